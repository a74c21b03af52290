//! The file under redb: redb's own `FileBackend`, behind a handle we can close ourselves.
//!
//! redb panics on some damaged files, and a handle whose locks a caught panic poisoned cannot
//! be dropped safely (its drop panics again). The store then leaks the redb handle, but must
//! still release the file: this wrapper owns the `FileBackend`, so `eject` drops it (closing
//! the descriptor releases every lock redb took) while redb keeps a handle whose every call
//! now fails. It also counts syncs (`fdatasync`), which the benchmarks and tests read, and
//! takes the per-run liveness locks that tell a live scan from an interrupted one.

use std::fs::File;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// First byte of the per-run liveness locks: past redb's own lock bytes (which start at 2^62
/// and end below 2^62 + 1024), one byte per run ID.
const LIVENESS_BASE: u64 = (1 << 62) + (1 << 20);
/// The byte a writer in the shared mode locks for as long as it lives: a reader that finds
/// journal records and this byte free knows their writer is gone (below the liveness locks,
/// past redb's).
pub(crate) const WRITER_BYTE: u64 = (1 << 62) + (1 << 19);
/// The byte the creator of a store locks while it fills the file in place (only where the
/// file system has no hard links; docs/FORMAT.md §10): an open that finds it locked waits.
pub(crate) const CREATING_BYTE: u64 = (1 << 62) + (1 << 18);
/// Run IDs the liveness locks can name; a larger ID is reported as not live-checkable.
pub(crate) const LIVENESS_RUNS_MAX: u64 = 1 << 40;

/// A shared handle on the file: the store keeps one, redb the other (inside `SharedBackend`).
#[derive(Debug, Clone)]
pub(crate) struct FileHandle {
    inner: Arc<RwLock<Option<FileBackend>>>,
    syncs: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    /// A private temporary copy: nothing on it needs to survive a crash, so syncs are skipped.
    private: bool,
}

impl FileHandle {
    pub(crate) fn new(file: File) -> Result<FileHandle, redb::DatabaseError> {
        Ok(FileHandle {
            inner: Arc::new(RwLock::new(Some(FileBackend::new(file)?))),
            syncs: Arc::new(AtomicU64::new(0)),
            written: Arc::new(AtomicU64::new(0)),
            private: false,
        })
    }

    /// A handle on a private temporary copy (a reader's recovered copy, the proof of an
    /// unclean file): its syncs are skipped, since the copy is thrown away when closed.
    pub(crate) fn private(file: File) -> Result<FileHandle, redb::DatabaseError> {
        let mut h = FileHandle::new(file)?;
        h.private = true;
        Ok(h)
    }

    /// The backend redb is given.
    pub(crate) fn backend(&self) -> SharedBackend {
        SharedBackend(self.clone())
    }

    /// Closes the file, releasing every lock taken through it; later calls fail.
    pub(crate) fn eject(&self) {
        let taken = match self.inner.write() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(taken);
    }

    /// Syncs issued so far through this handle.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Bytes written so far through this handle.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    fn with<T>(&self, f: impl FnOnce(&FileBackend) -> std::io::Result<T>) -> std::io::Result<T> {
        let guard = self
            .inner
            .read()
            .map_err(|_| std::io::Error::other("the store file was closed after a failure"))?;
        match guard.as_ref() {
            Some(b) => f(b),
            None => Err(std::io::Error::other(
                "the store file was closed after a failure",
            )),
        }
    }

    fn with_lock<T>(
        &self,
        f: impl FnOnce(&FileBackend) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let guard = self
            .inner
            .read()
            .map_err(|_| BackendError::Io(std::io::Error::other("store file closed")))?;
        match guard.as_ref() {
            Some(b) => f(b),
            None => Err(BackendError::Io(std::io::Error::other("store file closed"))),
        }
    }
}

