//! The page journal: one `fdatasync` per durable checkpoint while readers share the file
//! (specified byte for byte in docs/FORMAT.md §10a).
//!
//! In redb's shared (single-writer) mode every durable commit costs two `fdatasync`s. A writer
//! in that mode makes a checkpoint durable instead by appending one checksummed redo record
//! to `STORE.journal` and syncing that file once; every so often ([`fold_due`]) it *folds*:
//! it commits what the records hold to redb in one transaction. Readers in other processes
//! see the store as of the last fold.
//!
//! Identity. Every commit of a store writes a fresh random 16-byte *stamp* (`meta`
//! `journal_base`), and a journal's header names the stamp of the commit its records
//! continue. Records apply only to a store whose stamp is that one, in order: so a fold
//! (a commit, hence a new stamp) retires every record it covers without touching the file, and
//! a journal of another store, of an older generation, or beside a store restored from a
//! backup never applies. Every frame's check covers the store's tag and the stamp, so a frame
//! of an older generation left behind a rewritten header never passes.
//!
//! Length. The file is never cut: a new generation rewrites the header in place, and the
//! writer keeps the file's length ahead of its frames with zeros ([`grown_len`]), so most
//! appends overwrite bytes the file has and their `fdatasync` need not record a new length
//! (on ext4 here a page's sync costs about 0.7x an append's).
//!
//! Invariants:
//! - a record is acknowledged only after its `fdatasync` returned;
//! - records apply only over the exact committed state they continue (the stamp), in order,
//!   and applying them is idempotent (redo records: unions and last values);
//! - the journal is never emptied before the commit that covers it is durable: it is not
//!   touched by a fold at all, only restarted by the next append after one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redb::StorageBackend;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::Failure;
use crate::idset::{partition_of, PARTITION_WIDTH};

/// The least the journal file grows by when a frame would pass its end; each growth doubles
/// the file, up to the length of a generation that is due to fold ([`FOLD_BYTES`]).
const GROW_MIN: u64 = 64 << 10;
/// Bytes of the header: magic, tag, base stamp, check.
pub(crate) const HEADER_LEN: u64 = 48;
const MAGIC: [u8; 8] = *b"sljrnl\x00\x01";
/// Bytes of a frame's head: length and check.
const FRAME_HEAD_LEN: u64 = 4 + 16;
/// The version byte that begins every record's payload.
const RECORD_VERSION: u8 = 1;
/// Bytes of one record's payload at most; a larger checkpoint commits the store instead.
pub(crate) const RECORD_BYTES_MAX: u32 = 64 << 20;
/// Records between folds at most.
pub(crate) const FOLD_RECORDS: u32 = 64;
/// Journal bytes between folds at most (a fold follows the append that passes it).
pub(crate) const FOLD_BYTES: u64 = 8 << 20;
/// After this long, a fold waits only for [`FOLD_RECORDS_MIN`] records.
pub(crate) const FOLD_INTERVAL: Duration = Duration::from_secs(1);
/// Records a fold by time waits for, so a slow source pays at most 2/8 of a sync per page
/// for readers' freshness.
pub(crate) const FOLD_RECORDS_MIN: u32 = 8;
/// The oldest a record waits to be folded while pages arrive, however slowly.
pub(crate) const FOLD_AGE_MAX: Duration = Duration::from_secs(10);
/// The longest journal a writer leaves: a fold follows the append that passes
/// [`FOLD_BYTES`], and a writer that could not fold stops appending.
pub(crate) const JOURNAL_BYTES_MAX: u64 =
    HEADER_LEN + FOLD_BYTES + FRAME_HEAD_LEN + RECORD_BYTES_MAX as u64;

/// Bytes of a commit stamp.
pub(crate) const STAMP_LEN: usize = 16;
/// The random value every commit of a store writes to `meta` `journal_base`.
pub(crate) type Stamp = [u8; STAMP_LEN];

