//! The durable store: runs, page logs, partition bitmaps, labels and string dictionaries in one
//! redb file (layout in docs/FORMAT.md §10).
//!
//! Roles: `engine` is the only code that calls redb (opening, transactions, containing its
//! panics); `backend` is the file under it; `schema` the tables and the format record;
//! `records` the store's own value formats; `snapshot` a consistent read view (one read
//! transaction per command); `writer` the one writer of one run.
//!
//! Invariants:
//! - a checkpoint is one durable transaction holding the IDs, the counts and the request to
//!   continue from together, so the stored request always matches the stored IDs; a crash
//!   re-fetches at most the pages since the last commit;
//! - a run's pending (uncommitted) pages belong to its `RunWriter`, never to the `Store`;
//! - a restart supersedes the old run and begins the new one in one transaction;
//! - read-only opens never write; a run ID is never reused; after a failed commit the store
//!   refuses writes until it is reopened;
//! - no raw cursor is written to the file in clear, and a run nothing can resume keeps none.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redb::WriteTransaction;

use crate::codec::Interner;
use crate::contract::{Contract, Mode};
use crate::digest::Hash;
use crate::receipt::{RunId, RunMeta};
use crate::reconcile::{Limit, PageLog, Reconciler, Status, ViolationKind};

mod backend;
mod engine;
mod error;
mod journal;
mod maintenance;
mod records;
mod schema;
mod snapshot;
#[cfg(test)]
mod tests;
mod writer;

pub use engine::inside_engine_call;
pub use error::{Cause, OpenError, ReadError, WriteError};
pub use schema::{FORMAT_VERSION, TOKEN_KEY_LEN};
pub use snapshot::Snapshot;
pub use writer::RunWriter;

use engine::{Engine, Sharing};
use error::Failure;
use writer::NewRun;

/// How a store is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    keep_cursors: bool,
    checkpoint_every_pages: u32,
    exclusive: bool,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions::new()
    }
}

impl StoreOptions {
    /// The defaults: keep the (encrypted) request a resume needs, commit every page, share
    /// the file with readers in other processes.
    ///
    /// ```
    /// let o = scanledger::StoreOptions::new().checkpoint_every(10).exclusive(true);
    /// assert_eq!(o.checkpoint_every_pages(), 10);
    /// ```
    #[must_use]
    pub fn new() -> StoreOptions {
        StoreOptions {
            keep_cursors: true,
            checkpoint_every_pages: 1,
            exclusive: false,
        }
    }

    /// Keep the raw request a resume needs (encrypted, erased once the run cannot resume).
    /// Without it, a run cannot be resumed. Default true.
    #[must_use]
    pub fn keep_cursors(mut self, keep: bool) -> StoreOptions {
        self.keep_cursors = keep;
        self
    }

    /// Commit durably every `pages` pages (at least 1) instead of every page; a crash then
    /// re-fetches at most `pages - 1` pages. Default 1.
    #[must_use]
    pub fn checkpoint_every(mut self, pages: u32) -> StoreOptions {
        self.checkpoint_every_pages = pages.max(1);
        self
    }

    /// Hold the file for this process alone while writing: other processes cannot read it
    /// until the writer closes it. Default false.
    #[must_use]
    pub fn exclusive(mut self, exclusive: bool) -> StoreOptions {
        self.exclusive = exclusive;
        self
    }

    /// Pages per durable commit.
    #[must_use]
    pub fn checkpoint_every_pages(&self) -> u32 {
        self.checkpoint_every_pages
    }
}

/// The key of a collection's string dictionary: source and tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeKey(Vec<u8>);

impl ScopeKey {
    /// The dictionary key of a contract's (source, tenant).
    #[must_use]
    pub fn of(contract: &Contract) -> ScopeKey {
        let mut k = contract.scope.source.as_bytes().to_vec();
        k.push(0);
        k.extend_from_slice(contract.scope.tenant.as_deref().unwrap_or("").as_bytes());
        ScopeKey(k)
    }

    fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A run's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunState {
    /// Being written by a live process.
    Running,
    /// Recorded as running, but its writer is gone (killed, or Ctrl-C before a clean stop):
    /// `resume` continues it.
    Interrupted,
    /// Stopped; resumable when its stop was transient.
    Finished,
    /// Replaced by a restart.
    Superseded,
}

impl RunState {
    /// The name `runs` prints.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Finished => "finished",
            RunState::Superseded => "superseded",
        }
    }
}

/// One line of `runs`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// The scope's source.
    pub source: String,
    /// The scope's tenant.
    pub tenant: Option<String>,
    /// Its state.
    pub state: RunState,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed.
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339, `None` while running.
    pub finished_at: Option<String>,
}

