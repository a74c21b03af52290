//! The page journal's file format and writer, against a file in memory.
#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
use super::*;

/// A file in memory that grows on writes past its end, as a real file does; with a cap, a
/// write past the cap fails, as on a full disk.
#[derive(Debug, Default, Clone)]
struct VecFile(std::sync::Arc<std::sync::Mutex<Vec<u8>>>, Option<u64>);

impl StorageBackend for VecFile {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.lock().unwrap().len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let v = self.0.lock().unwrap();
        let start = offset as usize;
        let src = v
            .get(start..start + out.len())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        out.copy_from_slice(src);
        Ok(())
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if self.1.is_some_and(|cap| offset + data.len() as u64 > cap) {
            return Err(std::io::Error::other("no space left on device"));
        }
        let mut v = self.0.lock().unwrap();
        let end = offset as usize + data.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

/// One in-memory journal file.
#[derive(Default, Clone)]
struct MemFiles(std::sync::Arc<std::sync::Mutex<Option<VecFile>>>);

impl JournalFiles for MemFiles {
    fn open(&self, _: bool) -> std::io::Result<Option<Box<dyn StorageBackend>>> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .clone()
            .map(|f| Box::new(f) as Box<dyn StorageBackend>))
    }
    fn create(&self) -> std::io::Result<(Box<dyn StorageBackend>, u64)> {
        let f = VecFile::default();
        *self.0.lock().unwrap() = Some(f.clone());
        Ok((Box::new(f), 1))
    }
    fn remove(&self) -> std::io::Result<()> {
        *self.0.lock().unwrap() = None;
        Ok(())
    }
    fn set_aside(&self) -> std::io::Result<String> {
        self.remove().map(|()| "aside".to_owned())
    }
    fn name(&self) -> String {
        "memory".to_owned()
    }
}

impl MemFiles {
    fn file(&self) -> VecFile {
        self.0.lock().unwrap().clone().unwrap()
    }
}

fn rec(ids: &[u64]) -> Record {
    let mut r = Record {
        run: 1,
        run_record: vec![ids.len() as u8],
        ..Record::default()
    };
    r.set_ids(ids);
    r
}

const A: Stamp = [1; 16];
const B: Stamp = [2; 16];

#[test]
fn records_read_back_in_order_and_stop_at_a_torn_tail_or_a_flipped_byte() {
    let files = MemFiles::default();
    let tag = tag_of(b"k");
    let mut j = Journal::new(Box::new(files.clone()), tag, A, FOLD_RECORDS);
    for i in 0..5u64 {
        assert!(j.append(&mut rec(&[i, i + 70_000, u64::MAX - i])).unwrap());
    }
    assert_eq!(
        j.syncs(),
        6,
        "one sync per record and one to create the file"
    );
    let got = j.read_back().unwrap();
    assert_eq!(got.header, Header::Current);
    assert_eq!(got.records.len(), 5);
    assert_eq!(
        got.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(got.records[2].ids().unwrap(), vec![2, 70_002, u64::MAX - 2]);
    let file = files.file();
    // The file runs ahead of the frames (zeros): cut into the last frame itself.
    assert_eq!(file.len().unwrap(), GROW_MIN);
    assert_eq!(got.ignored_bytes, GROW_MIN - j.end);
    file.set_len(j.end - 3).unwrap();
    let got = read(&file, &tag, Some(&A)).unwrap();
    assert_eq!(got.records.len(), 4);
    assert!(got.ignored_bytes > 0);
    let at = HEADER_LEN + 30;
    let mut b = [0u8; 1];
    file.read(at, &mut b).unwrap();
    file.write(at, &[b[0] ^ 1]).unwrap();
    assert!(read(&file, &tag, Some(&A)).unwrap().records.is_empty());
}

#[test]
fn a_commit_retires_the_records_and_the_next_append_starts_a_generation() {
    let files = MemFiles::default();
    let tag = tag_of(b"k");
    let mut j = Journal::new(Box::new(files.clone()), tag, A, FOLD_RECORDS);
    for _ in 0..3 {
        j.append(&mut rec(&[1])).unwrap();
    }
    j.committed(B);
    assert!(!j.has_records());
    // The file still holds generation A: stale against a store stamped B.
    let got = read(&files.file(), &tag, Some(&B)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Stale, 0));
    j.append(&mut rec(&[2])).unwrap();
    let got = read(&files.file(), &tag, Some(&B)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Current, 1));
    assert_eq!(got.records[0].seq, 1);
    // Against the old stamp (a backup of the state before the commit): nothing applies.
    let got = read(&files.file(), &tag, Some(&A)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Stale, 0));
    // A store never stamped takes no journal.
    assert_eq!(
        read(&files.file(), &tag, None).unwrap().header,
        Header::Stale
    );
}