/// Whether the records since the last fold should be folded now: `records` of `bytes` in
/// frames, the first appended `age` ago.
pub(crate) fn fold_due(records: u32, bytes: u64, age: Duration) -> bool {
    records >= FOLD_RECORDS
        || bytes >= FOLD_BYTES
        || (records >= FOLD_RECORDS_MIN && age >= FOLD_INTERVAL)
        || (records > 0 && age >= FOLD_AGE_MAX)
}

/// The journal file's length after a frame of `frame_len` bytes that ends at `frame_end`, in a
/// file of `len` bytes: unchanged while the frame fits, else doubled (by at least
/// [`GROW_MIN`]) and at least to the frame's end, but not past what a generation holds when
/// its fold is due (a header and [`FOLD_BYTES`]) unless the frame itself ends later. A frame
/// larger than [`GROW_MIN`] (a group commit of many pages) only extends the file to its end:
/// its sync is mostly its own data, and zeros ahead of it would be written for little.
pub(crate) fn grown_len(len: u64, frame_end: u64, frame_len: u64) -> u64 {
    if frame_end <= len {
        return len;
    }
    if frame_len > GROW_MIN {
        return frame_end;
    }
    let cap = (HEADER_LEN + FOLD_BYTES).max(frame_end);
    len.saturating_add(len.max(GROW_MIN))
        .max(frame_end)
        .min(cap)
}

/// A fresh commit stamp from the system's random source.
pub(crate) fn fresh_stamp() -> Result<Stamp, Failure> {
    let mut s = [0u8; STAMP_LEN];
    getrandom::fill(&mut s).map_err(|e| Failure::Io {
        op: "draw a commit stamp from the system's random source",
        source: Box::new(std::io::Error::other(e.to_string())),
    })?;
    Ok(s)
}

/// A sealed request to continue from and the run's cursor key.
pub(crate) type SealedCursor = (Vec<u8>, Vec<u8>);

/// One checkpoint, as a redo record.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The record's place in its journal, from 1.
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
    pub(crate) cursor: Option<SealedCursor>,
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
            prev = if i == 0 {
                *gap
            } else {
                prev.checked_add(*gap)?
            };
            out.push(prev);
        }
        Some(out)
    }

    fn encode(&self) -> Result<Vec<u8>, Failure> {
        let out = vec![RECORD_VERSION];
        postcard::to_extend(self, out).map_err(|e| Failure::Io {
            op: "encode a page journal record",
            source: Box::new(std::io::Error::other(e)),
        })
    }

    fn decode(payload: &[u8]) -> Option<Record> {
        match payload.split_first() {
            Some((&RECORD_VERSION, rest)) => postcard::from_bytes(rest).ok(),
            _ => None,
        }
    }
}

/// The journal's tag for a store: a function of the store's own page-token key.
pub(crate) fn tag_of(store_key: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"scanledger:journal:v1");
    h.update(store_key);
    truncate16(&h.finalize())
}

fn truncate16(d: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn check_of(tag: &[u8; 16], base: &Stamp, len: u32, payload: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(tag);
    h.update(base);
    h.update(len.to_le_bytes());
    h.update(payload);
    truncate16(&h.finalize())
}

fn header(tag: &[u8; 16], base: &Stamp) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..24].copy_from_slice(tag);
    h[24..40].copy_from_slice(base);
    let d = Sha256::digest(&h[..40]);
    h[40..48].copy_from_slice(&d[..8]);
    h
}

fn io_failure(op: &'static str, e: impl Into<std::io::Error>) -> Failure {
    Failure::Io {
        op,
        source: Box::new(e.into()),
    }
}

/// What a journal's header says about it, against a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Header {
    /// Shorter than a header, or not a whole valid one (never written, or torn): empty.
    #[default]
    Absent,
    /// The journal of another store (its tag differs): nothing in it applies here.
    Foreign,
    /// Of this store, continuing another commit than its last one: already folded, or of a
    /// state this file no longer is (a restored backup). Nothing in it applies.
    Stale,
    /// Continues the store's last commit: its records apply.
    Current,
}

