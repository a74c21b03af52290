//! The page journal: one `fdatasync` per durable checkpoint while readers share the file.
//!
//! In redb's shared (single-writer) mode every durable commit is a two-phase commit: two
//! `fdatasync`s. A writer in that mode therefore makes each checkpoint durable by appending
//! one checksummed record to `STORE.journal` and syncing that file once; every
//! [`FOLD_RECORDS`] records (or [`FOLD_BYTES`], or [`FOLD_INTERVAL`]) it folds what the
//! records hold into redb in one commit, records the last folded sequence number in the same
//! transaction, and empties the journal. Readers in other processes see the store as of the
//! last fold. A writer that opens the store (and a `Store` whose run writer was dropped) folds
//! whatever a journal holds past the folded sequence number, so a killed writer loses nothing
//! it acknowledged.
//!
//! File: a 32-byte header (magic, a 16-byte tag derived from the store's own key, so a journal
//! is never applied to another store, and 8 zero bytes), then frames: payload length (`u32`
//! LE), a 16-byte check (SHA-256 over the tag, the length and the payload, truncated) and the
//! payload (postcard of [`Record`]). Reading stops at the first frame that is short, too long,
//! fails its check or breaks the sequence: only the last append can be torn, since every
//! append is synced before the next begins. Records are redo records: each holds the page
//! log entries, the page's IDs and label IDs, new strings, content accumulators and the run
//! record as they were after the checkpoint, so applying them in order over the folded state
//! is idempotent.
//!
//! Invariants:
//! - a record is acknowledged only after its `fdatasync` returned;
//! - a record whose sequence number is at most the folded one is never applied again;
//! - the journal is emptied only after the fold that covers it committed durably.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::StorageBackend;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::Failure;
use crate::idset::{partition_of, PARTITION_WIDTH};

/// Bytes of the header.
pub(crate) const HEADER_LEN: u64 = 32;
const MAGIC: [u8; 8] = *b"sljrnl01";
/// Bytes of a frame's head: length and check.
const FRAME_HEAD_LEN: u64 = 4 + 16;
/// Bytes of one record's payload at most.
pub(crate) const RECORD_BYTES_MAX: u32 = 64 << 20;
/// Records between folds at most.
pub(crate) const FOLD_RECORDS: u32 = 64;
/// Journal bytes between folds at most (a fold follows the append that passes it).
pub(crate) const FOLD_BYTES: u64 = 8 << 20;
/// Time between folds at most while pages arrive: how far readers may lag behind.
pub(crate) const FOLD_INTERVAL: Duration = Duration::from_secs(1);

/// One checkpoint, as a redo record.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Sequence number: the folded one plus the record's place after it.
    pub(crate) seq: u64,
    pub(crate) run: u64,
    /// Page log entries: page index and the encoded page record.
    pub(crate) pages: Vec<(u32, Vec<u8>)>,
    /// The checkpoint's IDs, ascending, each as its gap from the one before (the first from 0).
    pub(crate) id_gaps: Vec<u64>,
    /// (label index, ID) pairs the checkpoint added.
    pub(crate) label_ids: Vec<(u32, u64)>,
    /// The dictionary scope of `interned` (empty when nothing was interned).
    pub(crate) scope: Vec<u8>,
    /// New strings and their IDs.
    pub(crate) interned: Vec<(u64, String)>,
    /// Content leaves and their accumulators after the checkpoint.
    pub(crate) content: Vec<(u64, Vec<u8>)>,
    /// The sealed request to continue from and its key, or `None` when none is kept.
    pub(crate) cursor: Option<(Vec<u8>, Vec<u8>)>,
    /// The encoded run record after the checkpoint.
    pub(crate) run_record: Vec<u8>,
}

impl Record {
    /// Sets `id_gaps` from ascending IDs.
    pub(crate) fn set_ids(&mut self, ids: &[u64]) {
        let mut prev = 0u64;
        self.id_gaps = ids
            .iter()
            .map(|&id| {
                // Ascending by construction; saturating keeps a bug from wrapping.
                let gap = id.saturating_sub(prev);
                prev = id;
                gap
            })
            .collect();
    }

