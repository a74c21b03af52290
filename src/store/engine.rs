//! The engine: opens files (for writing, or for reading without ever writing), creates a store
//! whole, begins transactions, and contains redb's panics on damaged files: every call into
//! redb, here or in a closure another module passes to `contain`, runs under `contain`.
//!
//! Invariants:
//! - a read-only open never writes the file: a file a killed writer left unclean is read
//!   through a recovered private copy, and repaired in place only by a writer;
//! - a writer repairs a file only after a read of its format record proved it a scanledger
//!   store (on the private copy when the file needs repair);
//! - every redb call runs under `contain`, which turns a panic into `Failure::Damaged` and
//!   closes the store: later calls fail at once, and the file (with its locks) is released;
//! - our own logic never runs under `contain`: a bug of ours panics as a bug.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redb::{
    ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    StorageBackend, WriteTransaction,
};

use super::backend::FileHandle;
use super::error::{Failure, OpenError};
use super::schema;

/// The first bytes of every redb file.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
/// Bytes of page cache redb may keep: the scan's working set is the pages a checkpoint
/// touches, so a small cache costs nothing and keeps the process's memory flat.
pub(crate) const CACHE_BYTES: usize = 32 * 1024 * 1024;

enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

/// An open store file.
pub(crate) struct Engine {
    /// `None` only while dropping.
    db: Option<Db>,
    /// The file, when the store is a file (tests open stores on simulated disks).
    file: Option<FileHandle>,
    path: PathBuf,
    /// A panic inside redb was caught: the store refuses every later call.
    broken: AtomicBool,
    /// Opened to read a recovered private copy (the file needed repair, or held journal
    /// records no writer is alive to fold).
    copy: Option<Private>,
    writable: bool,
    /// Opened for writing in the exclusive mode: this process holds the whole file.
    exclusive: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("path", &self.path)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

/// How a writer shares the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// Readers in other processes see each commit (redb's single-writer mode).
    Shared,
    /// The writer holds the file alone.
    Exclusive,
}

impl Engine {
    /// Opens (creating if absent) a store for writing.
    ///
    /// A store is created whole or not at all: formatted in a temporary file beside it and
    /// linked into place (`create_whole`), so another process never finds it empty or
    /// half-formatted, and of two processes creating it at once one links and the other opens
    /// what it linked.
    pub(crate) fn open_writer(path: &Path, sharing: Sharing) -> Result<Engine, OpenError> {
        wait_while_created(path)?;
        if !classify_path(path, true)? {
            create_whole(path)?;
        }
        check_redb_magic(path)?;
        prove_ours(path)?;
        let engine = Engine::open_db_writer(path, sharing, false)?;
        schema::init_or_check(&engine)?;
        Ok(engine)
    }

