//! The durable store: runs, page logs, partition bitmaps, labels, interners, in one redb file.
//!
//! The only module that names `redb`. Each observed page is one write transaction holding
//! the page record, the bitmaps of the partitions the page touched, the run record (counts,
//! chain digest, violations) and the request to continue from, so a crash at any instant
//! leaves the store at the last committed page: nothing lost, nothing counted twice.
//! Group commit (`checkpoint_every_pages = N`) holds pages in memory and commits N at a time
//! in one transaction, so the invariant "the stored cursor matches the stored IDs" still holds
//! and a crash re-fetches at most the pages since the last commit. (redb refuses non-durable
//! commits on a file shared with reader processes, which `runs` during a scan needs.)
//! Decoding never trusts the file: every value is checked and a failure names table and run.
//! After a failed commit the store is poisoned and refuses writes until reopened.

use std::path::{Path, PathBuf};

use redb::{
    ConcurrencyMode, Database, Durability, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    ReadableTable, TableDefinition,
};
use roaring::RoaringBitmap;

use crate::codec::{IdCodec, Interner};
use crate::collect::{PageLog, Raise, RunSink};
use crate::contract::{Contract, IdCodecKind};
use crate::digest::{self, Hash};
use crate::error::{Error, StoreError};
use crate::idset::IdSet;
use crate::receipt::{rfc3339, Receipt, RunId, RunMeta};
use crate::reconcile::{Reconciler, Request, Status};

pub(crate) mod codec;
use codec::{RunRecord, RunState};
#[cfg(test)]
mod tests;

/// The on-disk format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8] = b"scanledger-store";

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const RUNS: TableDefinition<u64, &[u8]> = TableDefinition::new("runs");
const PAGES: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("pages");
const IDS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("ids");
const LABELS: TableDefinition<(u64, u32, u64), &[u8]> = TableDefinition::new("labels");
const LEAVES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("leaves");
const CURSORS: TableDefinition<u64, &[u8]> = TableDefinition::new("cursors");
const INTERN: TableDefinition<(&str, &str), u64> = TableDefinition::new("intern");
const INTERN_REV: TableDefinition<(&str, u64), &str> = TableDefinition::new("intern_rev");

/// How the store writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Keep the raw cursor that `resume` needs (in the restricted CURSORS table). Default true.
    pub keep_cursors: bool,
    /// Commit (durably, with fsync) every N pages instead of every page; a crash then
    /// re-fetches at most the N - 1 pages since the last commit. 1 (the default) commits
    /// every page.
    pub checkpoint_every_pages: u32,
    /// Hold the file for this process alone while writing. A commit then costs one fsync
    /// instead of two (redb's multi-process mode publishes each commit to readers), but other
    /// processes cannot read the store (`runs`, `receipt`) until the writer closes it.
    /// Default false.
    pub exclusive: bool,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            keep_cursors: true,
            checkpoint_every_pages: 1,
            exclusive: false,
        }
    }
}

enum Db {
    Write(Database),
    Read(ReadOnlyDatabase),
}

/// An open store file.
pub struct Store {
    /// `None` only while dropping (see `Drop for Store`).
    db: Option<Db>,
    /// A storage-engine panic was caught on this store: its redb handle may hold poisoned
    /// locks, so it is leaked on drop rather than dropped (which would panic again).
    broken: std::sync::Arc<std::sync::atomic::AtomicBool>,
    path: PathBuf,
    options: StoreOptions,
    poisoned: bool,
    pending_pages: Vec<PageLog>,
    /// Recorded in each run this store begins (see `record_source`).
    source_spec: Option<String>,
}