    /// The IDs `id_gaps` encodes; `None` when they overflow (a damaged record).
    pub(crate) fn ids(&self) -> Option<Vec<u64>> {
        let mut prev = 0u64;
        let mut out = Vec::with_capacity(self.id_gaps.len());
        for (i, gap) in self.id_gaps.iter().enumerate() {
            prev = if i == 0 { *gap } else { prev.checked_add(*gap)? };
            out.push(prev);
        }
        Some(out)
    }
}

/// The journal's tag for a store: a function of the store's own page-token key.
pub(crate) fn tag_of(store_key: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"scanledger:journal:v1");
    h.update(store_key);
    let d = h.finalize();
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&d[..16]);
    tag
}

fn check_of(tag: &[u8; 16], len: u32, payload: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(tag);
    h.update(len.to_le_bytes());
    h.update(payload);
    let d = h.finalize();
    let mut c = [0u8; 16];
    c.copy_from_slice(&d[..16]);
    c
}

fn header(tag: &[u8; 16]) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..24].copy_from_slice(tag);
    h
}

fn io_failure(op: &'static str, e: impl Into<std::io::Error>) -> Failure {
    Failure::Io {
        op,
        source: Box::new(e.into()),
    }
}

/// The journal's path for a store file: the same name with `.journal` appended.
pub(crate) fn path_of(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

/// What reading a journal found.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// Records past the folded sequence number, in order.
    pub(crate) records: Vec<Record>,
    /// Bytes after the last good frame (a torn append), ignored.
    pub(crate) ignored_bytes: u64,
    /// The header was missing or not a journal's (a journal created but never written).
    pub(crate) no_header: bool,
    /// The journal belongs to another store (a store deleted and created again at the same
    /// path): nothing in it applies here.
    pub(crate) foreign: bool,
}

/// Reads the records of a journal past `folded`, stopping at the first bad frame.
///
/// # Errors
/// `Failure::Damaged` for a record that passes its check but does not decode; `Failure::Io`
/// when the file cannot be read.
pub(crate) fn read(
    file: &dyn StorageBackend,
    tag: &[u8; 16],
    folded: u64,
) -> Result<Recovered, Failure> {
    let len = file
        .len()
        .map_err(|e| io_failure("read the page journal's length", e))?;
    let mut out = Recovered::default();
    if len < HEADER_LEN {
        out.no_header = true;
        return Ok(out);
    }
    let mut head = [0u8; HEADER_LEN as usize];
    file.read(0, &mut head)
        .map_err(|e| io_failure("read the page journal", e))?;
    if head[..8] != MAGIC {
        out.no_header = true;
        return Ok(out);
    }
    if head[8..24] != tag[..] {
        out.foreign = true;
        return Ok(out);
    }
    let mut offset = HEADER_LEN;
    let mut expect = folded.checked_add(1);
    loop {
        let Some(payload_at) = offset.checked_add(FRAME_HEAD_LEN).filter(|e| *e <= len) else {
            break;
        };
        let mut fh = [0u8; FRAME_HEAD_LEN as usize];
        file.read(offset, &mut fh)
            .map_err(|e| io_failure("read the page journal", e))?;
        let plen = u32::from_le_bytes([fh[0], fh[1], fh[2], fh[3]]);
        let Some(end) = payload_at.checked_add(u64::from(plen)) else {
            break;
        };
        if plen > RECORD_BYTES_MAX || end > len {
            break;
        }
        let mut payload = vec![0u8; plen as usize];
        file.read(payload_at, &mut payload)
            .map_err(|e| io_failure("read the page journal", e))?;
        if check_of(tag, plen, &payload)[..] != fh[4..20] {
            break;
        }
        let rec: Record = postcard::from_bytes(&payload).map_err(|e| Failure::Damaged {
            what: format!("page journal, frame at byte {offset}: a record that passed its check does not decode"),
            source: Some(Box::new(e)),
        })?;
        if rec.seq <= folded {
            offset = end;
            continue;
        }
        if Some(rec.seq) != expect {
            break;
        }
        expect = rec.seq.checked_add(1);
        out.records.push(rec);
        offset = end;
    }
    out.ignored_bytes = len.saturating_sub(offset);
    Ok(out)
}