    /// Opens the file for writing (redb repairs it if a writer was killed), with no check of
    /// what it holds: callers check or initialise the format next.
    ///
    /// `private`: the file is a temporary copy of this process's own, whose syncs are skipped.
    fn open_db_writer(path: &Path, sharing: Sharing, private: bool) -> Result<Engine, OpenError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_open_error(path, "open", e))?;
        let handle = if private {
            FileHandle::private(file)
        } else {
            FileHandle::new(file)
        }
        .map_err(|e| db_open_error(path, e))?;
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        builder.set_concurrency_mode(match sharing {
            Sharing::Shared => ConcurrencyMode::SingleWriter,
            Sharing::Exclusive => ConcurrencyMode::ExclusiveWriter,
        });
        let db = contain_open(path, || builder.create_with_backend(handle.backend()))?
            .map_err(|e| db_open_error(path, e))?;
        Ok(Engine {
            db: Some(Db::Write(db)),
            file: Some(handle),
            path: path.to_owned(),
            broken: AtomicBool::new(false),
            copy: None,
            writable: true,
            exclusive: sharing == Sharing::Exclusive,
        })
    }

    /// Opens a store for reading. Never writes the file: one a killed writer left unclean is
    /// read through a recovered private copy (`recovered_copy()` says so), and so is any file
    /// when `force_copy`.
    ///
    /// `on_copy` runs on a recovered copy while it is still writable: the store folds the
    /// page journal a stopped writer left into it, so the reader sees every acknowledged
    /// page without writing the file.
    pub(crate) fn open_reader(
        path: &Path,
        force_copy: bool,
        on_copy: impl FnOnce(&Engine) -> Result<(), OpenError>,
    ) -> Result<Engine, OpenError> {
        Engine::open_reader_cached(path, force_copy, on_copy, CACHE_BYTES)
    }

    /// [`Engine::open_reader`] with a page cache of `cache_bytes` for a file read without a
    /// private copy: a reader that reads each page once (a merge's shard store) keeps little.
    pub(crate) fn open_reader_cached(
        path: &Path,
        force_copy: bool,
        on_copy: impl FnOnce(&Engine) -> Result<(), OpenError>,
        cache_bytes: usize,
    ) -> Result<Engine, OpenError> {
        wait_while_created(path)?;
        if !classify_path(path, false)? {
            return Err(OpenError::NotFound {
                path: path.to_owned(),
            });
        }
        check_redb_magic(path)?;
        if !force_copy {
            match open_read_only(path, cache_bytes) {
                Ok((db, file)) => {
                    let engine = Engine::read_only(db, file, path);
                    schema::check(&engine)?;
                    return Ok(engine);
                }
                Err(Opened::NeedsRepair) => {}
                Err(Opened::Failed(e)) => return Err(e),
            }
        }
        let copy = TempCopy::of(path)?;
        let mut engine = Engine::open_db_writer(&copy.path, Sharing::Exclusive, true)
            .map_err(|e| rename_path(e, path))?;
        schema::check(&engine).map_err(|e| rename_path(e, path))?;
        on_copy(&engine).map_err(|e| rename_path(e, path))?;
        engine.path = path.to_owned();
        engine.copy = Some(Private::File(copy));
        engine.writable = false;
        engine.exclusive = false;
        Ok(engine)
    }

    /// [`Engine::open_reader`] on a simulated disk: the private copy is a disk of its own.
    #[cfg(any(test, feature = "sim-disk"))]
    pub(crate) fn open_reader_backend(
        disk: &super::simdisk::SimDisk,
        force_copy: bool,
        on_copy: impl FnOnce(&Engine) -> Result<(), OpenError>,
    ) -> Result<Engine, OpenError> {
        let path = PathBuf::from("<simulated disk>");
        if !force_copy {
            let mut builder = Database::builder();
            builder.set_cache_size(CACHE_BYTES);
            builder.set_concurrency_mode(ConcurrencyMode::SingleWriter);
            match contain_open(&path, || {
                builder.open_read_only_with_backend(disk.store_file())
            })? {
                Ok(db) => {
                    let engine = Engine {
                        db: Some(Db::Read(db)),
                        file: None,
                        path,
                        broken: AtomicBool::new(false),
                        copy: None,
                        writable: false,
                        exclusive: false,
                    };
                    schema::check(&engine)?;
                    return Ok(engine);
                }
                Err(DatabaseError::RepairAborted) => {}
                Err(e) => return Err(db_open_error(&path, e)),
            }
        }
        let copy = disk.private_copy();
        let mut engine = Engine::open_backend(copy.store_file(), Sharing::Exclusive)?;
        on_copy(&engine)?;
        engine.copy = Some(Private::Sim);
        engine.writable = false;
        engine.exclusive = false;
        Ok(engine)
    }

    /// Whether this engine was opened for writing.
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this process holds the whole file (a writer in the exclusive mode): no other
    /// process can be writing any of its runs.
    pub(crate) fn exclusive(&self) -> bool {
        self.exclusive
    }

    /// Whether this store reads a recovered private copy of an unclean file.
    pub(crate) fn recovered_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// Syncs issued through this handle (for the benchmarks and tests).
    pub(crate) fn syncs(&self) -> u64 {
        self.file.as_ref().map_or(0, FileHandle::syncs)
    }

    /// Bytes written through this handle (for the benchmarks).
    pub(crate) fn bytes_written(&self) -> u64 {
        self.file.as_ref().map_or(0, FileHandle::written)
    }

    /// Opens (creating if empty) a store on a custom redb backend: the power-loss tests'
    /// simulated disk (which implements locks, so the shared mode works on it too).
    #[cfg(any(test, feature = "sim-disk"))]
    pub(crate) fn open_backend(
        backend: impl redb::StorageBackend,
        sharing: Sharing,
    ) -> Result<Engine, OpenError> {
        let path = PathBuf::from("<simulated disk>");
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        builder.set_concurrency_mode(match sharing {
            Sharing::Shared => ConcurrencyMode::SingleWriter,
            Sharing::Exclusive => ConcurrencyMode::ExclusiveWriter,
        });
        let db = contain_open(&path, || builder.create_with_backend(backend))?
            .map_err(|e| db_open_error(&path, e))?;
        let engine = Engine {
            db: Some(Db::Write(db)),
            file: None,
            path,
            broken: AtomicBool::new(false),
            copy: None,
            writable: true,
            exclusive: sharing == Sharing::Exclusive,
        };
        schema::init_or_check(&engine)?;
        Ok(engine)
    }

    fn db(&self) -> &Db {
        self.db
            .as_ref()
            .expect("invariant: the redb handle is present until the engine is dropped")
    }

    /// One read transaction: every read of a command goes through one, so it never sees a
    /// torn state.
    pub(crate) fn begin_read(&self) -> Result<ReadTransaction, Failure> {
        self.contain("begin a read transaction", || match self.db() {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        })
    }

    /// A durable write transaction. `None` when the store was opened for reading.
    pub(crate) fn begin_write(&self) -> Result<Option<WriteTransaction>, Failure> {
        match self.db() {
            Db::Write(db) if self.writable => self
                .contain("begin a write transaction", || db.begin_write())
                .map(Some),
            _ => Ok(None),
        }
    }

    /// Compacts the file (redb's `compact`), which needs no other open transaction.
    pub(crate) fn compact(&mut self) -> Result<(), super::maintenance::CompactOutcome> {
        use super::maintenance::CompactOutcome;
        if !self.writable {
            return Err(CompactOutcome::ReadOnly);
        }
        if self.broken.load(Ordering::Relaxed) {
            return Err(CompactOutcome::Failed(Failure::Closed));
        }
        let Some(Db::Write(db)) = self.db.as_mut() else {
            return Err(CompactOutcome::ReadOnly);
        };
        // Compacting repeats until nothing more moves; bounded by the file's pages.
        let mut result = Ok(());
        for _ in 0..64 {
            match catch(|| db.compact()) {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => break,
                Ok(Err(redb::CompactionError::TransactionInProgress)) => {
                    result = Err(CompactOutcome::Busy);
                    break;
                }
                Ok(Err(e)) => {
                    result = Err(CompactOutcome::Failed(classify("compact", e.into())));
                    break;
                }
                Err(message) => {
                    self.broken.store(true, Ordering::Relaxed);
                    if let Some(file) = &self.file {
                        file.eject();
                    }
                    result = Err(CompactOutcome::Failed(Failure::damaged(format!(
                        "compact failed inside the storage engine: {message}"
                    ))));
                    break;
                }
            }
        }
        result
    }

    /// Whether a panic inside the storage engine closed this store: every later call fails.
    pub(crate) fn closed(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Runs one call into redb: its error becomes a `Failure`, and so does a panic, which
    /// also closes the store (every later call fails with `Failure::Closed`).
    pub(crate) fn contain<T, E: Into<redb::Error>>(
        &self,
        op: &'static str,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Failure> {
        if self.broken.load(Ordering::Relaxed) {
            return Err(Failure::Closed);
        }
        match catch(|| {
            #[cfg(test)]
            fault::tick();
            f()
        }) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(op, e.into())),
            Err(message) => {
                self.broken.store(true, Ordering::Relaxed);
                // Release the file and its locks now: the redb handle is leaked on drop.
                if let Some(file) = &self.file {
                    file.eject();
                }
                Err(Failure::damaged(format!(
                    "{op} failed inside the storage engine: {message}"
                )))
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let db = self.db.take();
        if std::thread::panicking() || self.broken.load(Ordering::Relaxed) {
            // Dropping a redb handle whose locks a caught panic poisoned panics again (an
            // abort while unwinding): leak it; the file was ejected, so its locks are free.
            if let Some(file) = &self.file {
                file.eject();
            }
            std::mem::forget(db);
            return;
        }
        // redb flushes on close and can panic there on a damaged file that no earlier call
        // tripped over: contain it like any other engine panic.
        if catch(|| {
            drop(db);
            Ok::<(), ()>(())
        })
        .is_err()
        {
            if let Some(file) = &self.file {
                file.eject();
            }
        }
    }
}

