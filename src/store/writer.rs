//! `RunWriter`: the one writer of one run, as redb's consuming transactions are.
//!
//! A writer owns everything of its run that is not yet durable (the group-commit buffer), so
//! dropping it (a scan future dropped under a timeout, say) discards exactly that and nothing
//! else. `checkpoint` records what a page changed (the core's `Delta`) and commits when due;
//! `finish(self)` and `restart(self)` consume the writer, each in one transaction: a restart
//! supersedes the old run and begins its successor atomically, so no crash can leave one
//! without the other.

use std::collections::BTreeSet;

use redb::{ReadableTable, WriteTransaction};

use super::backend::Liveness;
use super::error::{Failure, WriteError};
use super::journal;
use super::records::{self, MergeRecord, RunRecord, StoredState, CURSOR_KEY_LEN};
use super::schema::{
    CONTENT, CURSORS, IDS, INTERN, INTERN_REV, LABELS, LEAVES, META, META_NEXT_RUN, PAGES, RUNS,
};
use super::{ScopeKey, Store};
use crate::contract::{Contract, IdCodecKind};
use crate::digest::{self, Hash};
use crate::receipt::RunId;
use crate::reconcile::{Delta, PageLog, Reconciler, Request};

/// What a new run starts from.
#[derive(Debug, Clone)]
pub(crate) struct NewRun {
    pub(crate) contract: Contract,
    pub(crate) started_at_ms: u64,
    pub(crate) restarted_from: Option<RunId>,
    pub(crate) restarts: u32,
    pub(crate) source_spec: Option<String>,
}

/// Bytes of what waits for the next durable checkpoint (the journal record or the commit a
/// group of `--checkpoint-every` pages makes): a page log, IDs, labels, new strings and content
/// leaves, counted as the writer holds them. Reaching it brings the checkpoint forward, so a
/// group of large pages is never held whole in memory (docs/REFERENCE.md §10, the group
/// commit's bound). A page holds at most `ITEMS_PER_PAGE_MAX` IDs (0.8 MB of them), so what
/// waits stays within this bound plus one page.
pub(crate) const PENDING_BYTES_MAX: u64 = 16 << 20;

/// Bytes a delta adds to what waits: 8 per ID, 12 per label pair, a string's bytes and its
/// bookkeeping, a page log and its partitions and leaves (an estimate from above of what the
/// writer's vectors and sets hold; never a stored size).
fn delta_bytes(delta: &Delta) -> u64 {
    const STRING_OVERHEAD_BYTES: u64 = 40;
    const SET_ENTRY_BYTES: u64 = 32;
    let strings: u64 = delta
        .interned
        .iter()
        .map(|(_, s)| s.len() as u64 + STRING_OVERHEAD_BYTES)
        .sum();
    let entries =
        (delta.partitions.len() + delta.label_partitions.len() + delta.content_leaves.len()) as u64;
    (delta.ids.len() as u64)
        .saturating_mul(8)
        .saturating_add((delta.label_ids.len() as u64).saturating_mul(12))
        .saturating_add(strings)
        .saturating_add(entries.saturating_mul(SET_ENTRY_BYTES))
        .saturating_add(std::mem::size_of::<PageLog>() as u64)
}

/// What the run changed since the last commit to redb.
#[derive(Debug, Default)]
struct Pending {
    /// What the fields below hold, by [`delta_bytes`].
    bytes: u64,
    pages: Vec<PageLog>,
    partitions: BTreeSet<u64>,
    label_partitions: BTreeSet<(u32, u64)>,
    interned: Vec<(u64, String)>,
    content_leaves: BTreeSet<u64>,
}

/// What the run changed since the last journal record (journaled stores only).
#[derive(Debug, Default)]
struct Unjournaled {
    /// What the fields below hold, by [`delta_bytes`].
    bytes: u64,
    pages: Vec<PageLog>,
    ids: Vec<u64>,
    label_ids: Vec<(u32, u64)>,
    interned: Vec<(u64, String)>,
    content_leaves: BTreeSet<u64>,
}