/// What reading a journal found.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// The records that apply, in order.
    pub(crate) records: Vec<Record>,
    pub(crate) header: Header,
    /// Bytes after the last good frame (a torn append, never acknowledged), ignored.
    pub(crate) ignored_bytes: u64,
}

/// Reads the records of a journal that continue the commit stamped `base` (`None`: a store
/// never stamped, which no journal continues), stopping at the first bad frame.
///
/// # Errors
/// `Failure::Damaged` for a record that passes its check but does not decode, or a journal
/// longer than any writer leaves; `Failure::Io` when the file cannot be read.
pub(crate) fn read(
    file: &dyn StorageBackend,
    tag: &[u8; 16],
    base: Option<&Stamp>,
) -> Result<Recovered, Failure> {
    let len = file
        .len()
        .map_err(|e| io_failure("read the page journal's length", e))?;
    let mut out = Recovered::default();
    if len < HEADER_LEN {
        return Ok(out);
    }
    let mut head = [0u8; HEADER_LEN as usize];
    file.read(0, &mut head)
        .map_err(|e| io_failure("read the page journal", e))?;
    let stated_base: Stamp = truncate16(&head[24..40]);
    if head[..8] != MAGIC || head != header(&truncate16(&head[8..24]), &stated_base) {
        return Ok(out);
    }
    if head[8..24] != tag[..] {
        out.header = Header::Foreign;
        return Ok(out);
    }
    let Some(base) = base.filter(|b| **b == stated_base) else {
        out.header = Header::Stale;
        return Ok(out);
    };
    out.header = Header::Current;
    let mut offset = HEADER_LEN;
    let mut expect = 1u64;
    while let Some(payload_at) = offset.checked_add(FRAME_HEAD_LEN).filter(|e| *e <= len) {
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
        if end > JOURNAL_BYTES_MAX {
            return Err(Failure::damaged(format!(
                "page journal: frames continue past byte {JOURNAL_BYTES_MAX}, longer than any writer leaves"
            )));
        }
        let mut payload = vec![0u8; plen as usize];
        file.read(payload_at, &mut payload)
            .map_err(|e| io_failure("read the page journal", e))?;
        if check_of(tag, base, plen, &payload)[..] != fh[4..20] {
            break;
        }
        let rec = Record::decode(&payload).ok_or_else(|| {
            Failure::damaged(format!(
                "page journal, frame at byte {offset}: a record that passed its check does not decode"
            ))
        })?;
        if rec.seq != expect {
            break;
        }
        expect = expect.saturating_add(1);
        out.records.push(rec);
        offset = end;
    }
    out.ignored_bytes = len.saturating_sub(offset);
    Ok(out)
}

/// Where a store's journal lives: a file beside it (`fold.rs`), or a simulated disk.
pub(crate) trait JournalFiles: Send + Sync {
    /// The journal, when it exists, open for reading (and writing when `write`).
    fn open(&self, write: bool) -> std::io::Result<Option<Box<dyn StorageBackend>>>;
    /// Creates the journal empty and makes its name durable; returns it and the syncs that
    /// took.
    fn create(&self) -> std::io::Result<(Box<dyn StorageBackend>, u64)>;
    /// Removes the journal (not synced: a journal that survives is stale, and ignored).
    fn remove(&self) -> std::io::Result<()>;
    /// Moves a foreign journal aside, where it is kept and never applied; returns its new name.
    fn set_aside(&self) -> std::io::Result<String>;
    /// The journal's name, for messages.
    fn name(&self) -> String;
}