/// The tests' engine fault: a panic inside `contain`, where redb panics on some damaged files
/// (tests only; nothing of it is built into the library).
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::Cell;

    thread_local! {
        static CALLS: Cell<u64> = const { Cell::new(0) };
        static PANIC_AT: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// Calls into the engine on this thread so far.
    pub(crate) fn calls() -> u64 {
        CALLS.with(Cell::get)
    }

    /// The engine call `n` calls from now (0: the next) on this thread panics, once.
    pub(crate) fn panic_in(n: u64) {
        PANIC_AT.with(|p| p.set(Some(calls() + n)));
    }

    /// Disarms the fault.
    pub(crate) fn disarm() {
        PANIC_AT.with(|p| p.set(None));
    }

    pub(super) fn tick() {
        let call = CALLS.with(|c| {
            let n = c.get();
            c.set(n + 1);
            n
        });
        if PANIC_AT.with(Cell::get) == Some(call) {
            disarm();
            panic!("injected engine panic at call {call}");
        }
    }
}

thread_local! {
    static CONTAINED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether the current thread is inside a call into the storage engine whose panics are
/// caught and reported as a damaged store (the binary's panic hook stays quiet about them).
#[doc(hidden)]
#[must_use]
pub fn inside_engine_call() -> bool {
    CONTAINED.with(|d| d.get() > 0)
}

/// Runs `f`, catching a panic and returning its message.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    CONTAINED.with(|d| d.set(d.get().saturating_add(1)));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINED.with(|d| d.set(d.get().saturating_sub(1)));
    result.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned())
    })
}