impl Unjournaled {
    fn add(&mut self, delta: &Delta) {
        self.bytes = self.bytes.saturating_add(delta_bytes(delta));
        if let Some(p) = &delta.page {
            self.pages.push(p.clone());
        }
        self.ids.extend_from_slice(&delta.ids);
        self.label_ids.extend_from_slice(&delta.label_ids);
        self.interned.extend(delta.interned.iter().cloned());
        self.content_leaves
            .extend(delta.content_leaves.iter().copied());
    }
}

/// The writer of one run. Dropping it discards its uncommitted pages and nothing else.
pub struct RunWriter<'s> {
    store: &'s mut Store,
    run: RunId,
    scope: ScopeKey,
    contract: Contract,
    cursor_key: [u8; CURSOR_KEY_LEN],
    /// The key is durable in the key file (saved before the first sealed request under it).
    key_saved: bool,
    started_at_ms: u64,
    restarts: u32,
    restarted_from: Option<RunId>,
    server_count: Option<u64>,
    /// A merged run's plan and shards (`write_whole` only).
    merged: Option<MergeRecord>,
    pending: Pending,
    /// `Some` when the store journals checkpoints (shared mode on a file).
    unjournaled: Option<Unjournaled>,
    _liveness: Option<Liveness>,
}

impl std::fmt::Debug for RunWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunWriter")
            .field("run", &self.run)
            .field("pending_pages", &self.pending.pages.len())
            .finish_non_exhaustive()
    }
}

fn fresh_key() -> Result<[u8; CURSOR_KEY_LEN], Failure> {
    let mut key = [0u8; CURSOR_KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| Failure::Io {
        op: "draw a cursor key from the system's random source",
        source: Box::new(std::io::Error::other(e.to_string())),
    })?;
    Ok(key)
}

impl<'s> RunWriter<'s> {
    /// Begins a new run in one transaction: a fresh run ID (checked against the runs table, so
    /// a damaged counter can never make a run overwrite another), its record and cursor key.
    pub(crate) fn begin(store: &'s mut Store, new: NewRun) -> Result<RunWriter<'s>, WriteError> {
        let path = store.engine.path().to_owned();
        let txn = store.write_txn()?;
        let key = fresh_key().map_err(|f| f.into_write(&path))?;
        let run = match allocate_run(store, &txn, &new) {
            Ok(run) => run,
            Err(f) => return Err(store.poison(f)),
        };
        store.commit(txn)?;
        Ok(RunWriter::open(store, run, new, key, false, None))
    }

    pub(crate) fn open(
        store: &'s mut Store,
        run: RunId,
        new: NewRun,
        cursor_key: [u8; CURSOR_KEY_LEN],
        key_saved: bool,
        server_count: Option<u64>,
    ) -> RunWriter<'s> {
        let liveness = Liveness::take(store.engine.path(), run.0);
        let unjournaled = store.journaled().then(Unjournaled::default);
        RunWriter {
            run,
            scope: ScopeKey::of(&new.contract),
            contract: new.contract,
            cursor_key,
            key_saved,
            started_at_ms: new.started_at_ms,
            restarts: new.restarts,
            restarted_from: new.restarted_from,
            server_count,
            merged: None,
            pending: Pending::default(),
            unjournaled,
            _liveness: liveness,
            store,
        }
    }