/// The writer's journal (shared mode).
pub(crate) struct Journal {
    files: Box<dyn JournalFiles>,
    file: Option<Box<dyn StorageBackend>>,
    tag: [u8; 16],
    /// The stamp of the store's last commit: what the next record continues.
    base: Stamp,
    /// The stamp the file's header names, when this writer wrote it.
    generation: Option<Stamp>,
    /// Where the next frame goes.
    end: u64,
    /// The file's length, once it is open: zeros this writer wrote ahead of its frames, or
    /// frames of older generations (which fail their check: it covers the base).
    len: u64,
    /// Records of the current generation.
    records: u32,
    bytes: u64,
    first_at: Option<Instant>,
    /// Records after which a fold is due whatever else ([`FOLD_RECORDS`] but in tests).
    fold_records: u32,
    /// The journal cannot be created: checkpoints commit the store.
    unavailable: bool,
    syncs: u64,
    written: u64,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// The journal of a store whose last commit is stamped `base`. Nothing is written until
    /// the first record.
    pub(crate) fn new(
        files: Box<dyn JournalFiles>,
        tag: [u8; 16],
        base: Stamp,
        fold_records: u32,
    ) -> Journal {
        Journal {
            files,
            file: None,
            tag,
            base,
            generation: None,
            end: HEADER_LEN,
            len: 0,
            records: 0,
            bytes: 0,
            first_at: None,
            fold_records,
            unavailable: false,
            syncs: 0,
            written: 0,
        }
    }

    /// Whether records wait to be folded.
    pub(crate) fn has_records(&self) -> bool {
        self.records > 0
    }

    /// Records appended since the last commit.
    pub(crate) fn records(&self) -> u32 {
        self.records
    }

    /// Whether checkpoints can go to the journal.
    pub(crate) fn available(&self) -> bool {
        !self.unavailable
    }

    fn file(&mut self) -> Result<&dyn StorageBackend, Failure> {
        if self.file.is_none() {
            let opened = self
                .files
                .open(true)
                .map_err(|e| io_failure("open the page journal", e))?;
            let file = match opened {
                Some(f) => {
                    self.len = f
                        .len()
                        .map_err(|e| io_failure("read the page journal's length", e))?;
                    f
                }
                None => {
                    self.len = 0;
                    let (f, syncs) = self
                        .files
                        .create()
                        .map_err(|e| io_failure("create the page journal", e))?;
                    self.syncs += syncs;
                    f
                }
            };
            self.file = Some(file);
        }
        match self.file.as_deref() {
            Some(f) => Ok(f),
            None => Err(Failure::damaged("the page journal vanished")),
        }
    }