fn contain_open<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, OpenError> {
    catch(f).map_err(|message| OpenError::Damaged {
        path: path.to_owned(),
        what: format!("opening it failed inside the storage engine: {message}"),
        source: None,
    })
}

fn classify(op: &'static str, e: redb::Error) -> Failure {
    match e {
        // A read past the end of the file is a truncated file, not a failing disk.
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => Failure::Damaged {
            what: format!("{op} failed: the file is shorter than its own header says (truncated?)"),
            source: Some(Box::new(io)),
        },
        redb::Error::Io(io) => Failure::Io {
            op,
            source: Box::new(io),
        },
        redb::Error::PreviousIo => Failure::Io {
            op,
            source: "an earlier write to the file failed".into(),
        },
        redb::Error::TableDoesNotExist(table) => {
            Failure::damaged(format!("table {table} is missing"))
        }
        other => Failure::Damaged {
            what: format!("{op} failed"),
            source: Some(Box::new(other)),
        },
    }
}

/// Sorts out the path before redb sees it. Returns whether the file exists.
fn classify_path(path: &Path, creating: bool) -> Result<bool, OpenError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(OpenError::IsDirectory {
            path: path.to_owned(),
        }),
        Ok(m) if m.len() == 0 => Err(OpenError::Empty {
            path: path.to_owned(),
        }),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent_dir(path);
            if creating && !dir.is_dir() {
                return Err(OpenError::NoDirectory {
                    path: path.to_owned(),
                    dir: dir.to_owned(),
                });
            }
            Ok(false)
        }
        Err(e) => Err(io_open_error(path, "stat", e)),
    }
}

fn io_open_error(path: &Path, op: &'static str, e: std::io::Error) -> OpenError {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => OpenError::PermissionDenied {
            path: path.to_owned(),
            source: e,
        },
        std::io::ErrorKind::IsADirectory => OpenError::IsDirectory {
            path: path.to_owned(),
        },
        _ => OpenError::Io {
            path: path.to_owned(),
            op,
            source: Box::new(e),
        },
    }
}

fn db_open_error(path: &Path, e: DatabaseError) -> OpenError {
    match e {
        DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => {
            OpenError::Busy {
                path: path.to_owned(),
            }
        }
        DatabaseError::UpgradeRequired(_) => OpenError::NotAStore {
            path: path.to_owned(),
            why: "a database in a storage-engine format this build does not read",
        },
        DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            OpenError::Damaged {
                path: path.to_owned(),
                what: "the file is shorter than its own header says (truncated?)".to_owned(),
                source: Some(Box::new(io)),
            }
        }
        DatabaseError::Storage(redb::StorageError::Io(io)) => io_open_error(path, "open", io),
        other => OpenError::Damaged {
            path: path.to_owned(),
            what: "the storage engine refused to open it".to_owned(),
            source: Some(Box::new(other)),
        },
    }
}