/// What `diff`, `missing`, `export` and `page` need of a run, read without its bitmaps.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunHeader {
    /// The run.
    pub run_id: RunId,
    /// Its effective contract.
    pub contract: Contract,
    /// Its state.
    pub state: RunState,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed (also the run's version stamp: every checkpoint adds a page).
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// Non-empty partitions of its ID set.
    pub partitions: u64,
    /// The receipt's Merkle root, stored when the run finished.
    pub merkle_root: Option<Hash>,
    /// The `prefixed` codec's prefix, given or learned.
    pub id_prefix: Option<String>,
    /// The snapshot the run is pinned to.
    pub snapshot_id: Option<String>,
    /// The source the run was started with.
    pub source_spec: Option<String>,
}

/// A run loaded whole from the store.
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadedRun {
    /// The run's effective contract.
    pub contract: Contract,
    /// Its metadata.
    pub meta: RunMeta,
    /// Its state, with the request to continue from when kept.
    pub reconciler: Reconciler,
    /// Its lifecycle state.
    pub state: RunState,
    /// The source the run was started with, if recorded.
    pub source_spec: Option<String>,
    /// The receipt root stored when it finished.
    pub stored_root: Option<Hash>,
    /// Its page log.
    pub pages: Vec<PageLog>,
}

/// Budgets a resume may raise.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raise {
    /// New `max_pages`.
    pub max_pages: Option<u32>,
    /// New `max_records`.
    pub max_records: Option<u64>,
    /// New `max_bytes`.
    pub max_bytes: Option<u64>,
    /// New `deadline_seconds` for this session of the run.
    pub deadline_seconds: Option<u64>,
}

/// An open store file.
pub struct Store {
    engine: Engine,
    options: StoreOptions,
    poisoned: AtomicBool,
    source_spec: Option<String>,
    /// The page journal of a writer in the shared mode (`journal.rs`).
    journal: Mutex<Option<journal::Journal>>,
    journal_path: Option<PathBuf>,
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
        let (journal, journal_path) = if sharing == Sharing::Shared {
            match open_journal(&engine, path) {
                Ok(j) => (Some(j), Some(journal::path_of(path))),
                Err(JournalOpen::Unavailable(e)) => {
                    tracing::warn!(
                        store = %path.display(),
                        error = %e,
                        "the page journal cannot be created next to the store; every checkpoint commits the store (two syncs)"
                    );
                    (None, None)
                }
                Err(JournalOpen::Failed(f)) => return Err(f.into_open(path)),
            }
        } else {
            (None, None)
        };
        Ok(Store {
            engine,
            options,
            poisoned: AtomicBool::new(false),
            source_spec: None,
            journal: Mutex::new(journal),
            journal_path,
        })
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
    /// holds it exclusively), and never writes the file.
    ///
    /// # Errors
    /// `OpenError` naming the path and the problem.
    pub fn open_read(path: &Path) -> Result<Store, OpenError> {
        let jpath = journal::path_of(path);
        let engine = Engine::open_reader(path, |copy| {
            fold_journal_into_copy(copy, &jpath).map_err(|f| f.into_open(path))
        })?;
        Ok(Store {
            engine,
            options: StoreOptions::new(),
            poisoned: AtomicBool::new(false),
            source_spec: None,
            journal: Mutex::new(None),
            journal_path: None,
        })
    }

    /// [`Store::open_read`], waiting up to `wait` while a process holds the store exclusively.
    ///
    /// # Errors
    /// As [`Store::open_read`].
    pub fn open_read_waiting(path: &Path, wait: Duration) -> Result<Store, OpenError> {
        retry_busy(wait, || Store::open_read(path))
    }

    /// Opens a store on a custom backend (the power-loss tests' simulated disk).
    #[cfg(test)]
    pub(crate) fn open_backend(
        backend: impl redb::StorageBackend,
        options: StoreOptions,
        shared: bool,
    ) -> Result<Store, OpenError> {
        let sharing = if shared {
            Sharing::Shared
        } else {
            Sharing::Exclusive
        };
        Ok(Store {
            engine: Engine::open_backend(backend, sharing)?,
            options,
            poisoned: AtomicBool::new(false),
            source_spec: None,
            journal: Mutex::new(None),
            journal_path: None,
        })
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
        Snapshot::new(&self.engine)
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// Whether this store reads a recovered private copy, because a killed writer left the
    /// file unclean (the next writer repairs it in place).
    #[must_use]
    pub fn reads_recovered_copy(&self) -> bool {
        self.engine.recovered_copy()
    }

    /// Syncs (`fdatasync`) issued through this handle so far.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.engine.syncs() + self.with_journal(|j| j.syncs()).unwrap_or(0)
    }