impl Drop for Store {
    fn drop(&mut self) {
        let db = self.db.take();
        if std::thread::panicking() || self.broken.load(std::sync::atomic::Ordering::Relaxed) {
            // Dropping a redb handle whose locks a caught panic poisoned panics again (an
            // abort while unwinding); leaking it (memory and a file handle) is the lesser harm.
            std::mem::forget(db);
            return;
        }
        // redb flushes on close and can panic there on a damaged file that no earlier
        // operation tripped over: contain it like any other storage-engine panic.
        let _ = guard(&self.path, &self.broken, "close", move || {
            drop(db);
            Ok::<(), StoreError>(())
        });
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One line of `runs`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunSummary {
    /// `run-N`.
    pub run_id: String,
    /// The scope's source.
    pub source: String,
    /// The scope's tenant.
    pub tenant: Option<String>,
    /// `running`, `finished` or `superseded`.
    pub state: String,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed.
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339, null while running.
    pub finished_at: Option<String>,
}

/// A run loaded from the store.
#[derive(Debug)]
pub struct LoadedRun {
    /// The run's effective contract.
    pub contract: Contract,
    /// Its metadata.
    pub meta: RunMeta,
    /// Its state, with the request to continue from when cursors are kept.
    pub reconciler: Reconciler,
    /// Whether it is running (or was interrupted), finished or superseded.
    pub state: &'static str,
    /// The source the run was started with, if recorded.
    pub source_spec: Option<String>,
}

fn scope_key(contract: &Contract) -> String {
    format!(
        "{}\u{0}{}",
        contract.scope.source,
        contract.scope.tenant.as_deref().unwrap_or("")
    )
}

impl Store {
    /// Opens a store for writing, creating it if the file does not exist. An existing file
    /// must be a scanledger store: an empty, foreign, corrupt or newer file is refused.
    ///
    /// # Errors
    /// `StoreError` naming the path and the problem; `Locked` if another process writes it.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        guard(path, &std::sync::Arc::default(), "open", || {
            let exists = path.exists();
            let mut builder = Database::builder();
            builder.set_concurrency_mode(if options.exclusive {
                ConcurrencyMode::ExclusiveWriter
            } else {
                ConcurrencyMode::SingleWriter
            });
            let db = if exists {
                // Validate read-only first: opening a foreign or newer file for writing could
                // change it before we know it is not ours.
                drop(Store::open_read(path)?);
                builder.open(path)
            } else {
                builder.create(path)
            }
            .map_err(|e| map_db_error(path, e))?;
            let mut store = Store {
                db: Some(Db::Write(db)),
                broken: std::sync::Arc::default(),
                path: path.to_owned(),
                options,
                poisoned: false,
                pending_pages: Vec::new(),
                source_spec: None,
            };
            if exists {
                store.check_format()?;
            } else {
                store.init_format()?;
            }
            Ok(store)
        })
    }

    /// Opens (or creates) a store on a custom redb backend: the crash tests' power-loss
    /// simulator. Exclusive-writer mode, since such backends have no byte-range locks.
    #[cfg(test)]
    pub(crate) fn open_backend(
        backend: impl redb::StorageBackend,
        create: bool,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let path = PathBuf::from("<memory backend>");
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(|e| map_db_error(&path, e))?;
        let mut store = Store {
            db: Some(Db::Write(db)),
            broken: std::sync::Arc::default(),
            path,
            options,
            poisoned: false,
            pending_pages: Vec::new(),
            source_spec: None,
        };
        if create {
            store.init_format()?;
        } else {
            store.check_format()?;
        }
        Ok(store)
    }

    /// Opens a store for reading; works while another process writes it.
    ///
    /// # Errors
    /// `StoreError` naming the path and the problem.
    pub fn open_read(path: &Path) -> Result<Store, StoreError> {
        guard(path, &std::sync::Arc::default(), "open_read", || {
            if !path.exists() {
                return Err(StoreError::Missing {
                    path: path.to_owned(),
                });
            }
            check_not_empty(path)?;
            let mut builder = Database::builder();
            builder.set_concurrency_mode(ConcurrencyMode::SingleWriter);
            let db = match builder.open_read_only(path) {
                Ok(db) => db,
                Err(redb::DatabaseError::RepairAborted) => {
                    // A writer was killed: the file needs redb's recovery, which a read-only handle
                    // refuses to run. Open it once for writing (which recovers to the last
                    // committed transaction), close it, and read.
                    let mut wb = Database::builder();
                    wb.set_concurrency_mode(ConcurrencyMode::SingleWriter);
                    drop(wb.open(path).map_err(|e| map_db_error(path, e))?);
                    builder
                        .open_read_only(path)
                        .map_err(|e| map_db_error(path, e))?
                }
                Err(e) => return Err(map_db_error(path, e)),
            };
            let store = Store {
                db: Some(Db::Read(db)),
                broken: std::sync::Arc::default(),
                path: path.to_owned(),
                options: StoreOptions::default(),
                poisoned: false,
                pending_pages: Vec::new(),
                source_spec: None,
            };
            store.check_format()?;
            Ok(store)
        })
    }

    fn db(&self) -> &Db {
        self.db
            .as_ref()
            .expect("invariant: the redb handle is present until the store is dropped")
    }

    /// Records `spec` (the `--source` argument) in every run this store begins from now on,
    /// so that `resume` can default to it. Never pass a secret: it is stored in clear.
    pub fn record_source(&mut self, spec: &str) {
        self.source_spec = Some(spec.to_owned());
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn backend(&self, op: &'static str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Backend {
            path: self.path.clone(),
            op,
            detail: e.to_string(),
        }
    }

    fn corrupted(&self, table: &'static str, run: u64, detail: &str) -> StoreError {
        StoreError::Corrupted {
            path: self.path.clone(),
            table,
            run,
            detail: detail.to_owned(),
        }
    }

    fn read_txn(&self) -> Result<ReadTransaction, StoreError> {
        match self.db() {
            Db::Write(db) => db.begin_read(),
            Db::Read(db) => db.begin_read(),
        }
        // A read that fails is a file that cannot be trusted (truncated, damaged).
        .map_err(|e| self.corrupt(e))
    }

    fn write_db(&self) -> Result<&Database, StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned {
                path: self.path.clone(),
            });
        }
        match self.db() {
            Db::Write(db) => Ok(db),
            Db::Read(_) => Err(self.backend("write", "the store was opened read-only")),
        }
    }

    fn init_format(&mut self) -> Result<(), StoreError> {
        let db = self.write_db()?;
        let txn = db
            .begin_write()
            .map_err(|e| self.backend("begin write", e))?;
        {
            let mut meta = txn
                .open_table(META)
                .map_err(|e| self.backend("open meta", e))?;
            meta.insert("magic", MAGIC)
                .map_err(|e| self.backend("write meta", e))?;
            meta.insert("format_version", FORMAT_VERSION.to_le_bytes().as_slice())
                .map_err(|e| self.backend("write meta", e))?;
            meta.insert("next_run", 1u64.to_le_bytes().as_slice())
                .map_err(|e| self.backend("write meta", e))?;
            // Create every table so that readers find them.
            txn.open_table(RUNS)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(PAGES)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(IDS)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(LABELS)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(LEAVES)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(CURSORS)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(INTERN)
                .map_err(|e| self.backend("create table", e))?;
            txn.open_table(INTERN_REV)
                .map_err(|e| self.backend("create table", e))?;
        }
        txn.commit().map_err(|e| self.backend("commit", e))
    }

    fn check_format(&self) -> Result<(), StoreError> {
        let foreign = || StoreError::Foreign {
            path: self.path.clone(),
        };
        let txn = self.read_txn()?;
        let meta = txn.open_table(META).map_err(|_| foreign())?;
        let magic = meta
            .get("magic")
            .map_err(|e| self.corrupt(e))?
            .ok_or_else(foreign)?;
        if magic.value() != MAGIC {
            return Err(foreign());
        }
        let version = meta
            .get("format_version")
            .map_err(|e| self.corrupt(e))?
            .ok_or_else(foreign)?;
        let bytes: [u8; 4] = version
            .value()
            .try_into()
            .map_err(|_| self.corrupted("meta", 0, "format_version is not 4 bytes"))?;
        let found = u32::from_le_bytes(bytes);
        if found > FORMAT_VERSION {
            return Err(StoreError::NewerFormat {
                path: self.path.clone(),
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }

    fn corrupt(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail: e.to_string(),
        }
    }

    /// Every run, newest first.
    ///
    /// # Errors
    /// `StoreError` when the store cannot be read or a record does not decode.
    pub fn runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        guard(&self.path, &self.broken, "runs", || {
            let txn = self.read_txn()?;
            let runs = txn.open_table(RUNS).map_err(|e| self.corrupt(e))?;
            let mut out = Vec::new();
            for entry in runs.iter().map_err(|e| self.corrupt(e))?.rev() {
                let (k, v) = entry.map_err(|e| self.corrupt(e))?;
                let run = k.value();
                let rec = codec::decode_run(v.value())
                    .ok_or_else(|| self.corrupted("runs", run, "run record does not decode"))?;
                let contract = self.contract_of(run, &rec)?;
                out.push(RunSummary {
                    run_id: RunId(run).to_string(),
                    source: contract.scope.source,
                    tenant: contract.scope.tenant,
                    state: rec.state.as_str().to_owned(),
                    coverage_status: rec.status,
                    pages_observed: rec.progress.pages_observed,
                    unique_ids_observed: rec.unique_ids,
                    started_at: rfc3339(rec.started_at_ms),
                    finished_at: rec.finished_at_ms.map(rfc3339),
                });
            }
            Ok(out)
        })
    }

    fn contract_of(&self, run: u64, rec: &RunRecord) -> Result<Contract, StoreError> {
        Contract::from_json(&rec.contract_json)
            .map_err(|e| self.corrupted("runs", run, &format!("stored contract: {e}")))
    }

    fn run_record(&self, txn: &ReadTransaction, run: RunId) -> Result<RunRecord, StoreError> {
        let runs = txn.open_table(RUNS).map_err(|e| self.corrupt(e))?;
        let v = runs
            .get(run.0)
            .map_err(|e| self.corrupt(e))?
            .ok_or_else(|| StoreError::UnknownRun {
                path: self.path.clone(),
                run: run.0,
            })?;
        codec::decode_run(v.value())
            .ok_or_else(|| self.corrupted("runs", run.0, "run record does not decode"))
    }

    /// The page log of a run, in page order.
    ///
    /// # Errors
    /// `StoreError` when unreadable or corrupt.
    pub fn page_log(&self, run: RunId) -> Result<Vec<PageLog>, StoreError> {
        guard(&self.path, &self.broken, "page_log", || {
            let txn = self.read_txn()?;
            self.page_log_in(&txn, run)
        })
    }

    fn page_log_in(&self, txn: &ReadTransaction, run: RunId) -> Result<Vec<PageLog>, StoreError> {
        let pages = txn.open_table(PAGES).map_err(|e| self.corrupt(e))?;
        let mut out = Vec::new();
        for entry in pages
            .range((run.0, 0)..=(run.0, u32::MAX))
            .map_err(|e| self.corrupt(e))?
        {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let idx = k.value().1;
            let log = codec::decode_page(idx, v.value()).ok_or_else(|| {
                self.corrupted("pages", run.0, "page record has the wrong length")
            })?;
            if idx as usize != out.len() + 1 {
                return Err(self.corrupted("pages", run.0, "the page log has a gap"));
            }
            out.push(log);
        }
        Ok(out)
    }

    /// The ID set of a run.
    ///
    /// # Errors
    /// `StoreError` when unreadable or a bitmap does not decode.
    pub fn ids(&self, run: RunId) -> Result<IdSet, StoreError> {
        guard(&self.path, &self.broken, "ids", || {
            let txn = self.read_txn()?;
            self.ids_in(&txn, run)
        })
    }

    fn ids_in(&self, txn: &ReadTransaction, run: RunId) -> Result<IdSet, StoreError> {
        let table = txn.open_table(IDS).map_err(|e| self.corrupt(e))?;
        let mut set = IdSet::new();
        for entry in table
            .range((run.0, 0)..=(run.0, u64::MAX))
            .map_err(|e| self.corrupt(e))?
        {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            let b = codec::decode_bitmap(v.value())
                .ok_or_else(|| self.corrupted("ids", run.0, "partition bitmap does not decode"))?;
            set.set_partition(k.value().1, b);
        }
        Ok(set)
    }

    /// One partition of a run's ID set (low 16 bits), if non-empty.
    ///
    /// # Errors
    /// `StoreError` when unreadable or the bitmap does not decode.
    pub fn partition(&self, run: RunId, p: u64) -> Result<Option<RoaringBitmap>, StoreError> {
        guard(&self.path, &self.broken, "partition", || {
            let txn = self.read_txn()?;
            let table = txn.open_table(IDS).map_err(|e| self.corrupt(e))?;
            let Some(v) = table.get((run.0, p)).map_err(|e| self.corrupt(e))? else {
                return Ok(None);
            };
            codec::decode_bitmap(v.value())
                .map(Some)
                .ok_or_else(|| self.corrupted("ids", run.0, "partition bitmap does not decode"))
        })
    }

    /// The Merkle leaves of a run: stored at finish, else computed from its partitions.
    ///
    /// # Errors
    /// `StoreError` when unreadable or corrupt.
    pub fn leaves(&self, run: RunId) -> Result<Vec<(u64, Hash)>, StoreError> {
        guard(&self.path, &self.broken, "leaves", || {
            let txn = self.read_txn()?;
            let rec = self.run_record(&txn, run)?;
            if rec.merkle_root.is_some() {
                let table = txn.open_table(LEAVES).map_err(|e| self.corrupt(e))?;
                let mut out = Vec::new();
                for entry in table
                    .range((run.0, 0)..=(run.0, u64::MAX))
                    .map_err(|e| self.corrupt(e))?
                {
                    let (k, v) = entry.map_err(|e| self.corrupt(e))?;
                    let h: Hash = v.value().try_into().map_err(|_| {
                        self.corrupted("leaves", run.0, "leaf hash is not 32 bytes")
                    })?;
                    out.push((k.value().1, h));
                }
                if out.len() as u64 == rec.partitions {
                    return Ok(out);
                }
            }
            Ok(digest::leaves(&self.ids_in(&txn, run)?))
        })
    }

    /// The stored Merkle root of a finished run, if any (without loading its partitions).
    ///
    /// # Errors
    /// `StoreError` when unreadable or corrupt.
    pub fn stored_root(&self, run: RunId) -> Result<Option<Hash>, StoreError> {
        guard(&self.path, &self.broken, "stored_root", || {
            let txn = self.read_txn()?;
            Ok(self.run_record(&txn, run)?.merkle_root)
        })
    }

    /// Loads a run whole: contract, metadata, reconciler (ID and label sets, page-log cursor
    /// hashes, interner, and the request to continue from when cursors are kept).
    ///
    /// # Errors
    /// `StoreError` when unreadable, unknown or corrupt.
    pub fn load(&self, run: RunId) -> Result<LoadedRun, StoreError> {
        guard(&self.path, &self.broken, "load", || {
            let txn = self.read_txn()?;
            let rec = self.run_record(&txn, run)?;
            let contract = self.contract_of(run.0, &rec)?;
            let ids = self.ids_in(&txn, run)?;
            if ids.len() != rec.unique_ids {
                return Err(self.corrupted(
                    "ids",
                    run.0,
                    "bitmap cardinality differs from the run record",
                ));
            }
            let mut labels = vec![IdSet::new(); rec.progress.label_names.len()];
            let table = txn.open_table(LABELS).map_err(|e| self.corrupt(e))?;
            for entry in table
                .range((run.0, 0, 0)..=(run.0, u32::MAX, u64::MAX))
                .map_err(|e| self.corrupt(e))?
            {
                let (k, v) = entry.map_err(|e| self.corrupt(e))?;
                let (_, label, p) = k.value();
                let b = codec::decode_bitmap(v.value()).ok_or_else(|| {
                    self.corrupted("labels", run.0, "label bitmap does not decode")
                })?;
                let slot = labels
                    .get_mut(label as usize)
                    .ok_or_else(|| self.corrupted("labels", run.0, "label index without a name"))?;
                slot.set_partition(p, b);
            }
            let pages = self.page_log_in(&txn, run)?;
            if pages.len() != rec.progress.pages_observed as usize {
                return Err(self.corrupted(
                    "pages",
                    run.0,
                    "page log length differs from the run record",
                ));
            }
            let mut codec_state = IdCodec::new(contract.id_codec, contract.id_prefix.clone());
            if contract.id_codec == IdCodecKind::String {
                *codec_state.interner_mut() = self.interner_in(&txn, &scope_key(&contract))?;
            }
            // The reconciler's invariants, checked here on decoded data: a damaged record must be
            // reported as such, not trip an assertion later.
            if rec.progress.records_observed != ids.len().saturating_add(rec.progress.duplicate_ids)
            {
                return Err(self.corrupted(
                    "runs",
                    run.0,
                    "records observed differ from unique + duplicate IDs",
                ));
            }
            if labels.iter().any(|l| !l.difference(&ids).is_empty()) {
                return Err(self.corrupted(
                    "labels",
                    run.0,
                    "a label holds an ID the run never observed",
                ));
            }
            let mut progress = rec.progress.clone();
            progress.next = match rec.next_kind {
                0 => None,
                1 => Some(Request::First),
                _ => {
                    let cursors = txn.open_table(CURSORS).map_err(|e| self.corrupt(e))?;
                    match cursors.get(run.0).map_err(|e| self.corrupt(e))? {
                        Some(v) => Some(codec::decode_request(v.value()).ok_or_else(|| {
                            self.corrupted("cursors", run.0, "resume request does not decode")
                        })?),
                        None => None,
                    }
                }
            };
            let reconciler = Reconciler::restore(
                &contract,
                progress,
                ids,
                labels,
                pages.iter().map(|p| p.cursor_hash),
                codec_state,
            );
            Ok(LoadedRun {
                meta: RunMeta {
                    run_id: run,
                    restarts: rec.restarts,
                    started_at: rfc3339(rec.started_at_ms),
                    finished_at: rec.finished_at_ms.map(rfc3339),
                    restarted_from: rec.restarted_from.map(RunId),
                    superseded_by: rec.superseded_by.map(RunId),
                    server_count: rec.server_count,
                },
                contract,
                reconciler,
                state: rec.state.as_str(),
                source_spec: rec.source_spec.clone(),
            })
        })
    }

    fn interner_in(&self, txn: &ReadTransaction, scope: &str) -> Result<Interner, StoreError> {
        let table = txn.open_table(INTERN_REV).map_err(|e| self.corrupt(e))?;
        let mut strings = Vec::new();
        for entry in table
            .range((scope, 0u64)..=(scope, u64::MAX))
            .map_err(|e| self.corrupt(e))?
        {
            let (k, v) = entry.map_err(|e| self.corrupt(e))?;
            if k.value().1 != strings.len() as u64 {
                return Err(self.corrupted("intern_rev", 0, "interned IDs are not dense"));
            }
            strings.push(v.value().to_owned());
        }
        Interner::from_ordered(strings)
            .map_err(|_| self.corrupted("intern_rev", 0, "a string is interned twice"))
    }

    /// The receipt of a run as stored.
    ///
    /// # Errors
    /// `StoreError` when unreadable, unknown or corrupt.
    pub fn receipt(&self, run: RunId) -> Result<Receipt, StoreError> {
        guard(&self.path, &self.broken, "receipt", || {
            let loaded = self.load(run)?;
            Ok(Receipt::build(
                &loaded.contract,
                &loaded.meta,
                &loaded.reconciler,
            ))
        })
    }

    /// Loads a run for `resume`: reopens a transient stop, raises budgets.
    ///
    /// # Errors
    /// `NotResumable` when the run is superseded, finished for good, or its cursor was not kept.
    pub fn prepare_resume(&self, run: RunId, raise: &Raise) -> Result<LoadedRun, StoreError> {
        guard(&self.path, &self.broken, "prepare_resume", || {
            let mut loaded = self.load(run)?;
            let not = |reason: &str| StoreError::NotResumable {
                run: run.0,
                reason: reason.to_owned(),
            };
            if loaded.state == "superseded" {
                return Err(not("it was superseded by a restart"));
            }
            let rec = &mut loaded.reconciler;
            if rec.progress().next.is_none() {
                return Err(
                    if rec.progress().terminal_observed || rec.status() == Status::Failed {
                        not("it is finished; there is nothing left to request")
                    } else {
                        not("its cursor was not kept (the store was written with --no-keep-cursors)")
                    },
                );
            }
            if rec.is_finished() && !rec.reopen() {
                return Err(not("it stopped on a finding that resuming cannot change"));
            }
            rec.raise_limits(raise.max_pages, raise.max_records, raise.max_bytes);
            if let Some(p) = raise.max_pages {
                loaded.contract.limits.max_pages = Some(p);
            }
            if raise.max_records.is_some() {
                loaded.contract.limits.max_records = raise.max_records;
            }
            if raise.max_bytes.is_some() {
                loaded.contract.limits.max_bytes = raise.max_bytes;
            }
            if raise.deadline_seconds.is_some() {
                loaded.contract.limits.deadline_seconds = raise.deadline_seconds;
            }
            if let crate::contract::Mode::Sample(_) = loaded.contract.mode {
                loaded.contract.mode = crate::contract::Mode::All;
            }
            loaded.meta.finished_at = None;
            Ok(loaded)
        })
    }

    fn write_checkpoint(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        page: Option<&PageLog>,
        finish: Option<(RunState, u64)>,
    ) -> Result<(), StoreError> {
        if let Some(p) = page {
            self.pending_pages.push(p.clone());
        }
        // Group commit: pages accumulate in memory (the reconciler keeps the set of touched
        // partitions) until N are pending; a stop, a finish or a policy switch commits at once.
        let due = finish.is_some()
            || page.is_none()
            || self.pending_pages.len() >= self.options.checkpoint_every_pages.max(1) as usize;
        if !due {
            return Ok(());
        }
        let pages = std::mem::take(&mut self.pending_pages);
        match self.write_checkpoint_inner(run, rec, &pages, finish) {
            Ok(()) => {
                rec.codec_mut().interner_mut().mark_persisted();
                Ok(())
            }
            Err(e) => {
                // Sticky: the file may hold a partial state only redb's recovery can judge.
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Pages observed but not yet committed (group commit).
    #[must_use]
    pub fn pending_pages(&self) -> usize {
        self.pending_pages.len()
    }

    fn write_checkpoint_inner(
        &self,
        run: RunId,
        rec: &mut Reconciler,
        page_logs: &[PageLog],
        finish: Option<(RunState, u64)>,
    ) -> Result<(), StoreError> {
        let db = self.write_db()?;
        let mut txn = db
            .begin_write()
            .map_err(|e| self.backend("begin write", e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.backend("set durability", e))?;
        let (parts, label_parts) = rec.take_touched();
        let mut record;
        {
            let runs = txn
                .open_table(RUNS)
                .map_err(|e| self.backend("open runs", e))?;
            let old = runs
                .get(run.0)
                .map_err(|e| self.backend("read run", e))?
                .ok_or_else(|| StoreError::UnknownRun {
                    path: self.path.clone(),
                    run: run.0,
                })?;
            record = codec::decode_run(old.value())
                .ok_or_else(|| self.corrupted("runs", run.0, "run record does not decode"))?;
        }
        {
            let mut ids = txn
                .open_table(IDS)
                .map_err(|e| self.backend("open ids", e))?;
            for p in &parts {
                if let Some(b) = rec.ids().partition(*p) {
                    ids.insert((run.0, *p), codec::encode_bitmap(b).as_slice())
                        .map_err(|e| self.backend("write ids", e))?;
                }
            }
            let mut labels = txn
                .open_table(LABELS)
                .map_err(|e| self.backend("open labels", e))?;
            for (l, p) in &label_parts {
                if let Some(b) = rec.labels().get(*l as usize).and_then(|s| s.partition(*p)) {
                    labels
                        .insert((run.0, *l, *p), codec::encode_bitmap(b).as_slice())
                        .map_err(|e| self.backend("write labels", e))?;
                }
            }
            let mut pages = txn
                .open_table(PAGES)
                .map_err(|e| self.backend("open pages", e))?;
            for pl in page_logs {
                pages
                    .insert((run.0, pl.page_idx), codec::encode_page(pl).as_slice())
                    .map_err(|e| self.backend("write pages", e))?;
            }
            let mut cursors = txn
                .open_table(CURSORS)
                .map_err(|e| self.backend("open cursors", e))?;
            match rec.progress().next.as_ref() {
                Some(req @ (Request::Cursor(_) | Request::After(_)))
                    if self.options.keep_cursors =>
                {
                    cursors
                        .insert(run.0, codec::encode_request(req).as_slice())
                        .map_err(|e| self.backend("write cursors", e))?;
                }
                _ => {
                    cursors
                        .remove(run.0)
                        .map_err(|e| self.backend("write cursors", e))?;
                }
            }
            let unpersisted: Vec<(u64, String)> = rec
                .codec()
                .interner()
                .unpersisted()
                .map(|(id, s)| (id, s.to_owned()))
                .collect();
            if !unpersisted.is_empty() {
                let c = self.contract_of(run.0, &record)?;
                let scope = scope_key(&c);
                let mut fwd = txn
                    .open_table(INTERN)
                    .map_err(|e| self.backend("open intern", e))?;
                let mut rev = txn
                    .open_table(INTERN_REV)
                    .map_err(|e| self.backend("open intern", e))?;
                for (id, s) in &unpersisted {
                    fwd.insert((scope.as_str(), s.as_str()), *id)
                        .map_err(|e| self.backend("write intern", e))?;
                    rev.insert((scope.as_str(), *id), s.as_str())
                        .map_err(|e| self.backend("write intern", e))?;
                }
            }
            record.progress = rec.progress().clone();
            record.next_kind = codec::next_kind(rec.progress().next.as_ref());
            record.progress.next = None;
            record.unique_ids = rec.ids().len();
            record.partitions = rec.ids().partition_count() as u64;
            record.status = rec.status();
            if let Some((state, at)) = finish {
                record.state = state;
                record.finished_at_ms = Some(at);
                let leaves = digest::leaves(rec.ids());
                let mut table = txn
                    .open_table(LEAVES)
                    .map_err(|e| self.backend("open leaves", e))?;
                table
                    .retain_in((run.0, 0)..=(run.0, u64::MAX), |_, _| false)
                    .map_err(|e| self.backend("write leaves", e))?;
                for (p, h) in &leaves {
                    table
                        .insert((run.0, *p), h.as_slice())
                        .map_err(|e| self.backend("write leaves", e))?;
                }
                record.merkle_root =
                    Some(digest::merkle_root_of_leaves(leaves.iter().map(|(_, h)| h)));
            } else {
                record.state = RunState::Running;
                record.finished_at_ms = None;
                record.merkle_root = None;
            }
            let mut runs = txn
                .open_table(RUNS)
                .map_err(|e| self.backend("open runs", e))?;
            runs.insert(run.0, codec::encode_run(&record).as_slice())
                .map_err(|e| self.backend("write run", e))?;
        }
        txn.commit().map_err(|e| self.backend("commit", e))
    }

    /// Records the server-side count of a `count`-mode run.
    fn set_server_count(&mut self, run: RunId, n: u64) -> Result<(), StoreError> {
        self.update_record(run, |r| r.server_count = Some(n))
    }

    fn update_record(
        &mut self,
        run: RunId,
        f: impl FnOnce(&mut RunRecord),
    ) -> Result<(), StoreError> {
        let db = self.write_db()?;
        let txn = db
            .begin_write()
            .map_err(|e| self.backend("begin write", e))?;
        {
            let mut runs = txn
                .open_table(RUNS)
                .map_err(|e| self.backend("open runs", e))?;
            let mut record = {
                let old = runs
                    .get(run.0)
                    .map_err(|e| self.backend("read run", e))?
                    .ok_or_else(|| StoreError::UnknownRun {
                        path: self.path.clone(),
                        run: run.0,
                    })?;
                codec::decode_run(old.value())
                    .ok_or_else(|| self.corrupted("runs", run.0, "run record does not decode"))?
            };
            f(&mut record);
            runs.insert(run.0, codec::encode_run(&record).as_slice())
                .map_err(|e| self.backend("write run", e))?;
        }
        txn.commit().map_err(|e| self.backend("commit", e))
    }
}

impl RunSink for Store {
    fn begin(
        &mut self,
        contract: &Contract,
        restarted_from: Option<RunId>,
        started_at_ms: u64,
        rec: &mut Reconciler,
    ) -> Result<RunId, Error> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        let result = guard(&path, &broken, "begin", || {
            if contract.id_codec == IdCodecKind::String {
                let txn = self.read_txn()?;
                *rec.codec_mut().interner_mut() = self.interner_in(&txn, &scope_key(contract))?;
            }
            let db = self.write_db()?;
            let txn = db
                .begin_write()
                .map_err(|e| self.backend("begin write", e))?;
            let run;
            {
                let mut meta = txn
                    .open_table(META)
                    .map_err(|e| self.backend("open meta", e))?;
                let next = meta
                    .get("next_run")
                    .map_err(|e| self.backend("read meta", e))?
                    .and_then(|v| <[u8; 8]>::try_from(v.value()).ok())
                    .map(u64::from_le_bytes)
                    .ok_or_else(|| {
                        self.corrupted("meta", 0, "next_run is missing or not 8 bytes")
                    })?;
                run = next;
                meta.insert("next_run", (next + 1).to_le_bytes().as_slice())
                    .map_err(|e| self.backend("write meta", e))?;
                let record = RunRecord {
                    contract_json: contract.to_value().to_string(),
                    state: RunState::Running,
                    started_at_ms,
                    finished_at_ms: None,
                    restarts: 0,
                    restarted_from: restarted_from.map(|r| r.0),
                    superseded_by: None,
                    server_count: None,
                    progress: {
                        let mut p = rec.progress().clone();
                        p.next = None;
                        p
                    },
                    next_kind: codec::next_kind(rec.progress().next.as_ref()),
                    unique_ids: 0,
                    partitions: 0,
                    merkle_root: None,
                    status: Status::Unknown,
                    source_spec: self.source_spec.clone(),
                };
                let mut record = record;
                if let Some(old) = restarted_from {
                    let runs = txn
                        .open_table(RUNS)
                        .map_err(|e| self.backend("open runs", e))?;
                    let prior = runs
                        .get(old.0)
                        .map_err(|e| self.backend("read run", e))?
                        .and_then(|v| codec::decode_run(v.value()));
                    if let Some(o) = prior {
                        record.restarts = o.restarts + 1;
                    }
                }
                let mut runs = txn
                    .open_table(RUNS)
                    .map_err(|e| self.backend("open runs", e))?;
                runs.insert(run, codec::encode_run(&record).as_slice())
                    .map_err(|e| self.backend("write run", e))?;
            }
            txn.commit().map_err(|e| self.backend("commit", e))?;
            Ok(RunId(run))
        });
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn checkpoint(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        page: Option<&PageLog>,
    ) -> Result<(), Error> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        let result = guard(&path, &broken, "checkpoint", || {
            Ok(self.write_checkpoint(run, rec, page, None)?)
        });
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn finish(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        finished_at_ms: u64,
    ) -> Result<(), Error> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        let result = guard(&path, &broken, "finish", || {
            Ok(self.write_checkpoint(run, rec, None, Some((RunState::Finished, finished_at_ms)))?)
        });
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn supersede(&mut self, old: RunId, new: RunId) -> Result<(), Error> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        let result = guard(&path, &broken, "supersede", || {
            Ok(self.update_record(old, |r| {
                r.state = RunState::Superseded;
                r.superseded_by = Some(new.0);
            })?)
        });
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn server_count(&mut self, run: RunId, n: u64) -> Result<(), Error> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        let result = guard(&path, &broken, "server_count", || {
            Ok(self.set_server_count(run, n)?)
        });
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }
}

thread_local! {
    static GUARD_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether the current thread is inside a store operation whose panics are caught and
/// reported as a corrupt store (a panic hook uses this to stay quiet about them).
#[doc(hidden)]
#[must_use]
pub fn inside_guard() -> bool {
    GUARD_DEPTH.with(|d| d.get() > 0)
}

/// Runs a store operation, turning a panic into `StoreError::Corrupt`.
///
/// redb (4.x) panics on some damaged files (unreachable B-tree states, invalid UTF-8 in `&str`
/// keys, out-of-range slices) instead of returning an error; the fuzz target `decode_store`
/// finds dozens of such sites. A corrupt file must be reported, never crash the program, so
/// every public operation of the store runs under this guard. The store is then poisoned for
/// writes by the caller. Our own invariants are asserted outside redb calls and are bugs.
fn guard<T, E: From<StoreError>>(
    path: &Path,
    broken: &std::sync::atomic::AtomicBool,
    op: &'static str,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    GUARD_DEPTH.with(|d| d.set(d.get() + 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    result.unwrap_or_else(|panic| {
        broken.store(true, std::sync::atomic::Ordering::Relaxed);
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!("{op} failed inside the storage engine: {message}"),
        }
        .into())
    })
}