/// The writer's journal.
pub(crate) struct Journal {
    file: Box<dyn StorageBackend>,
    tag: [u8; 16],
    /// Where the next frame goes.
    end: u64,
    /// The last folded sequence number.
    folded: u64,
    /// Records appended since the last fold.
    records: u32,
    bytes: u64,
    last_fold: Instant,
    syncs: u64,
    written: u64,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("folded", &self.folded)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// A journal over `file`, emptied to its header (what it held was folded by the caller).
    /// `fresh` says the file was just created: its header is synced before any record.
    pub(crate) fn start(
        file: Box<dyn StorageBackend>,
        tag: [u8; 16],
        folded: u64,
    ) -> Result<Journal, Failure> {
        let mut j = Journal {
            file,
            tag,
            end: HEADER_LEN,
            folded,
            records: 0,
            bytes: 0,
            last_fold: Instant::now(),
            syncs: 0,
            written: 0,
        };
        let len = j
            .file
            .len()
            .map_err(|e| io_failure("read the page journal's length", e))?;
        let mut head = [0u8; HEADER_LEN as usize];
        let has_header = len >= HEADER_LEN
            && j.file.read(0, &mut head).is_ok()
            && head == header(&tag);
        if has_header {
            j.file
                .set_len(HEADER_LEN)
                .map_err(|e| io_failure("empty the page journal", e))?;
        } else {
            j.file
                .set_len(0)
                .map_err(|e| io_failure("create the page journal", e))?;
            j.file
                .write(0, &header(&tag))
                .map_err(|e| io_failure("create the page journal", e))?;
            j.file
                .sync_data()
                .map_err(|e| io_failure("sync the page journal", e))?;
            j.syncs += 1;
            j.written += HEADER_LEN;
        }
        Ok(j)
    }

    /// The sequence number the next record takes.
    pub(crate) fn next_seq(&self) -> u64 {
        self.folded
            .saturating_add(u64::from(self.records))
            .saturating_add(1)
    }

    /// The sequence number of the last record appended (the folded one when none was).
    pub(crate) fn last_seq(&self) -> u64 {
        self.folded.saturating_add(u64::from(self.records))
    }

    /// Whether records wait to be folded.
    pub(crate) fn has_records(&self) -> bool {
        self.records > 0
    }

    /// Appends a record and syncs it: when this returns, the record survives a crash.
    pub(crate) fn append(&mut self, rec: &Record) -> Result<(), Failure> {
        debug_assert_eq!(rec.seq, self.next_seq());
        let payload = postcard::to_allocvec(rec)
            .map_err(|e| io_failure("encode a page journal record", std::io::Error::other(e)))?;
        let plen = u32::try_from(payload.len())
            .ok()
            .filter(|n| *n <= RECORD_BYTES_MAX)
            .ok_or_else(|| {
                Failure::damaged(format!(
                    "a checkpoint of {} bytes exceeds the page journal's bound of {RECORD_BYTES_MAX} bytes per record",
                    payload.len()
                ))
            })?;
        let mut frame = Vec::with_capacity(payload.len() + FRAME_HEAD_LEN as usize);
        frame.extend_from_slice(&plen.to_le_bytes());
        frame.extend_from_slice(&check_of(&self.tag, plen, &payload));
        frame.extend_from_slice(&payload);
        self.file
            .write(self.end, &frame)
            .map_err(|e| io_failure("append to the page journal", e))?;
        self.file
            .sync_data()
            .map_err(|e| io_failure("sync the page journal", e))?;
        self.syncs += 1;
        self.written += frame.len() as u64;
        self.end += frame.len() as u64;
        self.records += 1;
        self.bytes += frame.len() as u64;
        Ok(())
    }