    /// Bytes written to the file through this handle so far (what a scan costs the disk).
    #[must_use]
    pub fn bytes_written(&self) -> u64 {
        self.engine.bytes_written() + self.with_journal(|j| j.written()).unwrap_or(0)
    }

    /// Whether checkpoints go to the page journal (a file store in the shared mode).
    #[must_use]
    pub fn journaled(&self) -> bool {
        self.with_journal(|_| ()).is_some()
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
        let (mut loaded, key) = {
            let snap = self.read()?;
            let loaded = snap.load(run)?;
            let key = snap.cursor_key(run)?;
            (loaded, key)
        };
        check_resumable(&loaded, raise)?;
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
        let mut writer = RunWriter::open(self, run, new, key, None);
        writer.commit(&loaded.reconciler)?;
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

    fn commit(&self, txn: WriteTransaction) -> Result<(), WriteError> {
        self.engine
            .contain("commit", || txn.commit())
            .map_err(|f| self.poison(f))
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

    fn fold_due(&self) -> bool {
        self.with_journal(|j| j.fold_due()).unwrap_or(false)
    }

    fn journal_next_seq(&self) -> u64 {
        self.with_journal(|j| j.next_seq()).unwrap_or(0)
    }

    /// Appends a checkpoint's record to the journal and syncs it.
    fn append_journal(&self, record: journal::Record) -> Result<(), WriteError> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(WriteError::Poisoned {
                path: self.path().to_owned(),
            });
        }
        match self.with_journal(|j| j.append(&record)) {
            Some(Err(f)) => Err(self.poison(f)),
            _ => Ok(()),
        }
    }

    /// Commits a transaction that covers every journal record appended so far: records the
    /// last one's sequence number with it, then empties the journal.
    fn commit_folding(&self, txn: WriteTransaction) -> Result<(), WriteError> {
        let Some(seq) = self.with_journal(|j| j.last_seq()) else {
            return self.commit(txn);
        };
        self.engine
            .contain("record the folded page journal", || -> Result<(), redb::Error> {
                txn.open_table(schema::META)?
                    .insert(schema::META_JOURNAL_SEQ, seq.to_le_bytes().as_slice())?;
                Ok(())
            })
            .map_err(|f| self.poison(f))?;
        self.commit(txn)?;
        if let Some(Err(f)) = self.with_journal(|j| j.folded(seq)) {
            // Harmless: the records left are at or below the folded number.
            tracing::warn!(store = %self.path().display(), error = ?f, "the page journal could not be emptied");
        }
        Ok(())
    }