    /// Writes a whole, finished run in one transaction: its record, every partition of its
    /// ID and label sets, its content accumulators, its page log, the root and leaves. What
    /// `merge` writes (the run of a plan, from its shards); the state is the reconciler's.
    pub(crate) fn write_whole(
        store: &'s mut Store,
        new: NewRun,
        rec: &Reconciler,
        pages: Vec<PageLog>,
        merged: Option<MergeRecord>,
        finished_at_ms: u64,
    ) -> Result<RunId, WriteError> {
        // A dropped writer's acknowledged pages are committed before anything else is.
        store.settle()?;
        let path = store.engine.path().to_owned();
        let key = fresh_key().map_err(|f| f.into_write(&path))?;
        let txn = store.write_txn()?;
        let run = match allocate_run(store, &txn, &new) {
            Ok(run) => run,
            Err(f) => return Err(store.poison(f)),
        };
        // A finished run keeps no request, so its key is never saved (the key file is untouched).
        let mut w = RunWriter::open(store, run, new, key, false, None);
        w.merged = merged;
        w.pending.pages = pages;
        w.pending.partitions = rec.ids().partitions().map(|(p, _)| p).collect();
        for (l, set) in rec.labels().iter().enumerate() {
            // Labels per run are bounded by LABELS_PER_RUN_MAX (64).
            let l = u32::try_from(l).unwrap_or(u32::MAX);
            w.pending
                .label_partitions
                .extend(set.partitions().map(|(p, _)| (l, p)));
        }
        w.pending.content_leaves = rec.content().keys().copied().collect();
        if let Err(f) = w.write_state(&txn, rec, StoredState::Finished, Some(finished_at_ms)) {
            return Err(w.store.poison(f));
        }
        w.store.commit(txn)?;
        Ok(run)
    }

    /// The run this writer writes.
    #[must_use]
    pub fn run(&self) -> RunId {
        self.run
    }

    /// The run's cursor key, for the tests that look for it in the files.
    #[cfg(test)]
    pub(crate) fn cursor_key_for_tests(&self) -> [u8; CURSOR_KEY_LEN] {
        self.cursor_key
    }

