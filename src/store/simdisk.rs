//! A simulated disk under a store and its page journal, for the power-loss tests and the
//! crash fuzzer (`fuzz/fuzz_targets/store_crash.rs`): nothing here is used by a real store.
//!
//! It holds three files, the store, its journal and its key file. Each keeps what its last sync made durable
//! and the writes, truncations and extensions issued since. A crash point is the n-th
//! operation (write, length change, sync, creation or removal of the journal, in either file):
//! from there every operation fails, as after a power cut. [`SimDisk::after_crash`] then
//! builds the disk a reboot finds: for each file, its durable image plus any subset of the
//! operations issued since its last sync (in their order, each kept, dropped or, for a write,
//! torn to a prefix), and a removal of the journal that may or may not have reached the
//! directory. Creating the journal syncs the directory, so a created journal exists after a
//! crash (empty unless a sync of its own made more durable).
//!
//! Byte-range locks are kept in memory per handle (open-file-description semantics), so redb
//! runs in its shared single-writer mode here as on a real file.

// Public only with the `sim-disk` feature (for the fuzz crate); the unit tests use it too.
#![cfg_attr(not(feature = "sim-disk"), allow(unreachable_pub, dead_code))]

use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use redb::{BackendError, StorageBackend};

/// Which file of the disk.
const STORE: usize = 0;
const JOURNAL: usize = 1;
const KEYS: usize = 2;

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct SimFile {
    exists: bool,
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<Op>,
    /// Removed since the directory was last synced: a crash may undo the removal.
    removal_pending: bool,
}

#[derive(Debug, Default)]
struct State {
    files: [SimFile; 3],
    ops: u64,
    crash_after: Option<u64>,
    crashed: bool,
    syncs: u64,
    locks: Vec<(u64, u64, u64, bool)>,
    next_owner: u64,
    writer_alive: bool,
}

/// How a crash treats the operations issued since a file's last sync.
#[derive(Debug, Clone, Copy)]
pub enum Loss {
    /// Keep the first `keep` of every `of` (a prefix): `(0, 1)` none, `(1, 1)` all.
    Prefix { keep: u32, of: u32 },
    /// Each operation kept, dropped or (a write) torn at random, from this seed.
    Random(u64),
}

