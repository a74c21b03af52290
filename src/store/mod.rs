//! The durable store: runs, page logs, partition bitmaps, labels and string dictionaries in one
//! redb file (layout in docs/FORMAT.md §10).
//!
//! Roles: `engine` opens files and begins transactions, and every call into redb runs inside
//! its `contain` (which contains redb's panics); `backend` is the file under it; `schema` the tables and the format record;
//! `records` the store's own value formats; `snapshot` a consistent read view (one read
//! transaction per command); `writer` the one writer of one run.
//!
//! Invariants:
//! - a checkpoint is one durable unit (a journal record, or a transaction) holding the IDs,
//!   the counts and the request to continue from together, so the stored request always matches the stored IDs; a crash
//!   re-fetches at most the pages since the last commit;
//! - a run's pending (uncommitted) pages belong to its `RunWriter`, never to the `Store`;
//! - a restart supersedes the old run and begins the new one in one transaction;
//! - read-only opens never write; a run ID is never reused; after a failed commit the store
//!   refuses writes until it is reopened;
//! - no raw cursor is written to the file in clear, and a run nothing can resume keeps none:
//!   its key's slot in the key file (`keys.rs`) is zeroed, so no copy of its sealed request
//!   left in redb's freed pages or in the journal can be opened.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redb::WriteTransaction;

use crate::codec::Interner;
use crate::contract::{Contract, Mode};
use crate::receipt::RunId;
use crate::reconcile::{Limit, Reconciler, Status, ViolationKind};

mod backend;
mod engine;
#[cfg(test)]
mod erasure_tests;
mod error;
mod fold;
mod journal;
mod keys;
mod maintenance;
mod merged;
mod options;
mod records;
mod run;
mod schema;
#[cfg(feature = "sim-disk")]
#[doc(hidden)]
pub mod simdisk;
#[cfg(all(test, not(feature = "sim-disk")))]
mod simdisk;
mod snapshot;
mod stops;
mod summary;
#[cfg(test)]
mod tests;
mod unfinished;
mod writer;

pub use engine::inside_engine_call;
pub use error::{Cause, ErrorClass, OpenError, ReadError, WriteError};
pub(crate) use merged::{MergedWriter, PARTITION_BATCH, RECORD_BATCH};
pub use options::StoreOptions;
pub use run::{LoadedRun, Raise, RunHeader, RunState, RunSummary, ScopeKey};
pub use schema::{FORMAT_VERSION, TOKEN_KEY_LEN};
pub use snapshot::Snapshot;
pub use stops::{StopCause, STOP_MESSAGE_BYTES_MAX};
pub use writer::RunWriter;

use engine::{Engine, Sharing};
use error::Failure;
use writer::NewRun;

/// An open store file: a writer (`open`) or a reader (`open_read`).
pub struct Store {
    engine: Engine,
    options: StoreOptions,
    poisoned: AtomicBool,
    source_spec: Option<String>,
    /// The page journal of a writer in the shared mode (`journal.rs`, `fold.rs`).
    journal: Mutex<Option<journal::Journal>>,
    /// The per-run cursor keys (`keys.rs`); `None` when the key file cannot be read (a
    /// reader then opens no sealed request).
    keys: Mutex<Option<keys::KeyFile>>,
    /// Held by a shared-mode writer while it lives: readers leave its journal to it.
    _writer_mark: Option<WriterMark>,
}

/// What marks a shared-mode writer alive to readers in other processes.
enum WriterMark {
    /// A byte-range lock on the store file (`backend::Liveness::writer`).
    File(#[allow(dead_code)] backend::Liveness),
    #[cfg(any(test, feature = "sim-disk"))]
    Sim(simdisk::SimDisk),
}

impl Drop for WriterMark {
    fn drop(&mut self) {
        #[cfg(any(test, feature = "sim-disk"))]
        if let WriterMark::Sim(disk) = self {
            disk.set_writer_alive(false);
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.engine.path())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens a store for writing, creating it if the file does not exist. An existing file
    /// must be a scanledger store of this format: it is checked before anything is written.
    /// Journal records a killed writer left are folded first, in one commit.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("sl-doc-open-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("s.redb");
    /// let store = scanledger::Store::open(&path, scanledger::StoreOptions::new()).unwrap();
    /// assert!(store.read().unwrap().runs().unwrap().is_empty());
    /// # drop(store); std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    ///
    /// # Errors
    /// `OpenError` naming the path and the problem; `Busy` if another process writes it.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Store, OpenError> {
        let sharing = if options.exclusive {
            Sharing::Exclusive
        } else {
            Sharing::Shared
        };
        let engine = Engine::open_writer(path, sharing)?;
        // Taken before the journal is read: a reader that finds it free knows no writer
        // will fold what it reads.
        let mark = (sharing == Sharing::Shared)
            .then(|| backend::Liveness::writer(path).map(WriterMark::File))
            .flatten();
        let files = Box::new(fold::FileJournal::beside(path));
        let key_files = Box::new(fold::FileJournal::keys_beside(path));
        Store::writer(engine, options, sharing, files, key_files, mark)
            .map_err(|f| f.into_open(path))
    }

