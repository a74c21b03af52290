//! The per-run cursor keys, in a small file of fixed slots beside the store (`STORE.keys`,
//! specified byte for byte in docs/FORMAT.md §10b).
//!
//! Why not a table: redb is copy-on-write, so a removed value's bytes stay in a freed page of
//! the file until that page happens to be reused, and the page journal keeps what it
//! journaled until its next generation. A key kept there could never be erased, and with it
//! the sealed requests under it (in live data, freed pages or journal frames) would stay
//! readable. Here every key has a slot of its own, written in place; when nothing can resume
//! its run (finished for good, superseded, deleted), the slot is overwritten with zeros and
//! the file synced. What remains anywhere else is sealed under a key that no longer exists.
//!
//! Invariants:
//! - a key is durable in its slot before any sealed request under it is (the writer saves it
//!   before the first journal record or commit that carries one);
//! - a slot is zeroed, and synced, once its run keeps no sealed request: right after the
//!   finish, restart or delete that dropped the request, and otherwise by the scrub every
//!   writer runs when it opens the store (a kill between the two);
//! - the file never holds anything but the header, keys and zeros: no raw cursor.
//!
//! Cost: one sync when a run first keeps a request, one when it stops keeping one; none per
//! page.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use redb::StorageBackend;
use sha2::{Digest, Sha256};

use super::error::Failure;
use super::journal::JournalFiles;
use super::records::CURSOR_KEY_LEN;

/// Bytes of the header: magic, tag, check.
pub(crate) const HEADER_LEN: u64 = 32;
const MAGIC: [u8; 8] = *b"slkeys\x00\x01";
/// Bytes of one slot: run (u64le, 0 for a free slot), key, check, zeros.
pub(crate) const SLOT_LEN: u64 = 64;
/// Slots a key file may hold: runs that can still be resumed at once.
pub(crate) const SLOTS_MAX: u64 = 1 << 20;

/// A per-run cursor key.
pub(crate) type Key = [u8; CURSOR_KEY_LEN];

/// The keys a read view can open sealed requests with, by run.
pub(crate) type KeyMap = Arc<BTreeMap<u64, Key>>;

/// The key file's tag for a store: a function of the store's own page-token key.
pub(crate) fn tag_of(store_key: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"scanledger:keys:v1");
    h.update(store_key);
    truncate16(&h.finalize())
}

fn truncate16(d: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn header(tag: &[u8; 16]) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..24].copy_from_slice(tag);
    let d = Sha256::digest(&h[..24]);
    h[24..32].copy_from_slice(&d[..8]);
    h
}

fn slot_check(tag: &[u8; 16], run: u64, key: &Key) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(tag);
    h.update(run.to_le_bytes());
    h.update(key);
    truncate16(&h.finalize())
}

fn slot_bytes(tag: &[u8; 16], run: u64, key: &Key) -> [u8; SLOT_LEN as usize] {
    let mut s = [0u8; SLOT_LEN as usize];
    s[..8].copy_from_slice(&run.to_le_bytes());
    s[8..40].copy_from_slice(key);
    s[40..56].copy_from_slice(&slot_check(tag, run, key));
    s
}

fn io(op: &'static str, e: std::io::Error) -> Failure {
    Failure::Io {
        op,
        source: Box::new(e),
    }
}

fn offset_of(slot: u64) -> u64 {
    // slot < SLOTS_MAX, so this cannot overflow.
    HEADER_LEN + slot * SLOT_LEN
}