    /// Syncs (`fdatasync`) issued through the store so far ([`super::Store::syncs`]).
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.store.syncs()
    }

    /// Pages observed but not yet durable.
    #[must_use]
    pub fn pending_pages(&self) -> usize {
        match &self.unjournaled {
            Some(u) => u.pages.len(),
            None => self.pending.pages.len(),
        }
    }

    /// Records what one observation changed and makes it durable when the group-commit budget
    /// is reached (at once when the run's state changed without a page: a failure, a limit, a
    /// policy switch; or when the run finished).
    ///
    /// Durable means, on a journaled store (the default shared mode), one record appended to
    /// the page journal and synced, folded into the store's tables every so often (readers in
    /// other processes see the last fold); otherwise one commit of the store.
    ///
    /// # Errors
    /// `WriteError` when the write fails; the store then refuses writes until reopened.
    pub fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), WriteError> {
        let page_seen = delta.page.is_some();
        if let Some(u) = &mut self.unjournaled {
            u.add(&delta);
        }
        self.pending.bytes = self.pending.bytes.saturating_add(delta_bytes(&delta));
        if let Some(p) = delta.page {
            self.pending.pages.push(p);
        }
        self.pending.partitions.extend(delta.partitions);
        self.pending.label_partitions.extend(delta.label_partitions);
        self.pending.interned.extend(delta.interned);
        self.pending.content_leaves.extend(delta.content_leaves);
        let every = self.store.options.checkpoint_every_pages.max(1) as usize;
        if !page_seen {
            return self.commit(rec);
        }
        // What waits is bounded in bytes whatever the page size and the group: past the bound
        // the checkpoint comes forward (the group is a most, never a least).
        let waiting_bytes = self
            .unjournaled
            .as_ref()
            .map_or(self.pending.bytes, |u| u.bytes);
        if !rec.is_finished() && self.pending_pages() < every && waiting_bytes < PENDING_BYTES_MAX {
            return Ok(());
        }
        if self.unjournaled.is_none() {
            return self.commit(rec);
        }
        // The redb side waits for a fold; it is bounded alike.
        let fold_forward = self.pending.bytes >= PENDING_BYTES_MAX;
        if !self.append(rec)? || self.store.fold_due() || fold_forward {
            // Not journaled (a record too large for the journal), or time to fold.
            self.commit(rec)?;
        }
        Ok(())
    }

    /// Appends what changed since the last record to the journal, synced; `false` when it
    /// was not journaled (what it held is still pending, for a commit).
    fn append(&mut self, rec: &Reconciler) -> Result<bool, WriteError> {
        if self.unjournaled.is_none() {
            return Ok(false);
        }
        self.ensure_key(rec, StoredState::Running)?;
        let Some(u) = self.unjournaled.take() else {
            return Ok(false);
        };
        let record = self.journal_record(rec, u);
        self.unjournaled = Some(Unjournaled::default());
        self.store.append_journal(record)
    }

    /// The redo record of what changed since the last one.
    fn journal_record(&self, rec: &Reconciler, mut u: Unjournaled) -> journal::Record {
        let (run_record, sealed) = self.run_record(rec, StoredState::Running, None);
        u.ids.sort_unstable();
        u.ids.dedup();
        let mut r = journal::Record {
            run: self.run.0,
            pages: u
                .pages
                .iter()
                .map(|pl| (pl.page_idx, records::encode_page(pl).to_vec()))
                .collect(),
            label_ids: u.label_ids,
            scope: if u.interned.is_empty() {
                Vec::new()
            } else {
                self.scope.as_bytes().to_vec()
            },
            interned: u.interned,
            content: u
                .content_leaves
                .iter()
                .filter_map(|leaf| rec.content().get(leaf).map(|a| (*leaf, a.0.to_vec())))
                .collect(),
            // The key is in the key file, never in the journal (so erasing it there erases
            // every journaled copy of the request).
            cursor: sealed.map(|s| (s, Vec::new())),
            run_record,
            ..journal::Record::default()
        };
        r.set_ids(&u.ids);
        r
    }

    /// Records the server-side count of a `count`-mode run (written with the next commit).
    pub fn set_server_count(&mut self, n: u64) {
        self.server_count = Some(n);
    }

    /// Commits what is pending now.
    ///
    /// # Errors
    /// As [`RunWriter::checkpoint`].
    pub fn commit(&mut self, rec: &Reconciler) -> Result<(), WriteError> {
        self.ensure_key(rec, StoredState::Running)?;
        let txn = self.store.write_txn()?;
        if let Err(f) = self.write_state(&txn, rec, StoredState::Running, None) {
            return Err(self.store.poison(f));
        }
        self.store.commit(txn)?;
        self.pending = Pending::default();
        if self.unjournaled.is_some() {
            self.unjournaled = Some(Unjournaled::default());
        }
        Ok(())
    }

    /// Finishes the run (for now: a run stopped on a transient cause can be resumed) in one
    /// transaction: everything pending, the final state, the Merkle root and leaves; the raw
    /// request is erased unless a resume still needs it.
    ///
    /// # Errors
    /// As [`RunWriter::checkpoint`].
    pub fn finish(mut self, rec: &Reconciler, finished_at_ms: u64) -> Result<(), WriteError> {
        self.ensure_key(rec, StoredState::Finished)?;
        let txn = self.store.write_txn()?;
        if let Err(f) = self.write_state(&txn, rec, StoredState::Finished, Some(finished_at_ms)) {
            return Err(self.store.poison(f));
        }
        self.store.commit(txn)?;
        if !self.keeps_request(rec, StoredState::Finished) {
            // Nothing can resume the run: its key goes, and with it every sealed copy of its
            // request (in freed pages, in journal frames).
            self.store.erase_keys(&[self.run.0])?;
        }
        Ok(())
    }

    /// The run stops on an error (a source that cannot go on): what is pending and `cause`
    /// are committed in one transaction and the writer goes, so the run reads as interrupted,
    /// resumable from here, with the error beside it (`RunSummary::stopped_by`).
    ///
    /// # Errors
    /// As [`RunWriter::checkpoint`].
    pub fn stopped(
        mut self,
        rec: &Reconciler,
        cause: &super::StopCause,
        at_ms: u64,
    ) -> Result<(), WriteError> {
        self.ensure_key(rec, StoredState::Running)?;
        let bytes = super::stops::encode(cause, at_ms);
        let txn = self.store.write_txn()?;
        let written = self
            .write_state(&txn, rec, StoredState::Running, None)
            .and_then(|()| super::stops::put(&self.store.engine, &txn, self.run, &bytes));
        if let Err(f) = written {
            return Err(self.store.poison(f));
        }
        self.store.commit(txn)
    }

    /// Whether the run keeps (sealed) the request to continue from in `state`.
    fn keeps_request(&self, rec: &Reconciler, state: StoredState) -> bool {
        self.store.options.keep_cursors
            && state != StoredState::Superseded
            && matches!(
                rec.progress().next,
                Some(Request::Cursor(_) | Request::After(_))
            )
    }

    /// Makes the run's key durable in the key file before the first durable write that
    /// carries a request sealed under it.
    fn ensure_key(&mut self, rec: &Reconciler, state: StoredState) -> Result<(), WriteError> {
        if self.key_saved || !self.keeps_request(rec, state) {
            return Ok(());
        }
        self.store.save_key(self.run.0, &self.cursor_key)?;
        self.key_saved = true;
        Ok(())
    }

    /// Ends this run as superseded and begins its successor under `contract` (a fresh
    /// snapshot), in one transaction.
    ///
    /// # Errors
    /// As [`RunWriter::checkpoint`].
    pub fn restart(
        self,
        rec: &Reconciler,
        contract: &Contract,
        at_ms: u64,
    ) -> Result<RunWriter<'s>, WriteError> {
        let path = self.store.engine.path().to_owned();
        let new = NewRun {
            contract: contract.clone(),
            started_at_ms: at_ms,
            restarted_from: Some(self.run),
            restarts: self.restarts.saturating_add(1),
            source_spec: self.store.source_spec.clone(),
        };
        let key = fresh_key().map_err(|f| f.into_write(&path))?;
        let txn = self.store.write_txn()?;
        let result = (|| {
            let run = allocate_run(self.store, &txn, &new)?;
            self.write_state(&txn, rec, StoredState::Superseded, Some(at_ms))?;
            set_superseded_by(self.store, &txn, self.run, run)?;
            Ok(run)
        })();
        let run = match result {
            Ok(run) => run,
            Err(f) => return Err(self.store.poison(f)),
        };
        self.store.commit(txn)?;
        // The superseded run keeps no request: its key goes.
        self.store.erase_keys(&[self.run.0])?;
        let RunWriter { store, .. } = self;
        Ok(RunWriter::open(store, run, new, key, false, None))
    }

    /// The run record as of `rec`, encoded, and the sealed request to continue from when one
    /// is kept.
    fn run_record(
        &self,
        rec: &Reconciler,
        state: StoredState,
        finished_at_ms: Option<u64>,
    ) -> (Vec<u8>, Option<Vec<u8>>) {
        let p = rec.progress();
        let ids = rec.ids();
        let done = state != StoredState::Running;
        // The raw request is kept (encrypted) only while a resume may still need it.
        let keep_request = self.keeps_request(rec, state);
        let sealed = if keep_request {
            p.next
                .as_ref()
                .and_then(|r| records::seal_request(r, &self.cursor_key))
        } else {
            None
        };
        let mut progress = p.clone();
        progress.next = (p.next == Some(Request::First)).then_some(Request::First);
        let record = RunRecord {
            contract_json: self.contract.to_value().to_string(),
            state,
            started_at_ms: self.started_at_ms,
            finished_at_ms,
            restarts: self.restarts,
            restarted_from: self.restarted_from.map(|r| r.0),
            superseded_by: None,
            server_count: self.server_count,
            source_spec: self.store.source_spec.clone(),
            next_kind: if keep_request || p.next == Some(Request::First) {
                records::next_kind(p.next.as_ref())
            } else {
                0
            },
            progress,
            unique_ids: ids.len(),
            partitions: ids.partition_count() as u64,
            merkle_root: done.then(|| run_root(rec)),
            status: rec.status(),
            merged: self.merged.clone(),
        };
        (records::encode_run(&record), sealed)
    }

    /// Writes pending pages, changed bitmaps, new strings, the request and the run record.
    fn write_state(
        &self,
        txn: &WriteTransaction,
        rec: &Reconciler,
        state: StoredState,
        finished_at_ms: Option<u64>,
    ) -> Result<(), Failure> {
        let engine = &self.store.engine;
        let run = self.run.0;
        let ids = rec.ids();
        // Encode outside the engine calls: our own work is never inside `contain`.
        let id_rows: Vec<(u64, Vec<u8>)> = self
            .pending
            .partitions
            .iter()
            .filter_map(|&part| {
                ids.partition(part)
                    .map(|b| (part, records::encode_bitmap(b)))
            })
            .collect();
        let label_rows: Vec<(u32, u64, Vec<u8>)> = self
            .pending
            .label_partitions
            .iter()
            .filter_map(|&(l, part)| {
                rec.labels()
                    .get(l as usize)
                    .and_then(|set| set.partition(part))
                    .map(|b| (l, part, records::encode_bitmap(b)))
            })
            .collect();
        let content_rows: Vec<(u64, [u8; crate::content::CONTENT_ACC_LEN])> = self
            .pending
            .content_leaves
            .iter()
            .filter_map(|leaf| rec.content().get(leaf).map(|a| (*leaf, a.0)))
            .collect();
        let page_rows: Vec<(u32, [u8; records::PAGE_RECORD_LEN])> = self
            .pending
            .pages
            .iter()
            .map(|pl| (pl.page_idx, records::encode_page(pl)))
            .collect();
        let string_rows: Vec<(u64, &str, Vec<u8>)> = self
            .pending
            .interned
            .iter()
            .map(|(id, s)| (*id, s.as_str(), records::encode_interned(s)))
            .collect();
        let done = state != StoredState::Running;
        let (record_bytes, sealed) = self.run_record(rec, state, finished_at_ms);
        let leaves = done.then(|| digest::leaves(ids));

        let scope = self.scope.as_bytes().to_vec();
        engine.contain("write a checkpoint", || -> Result<(), redb::Error> {
            {
                let mut t = txn.open_table(PAGES)?;
                for (idx, bytes) in &page_rows {
                    t.insert((run, *idx), bytes.as_slice())?;
                }
            }
            {
                let mut t = txn.open_table(IDS)?;
                for (part, bytes) in &id_rows {
                    t.insert((run, *part), bytes.as_slice())?;
                }
            }
            {
                let mut t = txn.open_table(LABELS)?;
                for (l, part, bytes) in &label_rows {
                    t.insert((run, *l, *part), bytes.as_slice())?;
                }
            }
            if !content_rows.is_empty() {
                let mut t = txn.open_table(CONTENT)?;
                for (leaf, acc) in &content_rows {
                    t.insert((run, *leaf), acc.as_slice())?;
                }
            }
            if !string_rows.is_empty() {
                let mut fwd = txn.open_table(INTERN)?;
                let mut rev = txn.open_table(INTERN_REV)?;
                for (id, s, bytes) in &string_rows {
                    fwd.insert((scope.as_slice(), s.as_bytes()), *id)?;
                    rev.insert((scope.as_slice(), *id), bytes.as_slice())?;
                }
            }
            {
                // The key is in the key file (`keys.rs`); a run that keeps no request has its
                // slot zeroed after this commit.
                let mut c = txn.open_table(CURSORS)?;
                match &sealed {
                    Some(bytes) => {
                        c.insert(run, bytes.as_slice())?;
                    }
                    None => {
                        c.remove(run)?;
                    }
                }
            }
            if let Some(leaves) = &leaves {
                let mut t = txn.open_table(LEAVES)?;
                t.retain_in((run, 0)..=(run, u64::MAX), |_, _| false)?;
                for (part, h) in leaves {
                    t.insert((run, *part), h.as_slice())?;
                }
            }
            txn.open_table(RUNS)?.insert(run, record_bytes.as_slice())?;
            Ok(())
        })
    }
}