    /// Whether the records since the last fold should be folded now.
    pub(crate) fn fold_due(&self) -> bool {
        self.records >= FOLD_RECORDS
            || self.bytes >= FOLD_BYTES
            || (self.records > 0 && self.last_fold.elapsed() >= FOLD_INTERVAL)
    }

    /// After a durable fold up to `seq`: the journal starts over (not synced: a record at
    /// or below the folded number is never applied again).
    pub(crate) fn folded(&mut self, seq: u64) -> Result<(), Failure> {
        self.folded = seq;
        self.records = 0;
        self.bytes = 0;
        self.end = HEADER_LEN;
        self.last_fold = Instant::now();
        self.file
            .set_len(HEADER_LEN)
            .map_err(|e| io_failure("empty the page journal", e))
    }

    /// The records since the last fold, read back from the file (for a `Store` whose writer
    /// was dropped between folds).
    pub(crate) fn read_back(&self) -> Result<Recovered, Failure> {
        read(self.file.as_ref(), &self.tag, self.folded)
    }

    /// Syncs issued on the journal.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs
    }

    /// Bytes written to the journal.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}

/// What a fold of journal records writes, merged: the last value of each key wins, IDs and
/// label IDs are unions.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pub(crate) pages: BTreeMap<(u64, u32), Vec<u8>>,
    pub(crate) ids: BTreeMap<(u64, u64), RoaringBitmap>,
    pub(crate) labels: BTreeMap<(u64, u32, u64), RoaringBitmap>,
    pub(crate) strings: Vec<(Vec<u8>, u64, String)>,
    pub(crate) content: BTreeMap<(u64, u64), Vec<u8>>,
    pub(crate) cursors: BTreeMap<u64, Option<(Vec<u8>, Vec<u8>)>>,
    pub(crate) runs: BTreeMap<u64, Vec<u8>>,
    pub(crate) last_seq: u64,
}

impl Merged {
    /// Merges records in order.
    ///
    /// # Errors
    /// `Failure::Damaged` when a record's IDs overflow.
    pub(crate) fn of(records: Vec<Record>) -> Result<Merged, Failure> {
        let mut m = Merged::default();
        for r in records {
            let run = r.run;
            let ids = r.ids().ok_or_else(|| {
                Failure::damaged(format!(
                    "page journal, record {}: its IDs overflow 64 bits",
                    r.seq
                ))
            })?;
            for id in ids {
                m.ids
                    .entry((run, partition_of(id)))
                    .or_default()
                    .insert(low(id));
            }
            for (label, id) in r.label_ids {
                m.labels
                    .entry((run, label, partition_of(id)))
                    .or_default()
                    .insert(low(id));
            }
            for (idx, bytes) in r.pages {
                m.pages.insert((run, idx), bytes);
            }
            for (id, s) in r.interned {
                m.strings.push((r.scope.clone(), id, s));
            }
            for (leaf, acc) in r.content {
                m.content.insert((run, leaf), acc);
            }
            m.cursors.insert(run, r.cursor);
            m.runs.insert(run, r.run_record);
            m.last_seq = r.seq;
        }
        Ok(m)
    }
}