/// The liveness lock of one run: held by the process that writes the run, for as long as it
/// writes it (an fcntl byte-range lock on the store file, released by the kernel when the
/// process dies, however it dies).
#[derive(Debug)]
pub(crate) struct Liveness {
    file: FileBackend,
    byte: u64,
}

impl Liveness {
    /// Takes the lock of `run` on a fresh descriptor of `path`. `None` when the run ID is past
    /// the lockable range or the lock cannot be taken (the run then reads as interrupted while
    /// it runs, which is the safe side: nothing trusts a live run more).
    pub(crate) fn take(path: &std::path::Path, run: u64) -> Option<Liveness> {
        if run >= LIVENESS_RUNS_MAX {
            return None;
        }
        Liveness::take_byte(path, LIVENESS_BASE + run)
    }

    /// Takes the shared-mode writer's lock (`WRITER_BYTE`); `None` when it cannot be taken
    /// (readers then fold the journal into a private copy themselves, which is correct, only
    /// slower).
    pub(crate) fn writer(path: &std::path::Path) -> Option<Liveness> {
        Liveness::take_byte(path, WRITER_BYTE)
    }

    fn take_byte(path: &std::path::Path, byte: u64) -> Option<Liveness> {
        // A write lock needs a descriptor open for writing (fcntl refuses it on a read-only
        // one with EBADF, and the run would read as interrupted while it runs).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ok()?;
        let file = FileBackend::new(file).ok()?;
        match file.try_lock_range(Bound::Included(byte), Bound::Excluded(byte + 1)) {
            Ok(true) => Some(Liveness { file, byte }),
            _ => None,
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock anyway; unlocking first is tidy.
        let _ = self
            .file
            .unlock_range(Bound::Included(self.byte), Bound::Excluded(self.byte + 1));
    }
}

/// Whether another process holds the liveness lock of `run` in the file at `path`: a run in
/// the `running` state whose lock nobody holds was interrupted (its writer is gone).
pub(crate) fn is_live(path: &std::path::Path, run: u64) -> bool {
    run < LIVENESS_RUNS_MAX && is_locked(path, LIVENESS_BASE + run)
}

/// Whether a writer in the shared mode holds the store at `path` now.
pub(crate) fn writer_is_live(path: &std::path::Path) -> bool {
    is_locked(path, WRITER_BYTE)
}

/// Whether another process is creating the store at `path` in place now.
pub(crate) fn is_being_created(path: &std::path::Path) -> bool {
    is_locked(path, CREATING_BYTE)
}

fn is_locked(path: &std::path::Path, byte: u64) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let Ok(file) = FileBackend::new(file) else {
        return false;
    };
    matches!(
        file.query_lock_range(Bound::Included(byte), Bound::Excluded(byte + 1)),
        Ok(true)
    )
}

/// What redb holds: every call goes to the shared `FileBackend` while it is there.
#[derive(Debug)]
pub(crate) struct SharedBackend(FileHandle);

impl StorageBackend for SharedBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.with(StorageBackend::len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.with(|b| b.read(offset, out))
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.with(|b| b.set_len(len))
    }

    fn sync_data(&self) -> std::io::Result<()> {
        if self.0.private {
            return self.0.with(|_| Ok(()));
        }
        self.0.syncs.fetch_add(1, Ordering::Relaxed);
        self.0.with(StorageBackend::sync_data)
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0
            .written
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.0.with(|b| b.write(offset, data))
    }

    fn close(&self) -> std::io::Result<()> {
        // A closed (ejected) file has nothing left to release.
        match self.0.inner.read() {
            Ok(guard) => guard.as_ref().map_or(Ok(()), StorageBackend::close),
            Err(_) => Ok(()),
        }
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.with_lock(|b| b.try_lock_range(start, end))
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.0.with_lock(|b| b.try_lock_shared_range(start, end))
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with_lock(|b| b.lock_range(start, end))
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with_lock(|b| b.lock_shared_range(start, end))
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.with_lock(|b| b.unlock_range(start, end))
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.with_lock(|b| b.query_lock_range(start, end))
    }
}