fn check_not_empty(path: &Path) -> Result<(), StoreError> {
    let len = std::fs::metadata(path)
        .map_err(|e| StoreError::Corrupt {
            path: path.to_owned(),
            detail: e.to_string(),
        })?
        .len();
    if len == 0 {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: "the file is empty (0 bytes)".to_owned(),
        });
    }
    Ok(())
}

fn map_db_error(path: &Path, e: redb::DatabaseError) -> StoreError {
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
            path: path.to_owned(),
        },
        redb::DatabaseError::UpgradeRequired(v) => StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!("redb file format {v} is not supported by this build"),
        },
        other => StoreError::Corrupt {
            path: path.to_owned(),
            detail: other.to_string(),
        },
    }
}

/// Bytes of the per-store key that signs page tokens (`token` module).
pub const MAC_KEY_LEN: usize = 32;
/// The META key under which the page-token key is kept.
const MAC_KEY_META: &str = "page_token_key";

/// What `diff`, `missing`, `export` and `page` need of a run, read without its bitmaps.
#[derive(Debug, Clone)]
pub struct RunHeader {
    /// The run.
    pub run_id: RunId,
    /// Its effective contract.
    pub contract: Contract,
    /// `running`, `finished` or `superseded`.
    pub state: &'static str,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed (also the run's version stamp: every checkpoint adds a page).
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// Non-empty partitions.
    pub partitions: u64,
    /// The Merkle root stored when the run finished.
    pub merkle_root: Option<Hash>,
    /// The `prefixed` codec's prefix, given or learned.
    pub id_prefix: Option<String>,
}