    /// A writer over an open engine: folds the journal records that continue its last
    /// commit, then journals (shared mode) or removes the journal (exclusive mode).
    fn writer(
        engine: Engine,
        options: StoreOptions,
        sharing: Sharing,
        files: Box<dyn journal::JournalFiles>,
        key_files: Box<dyn journal::JournalFiles>,
        mark: Option<WriterMark>,
    ) -> Result<Store, Failure> {
        let merged = fold::recover(&engine, files.as_ref(), true)?;
        if !merged.is_empty() {
            fold::fold_into(&engine, &merged)?;
            tracing::info!(store = %engine.path().display(), records = merged.records, "folded the page journal a stopped writer left");
        }
        let keys = settle_keys(&engine, key_files)?;
        let journal = if sharing == Sharing::Shared {
            let (tag, base) = fold::identity(&engine)?;
            let base = match base {
                Some(b) => b,
                None => fold::fold_into(&engine, &journal::Merged::default())?,
            };
            Some(journal::Journal::new(
                files,
                tag,
                base,
                options.fold_records,
            ))
        } else {
            // Nothing in it applies any more: this writer's commits are not journaled.
            if let Err(e) = files.remove() {
                tracing::debug!(journal = %files.name(), error = %e, "a stale page journal could not be removed (it is ignored)");
            }
            None
        };
        Ok(Store {
            engine,
            options,
            poisoned: AtomicBool::new(false),
            source_spec: None,
            journal: Mutex::new(journal),
            keys: Mutex::new(Some(keys)),
            _writer_mark: mark,
        })
    }

    fn reader(engine: Engine, key_files: Box<dyn journal::JournalFiles>) -> Store {
        let keys = keys_tag(&engine)
            .and_then(|tag| keys::KeyFile::load(key_files, tag, false))
            .map_err(|f| {
                tracing::warn!(store = %engine.path().display(), error = ?f, "the key file cannot be read; no resume request can be opened");
            })
            .ok();
        Store {
            engine,
            options: StoreOptions::new(),
            poisoned: AtomicBool::new(false),
            source_spec: None,
            journal: Mutex::new(None),
            keys: Mutex::new(keys),
            _writer_mark: None,
        }
    }

    /// [`Store::open`], waiting up to `wait` while another process writes the store.
    ///
    /// # Errors
    /// As [`Store::open`]; `Busy` once `wait` has passed.
    pub fn open_waiting(
        path: &Path,
        options: StoreOptions,
        wait: Duration,
    ) -> Result<Store, OpenError> {
        retry_busy(wait, || Store::open(path, options))
    }

    /// Opens a store for reading; works while another process writes it (unless that one
    /// holds it exclusively), and never writes the file. While a writer is alive the view is
    /// its last fold; after a writer died, journal records it acknowledged are folded into a
    /// private copy, which the view then reads (`reads_recovered_copy`).
    ///
    /// # Errors
    /// `OpenError` naming the path and the problem.
    pub fn open_read(path: &Path) -> Result<Store, OpenError> {
        Store::open_read_cached(path, engine::CACHE_BYTES)
    }

    /// [`Store::open_read`] keeping a page cache of about 256 KiB: for a reader that reads each
    /// page once, as `merge` reads its shard stores (many at once, each read whole).
    ///
    /// # Errors
    /// As [`Store::open_read`].
    pub fn open_read_streaming(path: &Path) -> Result<Store, OpenError> {
        Store::open_read_cached(path, 1 << 18)
    }