#[test]
fn frames_of_an_older_generation_behind_a_new_header_never_pass() {
    let files = MemFiles::default();
    let tag = tag_of(b"k");
    let mut j = Journal::new(Box::new(files.clone()), tag, A, FOLD_RECORDS);
    for _ in 0..4 {
        j.append(&mut rec(&[7, 8])).unwrap();
    }
    // A power cut kept the new header but lost the truncation and the new frame.
    let file = files.file();
    file.write(0, &header(&tag, &B)).unwrap();
    let got = read(&file, &tag, Some(&B)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Current, 0));
}

#[test]
fn the_file_runs_ahead_of_its_frames_and_a_new_generation_overwrites_it_in_place() {
    let files = MemFiles::default();
    let tag = tag_of(b"k");
    let mut j = Journal::new(Box::new(files.clone()), tag, A, FOLD_RECORDS);
    let big: Vec<u64> = (0..4_000).map(|i| i * 1_000_003).collect();
    for _ in 0..3 {
        j.append(&mut rec(&big)).unwrap();
    }
    let file = files.file();
    let grown = file.len().unwrap();
    assert!(grown > j.end && grown >= GROW_MIN, "{grown} vs {}", j.end);
    let written = j.written();
    assert!(written >= grown, "the zeros are counted as written");
    // Appends inside the length leave it alone.
    j.append(&mut rec(&[1])).unwrap();
    assert_eq!(file.len().unwrap(), grown);
    // A new generation: the header is rewritten in place, the length kept, and the old
    // generation's frames behind the new one's never pass.
    j.committed(B);
    j.append(&mut rec(&[5])).unwrap();
    assert_eq!(file.len().unwrap(), grown);
    let got = read(&file, &tag, Some(&B)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Current, 1));
    assert_eq!(got.records[0].ids().unwrap(), vec![5]);
    assert_eq!(got.ignored_bytes, grown - j.end);
    // A second writer opening the file goes on from its length.
    let mut k = Journal::new(Box::new(files.clone()), tag, B, FOLD_RECORDS);
    k.generation = Some(B);
    k.records = 1;
    k.end = j.end;
    k.append(&mut rec(&[6])).unwrap();
    assert_eq!(file.len().unwrap(), grown);
    assert_eq!(read(&file, &tag, Some(&B)).unwrap().records.len(), 2);
}

#[test]
fn a_disk_too_full_for_the_zeros_still_takes_the_records_that_fit() {
    let tag = tag_of(b"k");
    let cap = 3_000;
    let file = VecFile(std::sync::Arc::default(), Some(cap));
    let files = MemFiles(std::sync::Arc::new(std::sync::Mutex::new(Some(
        file.clone(),
    ))));
    let mut j = Journal::new(Box::new(files), tag, A, FOLD_RECORDS);
    let mut n = 0;
    while j.end + 200 < cap {
        assert!(j.append(&mut rec(&[n, n + 1])).unwrap(), "record {n}");
        n += 1;
    }
    assert!(n > 10);
    assert!(file.len().unwrap() <= cap);
    let got = read(&file, &tag, Some(&A)).unwrap();
    assert_eq!(got.records.len() as u64, n);
    // A record that does not fit fails, as a write to a full disk does.
    let big: Vec<u64> = (0..1_000).map(|i| i * 1_000_003).collect();
    assert!(j.append(&mut rec(&big)).is_err());
}