    /// Appends a record (its `seq` set here) and syncs it: when this returns `Ok(true)`, the
    /// record survives a crash. `Ok(false)`: the record was not written (too large for a
    /// journal record, or no journal can be created beside the store): commit instead.
    pub(crate) fn append(&mut self, rec: &mut Record) -> Result<bool, Failure> {
        if self.unavailable {
            return Ok(false);
        }
        let starts = self.generation != Some(self.base);
        rec.seq = if starts {
            1
        } else {
            u64::from(self.records).saturating_add(1)
        };
        let payload = rec.encode()?;
        let Some(plen) = u32::try_from(payload.len())
            .ok()
            .filter(|n| *n <= RECORD_BYTES_MAX)
        else {
            return Ok(false);
        };
        let mut frame = Vec::with_capacity(payload.len() + FRAME_HEAD_LEN as usize);
        frame.extend_from_slice(&plen.to_le_bytes());
        frame.extend_from_slice(&check_of(&self.tag, &self.base, plen, &payload));
        frame.extend_from_slice(&payload);
        let had_file = self.file.is_some();
        match self.file() {
            Ok(_) => {}
            Err(f) if !had_file => {
                // The directory refuses a new file (read-only, say): the store still works.
                tracing::warn!(error = ?f, "the page journal cannot be created beside the store; every checkpoint commits the store (two syncs)");
                self.unavailable = true;
                return Ok(false);
            }
            Err(f) => return Err(f),
        }
        let (tag, base, old_end, old_len) = (self.tag, self.base, self.end, self.len);
        let Some(file) = self.file.as_deref() else {
            return Err(Failure::damaged("the page journal vanished"));
        };
        let mut written = 0u64;
        let end = if starts {
            // A new generation: the header names the commit these records continue. It is
            // written over the old one and the file is not cut: what lies past the frames is
            // zeros, or frames of older generations, which fail their check (it covers the
            // base).
            file.write(0, &header(&tag, &base))
                .map_err(|e| io_failure("restart the page journal", e))?;
            written += HEADER_LEN;
            HEADER_LEN
        } else {
            old_end
        };
        let frame_end = end.saturating_add(frame.len() as u64);
        file.write(end, &frame)
            .map_err(|e| io_failure("append to the page journal", e))?;
        written += frame.len() as u64;
        let len = old_len.max(frame_end);
        let grown = grown_len(old_len, frame_end, frame.len() as u64);
        // Zeros ahead of the frames, synced with this one: the next appends overwrite blocks
        // the file has, so their `fdatasync` need not record a new length. They only make
        // later syncs cheaper: a disk too full for them (or any failure to write them) leaves
        // the file as long as what was written, and the frame's own sync below decides
        // whether the record is durable.
        let mut at = len;
        if grown > len {
            let zeros = vec![0u8; GROW_MIN as usize];
            while at < grown {
                let n = (grown - at).min(GROW_MIN);
                // n <= GROW_MIN, the length of `zeros`.
                let chunk = zeros.get(..n as usize).unwrap_or(&zeros);
                if let Err(e) = file.write(at, chunk) {
                    tracing::debug!(error = %e, "zeros ahead of the page journal's frames not written");
                    break;
                }
                at += n;
                written += n;
            }
        }
        file.sync_data()
            .map_err(|e| io_failure("sync the page journal", e))?;
        self.len = at;
        if starts {
            self.generation = Some(base);
            self.records = 0;
            self.bytes = 0;
        }
        self.syncs += 1;
        self.written += written;
        self.end = frame_end;
        self.records += 1;
        self.bytes += frame.len() as u64;
        self.first_at.get_or_insert_with(Instant::now);
        Ok(true)
    }

    /// Whether the records since the last fold should be folded now.
    pub(crate) fn fold_due(&self) -> bool {
        let age = self.first_at.map_or(Duration::ZERO, |t| t.elapsed());
        self.records >= self.fold_records || fold_due(self.records, self.bytes, age)
    }

    /// After a durable commit stamped `stamp`: every record so far is covered, and the next
    /// one starts a new generation (the file is not touched now).
    pub(crate) fn committed(&mut self, stamp: Stamp) {
        self.base = stamp;
        self.records = 0;
        self.bytes = 0;
        self.first_at = None;
    }

    /// The records not yet folded, read back from the file (for a `Store` whose writer was
    /// dropped between folds).
    pub(crate) fn read_back(&self) -> Result<Recovered, Failure> {
        match (&self.file, self.records) {
            (Some(file), n) if n > 0 => read(file.as_ref(), &self.tag, Some(&self.base)),
            _ => Ok(Recovered::default()),
        }
    }

    /// Removes the journal file (everything in it is folded).
    pub(crate) fn remove(&mut self) {
        self.file = None;
        if let Err(e) = self.files.remove() {
            tracing::debug!(journal = %self.files.name(), error = %e, "the page journal could not be removed (it is stale, and ignored)");
        }
        self.generation = None;
    }

    /// Syncs issued on the journal (and its directory).
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
    pub(crate) cursors: BTreeMap<u64, Option<SealedCursor>>,
    pub(crate) runs: BTreeMap<u64, Vec<u8>>,
    pub(crate) records: usize,
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
            m.records += 1;
        }
        Ok(m)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.records == 0
    }
}

/// An ID's place within its partition.
fn low(id: u64) -> u32 {
    // The remainder is below the partition width (2^16), so it fits a u32.
    (id % PARTITION_WIDTH) as u32
}

#[cfg(test)]
mod tests;