    fn open_read_cached(path: &Path, cache_bytes: usize) -> Result<Store, OpenError> {
        let files = fold::FileJournal::beside(path);
        let on_copy = |copy: &Engine| fold::fold_copy(copy, &files).map_err(|f| f.into_open(path));
        let engine = Engine::open_reader_cached(path, false, on_copy, cache_bytes)?;
        let key_files = || Box::new(fold::FileJournal::keys_beside(path));
        if engine.recovered_copy() || backend::writer_is_live(path) {
            return Ok(Store::reader(engine, key_files()));
        }
        let pending = fold::recover(&engine, &files, false).map_err(|f| f.into_open(path))?;
        if pending.is_empty() {
            return Ok(Store::reader(engine, key_files()));
        }
        drop(engine);
        let on_copy = |copy: &Engine| fold::fold_copy(copy, &files).map_err(|f| f.into_open(path));
        Ok(Store::reader(
            Engine::open_reader(path, true, on_copy)?,
            key_files(),
        ))
    }

    /// [`Store::open_read`], waiting up to `wait` while a process holds the store exclusively.
    ///
    /// # Errors
    /// As [`Store::open_read`].
    pub fn open_read_waiting(path: &Path, wait: Duration) -> Result<Store, OpenError> {
        retry_busy(wait, || Store::open_read(path))
    }

    /// Opens a store for writing on a simulated disk (the power-loss tests and the crash
    /// fuzzer): the store file and its journal, in the shared mode unless `options` say
    /// exclusive. Not part of the API.
    ///
    /// # Errors
    /// As [`Store::open`].
    #[cfg(any(test, feature = "sim-disk"))]
    #[doc(hidden)]
    pub fn open_simulated(
        disk: &simdisk::SimDisk,
        options: StoreOptions,
    ) -> Result<Store, OpenError> {
        let sharing = if options.exclusive {
            Sharing::Exclusive
        } else {
            Sharing::Shared
        };
        let engine = Engine::open_backend(disk.store_file(), sharing)?;
        let mark = (sharing == Sharing::Shared).then(|| {
            disk.set_writer_alive(true);
            WriterMark::Sim(disk.clone())
        });
        let files = Box::new(simdisk::SimJournal(disk.clone()));
        let key_files = Box::new(simdisk::SimKeys(disk.clone()));
        Store::writer(engine, options, sharing, files, key_files, mark)
            .map_err(|f| f.into_open(engine_path()))
    }

    /// Opens a store for reading on a simulated disk, as [`Store::open_read`] does a file.
    /// Not part of the API.
    ///
    /// # Errors
    /// As [`Store::open_read`].
    #[cfg(any(test, feature = "sim-disk"))]
    #[doc(hidden)]
    pub fn open_read_simulated(disk: &simdisk::SimDisk) -> Result<Store, OpenError> {
        let files = simdisk::SimJournal(disk.clone());
        let fold =
            |copy: &Engine| fold::fold_copy(copy, &files).map_err(|f| f.into_open(engine_path()));
        let engine = Engine::open_reader_backend(disk, false, fold)?;
        let key_files = || Box::new(simdisk::SimKeys(disk.clone()));
        if engine.recovered_copy() || disk.writer_alive() {
            return Ok(Store::reader(engine, key_files()));
        }
        let pending =
            fold::recover(&engine, &files, false).map_err(|f| f.into_open(engine_path()))?;
        if pending.is_empty() {
            return Ok(Store::reader(engine, key_files()));
        }
        drop(engine);
        let fold =
            |copy: &Engine| fold::fold_copy(copy, &files).map_err(|f| f.into_open(engine_path()));
        Ok(Store::reader(
            Engine::open_reader_backend(disk, true, fold)?,
            key_files(),
        ))
    }

    /// A consistent read view: one read transaction for everything a command reads.
    ///
    /// # Errors
    /// `ReadError` when the transaction cannot begin.
    pub fn read(&self) -> Result<Snapshot<'_>, ReadError> {
        // No run writer is alive while `&self` is lent: journal records left are a dropped
        // writer's, folded now so the view has them.
        if let Err(e) = self.settle() {
            tracing::warn!(store = %self.path().display(), error = %e, "the page journal could not be folded; reading the last fold");
        }
        let snap = Snapshot::new(&self.engine)?;
        Ok(snap.with_keys(self.key_map()))
    }