/// The key file of a store, as one process sees it.
pub(crate) struct KeyFile {
    files: Box<dyn JournalFiles>,
    file: Option<Box<dyn StorageBackend>>,
    tag: [u8; 16],
    /// The file needs a fresh header before the next slot is written (absent, torn, or set
    /// aside as another store's).
    fresh: bool,
    /// Run to slot.
    slots: BTreeMap<u64, u64>,
    keys: KeyMap,
    free: BTreeSet<u64>,
    /// Slots that hold neither a key nor zeros (a torn write): zeroed by the next scrub.
    dirty: BTreeSet<u64>,
    len_slots: u64,
    syncs: u64,
    written: u64,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFile")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl KeyFile {
    /// Reads the key file in `files` (a writer opens it for writing and sets a foreign one
    /// aside; a reader only reads).
    ///
    /// # Errors
    /// `Failure::Damaged` for a file longer than any writer leaves; `Failure::Io` when it
    /// cannot be read.
    pub(crate) fn load(
        files: Box<dyn JournalFiles>,
        tag: [u8; 16],
        write: bool,
    ) -> Result<KeyFile, Failure> {
        let mut k = KeyFile {
            file: None,
            tag,
            fresh: true,
            slots: BTreeMap::new(),
            keys: Arc::default(),
            free: BTreeSet::new(),
            dirty: BTreeSet::new(),
            len_slots: 0,
            syncs: 0,
            written: 0,
            files,
        };
        k.reload(write)?;
        Ok(k)
    }

    /// Reads the file again (a reader, before each view: a writer in another process may
    /// have added keys since).
    pub(crate) fn reload(&mut self, write: bool) -> Result<(), Failure> {
        self.slots.clear();
        self.free.clear();
        self.dirty.clear();
        self.len_slots = 0;
        self.fresh = true;
        let mut keys = BTreeMap::new();
        let file = self
            .files
            .open(write)
            .map_err(|e| io("open the key file", e))?;
        let Some(file) = file else {
            self.keys = Arc::new(keys);
            self.file = None;
            return Ok(());
        };
        let len = file.len().map_err(|e| io("read the key file", e))?;
        let mut head = [0u8; HEADER_LEN as usize];
        let valid = len >= HEADER_LEN
            && file.read(0, &mut head).is_ok()
            && head[..8] == MAGIC
            && head == header(&truncate16(&head[8..24]));
        if valid && head[8..24] != self.tag[..] {
            // Another store's keys (one deleted and created again here): never used.
            drop(file);
            if write {
                let aside = self
                    .files
                    .set_aside()
                    .map_err(|e| io("move aside the key file of another store", e))?;
                tracing::warn!(keys = %self.files.name(), moved_to = %aside, "the key file beside the store belongs to another store; moved aside, never used");
            } else {
                tracing::warn!(keys = %self.files.name(), "the key file beside the store belongs to another store; ignored");
            }
            self.keys = Arc::new(keys);
            return Ok(());
        }
        if !valid {
            // Never written whole (a cut while it was created): no key in it was ever relied on.
            self.keys = Arc::new(keys);
            self.file = Some(file);
            return Ok(());
        }
        self.fresh = false;
        let body = len - HEADER_LEN;
        let n = body / SLOT_LEN;
        if n > SLOTS_MAX {
            return Err(Failure::damaged(format!(
                "key file: {n} slots, more than the {SLOTS_MAX} any writer leaves"
            )));
        }
        let mut bytes = vec![0u8; (n * SLOT_LEN) as usize];
        file.read(HEADER_LEN, &mut bytes)
            .map_err(|e| io("read the key file", e))?;
        for (i, s) in bytes.chunks_exact(SLOT_LEN as usize).enumerate() {
            let slot = i as u64;
            let mut run = [0u8; 8];
            run.copy_from_slice(&s[..8]);
            let run = u64::from_le_bytes(run);
            let mut key = [0u8; CURSOR_KEY_LEN];
            key.copy_from_slice(&s[8..40]);
            if s.iter().all(|b| *b == 0) {
                self.free.insert(slot);
            } else if run != 0
                && s[40..56] == slot_check(&self.tag, run, &key)
                && s[56..].iter().all(|b| *b == 0)
                && !self.slots.contains_key(&run)
            {
                self.slots.insert(run, slot);
                keys.insert(run, key);
            } else {
                self.dirty.insert(slot);
                self.free.insert(slot);
            }
        }
        // A torn tail (a slot appended but cut): the next slot goes at the last whole one.
        self.len_slots = n;
        self.keys = Arc::new(keys);
        self.file = Some(file);
        Ok(())
    }

    /// The keys as a read view needs them.
    pub(crate) fn map(&self) -> KeyMap {
        Arc::clone(&self.keys)
    }