/// The simulated disk; clones share it.
#[derive(Debug, Clone, Default)]
pub struct SimDisk(Arc<Mutex<State>>);

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(offset, data) => {
            let Ok(start) = usize::try_from(*offset) else {
                return;
            };
            let end = start.saturating_add(data.len());
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
        Op::SetLen(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

fn power_lost() -> std::io::Error {
    std::io::Error::other("power lost (simulated)")
}

/// A small deterministic generator (SplitMix64).
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl SimDisk {
    /// An empty disk: no store, no journal.
    #[must_use]
    pub fn new() -> SimDisk {
        SimDisk::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Crash after `n` more operations: the (n+1)-th and every later one fail.
    pub fn crash_after(&self, n: u64) {
        let mut s = self.state();
        s.crash_after = s.ops.checked_add(n);
    }

    /// Cancels a crash point not yet reached.
    pub fn disarm(&self) {
        self.state().crash_after = None;
    }

    /// Operations issued so far (the crash points a run offers).
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// Syncs issued so far (file syncs and the directory sync of creating the journal).
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.state().syncs
    }

    /// Whether the crash point was reached.
    #[must_use]
    pub fn crashed(&self) -> bool {
        self.state().crashed
    }

    /// Whether the journal file exists now.
    #[must_use]
    pub fn journal_exists(&self) -> bool {
        self.state().files[JOURNAL].exists
    }

    /// The disk a reboot finds after a crash (or now, when none happened), losing what
    /// `loss` says of each file's unsynced operations. Locks and live writers are gone.
    #[must_use]
    pub fn after_crash(&self, loss: Loss) -> SimDisk {
        let s = self.state();
        let mut rng = match loss {
            Loss::Random(seed) => Some(Mix(seed)),
            Loss::Prefix { .. } => None,
        };
        let mut out = State::default();
        for (i, f) in s.files.iter().enumerate() {
            let mut image = f.durable.clone();
            let keep_prefix = match loss {
                Loss::Prefix { keep, of } => {
                    let n = f.pending.len() as u64;
                    Some(n.saturating_mul(u64::from(keep)) / u64::from(of.max(1)))
                }
                Loss::Random(_) => None,
            };
            for (k, op) in f.pending.iter().enumerate() {
                match (keep_prefix, rng.as_mut()) {
                    (Some(n), _) => {
                        if (k as u64) < n {
                            apply(&mut image, op);
                        }
                    }
                    (None, Some(r)) => match (r.next() % 3, op) {
                        (0, _) => {}
                        (1, Op::Write(off, data)) if !data.is_empty() => {
                            // Torn: a prefix of the write's bytes reached the disk.
                            let cut = (r.next() % data.len() as u64) as usize;
                            apply(&mut image, &Op::Write(*off, data[..cut].to_vec()));
                        }
                        _ => apply(&mut image, op),
                    },
                    (None, None) => apply(&mut image, op),
                }
            }
            let removed = f.removal_pending
                && match rng.as_mut() {
                    Some(r) => r.next() % 2 == 0,
                    None => keep_prefix.is_some_and(|n| n > 0) || f.pending.is_empty(),
                };
            let exists = if f.removal_pending {
                !removed
            } else {
                f.exists
            };
            out.files[i] = SimFile {
                exists,
                durable: image.clone(),
                current: image,
                pending: Vec::new(),
                removal_pending: false,
            };
        }
        SimDisk(Arc::new(Mutex::new(out)))
    }

    /// This disk's store file beside the journal file of `other` (a journal left by another
    /// store, or an older one), on a disk of its own.
    pub fn with_journal_of(&self, other: &SimDisk) -> SimDisk {
        let mine = self.state();
        let theirs = other.state();
        let mut out = State::default();
        out.files[STORE] = SimFile {
            exists: mine.files[STORE].exists,
            durable: mine.files[STORE].durable.clone(),
            current: mine.files[STORE].durable.clone(),
            ..SimFile::default()
        };
        out.files[JOURNAL] = SimFile {
            exists: theirs.files[JOURNAL].exists,
            durable: theirs.files[JOURNAL].durable.clone(),
            current: theirs.files[JOURNAL].durable.clone(),
            ..SimFile::default()
        };
        out.files[KEYS] = SimFile {
            exists: mine.files[KEYS].exists,
            durable: mine.files[KEYS].durable.clone(),
            current: mine.files[KEYS].durable.clone(),
            ..SimFile::default()
        };
        SimDisk(Arc::new(Mutex::new(out)))
    }

    /// A private copy of the store file as it is now, on a disk of its own (a reader's
    /// recovered copy).
    pub(crate) fn private_copy(&self) -> SimDisk {
        let s = self.state();
        let mut out = State::default();
        out.files[STORE] = SimFile {
            exists: true,
            durable: s.files[STORE].current.clone(),
            current: s.files[STORE].current.clone(),
            ..SimFile::default()
        };
        SimDisk(Arc::new(Mutex::new(out)))
    }

    /// A handle on the store file, for redb.
    pub(crate) fn store_file(&self) -> SimHandle {
        let mut s = self.state();
        s.files[STORE].exists = true;
        s.next_owner += 1;
        SimHandle {
            disk: self.clone(),
            file: STORE,
            owner: s.next_owner,
        }
    }

    /// Marks a shared-mode writer alive (readers then leave its journal to it).
    pub(crate) fn set_writer_alive(&self, alive: bool) {
        self.state().writer_alive = alive;
    }

    pub(crate) fn writer_alive(&self) -> bool {
        self.state().writer_alive
    }

    /// Counts one operation; fails it if the disk has crashed or this is the crash point.
    fn step(&self, f: impl FnOnce(&mut State)) -> std::io::Result<()> {
        let mut s = self.state();
        if s.crashed {
            return Err(power_lost());
        }
        s.ops += 1;
        if s.crash_after.is_some_and(|n| s.ops > n) {
            s.crashed = true;
            s.writer_alive = false;
            return Err(power_lost());
        }
        f(&mut s);
        Ok(())
    }
}

/// The journal's files on a simulated disk.
pub(crate) struct SimJournal(pub(crate) SimDisk);

/// The key file on a simulated disk.
pub(crate) struct SimKeys(pub(crate) SimDisk);

impl SimDisk {
    fn open_file(&self, file: usize) -> std::io::Result<Option<Box<dyn StorageBackend>>> {
        let mut s = self.state();
        if s.crashed {
            return Err(power_lost());
        }
        if !s.files[file].exists {
            return Ok(None);
        }
        s.next_owner += 1;
        Ok(Some(Box::new(SimHandle {
            disk: self.clone(),
            file,
            owner: s.next_owner,
        })))
    }

    fn create_file(&self, file: usize) -> std::io::Result<(Box<dyn StorageBackend>, u64)> {
        self.step(|s| {
            // Created and its name synced to the directory: it exists after a crash, empty.
            s.files[file] = SimFile {
                exists: true,
                ..SimFile::default()
            };
            s.syncs += 1;
        })?;
        let owner = {
            let mut s = self.state();
            s.next_owner += 1;
            s.next_owner
        };
        Ok((
            Box::new(SimHandle {
                disk: self.clone(),
                file,
                owner,
            }),
            1,
        ))
    }

    fn remove_file(&self, file: usize) -> std::io::Result<()> {
        self.step(|s| {
            let f = &mut s.files[file];
            if f.exists {
                f.exists = false;
                f.current.clear();
                f.removal_pending = true;
            }
        })
    }

    /// The bytes a file holds now (0 the store, 1 the journal, 2 the key file), for the tests
    /// that look for secrets in them.
    #[must_use]
    pub fn file_bytes(&self, file: usize) -> Vec<u8> {
        self.state()
            .files
            .get(file)
            .map(|f| f.current.clone())
            .unwrap_or_default()
    }
}

impl super::journal::JournalFiles for SimJournal {
    fn open(&self, _write: bool) -> std::io::Result<Option<Box<dyn StorageBackend>>> {
        self.0.open_file(JOURNAL)
    }

    fn create(&self) -> std::io::Result<(Box<dyn StorageBackend>, u64)> {
        self.0.create_file(JOURNAL)
    }

    fn remove(&self) -> std::io::Result<()> {
        self.0.remove_file(JOURNAL)
    }

    fn set_aside(&self) -> std::io::Result<String> {
        self.remove().map(|()| "<discarded>".to_owned())
    }

    fn name(&self) -> String {
        "<simulated journal>".to_owned()
    }
}

impl super::journal::JournalFiles for SimKeys {
    fn open(&self, _write: bool) -> std::io::Result<Option<Box<dyn StorageBackend>>> {
        self.0.open_file(KEYS)
    }

    fn create(&self) -> std::io::Result<(Box<dyn StorageBackend>, u64)> {
        self.0.create_file(KEYS)
    }

    fn remove(&self) -> std::io::Result<()> {
        self.0.remove_file(KEYS)
    }

    fn set_aside(&self) -> std::io::Result<String> {
        self.remove().map(|()| "<discarded>".to_owned())
    }

    fn name(&self) -> String {
        "<simulated key file>".to_owned()
    }
}

/// One handle on a file of the simulated disk (one open file description: its own locks).
#[derive(Debug)]
pub(crate) struct SimHandle {
    disk: SimDisk,
    file: usize,
    owner: u64,
}

fn range(start: Bound<u64>, end: Bound<u64>) -> (u64, u64) {
    let s = match start {
        Bound::Included(s) => s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let e = match end {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (s, e)
}

impl SimHandle {
    fn conflicts(&self, s: &State, (a, b): (u64, u64), shared: bool) -> bool {
        s.locks.iter().any(|&(owner, x, y, lock_shared)| {
            owner != self.owner && x < b && a < y && !(shared && lock_shared)
        })
    }

    fn take(&self, r: (u64, u64), shared: bool) -> Result<bool, BackendError> {
        let mut s = self.disk.state();
        if s.crashed {
            return Err(BackendError::Io(power_lost()));
        }
        if self.conflicts(&s, r, shared) {
            return Ok(false);
        }
        let owner = self.owner;
        s.locks
            .retain(|&(o, x, y, _)| !(o == owner && x == r.0 && y == r.1));
        s.locks.push((owner, r.0, r.1, shared));
        Ok(true)
    }
}

impl StorageBackend for SimHandle {
    fn len(&self) -> std::io::Result<u64> {
        let s = self.disk.state();
        if s.crashed {
            return Err(power_lost());
        }
        Ok(s.files[self.file].current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let s = self.disk.state();
        if s.crashed {
            return Err(power_lost());
        }
        let cur = &s.files[self.file].current;
        let start = usize::try_from(offset).map_err(|_| power_lost())?;
        let end = start.saturating_add(out.len());
        let src = cur
            .get(start..end)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        let file = self.file;
        self.disk.step(|s| {
            let f = &mut s.files[file];
            let op = Op::SetLen(len);
            apply(&mut f.current, &op);
            f.pending.push(op);
        })
    }

    fn sync_data(&self) -> std::io::Result<()> {
        let file = self.file;
        self.disk.step(|s| {
            s.syncs += 1;
            let f = &mut s.files[file];
            f.durable = f.current.clone();
            f.pending.clear();
        })
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let file = self.file;
        self.disk.step(|s| {
            let f = &mut s.files[file];
            let op = Op::Write(offset, data.to_vec());
            apply(&mut f.current, &op);
            f.pending.push(op);
        })
    }

    fn close(&self) -> std::io::Result<()> {
        let owner = self.owner;
        self.disk.state().locks.retain(|l| l.0 != owner);
        Ok(())
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.take(range(start, end), false)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.take(range(start, end), true)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        // One process: a conflict would wait forever.
        if self.take(range(start, end), false)? {
            Ok(())
        } else {
            Err(BackendError::Io(std::io::Error::other(
                "simulated lock conflict",
            )))
        }
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        if self.take(range(start, end), true)? {
            Ok(())
        } else {
            Err(BackendError::Io(std::io::Error::other(
                "simulated lock conflict",
            )))
        }
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        let (a, b) = range(start, end);
        let owner = self.owner;
        self.disk
            .state()
            .locks
            .retain(|&(o, x, y, _)| !(o == owner && x == a && y == b));
        Ok(())
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        let s = self.disk.state();
        Ok(self.conflicts(&s, range(start, end), false))
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let owner = self.owner;
        self.disk.state().locks.retain(|l| l.0 != owner);
    }
}