    /// The keys a read view opens sealed requests with: a writer's own, or what the key
    /// file holds now (a reader reads it again: a writer elsewhere may have added keys).
    fn key_map(&self) -> keys::KeyMap {
        let writer = self.engine.writable();
        self.with_keys(|k| {
            if !writer {
                if let Err(f) = k.reload(false) {
                    tracing::warn!(store = %self.path().display(), error = ?f, "the key file cannot be read; no resume request can be opened");
                }
            }
            k.map()
        })
        .unwrap_or_default()
    }

    /// Makes a run's key durable in the key file.
    fn save_key(&self, run: u64, key: &keys::Key) -> Result<(), WriteError> {
        match self.with_keys(|k| k.put(run, key)) {
            Some(Ok(())) => Ok(()),
            Some(Err(f)) => Err(self.poison(f)),
            None => Err(self.poison(Failure::damaged("the key file is not open"))),
        }
    }

    /// Zeroes the key slots of runs that keep no request any more (one sync, when any).
    fn erase_keys(&self, runs: &[u64]) -> Result<(), WriteError> {
        match self.with_keys(|k| k.erase(runs)) {
            Some(Err(f)) => Err(self.poison(f)),
            _ => Ok(()),
        }
    }

    fn with_keys<T>(&self, f: impl FnOnce(&mut keys::KeyFile) -> T) -> Option<T> {
        let mut guard = match self.keys.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.as_mut().map(f)
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// Whether this store reads a recovered private copy, because a killed writer left the
    /// file unclean or journal records no writer is alive to fold (the next writer repairs
    /// and folds in place).
    #[must_use]
    pub fn reads_recovered_copy(&self) -> bool {
        self.engine.recovered_copy()
    }

    /// Syncs (`fdatasync`) issued through this handle so far.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.engine.syncs()
            + self.with_journal(|j| j.syncs()).unwrap_or(0)
            + self.with_keys(|k| k.syncs()).unwrap_or(0)
    }

    /// Bytes written to the file through this handle so far (what a scan costs the disk).
    #[must_use]
    pub fn bytes_written(&self) -> u64 {
        self.engine.bytes_written()
            + self.with_journal(|j| j.written()).unwrap_or(0)
            + self.with_keys(|k| k.written()).unwrap_or(0)
    }

    /// Of [`Store::bytes_written`], the bytes written to the page journal (the benchmarks'
    /// split of what a scan writes). Not part of the API.
    #[doc(hidden)]
    #[must_use]
    pub fn journal_bytes_written(&self) -> u64 {
        self.with_journal(|j| j.written()).unwrap_or(0)
    }

    /// Whether checkpoints go to the page journal (a writer in the shared mode).
    #[must_use]
    pub fn journaled(&self) -> bool {
        self.with_journal(|j| j.available()).unwrap_or(false)
    }

    /// Records `spec` (the `--source` argument) in every run this store begins from now on, so
    /// that `resume` can default to it. Never pass a secret: it is stored in clear.
    pub fn record_source(&mut self, spec: &str) {
        self.source_spec = Some(spec.to_owned());
    }

    /// Begins a run of `contract`: returns its writer and, for the `string` codec, the
    /// dictionary of its (source, tenant) for the reconciler (`Reconciler::set_interner`).
    ///
    /// # Errors
    /// `WriteError` when the run cannot be recorded.
    pub fn begin(
        &mut self,
        contract: &Contract,
        started_at_ms: u64,
    ) -> Result<(RunWriter<'_>, Option<Interner>), WriteError> {
        // A dropped writer's acknowledged pages are committed before anything else is.
        self.settle()?;
        let interner = if writer::is_string(contract) {
            Some(self.read()?.interner(&ScopeKey::of(contract))?)
        } else {
            None
        };
        let new = NewRun {
            contract: contract.clone(),
            started_at_ms,
            restarted_from: None,
            restarts: 0,
            source_spec: self.source_spec.clone(),
        };
        Ok((RunWriter::begin(self, new)?, interner))
    }