    /// The key of `run`, if it has one.
    pub(crate) fn get(&self, run: u64) -> Option<Key> {
        self.keys.get(&run).copied()
    }

    fn file(&mut self) -> Result<&dyn StorageBackend, Failure> {
        if self.file.is_none() || self.fresh {
            let (file, syncs) = self
                .files
                .create()
                .map_err(|e| io("create the key file", e))?;
            self.syncs += syncs;
            file.set_len(0)
                .map_err(|e| io("write the key file's header", e))?;
            file.write(0, &header(&self.tag))
                .map_err(|e| io("write the key file's header", e))?;
            self.written += HEADER_LEN;
            self.file = Some(file);
            self.fresh = false;
            self.len_slots = 0;
            self.free.clear();
            self.dirty.clear();
            self.slots.clear();
            self.keys = Arc::default();
        }
        match self.file.as_deref() {
            Some(f) => Ok(f),
            None => Err(Failure::damaged("key file: not open")),
        }
    }

    /// Makes `run`'s key durable in a slot (one sync); nothing when it already is.
    ///
    /// # Errors
    /// `Failure::Io` when the file cannot be written or synced; `Damaged` when it is full.
    pub(crate) fn put(&mut self, run: u64, key: &Key) -> Result<(), Failure> {
        if self.get(run).as_ref() == Some(key) {
            return Ok(());
        }
        self.file()?;
        let slot = match self.slots.get(&run) {
            Some(s) => *s,
            None => match self.free.pop_first() {
                Some(s) => s,
                None if self.len_slots < SLOTS_MAX => {
                    self.len_slots += 1;
                    self.len_slots - 1
                }
                None => {
                    return Err(Failure::damaged(format!(
                        "key file: all {SLOTS_MAX} slots hold keys of resumable runs; delete runs to free some"
                    )))
                }
            },
        };
        let bytes = slot_bytes(&self.tag, run, key);
        let f = self.file()?;
        f.write(offset_of(slot), &bytes)
            .map_err(|e| io("write a cursor key", e))?;
        f.sync_data().map_err(|e| io("sync the key file", e))?;
        self.syncs += 1;
        self.written += SLOT_LEN;
        self.dirty.remove(&slot);
        self.slots.insert(run, slot);
        Arc::make_mut(&mut self.keys).insert(run, *key);
        Ok(())
    }

    /// Overwrites with zeros the slots of `runs` (those that have one) and every torn slot,
    /// then syncs once; nothing when there is nothing to zero.
    ///
    /// # Errors
    /// `Failure::Io` when the file cannot be written or synced.
    pub(crate) fn erase(&mut self, runs: &[u64]) -> Result<(), Failure> {
        let mut zero: Vec<(Option<u64>, u64)> = runs
            .iter()
            .filter_map(|r| self.slots.get(r).map(|s| (Some(*r), *s)))
            .collect();
        zero.extend(self.dirty.iter().map(|s| (None, *s)));
        if zero.is_empty() || self.fresh {
            return Ok(());
        }
        let f = self.file()?;
        for (_, slot) in &zero {
            f.write(offset_of(*slot), &[0u8; SLOT_LEN as usize])
                .map_err(|e| io("erase a cursor key", e))?;
        }
        f.sync_data().map_err(|e| io("sync the key file", e))?;
        self.syncs += 1;
        self.written += SLOT_LEN * zero.len() as u64;
        self.dirty.clear();
        for (run, slot) in zero {
            if let Some(run) = run {
                self.slots.remove(&run);
                Arc::make_mut(&mut self.keys).remove(&run);
            }
            self.free.insert(slot);
        }
        Ok(())
    }

    /// Erases every key whose run `keep` says no longer needs it, and every torn slot.
    ///
    /// # Errors
    /// As [`KeyFile::erase`].
    pub(crate) fn scrub(&mut self, keep: impl Fn(u64) -> bool) -> Result<(), Failure> {
        let gone: Vec<u64> = self.slots.keys().copied().filter(|r| !keep(*r)).collect();
        self.erase(&gone)
    }

    /// Syncs issued on the key file (and its directory).
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs
    }

    /// Bytes written to the key file.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}