// Evidence accessors (issue 4): appended in their own block so that edits to the functions
// above do not collide with them. Every one reads in a single transaction.
impl Store {
    /// A run's header: contract, state, counts and stored root, without loading a bitmap.
    ///
    /// # Errors
    /// `UnknownRun`, or `StoreError` when unreadable or corrupt.
    pub fn run_header(&self, run: RunId) -> Result<RunHeader, StoreError> {
        guard(&self.path, &self.broken, "run_header", || {
            let txn = self.read_txn()?;
            let rec = self.run_record(&txn, run)?;
            let contract = self.contract_of(run.0, &rec)?;
            Ok(RunHeader {
                run_id: run,
                id_prefix: rec
                    .progress
                    .id_prefix
                    .clone()
                    .or_else(|| contract.id_prefix.clone()),
                contract,
                state: rec.state.as_str(),
                coverage_status: rec.status,
                pages_observed: rec.progress.pages_observed,
                unique_ids_observed: rec.unique_ids,
                partitions: rec.partitions,
                merkle_root: rec.merkle_root,
            })
        })
    }

    /// The codec that renders a run's IDs in their original form: the contract's kind, the
    /// learned prefix and, for the `string` codec, the interner of the run's (source, tenant).
    ///
    /// # Errors
    /// `StoreError` when the interner is unreadable or corrupt.
    pub fn codec(&self, header: &RunHeader) -> Result<IdCodec, StoreError> {
        guard(&self.path, &self.broken, "codec", || {
            let mut codec = IdCodec::new(header.contract.id_codec, header.id_prefix.clone());
            if header.contract.id_codec == IdCodecKind::String {
                let txn = self.read_txn()?;
                *codec.interner_mut() = self.interner_in(&txn, &scope_key(&header.contract))?;
            }
            Ok(codec)
        })
    }