    /// Records a whole, finished run of `contract` in one transaction: the reconciler's state
    /// (ID and label sets, content, progress), its page log and the plan and shards it was
    /// merged from, as `merge` builds them from a plan's shards (`shards` `None` records a
    /// whole run without a list, as the benches make shard stores). Returns the run's ID.
    ///
    /// # Errors
    /// `InvalidRun`, before anything is written, when the shard list is not a plan's (an index
    /// out of place, ranges that do not cover the key space, a run or digest malformed);
    /// `WriteError` when the run cannot be recorded.
    pub fn write_merged(
        &mut self,
        contract: &Contract,
        rec: &Reconciler,
        pages: Vec<crate::reconcile::PageLog>,
        shards: Option<&crate::receipt::MergedFrom>,
        started_at_ms: u64,
        finished_at_ms: u64,
    ) -> Result<RunId, WriteError> {
        let merged = shards
            .map(|m| records::MergeRecord::of_cover(m, contract.scope.key_range))
            .transpose()
            .map_err(|what| WriteError::InvalidRun {
                path: self.path().to_owned(),
                what,
            })?;
        let new = NewRun {
            contract: contract.clone(),
            started_at_ms,
            restarted_from: None,
            restarts: 0,
            source_spec: self.source_spec.clone(),
        };
        RunWriter::write_whole(self, new, rec, pages, merged, finished_at_ms)
    }

    /// Reopens a stored run for `resume`: checks that it can go on, raises its budgets, turns a
    /// sample into a full scan, and records the effective contract with the run, all before a
    /// page is fetched. Returns the writer and the run.
    ///
    /// # Errors
    /// `NotResumable` with the reason and what to do; `WriteError` otherwise.
    pub fn resume(
        &mut self,
        run: RunId,
        raise: &Raise,
    ) -> Result<(RunWriter<'_>, LoadedRun), WriteError> {
        self.settle()?;
        let (mut loaded, key, stopped) = {
            let snap = self.read()?;
            let loaded = snap.load(run)?;
            let key = snap.cursor_key(run)?;
            (loaded, key, snap.stops(Some(run))?.contains_key(&run.0))
        };
        // Nothing is fetched for a run that only lacks its finish: its contract stays as it
        // ended, and the writer writes the finish the dead one did not.
        let finish_only = check_resumable(&loaded, raise)? == Resumable::FinishOnly;
        if !finish_only {
            reopen_for_resume(&mut loaded, raise)?;
        }
        let saved = key.is_some();
        let key = match key {
            Some(k) => k,
            None => {
                let mut k = [0u8; records::CURSOR_KEY_LEN];
                getrandom::fill(&mut k).map_err(|e| WriteError::Io {
                    path: self.path().to_owned(),
                    op: "draw a cursor key from the system's random source",
                    source: Box::new(std::io::Error::other(e.to_string())),
                })?;
                k
            }
        };
        let new = NewRun {
            contract: loaded.contract.clone(),
            started_at_ms: self.read()?.record(run)?.started_at_ms,
            restarted_from: loaded.meta.restarted_from,
            restarts: loaded.meta.restarts,
            source_spec: loaded.source_spec.clone(),
        };
        if loaded.source_spec.is_some() && self.source_spec.is_none() {
            self.source_spec.clone_from(&loaded.source_spec);
        }
        // The error that stopped the run is no longer why it stands still once it goes on.
        if stopped {
            self.clear_stop(run)?;
        }
        let mut writer = RunWriter::open(self, run, new, key, saved, None);
        // The effective contract is recorded before any page; a run that only lacks its
        // finish changed nothing, and its finish is its next (and only) commit.
        if !finish_only {
            writer.commit(&loaded.reconciler)?;
        }
        Ok((writer, loaded))
    }

    fn write_txn(&self) -> Result<WriteTransaction, WriteError> {
        let path = self.engine.path();
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(WriteError::Poisoned {
                path: path.to_owned(),
            });
        }
        match self.engine.begin_write() {
            Ok(Some(txn)) => Ok(txn),
            Ok(None) => Err(WriteError::ReadOnly {
                path: path.to_owned(),
            }),
            Err(f) => Err(self.poison(f)),
        }
    }

    fn poison(&self, f: Failure) -> WriteError {
        self.poisoned.store(true, Ordering::Relaxed);
        f.into_write(self.engine.path())
    }

    fn with_journal<T>(&self, f: impl FnOnce(&mut journal::Journal) -> T) -> Option<T> {
        let mut guard = match self.journal.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.as_mut().map(f)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.poisoned.load(Ordering::Relaxed) || self.engine.closed() {
            // What the journal holds stays for the next writer (or a reader's copy) to fold;
            // after an engine panic the file is released, and the journal may be another
            // writer's already.
            return;
        }
        if self.settle().is_ok() {
            // Everything is folded: the journal goes (recreated by the next writer).
            self.with_journal(journal::Journal::remove);
        }
    }
}