/// How long an open waits for another process to finish creating the store (only where the
/// file system has no hard links, so the file appears before it is whole).
const CREATION_WAIT: Duration = Duration::from_secs(10);

/// Creates the store at `path` whole: formats a temporary file in the same directory, syncs
/// it, and hard-links it to `path`, which fails when `path` exists, so nothing is clobbered.
/// Returns `Ok` too when another process created `path` first (the caller opens theirs).
///
/// Where hard links are refused, the file is created with `O_EXCL` and filled from the
/// temporary one under the creation lock (`CREATING_BYTE`): an open meeting the lock waits
/// for it (`wait_while_created`).
fn create_whole(path: &Path) -> Result<(), OpenError> {
    let tmp = CreationTemp::beside(path)?;
    {
        let engine = Engine::open_db_writer(&tmp.path, Sharing::Exclusive, false)
            .map_err(|e| rename_path(e, path))?;
        schema::init_or_check(&engine).map_err(|e| rename_path(e, path))?;
    }
    let sync = |p: &Path| std::fs::File::open(p).and_then(|f| f.sync_all());
    sync(&tmp.path).map_err(|e| io_open_error(path, "sync the new store", e))?;
    match std::fs::hard_link(&tmp.path, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => {
            tracing::debug!(store = %path.display(), error = %e, "no hard link: the store is created in place under the creation lock");
            fill_in_place(&tmp.path, path)?;
        }
    }
    // The new name is durable once its directory is synced (where directories can be).
    if let Err(e) = sync(parent_dir(path)) {
        tracing::debug!(store = %path.display(), error = %e, "the store's directory could not be synced");
    }
    Ok(())
}

/// `create_whole` without a hard link: `path` created exclusively, locked, then filled.
fn fill_in_place(from: &Path, path: &Path) -> Result<(), OpenError> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(io_open_error(path, "create", e)),
    };
    let file = redb::backends::FileBackend::new(file).map_err(|e| db_open_error(path, e))?;
    let byte = super::backend::CREATING_BYTE;
    let (start, end) = (
        std::ops::Bound::Included(byte),
        std::ops::Bound::Excluded(byte + 1),
    );
    // Best effort: without the lock an open that meets the file unfilled reports it empty.
    // Everything goes through this one descriptor: closing another would drop the lock.
    let locked = matches!(file.try_lock_range(start, end), Ok(true));
    let filled = copy_into(from, &file).map_err(|e| io_open_error(path, "write the new store", e));
    if locked {
        let _ = file.unlock_range(start, end);
    }
    filled
}

/// Copies the file at `from` into `to` from its start, and syncs it.
fn copy_into(from: &Path, to: &redb::backends::FileBackend) -> std::io::Result<()> {
    use std::io::Read;
    let mut from = std::fs::File::open(from)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or_default();
        to.write(offset, chunk)?;
        offset = offset
            .checked_add(n as u64)
            .ok_or_else(|| std::io::Error::other("the new store is too large"))?;
    }
    to.sync_data()
}