#[test]
fn the_length_doubles_up_to_a_generation_due_to_fold() {
    let small = 100;
    assert_eq!(grown_len(0, HEADER_LEN + 10, 10), GROW_MIN);
    assert_eq!(
        grown_len(GROW_MIN, GROW_MIN, small),
        GROW_MIN,
        "a frame that fits"
    );
    assert_eq!(grown_len(GROW_MIN, GROW_MIN + 1, small), 2 * GROW_MIN);
    let cap = HEADER_LEN + FOLD_BYTES;
    assert_eq!(grown_len(cap - 1, cap, small), cap);
    assert_eq!(grown_len(6 << 20, (6 << 20) + 1, small), cap);
    assert_eq!(
        grown_len(cap, cap + 7, small),
        cap + 7,
        "past the cap: only the frame"
    );
    // A large frame extends the file to its own end, with no zeros ahead.
    assert_eq!(
        grown_len(GROW_MIN, 5 * GROW_MIN, 4 * GROW_MIN),
        5 * GROW_MIN
    );
    assert_eq!(
        grown_len(0, HEADER_LEN + GROW_MIN + 1, GROW_MIN + 1),
        HEADER_LEN + GROW_MIN + 1
    );
    assert_eq!(
        grown_len(cap, JOURNAL_BYTES_MAX, JOURNAL_BYTES_MAX - cap),
        JOURNAL_BYTES_MAX
    );
}

#[test]
fn a_journal_of_another_store_is_foreign_and_a_torn_header_is_absent() {
    let files = MemFiles::default();
    let mut j = Journal::new(Box::new(files.clone()), tag_of(b"a"), A, FOLD_RECORDS);
    j.append(&mut rec(&[1])).unwrap();
    let file = files.file();
    let got = read(&file, &tag_of(b"b"), Some(&A)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Foreign, 0));
    file.write(30, &[0xff]).unwrap();
    let got = read(&file, &tag_of(b"a"), Some(&A)).unwrap();
    assert_eq!((got.header, got.records.len()), (Header::Absent, 0));
    assert_eq!(
        read(&VecFile::default(), &tag_of(b"a"), Some(&A))
            .unwrap()
            .header,
        Header::Absent
    );
}

#[test]
fn merged_records_union_ids_and_keep_the_last_run_record() {
    let mut a = rec(&[1, 2, 65_536]);
    a.label_ids = vec![(0, 1)];
    let b = rec(&[3, 65_537]);
    let m = Merged::of(vec![a, b]).unwrap();
    assert_eq!(m.ids[&(1, 0)].iter().collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(m.ids[&(1, 1)].iter().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(m.labels[&(1, 0, 0)].len(), 1);
    assert_eq!(m.runs[&1], vec![2]);
    assert_eq!(m.records, 2);
}

#[test]
fn a_slow_source_folds_every_eight_pages_and_never_more_than_every_other_page() {
    let s = Duration::from_secs;
    // Fast: every 64 records (or 8 MiB).
    assert!(!fold_due(63, 1 << 20, Duration::from_millis(900)));
    assert!(fold_due(64, 1 << 20, Duration::from_millis(10)));
    assert!(fold_due(1, FOLD_BYTES, Duration::ZERO));
    // A page every 1.2 s: the eighth record is 8.4 s old, and the first fold comes there.
    for n in 1..8 {
        assert!(!fold_due(
            n,
            100,
            Duration::from_millis(1_200 * u64::from(n - 1))
        ));
    }
    assert!(fold_due(8, 100, Duration::from_millis(8_400)));
    // A page every 20 s: the second record folds (2 syncs per page at worst, not 3).
    assert!(!fold_due(1, 100, Duration::ZERO));
    assert!(fold_due(2, 100, s(20)));
    // Syncs per page, simulated for pages `gap` apart: 1 + 2 / (records per fold).
    for (gap_ms, worst) in [(10u64, 1.04), (1_100, 1.26), (2_000, 1.34), (60_000, 2.0)] {
        let (mut records, mut syncs, mut first) = (0u32, 0u64, 0u64);
        for page in 0..1_000u64 {
            let now = page * gap_ms;
            if records == 0 {
                first = now;
            }
            records += 1;
            syncs += 1;
            if fold_due(
                records,
                u64::from(records) * 100,
                Duration::from_millis(now - first),
            ) {
                syncs += 2;
                records = 0;
            }
        }
        let per_page = syncs as f64 / 1_000.0;
        assert!(
            per_page <= worst,
            "pages {gap_ms} ms apart: {per_page} syncs per page"
        );
    }
}