    /// Several partitions of a run (low 16 bits), in the order asked; `None` for an empty one.
    ///
    /// # Errors
    /// `StoreError` when unreadable or a bitmap does not decode.
    pub fn partitions_of(
        &self,
        run: RunId,
        indexes: &[u64],
    ) -> Result<Vec<(u64, Option<RoaringBitmap>)>, StoreError> {
        guard(&self.path, &self.broken, "partitions_of", || {
            let txn = self.read_txn()?;
            let table = txn.open_table(IDS).map_err(|e| self.corrupt(e))?;
            let mut out = Vec::with_capacity(indexes.len());
            for &p in indexes {
                let bitmap = match table.get((run.0, p)).map_err(|e| self.corrupt(e))? {
                    None => None,
                    Some(v) => Some(codec::decode_bitmap(v.value()).ok_or_else(|| {
                        self.corrupted("ids", run.0, "partition bitmap does not decode")
                    })?),
                };
                out.push((p, bitmap));
            }
            Ok(out)
        })
    }

    /// The partitions `first..=last` of a run's ID set.
    ///
    /// # Errors
    /// `StoreError` when unreadable or a bitmap does not decode.
    pub fn partitions_between(
        &self,
        run: RunId,
        first: u64,
        last: u64,
    ) -> Result<IdSet, StoreError> {
        guard(&self.path, &self.broken, "partitions_between", || {
            let txn = self.read_txn()?;
            let table = txn.open_table(IDS).map_err(|e| self.corrupt(e))?;
            let mut set = IdSet::new();
            if first > last {
                return Ok(set);
            }
            for entry in table
                .range((run.0, first)..=(run.0, last))
                .map_err(|e| self.corrupt(e))?
            {
                let (k, v) = entry.map_err(|e| self.corrupt(e))?;
                let b = codec::decode_bitmap(v.value()).ok_or_else(|| {
                    self.corrupted("ids", run.0, "partition bitmap does not decode")
                })?;
                set.set_partition(k.value().1, b);
            }
            Ok(set)
        })
    }