/// Waits (bounded by `CREATION_WAIT`) while another process holds the creation lock of the
/// file at `path`; `Busy` when it still does.
fn wait_while_created(path: &Path) -> Result<(), OpenError> {
    let deadline = Instant::now() + CREATION_WAIT;
    while super::backend::is_being_created(path) {
        if Instant::now() >= deadline {
            return Err(OpenError::Busy {
                path: path.to_owned(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The directory a store file is in.
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// The temporary file a new store is formatted in, beside it (so a hard link can name it);
/// removed when dropped. A process killed while creating leaves it behind, hidden and named
/// for what it is.
struct CreationTemp {
    path: PathBuf,
}

impl CreationTemp {
    fn beside(path: &Path) -> Result<CreationTemp, OpenError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = path
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy());
        let tmp = parent_dir(path).join(format!(".{name}.creating-{}-{nanos}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_open_error(path, "create a temporary file beside it", e))?;
        Ok(CreationTemp { path: tmp })
    }
}

impl Drop for CreationTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A file that does not begin as every redb file does is refused before redb sees it, so it
/// is never modified.
fn check_redb_magic(path: &Path) -> Result<(), OpenError> {
    use std::io::Read;
    let mut head = [0u8; REDB_MAGIC.len()];
    let mut file = std::fs::File::open(path).map_err(|e| io_open_error(path, "open", e))?;
    let n = file
        .read(&mut head)
        .map_err(|e| io_open_error(path, "read", e))?;
    if n < head.len() || head != REDB_MAGIC {
        return Err(OpenError::NotAStore {
            path: path.to_owned(),
            why: "not a database file",
        });
    }
    Ok(())
}

enum Opened {
    NeedsRepair,
    Failed(OpenError),
}

/// An engine over a store file opened read-only in place (never written, no private copy).
impl Engine {
    fn read_only(db: ReadOnlyDatabase, file: FileHandle, path: &Path) -> Engine {
        Engine {
            db: Some(Db::Read(db)),
            file: Some(file),
            path: path.to_owned(),
            broken: AtomicBool::new(false),
            copy: None,
            writable: false,
            exclusive: false,
        }
    }
}

fn open_read_only(
    path: &Path,
    cache_bytes: usize,
) -> Result<(ReadOnlyDatabase, FileHandle), Opened> {
    let file =
        std::fs::File::open(path).map_err(|e| Opened::Failed(io_open_error(path, "open", e)))?;
    let handle = FileHandle::new(file).map_err(|e| Opened::Failed(db_open_error(path, e)))?;
    let mut builder = Database::builder();
    builder.set_cache_size(cache_bytes);
    builder.set_concurrency_mode(ConcurrencyMode::SingleWriter);
    match contain_open(path, || {
        builder.open_read_only_with_backend(handle.backend())
    }) {
        Err(e) => Err(Opened::Failed(e)),
        Ok(Ok(db)) => Ok((db, handle)),
        Ok(Err(DatabaseError::RepairAborted)) => Err(Opened::NeedsRepair),
        Ok(Err(e)) => Err(Opened::Failed(db_open_error(path, e))),
    }
}

/// Proves an existing file is a scanledger store this build reads, without writing it: by a
/// read-only open, or, when the file needs repair, on a repaired private copy.
fn prove_ours(path: &Path) -> Result<(), OpenError> {
    match open_read_only(path, CACHE_BYTES) {
        Ok((db, file)) => schema::check(&Engine::read_only(db, file, path)),
        Err(Opened::NeedsRepair) => {
            let copy = TempCopy::of(path)?;
            let engine = Engine::open_db_writer(&copy.path, Sharing::Exclusive, true)
                .map_err(|e| rename_path(e, path))?;
            schema::check(&engine).map_err(|e| rename_path(e, path))
        }
        Err(Opened::Failed(e)) => Err(e),
    }
}

/// An error about the private copy, reported as about the store itself.
fn rename_path(e: OpenError, path: &Path) -> OpenError {
    let path = path.to_owned();
    match e {
        OpenError::NotAStore { why, .. } => OpenError::NotAStore { path, why },
        OpenError::NewerFormat {
            found, supported, ..
        } => OpenError::NewerFormat {
            path,
            found,
            supported,
        },
        OpenError::OlderFormat { found, .. } => OpenError::OlderFormat { path, found },
        OpenError::Damaged { what, source, .. } => OpenError::Damaged { path, what, source },
        other => other,
    }
}

/// A reader's private copy.
enum Private {
    /// A copy of the file in the temporary directory.
    File(#[allow(dead_code)] TempCopy),
    /// A copy on a simulated disk of its own.
    #[cfg(any(test, feature = "sim-disk"))]
    Sim,
}

/// A private copy of a store file, removed when dropped.
struct TempCopy {
    path: PathBuf,
}

impl TempCopy {
    fn of(path: &Path) -> Result<TempCopy, OpenError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("scanledger-recovered-{}-{nanos}.redb", std::process::id());
        let copy = TempCopy {
            path: std::env::temp_dir().join(name),
        };
        std::fs::copy(path, &copy.path).map_err(|e| OpenError::Io {
            path: path.to_owned(),
            op: "copy the unclean file for recovery",
            source: Box::new(e),
        })?;
        Ok(copy)
    }
}

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