/// The Merkle root a run's receipt carries: over ID partitions, or for the `string` codec
/// over the digests of the original strings (a function of the set of strings alone).
pub(crate) fn run_root(rec: &Reconciler) -> Hash {
    crate::receipt::merkle_root_of(rec.ids(), rec.codec()).0
}

pub(super) fn allocate_run(
    store: &Store,
    txn: &WriteTransaction,
    new: &NewRun,
) -> Result<RunId, Failure> {
    let engine = &store.engine;
    let (counter, last) =
        engine.contain("read the run counter", || -> Result<_, redb::Error> {
            let meta = txn.open_table(META)?;
            let counter = meta.get(META_NEXT_RUN)?.map(|v| v.value().to_vec());
            let last = txn.open_table(RUNS)?.last()?.map(|(k, _)| k.value());
            Ok((counter, last))
        })?;
    let counter = counter
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| Failure::damaged("table meta: next_run is missing or not 8 bytes"))?;
    if counter == 0 || last.is_some_and(|l| l >= counter) {
        return Err(Failure::damaged(format!(
            "table meta: the run counter (next_run = {counter}) is behind the runs table (last run {}); a new run would overwrite an existing one",
            last.map_or_else(|| "none".to_owned(), |l| format!("run-{l}"))
        )));
    }
    let next = counter
        .checked_add(1)
        .ok_or_else(|| Failure::damaged("table meta: the run counter is at its maximum"))?;
    let mut progress = crate::reconcile::Reconciler::new(&new.contract)
        .progress()
        .clone();
    progress.next = Some(Request::First);
    let record = RunRecord {
        contract_json: new.contract.to_value().to_string(),
        state: StoredState::Running,
        started_at_ms: new.started_at_ms,
        finished_at_ms: None,
        restarts: new.restarts,
        restarted_from: new.restarted_from.map(|r| r.0),
        superseded_by: None,
        server_count: None,
        source_spec: new.source_spec.clone(),
        next_kind: 1,
        progress,
        unique_ids: 0,
        partitions: 0,
        merkle_root: None,
        status: crate::reconcile::Status::Unknown,
        merged: None,
    };
    let bytes = records::encode_run(&record);
    engine.contain("begin a run", || -> Result<(), redb::Error> {
        txn.open_table(META)?
            .insert(META_NEXT_RUN, next.to_le_bytes().as_slice())?;
        txn.open_table(RUNS)?.insert(counter, bytes.as_slice())?;
        Ok(())
    })?;
    Ok(RunId(counter))
}

fn set_superseded_by(
    store: &Store,
    txn: &WriteTransaction,
    old: RunId,
    new: RunId,
) -> Result<(), Failure> {
    let bytes = store
        .engine
        .contain("read a run record", || -> Result<_, redb::Error> {
            Ok(txn
                .open_table(RUNS)?
                .get(old.0)?
                .map(|v| v.value().to_vec()))
        })?
        .ok_or_else(|| Failure::damaged(format!("table runs: {old} vanished")))?;
    let mut record = records::decode_run(&bytes).ok_or_else(|| {
        Failure::damaged(format!("table runs, {old}: the run record does not decode"))
    })?;
    record.superseded_by = Some(new.0);
    let bytes = records::encode_run(&record);
    store
        .engine
        .contain("write a run record", || -> Result<(), redb::Error> {
            txn.open_table(RUNS)?.insert(old.0, bytes.as_slice())?;
            Ok(())
        })
}

/// Whether a contract's IDs are interned strings.
pub(crate) fn is_string(contract: &Contract) -> bool {
    contract.id_codec == IdCodecKind::String
}