/// An ID's place within its partition.
fn low(id: u64) -> u32 {
    // The remainder is below the partition width (2^16), so it fits a u32.
    (id % PARTITION_WIDTH) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in memory that grows on writes past its end, as a real file does.
    #[derive(Debug, Default)]
    struct VecFile(std::sync::Mutex<Vec<u8>>);

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
            let mut v = self.0.lock().unwrap();
            let end = offset as usize + data.len();
            if v.len() < end {
                v.resize(end, 0);
            }
            v[offset as usize..end].copy_from_slice(data);
            Ok(())
        }
    }

    fn mem() -> Box<dyn StorageBackend> {
        Box::new(VecFile::default())
    }

    fn rec(seq: u64, ids: &[u64]) -> Record {
        let mut r = Record {
            seq,
            run: 1,
            run_record: vec![seq as u8],
            ..Record::default()
        };
        r.set_ids(ids);
        r
    }

    #[test]
    fn records_read_back_in_order_and_stop_at_a_torn_tail() {
        let tag = tag_of(b"k");
        let mut j = Journal::start(mem(), tag, 7).unwrap();
        for i in 0..5u64 {
            let r = rec(j.next_seq(), &[i, i + 70_000, u64::MAX - i]);
            j.append(&r).unwrap();
        }
        let got = j.read_back().unwrap();
        assert_eq!(got.records.len(), 5);
        assert_eq!(got.records[4].seq, 12);
        assert_eq!(
            got.records[2].ids().unwrap(),
            vec![2, 70_002, u64::MAX - 2]
        );
        assert_eq!(got.ignored_bytes, 0);
        // Tear the last frame: the first four survive.
        let len = j.file.len().unwrap();
        j.file.set_len(len - 3).unwrap();
        let got = read(j.file.as_ref(), &tag, 7).unwrap();
        assert_eq!(got.records.len(), 4);
        assert!(got.ignored_bytes > 0);
        // A flipped byte in the second frame stops the read there.
        let mut b = [0u8; 1];
        let at = HEADER_LEN + 40;
        j.file.read(at, &mut b).unwrap();
        j.file.write(at, &[b[0] ^ 1]).unwrap();
        let got = read(j.file.as_ref(), &tag, 7).unwrap();
        assert!(got.records.len() <= 1, "{}", got.records.len());
    }

    #[test]
    fn folded_records_are_skipped_and_a_gap_stops_the_read() {
        let tag = tag_of(b"k");
        let mut j = Journal::start(mem(), tag, 0).unwrap();
        for _ in 0..3 {
            let r = rec(j.next_seq(), &[1]);
            j.append(&r).unwrap();
        }
        assert_eq!(read(j.file.as_ref(), &tag, 2).unwrap().records.len(), 1);
        assert_eq!(read(j.file.as_ref(), &tag, 3).unwrap().records.len(), 0);
        // Records from 5 on after a fold at 2: 3 and 4 are missing, nothing applies.
        let got = read(j.file.as_ref(), &tag, 0).unwrap();
        assert_eq!(got.records.len(), 3);
        j.folded(4).unwrap();
        let r = rec(j.next_seq(), &[2]);
        assert_eq!(r.seq, 5);
        j.append(&r).unwrap();
        assert_eq!(read(j.file.as_ref(), &tag, 2).unwrap().records.len(), 0);
        assert_eq!(read(j.file.as_ref(), &tag, 4).unwrap().records.len(), 1);
    }

    #[test]
    fn a_journal_of_another_store_is_foreign_and_a_headless_one_is_empty() {
        let mut j = Journal::start(mem(), tag_of(b"a"), 0).unwrap();
        j.append(&rec(1, &[1])).unwrap();
        let got = read(j.file.as_ref(), &tag_of(b"b"), 0).unwrap();
        assert!(got.foreign && got.records.is_empty());
        let empty = mem();
        let got = read(empty.as_ref(), &tag_of(b"a"), 0).unwrap();
        assert!(got.no_header && got.records.is_empty());
    }

    #[test]
    fn merged_records_union_ids_and_keep_the_last_run_record() {
        let mut a = rec(1, &[1, 2, 65_536]);
        a.label_ids = vec![(0, 1)];
        let b = rec(2, &[3, 65_537]);
        let m = Merged::of(vec![a, b]).unwrap();
        assert_eq!(m.ids[&(1, 0)].iter().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(m.ids[&(1, 1)].iter().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(m.labels[&(1, 0, 0)].len(), 1);
        assert_eq!(m.runs[&1], vec![2]);
        assert_eq!(m.last_seq, 2);
    }
}