    /// Folds journal records a dropped run writer left (none while a writer is alive, since
    /// it borrows the store mutably).
    fn settle(&self) -> Result<(), WriteError> {
        if !self.with_journal(|j| j.has_records()).unwrap_or(false) {
            return Ok(());
        }
        let read = self
            .with_journal(|j| j.read_back())
            .unwrap_or_else(|| Ok(journal::Recovered::default()))
            .map_err(|f| self.poison(f))?;
        let expected = self.with_journal(|j| j.last_seq()).unwrap_or(0);
        if read.records.last().map(|r| r.seq) != Some(expected) {
            return Err(self.poison(Failure::damaged(format!(
                "the page journal lost records this process wrote (read up to {:?}, wrote up to {expected})",
                read.records.last().map(|r| r.seq)
            ))));
        }
        let merged = journal::Merged::of(read.records).map_err(|f| self.poison(f))?;
        let txn = self.write_txn()?;
        writer::apply_journal(&self.engine, &txn, &merged).map_err(|f| self.poison(f))?;
        self.commit(txn)?;
        if let Some(Err(f)) = self.with_journal(|j| j.folded(merged.last_seq)) {
            tracing::warn!(store = %self.path().display(), error = ?f, "the page journal could not be emptied");
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.poisoned.load(Ordering::Relaxed) {
            return;
        }
        if self.settle().is_ok() {
            if let Some(p) = &self.journal_path {
                // Everything is folded: the journal goes (recreated by the next writer).
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Folds the page journal a killed writer left into a reader's recovered private copy (the
/// journal file is only read).
fn fold_journal_into_copy(copy: &Engine, jpath: &Path) -> Result<(), Failure> {
    let file = match std::fs::File::open(jpath) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Failure::Io {
                op: "open the page journal",
                source: Box::new(e),
            })
        }
    };
    let handle = backend::FileHandle::new(file).map_err(|e| Failure::Io {
        op: "open the page journal",
        source: Box::new(std::io::Error::other(e.to_string())),
    })?;
    let (key, folded) = journal_identity(copy)?;
    let found = journal::read(&handle.backend(), &journal::tag_of(&key), folded)?;
    if found.foreign {
        tracing::warn!(journal = %jpath.display(), "the page journal belongs to another store; ignored");
    }
    if found.records.is_empty() {
        return Ok(());
    }
    let merged = journal::Merged::of(found.records)?;
    let txn = copy
        .begin_write()?
        .ok_or_else(|| Failure::damaged("the recovered copy opened read-only"))?;
    writer::apply_journal(copy, &txn, &merged)?;
    copy.contain("commit the folded page journal", || txn.commit())
}

/// The store's key (the journal's tag derives from it) and the last folded journal number.
fn journal_identity(engine: &Engine) -> Result<([u8; TOKEN_KEY_LEN], u64), Failure> {
    let wrap = |what: &str, e: ReadError| Failure::Damaged {
        what: what.to_owned(),
        source: Some(Box::new(e)),
    };
    let snap = Snapshot::new(engine).map_err(|e| wrap("cannot read the store", e))?;
    let key = snap
        .page_token_key()
        .map_err(|e| wrap("cannot read the store's key", e))?;
    let folded = snap
        .journal_seq()
        .map_err(|e| wrap("cannot read the folded page-journal number", e))?;
    Ok((key, folded))
}

enum JournalOpen {
    /// The file cannot be created or opened: the store works without a journal.
    Unavailable(std::io::Error),
    /// The journal holds records that cannot be folded: the store must not be written.
    Failed(Failure),
}

/// Opens the page journal next to a store opened for writing in the shared mode: folds the
/// records a killed writer left past the folded sequence number, then empties it.
fn open_journal(engine: &Engine, path: &Path) -> Result<journal::Journal, JournalOpen> {
    let jpath = journal::path_of(path);
    let (key, folded) = journal_identity(engine).map_err(JournalOpen::Failed)?;
    let tag = journal::tag_of(&key);
    let existed = jpath.exists();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&jpath)
        .map_err(JournalOpen::Unavailable)?;
    let handle = backend::FileHandle::new(file)
        .map_err(|e| JournalOpen::Unavailable(std::io::Error::other(e.to_string())))?;
    let backend: Box<dyn redb::StorageBackend> = Box::new(handle.backend());
    let mut folded_now = folded;
    if existed {
        let found = journal::read(backend.as_ref(), &tag, folded).map_err(JournalOpen::Failed)?;
        if found.foreign {
            // Left by another store once at this path: kept aside, never applied here.
            drop(backend);
            let mut aside = jpath.clone().into_os_string();
            aside.push(".stale");
            let aside = PathBuf::from(aside);
            std::fs::rename(&jpath, &aside).map_err(|e| {
                JournalOpen::Failed(Failure::Io {
                    op: "move aside the page journal of another store",
                    source: Box::new(e),
                })
            })?;
            tracing::warn!(
                journal = %jpath.display(),
                moved_to = %aside.display(),
                "the page journal next to the store belongs to another store (one deleted and created again here); moved aside"
            );
            return open_journal(engine, path);
        }
        if found.ignored_bytes > 0 {
            tracing::info!(
                journal = %jpath.display(),
                bytes = found.ignored_bytes,
                "the page journal ends with a torn record (never acknowledged); ignored"
            );
        }
        if !found.records.is_empty() {
            let merged = journal::Merged::of(found.records).map_err(JournalOpen::Failed)?;
            let txn = match engine.begin_write() {
                Ok(Some(t)) => t,
                Ok(None) => return Err(JournalOpen::Failed(Failure::damaged("opened read-only"))),
                Err(f) => return Err(JournalOpen::Failed(f)),
            };
            writer::apply_journal(engine, &txn, &merged).map_err(JournalOpen::Failed)?;
            engine
                .contain("commit the folded page journal", || txn.commit())
                .map_err(JournalOpen::Failed)?;
            folded_now = merged.last_seq;
            tracing::info!(
                journal = %jpath.display(),
                through = folded_now,
                "folded the page journal a stopped writer left"
            );
        }
    }
    let j = journal::Journal::start(backend, tag, folded_now).map_err(JournalOpen::Failed)?;
    if !existed {
        // The new file's name must survive a power cut before any record relies on it.
        let dir = match jpath.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        if let Err(e) = std::fs::File::open(&dir).and_then(|d| d.sync_all()) {
            return Err(JournalOpen::Failed(Failure::Io {
                op: "sync the directory of the page journal",
                source: Box::new(e),
            }));
        }
    }
    Ok(j)
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

/// Why a run cannot be resumed, if it cannot, with what to do instead.
fn check_resumable(loaded: &LoadedRun, raise: &Raise) -> Result<(), WriteError> {
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
    Ok(())
}