    /// Up to `n_max` IDs of a run at or above `start`, ascending: one page of `page`.
    /// Reads partitions from `start`'s onward and stops as soon as it has enough.
    ///
    /// # Errors
    /// `StoreError` when unreadable or a bitmap does not decode.
    pub fn ids_from(&self, run: RunId, start: u64, n_max: usize) -> Result<Vec<u64>, StoreError> {
        guard(&self.path, &self.broken, "ids_from", || {
            let txn = self.read_txn()?;
            let table = txn.open_table(IDS).map_err(|e| self.corrupt(e))?;
            let mut out = Vec::with_capacity(n_max.min(1 << 16));
            let first = crate::idset::partition_of(start);
            for entry in table
                .range((run.0, first)..=(run.0, u64::MAX))
                .map_err(|e| self.corrupt(e))?
            {
                if out.len() >= n_max {
                    break;
                }
                let (k, v) = entry.map_err(|e| self.corrupt(e))?;
                let b = codec::decode_bitmap(v.value()).ok_or_else(|| {
                    self.corrupted("ids", run.0, "partition bitmap does not decode")
                })?;
                let base = k.value().1 << crate::idset::PARTITION_BITS;
                for low in &b {
                    let id = base | u64::from(low);
                    if id < start {
                        continue;
                    }
                    if out.len() >= n_max {
                        break;
                    }
                    out.push(id);
                }
            }
            Ok(out)
        })
    }