/// The key file's tag for the store `engine` opens.
fn keys_tag(engine: &Engine) -> Result<[u8; 16], Failure> {
    let snap = Snapshot::new(engine).map_err(|e| Failure::Damaged {
        what: "cannot read the store".to_owned(),
        source: Some(Box::new(e)),
    })?;
    let key = snap.page_token_key().map_err(|e| Failure::Damaged {
        what: "cannot read the store's key".to_owned(),
        source: Some(Box::new(e)),
    })?;
    Ok(keys::tag_of(&key))
}

/// A writer's key file, settled before anything else is written: keys a store of format 3 or
/// older kept in its `cursor_keys` table move to the key file (then the table is emptied, in
/// one stamped commit), and every key whose run keeps no sealed request is zeroed (a kill
/// between a finish and its erasure, or a slot torn by a power cut).
fn settle_keys(
    engine: &Engine,
    key_files: Box<dyn journal::JournalFiles>,
) -> Result<keys::KeyFile, Failure> {
    use redb::ReadableTable;
    let mut keys = keys::KeyFile::load(key_files, keys_tag(engine)?, true)?;
    let (legacy, sealed) = {
        let txn = engine.begin_read()?;
        engine.contain("read the cursor keys", || -> Result<_, redb::Error> {
            let mut legacy = Vec::new();
            for row in txn.open_table(schema::CURSOR_KEYS)?.iter()? {
                let (k, v) = row?;
                legacy.push((k.value(), v.value().to_vec()));
            }
            let mut sealed = std::collections::BTreeSet::new();
            for row in txn.open_table(schema::CURSORS)?.iter()? {
                sealed.insert(row?.0.value());
            }
            Ok((legacy, sealed))
        })?
    };
    for (run, key) in &legacy {
        if let (true, Ok(key)) = (sealed.contains(run), keys::Key::try_from(key.as_slice())) {
            keys.put(*run, &key)?;
        }
    }
    if !legacy.is_empty() {
        let txn = engine
            .begin_write()?
            .ok_or_else(|| Failure::damaged("the store was opened read-only"))?;
        engine.contain(
            "empty the cursor keys table",
            || -> Result<(), redb::Error> {
                txn.open_table(schema::CURSOR_KEYS)?.retain(|_, _| false)?;
                Ok(())
            },
        )?;
        let stamp = journal::fresh_stamp()?;
        fold::stamp_txn(engine, &txn, &stamp)?;
        engine.contain("commit the moved cursor keys", || txn.commit())?;
        tracing::info!(store = %engine.path().display(), keys = legacy.len(), "moved the cursor keys to the key file beside the store");
    }
    keys.scrub(|run| sealed.contains(&run))?;
    Ok(keys)
}

/// The name errors give a simulated disk.
#[cfg(any(test, feature = "sim-disk"))]
fn engine_path() -> &'static Path {
    Path::new("<simulated disk>")
}