    /// The store's page-token key, if one was made.
    ///
    /// # Errors
    /// `StoreError` when unreadable, or the key has the wrong length.
    pub fn page_token_key(&self) -> Result<Option<[u8; MAC_KEY_LEN]>, StoreError> {
        guard(&self.path, &self.broken, "page_token_key", || {
            let txn = self.read_txn()?;
            let meta = txn.open_table(META).map_err(|e| self.corrupt(e))?;
            let Some(v) = meta.get(MAC_KEY_META).map_err(|e| self.corrupt(e))? else {
                return Ok(None);
            };
            let key = <[u8; MAC_KEY_LEN]>::try_from(v.value())
                .map_err(|_| self.corrupted("meta", 0, "page_token_key is not 32 bytes"))?;
            Ok(Some(key))
        })
    }

    /// The store's page-token key, made from `/dev/urandom` and kept in META at first use.
    /// The key never leaves the store: it only signs and checks tokens.
    ///
    /// # Errors
    /// `StoreError` when the store is read-only or unwritable, or the random source fails.
    pub fn mac_key(&mut self) -> Result<[u8; MAC_KEY_LEN], StoreError> {
        let path = self.path.clone();
        let broken = self.broken.clone();
        guard(&path, &broken, "mac_key", || {
            if let Some(key) = self.page_token_key()? {
                return Ok(key);
            }
            let db = self.write_db()?;
            let txn = db
                .begin_write()
                .map_err(|e| self.backend("begin write", e))?;
            let key;
            {
                let mut meta = txn
                    .open_table(META)
                    .map_err(|e| self.backend("open meta", e))?;
                // Another writer may have made the key between our read and this transaction.
                let existing = meta
                    .get(MAC_KEY_META)
                    .map_err(|e| self.backend("read meta", e))?
                    .map(|v| <[u8; MAC_KEY_LEN]>::try_from(v.value()));
                key = match existing {
                    Some(Ok(k)) => k,
                    Some(Err(_)) => {
                        return Err(self.corrupted("meta", 0, "page_token_key is not 32 bytes"))
                    }
                    None => {
                        let mut k = [0u8; MAC_KEY_LEN];
                        let mut urandom = std::fs::File::open("/dev/urandom")
                            .map_err(|e| self.backend("open /dev/urandom", e))?;
                        std::io::Read::read_exact(&mut urandom, &mut k)
                            .map_err(|e| self.backend("read /dev/urandom", e))?;
                        meta.insert(MAC_KEY_META, k.as_slice())
                            .map_err(|e| self.backend("write meta", e))?;
                        k
                    }
                };
            }
            txn.commit().map_err(|e| self.backend("commit", e))?;
            Ok(key)
        })
    }
}