fn retry_busy<T>(
    wait: Duration,
    mut open: impl FnMut() -> Result<T, OpenError>,
) -> Result<T, OpenError> {
    let deadline = Instant::now().checked_add(wait);
    // Bounded by the deadline; a wait too long to represent waits for a day at most.
    let deadline = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
    loop {
        match open() {
            Err(OpenError::Busy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn not_resumable(run: RunId, reason: &str) -> WriteError {
    WriteError::NotResumable {
        run,
        reason: reason.to_owned(),
    }
}

/// Raises a resumed run's budgets, turns a sample into a full scan, and reopens its
/// reconciler under the effective contract.
fn reopen_for_resume(loaded: &mut LoadedRun, raise: &Raise) -> Result<(), WriteError> {
    let run = loaded.meta.run_id;
    let c = &mut loaded.contract;
    if let Some(p) = raise.max_pages {
        c.limits.max_pages = Some(p);
    }
    if raise.max_records.is_some() {
        c.limits.max_records = raise.max_records;
    }
    if raise.max_bytes.is_some() {
        c.limits.max_bytes = raise.max_bytes;
    }
    if raise.deadline_seconds.is_some() {
        c.limits.deadline_seconds = raise.deadline_seconds;
    }
    if let Mode::Sample(_) = c.mode {
        // A resumed sample goes on as a full scan, and the run records it.
        c.mode = Mode::All;
    }
    let rec = &mut loaded.reconciler;
    if !rec.reopen() {
        return Err(not_resumable(
            run,
            "it stopped on a finding that resuming cannot change",
        ));
    }
    rec.apply_contract(&loaded.contract);
    loaded.meta.finished_at = None;
    loaded.meta.server_count = None;
    Ok(())
}

/// What resuming a run does.
#[derive(Debug, PartialEq, Eq)]
enum Resumable {
    /// It goes on fetching.
    Continue,
    /// It reached its end but its writer died before the finish: only the finish is left.
    FinishOnly,
}

/// Why a run cannot be resumed, if it cannot, with what to do instead.
fn check_resumable(loaded: &LoadedRun, raise: &Raise) -> Result<Resumable, WriteError> {
    let run = loaded.meta.run_id;
    let rec = &loaded.reconciler;
    let p = rec.progress();
    match loaded.state {
        RunState::Superseded => {
            let by = loaded
                .meta
                .superseded_by
                .map_or_else(|| "a later run".to_owned(), |r| r.to_string());
            return Err(not_resumable(
                run,
                &format!("it was superseded by a restart; resume {by} instead"),
            ));
        }
        RunState::Running => {
            return Err(not_resumable(run, "another process is writing it now"));
        }
        _ => {}
    }
    if loaded.meta.server_count.is_some() {
        return Err(not_resumable(
            run,
            "it was answered by the source's own count; there is nothing to traverse",
        ));
    }
    if p.next.is_none() {
        // A run that reached its end (its terminal page, or a finding) but whose writer died
        // before it wrote the finish: resuming fetches nothing and writes the finish, so the
        // run becomes what it would have been.
        let ended = p.terminal_observed
            || p.violations.iter().any(|v| {
                v.kind.status() == Status::Failed
                    || v.kind == ViolationKind::MissingCompletionEvidence
            });
        if ended && loaded.state == RunState::Interrupted {
            return Ok(Resumable::FinishOnly);
        }
        let reason = if p.terminal_observed {
            "it is finished: it saw its terminal page".to_owned()
        } else if let Some(v) = p
            .violations
            .iter()
            .find(|v| v.kind.status() == Status::Failed)
        {
            format!(
                "it failed ({} on page {}); resuming cannot change a finding",
                v.kind.as_str(),
                v.page
            )
        } else if let Some(v) = p
            .violations
            .iter()
            .find(|v| v.kind == ViolationKind::MissingCompletionEvidence)
        {
            format!(
                "its page {} had no cursor and not the completion evidence the contract requires; resuming cannot change that",
                v.page
            )
        } else {
            "its cursor was not kept (the store was written with --no-keep-cursors)".to_owned()
        };
        return Err(not_resumable(run, &reason));
    }
    for limit in &p.limits_hit {
        let c = &loaded.contract.limits;
        let unraised = match limit {
            Limit::MaxPages => raise
                .max_pages
                .is_none_or(|n| n <= p.pages_observed)
                .then(|| {
                    format!(
                        "its page budget of {} pages; raise it with --max-pages",
                        c.max_pages()
                    )
                }),
            Limit::MaxRecords => raise
                .max_records
                .is_none_or(|n| n <= p.records_observed)
                .then(|| {
                    format!(
                        "its record budget of {} records; raise it with --max-records",
                        c.max_records.unwrap_or(0)
                    )
                }),
            Limit::MaxBytes => raise
                .max_bytes
                .is_none_or(|n| n <= p.bytes_observed)
                .then(|| {
                    format!(
                        "its byte budget of {} bytes; raise it with --max-bytes",
                        c.max_bytes.unwrap_or(0)
                    )
                }),
            Limit::Deadline | Limit::Sample | Limit::Interrupted => None,
        };
        if let Some(what) = unraised {
            return Err(not_resumable(run, &format!("it stopped at {what}")));
        }
    }
    Ok(Resumable::Continue)
}