/// The diff of two stored runs, with what it took.
#[derive(Debug, Clone)]
pub struct RunDiff {
    /// The old run.
    pub old: RunHeader,
    /// The new run.
    pub new: RunHeader,
    /// What changed from old to new.
    pub diff: crate::diff::Diff,
    /// Partition bitmaps read from the store (0 when the roots matched).
    pub partitions_loaded: u64,
}

impl Store {
    /// Diffs two runs of one (source, tenant): compares the stored Merkle roots, then the
    /// leaves, then loads only the partitions whose leaves differ (both sides, in one read
    /// transaction each). Two equal finished runs cost two run-record reads.
    ///
    /// # Errors
    /// `Error::Usage` when the runs are not comparable (`diff::comparable`); `StoreError`
    /// when a run is unknown, unreadable or corrupt.
    pub fn diff_runs(&self, old: RunId, new: RunId) -> Result<RunDiff, Error> {
        guard(&self.path, &self.broken, "diff_runs", || {
            let old_h = self.run_header(old)?;
            let new_h = self.run_header(new)?;
            crate::diff::comparable(&old_h.comparable(), &new_h.comparable())
                .map_err(|e| Error::Usage(e.to_string()))?;
            if let (Some(a), Some(b)) = (old_h.merkle_root, new_h.merkle_root) {
                if a == b {
                    return Ok(RunDiff {
                        old: old_h,
                        new: new_h,
                        diff: crate::diff::Diff::default(),
                        partitions_loaded: 0,
                    });
                }
            }
            let differing =
                crate::diff::differing_partitions(&self.leaves(old)?, &self.leaves(new)?);
            let old_parts = self.partitions_of(old, &differing)?;
            let new_parts = self.partitions_of(new, &differing)?;
            let partitions_loaded = old_parts
                .iter()
                .chain(&new_parts)
                .filter(|(_, b)| b.is_some())
                .count() as u64;
            let diff = crate::diff::of_partitions(
                old_parts
                    .iter()
                    .zip(&new_parts)
                    .map(|((p, o), (_, n))| (*p, o.as_ref(), n.as_ref())),
            );
            Ok(RunDiff {
                old: old_h,
                new: new_h,
                diff,
                partitions_loaded,
            })
        })
    }

    /// Recomputes a receipt from the store's evidence for its run (`verify::check`). An
    /// unknown or malformed `run_id` is a mismatch of that field, not an error.
    ///
    /// # Errors
    /// `StoreError` when the store or the run's records are unreadable or corrupt.
    pub fn verify(&self, receipt: &Receipt) -> Result<Vec<crate::verify::Mismatch>, StoreError> {
        guard(&self.path, &self.broken, "verify", || {
            let run_mismatch = |why: String| {
                vec![crate::verify::Mismatch {
                    field: "run_id".to_owned(),
                    found_in: crate::verify::FoundIn::Receipt,
                    found: serde_json::Value::String(receipt.run_id.clone()).to_string(),
                    recomputed: why,
                    detail: None,
                }]
            };
            let Ok(run) = receipt.run_id.parse::<RunId>() else {
                return Ok(run_mismatch("a run ID of the form run-N".to_owned()));
            };
            let loaded = match self.load(run) {
                Ok(l) => l,
                Err(StoreError::UnknownRun { .. }) => {
                    return Ok(run_mismatch(format!(
                        "no such run in store {}",
                        self.path.display()
                    )))
                }
                Err(e) => return Err(e),
            };
            let pages: Vec<crate::verify::PageEvidence> = self
                .page_log(run)?
                .iter()
                .map(|p| crate::verify::PageEvidence {
                    cursor_hash: p.cursor_hash,
                    n_items: p.n_items,
                })
                .collect();
            let leaves = self.leaves(run)?;
            let evidence = crate::verify::Evidence {
                contract: &loaded.contract,
                meta: &loaded.meta,
                reconciler: &loaded.reconciler,
                pages: &pages,
                stored_root: self.stored_root(run)?,
                stored_leaves: &leaves,
            };
            Ok(crate::verify::check(receipt, &evidence))
        })
    }
}

impl RunHeader {
    /// What decides whether this run's IDs can be compared with another's.
    #[must_use]
    pub fn comparable(&self) -> crate::diff::Comparable<'_> {
        crate::diff::Comparable {
            run: self.run_id,
            source: &self.contract.scope.source,
            tenant: self.contract.scope.tenant.as_deref(),
            codec: self.contract.id_codec,
            prefix: self.id_prefix.as_deref(),
        }
    }
}
