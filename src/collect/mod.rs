//! The async collector: drives a `PageSource` through a `Reconciler`, page by page, under the
//! contract's budgets, timeouts, retries and policies, recording through a `RunLog`.
//!
//! It owns the tokio boundary of the crate (with `source`, whose delays use tokio's timer).
//! Pages of one run depend on each other (each request needs the previous cursor), so the
//! collector is one sequential future: no task is spawned, nothing is detached, and no store
//! transaction lives across an `.await` (the log is synchronous and called between awaits).
//! Dropping the future drops the run's writer, which discards what it had not committed and
//! nothing else. Every await on a source is bounded by `tokio::time::timeout`; every wait is
//! cut at the deadline; every loop has a bound.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::codec::IdCodec;
use crate::contract::{Contract, ExpiredPolicy, Mode, RawId, PAGES_PER_RUN_MAX, RESTARTS_MAX};
use crate::idset::IdSet;
use crate::receipt::{rfc3339, Receipt, RunId, RunMeta};
use crate::reconcile::{Delta, FetchFailure, Limit, Reconciler, Request, Status, Step, Violation};
use crate::source::{PageRequest, PageSource};
use crate::store::{LoadedRun, Raise, RunWriter, StopCause, Store};

mod error;
mod fetch;
mod keys;
mod reread;
mod start;

pub use error::{io_words, said_once, stop_cause, Error, Result};
pub use keys::{
    key_streams, KeyComparator, KeySender, KeyTap, StreamedKeys, CHANGED_COLUMNS_MAX,
    KEY_PAGES_AHEAD,
};
pub use reread::{reread_contents, reread_key_ranges, reread_streamed, Reread, StreamedReread};
pub use start::{continue_or_begin, ScanStart};

/// Milliseconds since the Unix epoch.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Where the collector records one run: the store's `RunWriter`, or `MemoryLog` (nothing).
/// Every method is synchronous and returns before the next await.
pub trait RunLog: Sized {
    /// The run being recorded.
    fn run(&self) -> RunId;
    /// Records what an observation changed (the reconciler's state after it, and its delta).
    ///
    /// # Errors
    /// When the checkpoint cannot be written; the run must not go on.
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error>;
    /// Records a `count`-mode run's server-side count.
    fn set_server_count(&mut self, n: u64);
    /// The run is finished (for now: a resumable stop can be reopened).
    ///
    /// # Errors
    /// When the final state cannot be written.
    fn finish(self, rec: &Reconciler, finished_at_ms: u64) -> Result<(), Error>;
    /// Supersedes this run and begins its successor under `contract`, atomically.
    ///
    /// # Errors
    /// When the restart cannot be written.
    fn restart(self, rec: &Reconciler, contract: &Contract, at_ms: u64) -> Result<Self, Error>;
    /// The run stops on an error (a source that cannot go on, `cause` says it): records the
    /// state as of `rec` and the cause with the run, which stays resumable (`interrupted`).
    /// The default records nothing (a log that keeps no run).
    ///
    /// # Errors
    /// When it cannot be written; the scan's own error is still the one returned.
    fn stopped(self, rec: &Reconciler, cause: &StopCause, at_ms: u64) -> Result<(), Error> {
        let _ = (rec, cause, at_ms);
        Ok(())
    }
    /// Whether the operator asked the scan to stop (Ctrl-C): checked before every request,
    /// so the run stops at a page boundary as `limit_reached` (interrupted), resumable.
    fn should_stop(&self) -> bool {
        false
    }
}

impl RunLog for RunWriter<'_> {
    fn run(&self) -> RunId {
        RunWriter::run(self)
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        Ok(RunWriter::checkpoint(self, rec, delta)?)
    }
    fn set_server_count(&mut self, n: u64) {
        RunWriter::set_server_count(self, n);
    }
    fn finish(self, rec: &Reconciler, finished_at_ms: u64) -> Result<(), Error> {
        Ok(RunWriter::finish(self, rec, finished_at_ms)?)
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at_ms: u64) -> Result<Self, Error> {
        Ok(RunWriter::restart(self, rec, contract, at_ms)?)
    }
    fn stopped(self, rec: &Reconciler, cause: &StopCause, at_ms: u64) -> Result<(), Error> {
        Ok(RunWriter::stopped(self, rec, cause, at_ms)?)
    }
}

/// A log that records nothing: for in-memory collection and tests.
#[derive(Debug)]
pub struct MemoryLog {
    run: RunId,
}

impl Default for MemoryLog {
    fn default() -> MemoryLog {
        MemoryLog { run: RunId(1) }
    }
}

impl RunLog for MemoryLog {
    fn run(&self) -> RunId {
        self.run
    }
    fn checkpoint(&mut self, _: &Reconciler, _: Delta) -> Result<(), Error> {
        Ok(())
    }
    fn set_server_count(&mut self, _: u64) {}
    fn finish(self, _: &Reconciler, _: u64) -> Result<(), Error> {
        Ok(())
    }
    fn restart(self, _: &Reconciler, _: &Contract, _: u64) -> Result<Self, Error> {
        Ok(MemoryLog {
            run: RunId(self.run.0.saturating_add(1)),
        })
    }
}

/// A finished (or stopped) run as the collector leaves it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ScanResult {
    /// The run's effective contract (after a restart its snapshot is the fresh one).
    pub contract: Contract,
    /// The run's metadata.
    pub meta: RunMeta,
    /// The run's state.
    pub reconciler: Reconciler,
}

impl ScanResult {
    /// The run's receipt.
    #[must_use]
    pub fn receipt(&self) -> Receipt {
        Receipt::build(&self.contract, &self.meta, &self.reconciler)
    }
}

/// Runs a scan of `contract` over `source`, recording it durably in `store`.
///
/// ```
/// use scanledger::{scan, Contract, SimConfig, SimSource, Status, Store, StoreOptions};
/// # let dir = std::env::temp_dir().join(format!("sl-doc-scan-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let mut store = Store::open(&dir.join("s.redb"), StoreOptions::new()).unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let mut source = SimSource::new(SimConfig::default().with_records(250));
/// let done = rt.block_on(scan(&Contract::new("sim"), &mut source, &mut store)).unwrap();
/// assert_eq!(done.reconciler.status(), Status::Verified);
/// let receipt = store.read().unwrap().receipt(done.meta.run_id).unwrap();
/// assert_eq!(receipt.unique_ids_observed, 250);
/// # drop(store); std::fs::remove_dir_all(&dir).unwrap();
/// ```
///
/// # Errors
/// A source that cannot go on (`FetchError::Fatal`) or a store that cannot record. Page
/// failures, limits and violations are not errors: they are in the result's receipt.
pub async fn scan<S: PageSource>(
    contract: &Contract,
    source: &mut S,
    store: &mut Store,
) -> Result<ScanResult, Error> {
    let (log, start) = ScanStart::begin(store, contract)?;
    start.run(contract, log, source).await
}

/// Runs a scan recording through any `RunLog` (`MemoryLog` keeps nothing).
///
/// # Errors
/// As [`scan`].
pub async fn scan_with<S: PageSource, L: RunLog>(
    contract: &Contract,
    mut rec: Reconciler,
    mut log: L,
    started_at_ms: u64,
    source: &mut S,
) -> Result<ScanResult, Error> {
    let mut meta = RunMeta {
        run_id: log.run(),
        restarts: 0,
        started_at: rfc3339(started_at_ms),
        finished_at: None,
        restarted_from: None,
        superseded_by: None,
        server_count: None,
        merged: None,
    };
    if contract.mode == Mode::Count {
        let asked = tokio::time::timeout(
            Duration::from_millis(contract.limits.page_timeout_ms()),
            source.count(),
        )
        .await;
        if let Ok(Some(n)) = asked {
            meta.server_count = Some(n);
            log.set_server_count(n);
            rec.counted_by_source(n, contract.expected_count);
            log.checkpoint(&rec, Delta::default())?;
            return finish(contract.clone(), meta, rec, log);
        }
    }
    drive(contract.clone(), meta, rec, log, source, None).await
}

/// Continues a stored run that a crash, a budget or a transient failure interrupted, with its
/// budgets raised by `raise`.
///
/// # Errors
/// `NotResumable` (through `Error::Write`) when it cannot go on; otherwise as [`scan`].
pub async fn resume<S: PageSource>(
    store: &mut Store,
    run: RunId,
    raise: &Raise,
    source: &mut S,
) -> Result<ScanResult, Error> {
    let (log, loaded) = store.resume(run, raise)?;
    resume_with(loaded, log, raise.deadline_seconds, source).await
}

/// Continues a run that `Store::resume` reopened, recording through any `RunLog`;
/// `deadline_seconds` bounds this session of the run.
///
/// # Errors
/// As [`scan`].
pub async fn resume_with<S: PageSource, L: RunLog>(
    loaded: LoadedRun,
    log: L,
    deadline_seconds: Option<u64>,
    source: &mut S,
) -> Result<ScanResult, Error> {
    drive(
        loaded.contract,
        loaded.meta,
        loaded.reconciler,
        log,
        source,
        deadline_seconds,
    )
    .await
}

fn finish<L: RunLog>(
    contract: Contract,
    mut meta: RunMeta,
    rec: Reconciler,
    log: L,
) -> Result<ScanResult, Error> {
    let at = now_ms();
    log.finish(&rec, at)?;
    meta.finished_at = Some(rfc3339(at));
    Ok(ScanResult {
        contract,
        meta,
        reconciler: rec,
    })
}

/// The page bound, times the restarts a run may take, plus the turns that observe nothing.
const TURNS_MAX: u64 =
    PAGES_PER_RUN_MAX as u64 * (RESTARTS_MAX as u64 + 1) + RESTARTS_MAX as u64 * 2 + 2;

async fn drive<S: PageSource, L: RunLog>(
    mut contract: Contract,
    mut meta: RunMeta,
    mut rec: Reconciler,
    mut log: L,
    source: &mut S,
    deadline_override: Option<u64>,
) -> Result<ScanResult, Error> {
    // A deadline too far to represent is no deadline: it cannot pass.
    let deadline = deadline_override
        .or(contract.limits.deadline_seconds)
        .and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
    let mut high_water_turns = 0u32;
    for _turn in 0..TURNS_MAX {
        let Some(request) = rec.next_request().cloned() else {
            break;
        };
        // A budget already spent (a resume that did not raise it) fetches nothing more; an
        // operator's stop ends the run at this page boundary.
        if let Some(limit) = rec
            .budget_exhausted()
            .or_else(|| log.should_stop().then_some(Limit::Interrupted))
        {
            rec.stop_on_limit(limit);
            log.checkpoint(&rec, Delta::default())?;
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            rec.stop_on_limit(Limit::Deadline);
            log.checkpoint(&rec, Delta::default())?;
            break;
        }
        let preq = PageRequest {
            request: request.clone(),
            page_size: contract.page_size,
            snapshot: rec.progress().serving_snapshot.clone(),
            query: contract.scope.query.clone(),
        };
        let fetched = match fetch::with_retries(&contract, source, &preq, deadline).await {
            Ok(f) => f,
            Err(e) => return Err(stopped(log, &rec, &request, e)),
        };
        match fetched {
            fetch::Fetched::Page(page) => {
                let mut seen = rec.observe(&page);
                if let Some(p) = seen.delta.page.as_mut() {
                    p.at_ms = now_ms();
                }
                log.checkpoint(&rec, seen.delta)?;
                if seen.step == Step::Restart {
                    tracing::info!("the snapshot changed; on_snapshot_change is restart: a new run under the new snapshot");
                    match restart(&mut contract, &mut meta, &mut rec, log)? {
                        (true, next) => {
                            log = next;
                            continue;
                        }
                        (false, same) => {
                            log = same;
                            break;
                        }
                    }
                }
            }
            fetch::Fetched::Failed(kind, detail) => {
                rec.fetch_failed(kind, detail);
                log.checkpoint(&rec, Delta::default())?;
            }
            fetch::Fetched::Invalid(detail) => {
                rec.page_invalid(detail);
                log.checkpoint(&rec, Delta::default())?;
            }
            fetch::Fetched::Deadline => {
                rec.stop_on_limit(Limit::Deadline);
                log.checkpoint(&rec, Delta::default())?;
            }
            fetch::Fetched::Expired => match contract.on_expired_cursor {
                // Each arm logs the policy's decision (the request by its fingerprint).
                ExpiredPolicy::Block => {
                    expired_block(&mut rec, &request);
                    log.checkpoint(&rec, Delta::default())?;
                }
                ExpiredPolicy::HighWater => {
                    high_water_turns += 1;
                    expired_high_water(&mut rec, &request, high_water_turns);
                    log.checkpoint(&rec, Delta::default())?;
                }
                ExpiredPolicy::Restart => {
                    tracing::info!(
                        "{} expired; on_expired_cursor is restart: a new run under a fresh snapshot",
                        crate::receipt::terminal_safe(&request.describe())
                    );
                    rec.fetch_failed(
                        FetchFailure::ExpiredCursor,
                        format!(
                            "{} expired; restarting under a fresh snapshot",
                            request.describe()
                        ),
                    );
                    match restart(&mut contract, &mut meta, &mut rec, log)? {
                        (true, next) => log = next,
                        (false, same) => {
                            log = same;
                            log.checkpoint(&rec, Delta::default())?;
                            break;
                        }
                    }
                }
            },
        }
    }
    finish(contract, meta, rec, log)
}

/// The run stops on `e`, met at `request`: the log records why (the run stays resumable), and
/// `e` is returned whatever the recording came to.
fn stopped<L: RunLog>(log: L, rec: &Reconciler, request: &Request, e: Error) -> Error {
    let at = now_ms();
    let cause = stop_cause(&e, request, rec.progress().pages_observed, at);
    if let Err(w) = log.stopped(rec, &cause, at) {
        tracing::warn!(
            "the error that stopped the run is not recorded with it: {}",
            crate::receipt::terminal_safe(&said_once(&w))
        );
    }
    e
}

/// `on_expired_cursor` `block` after `request` expired: the run stops with `expired_cursor`
/// (the decision logged with the request by its fingerprint).
fn expired_block(rec: &mut Reconciler, request: &Request) {
    tracing::info!(
        "{} expired; on_expired_cursor is block: the run stops",
        crate::receipt::terminal_safe(&request.describe())
    );
    rec.fetch_failed(
        FetchFailure::ExpiredCursor,
        format!("{} expired; the policy is block", request.describe()),
    );
}

/// `on_expired_cursor` `high_water` after `request` expired, the `turn`-th time in this run:
/// continue after the last key, or, past `RESTARTS_MAX` turns or without a key, stop with
/// `expired_cursor`.
fn expired_high_water(rec: &mut Reconciler, request: &Request, turn: u32) {
    tracing::info!(
        "{} expired; on_expired_cursor is high_water: continuing after the last key",
        crate::receipt::terminal_safe(&request.describe())
    );
    let switched = if turn <= RESTARTS_MAX {
        rec.continue_after_high_water()
    } else {
        None
    };
    if switched.is_none() {
        rec.fetch_failed(
            FetchFailure::ExpiredCursor,
            format!(
                "{} expired and no high-water key can continue it",
                request.describe()
            ),
        );
    }
}

/// Ends the current run as superseded and begins a new one under a fresh snapshot, in one
/// transaction. Returns false (and the same log) when the restart budget is spent.
fn restart<L: RunLog>(
    contract: &mut Contract,
    meta: &mut RunMeta,
    rec: &mut Reconciler,
    log: L,
) -> Result<(bool, L), Error> {
    if meta.restarts >= RESTARTS_MAX {
        return Ok((false, log));
    }
    let old = meta.run_id;
    let at = now_ms();
    // The new run pins to whatever snapshot the source serves now; never spliced with the old.
    let mut next = contract.clone();
    next.snapshot_id = None;
    let log = log.restart(rec, &next, at)?;
    let interner = rec.codec().interner().clone();
    *contract = next;
    *rec = Reconciler::new(contract);
    rec.set_interner(interner);
    *meta = RunMeta {
        run_id: log.run(),
        restarts: meta.restarts + 1,
        started_at: rfc3339(at),
        finished_at: None,
        restarted_from: Some(old),
        superseded_by: None,
        server_count: None,
        merged: None,
    };
    Ok((true, log))
}

/// A complete inventory: returned only for a verified run.
#[derive(Debug)]
pub struct Inventory {
    receipt: Receipt,
    ids: IdSet,
    codec: IdCodec,
}

impl Inventory {
    /// The receipt (status `verified`).
    #[must_use]
    pub fn receipt(&self) -> &Receipt {
        &self.receipt
    }

    /// Every unique ID of the collection, in its original form, ascending by the codec's
    /// order (numbers for `int` and `prefixed`, first appearance for `string`).
    pub fn ids(&self) -> impl Iterator<Item = RawId> + '_ {
        self.ids.iter().map(|id| match self.codec.kind() {
            crate::contract::IdCodecKind::Int => RawId::Int(id),
            crate::contract::IdCodecKind::Signed => RawId::of_i64(crate::codec::signed_of(id)),
            _ => RawId::Str(self.codec.render(id)),
        })
    }

    /// The IDs as the store keeps them (u64s; interned indexes for the `string` codec).
    #[must_use]
    pub fn id_set(&self) -> &IdSet {
        &self.ids
    }

    /// How many unique IDs.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.ids.len()
    }

    /// Whether the collection is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Anything short of a verified inventory. What was collected stays inside: it is never
/// presented as the collection.
#[derive(Debug)]
pub struct IncompleteRead {
    /// The receipt of the run, when one was made.
    pub receipt: Option<Box<Receipt>>,
    /// Why the read is not complete.
    pub reasons: Vec<Violation>,
    /// An error that stopped the run, if that is what happened.
    pub error: Option<Error>,
}

impl std::fmt::Display for IncompleteRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "incomplete read")?;
        for v in &self.reasons {
            write!(f, "; {} on page {}", v.kind.as_str(), v.page)?;
        }
        Ok(())
    }
}

impl std::error::Error for IncompleteRead {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The all-or-fail read a planner needs: an `Inventory` only when the run is verified.
///
/// ```
/// use scanledger::{collect, Contract, RawId, SimConfig, SimSource};
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let mut ok = SimSource::new(SimConfig::default().with_records(10));
/// let inventory = rt.block_on(collect(&Contract::new("s"), &mut ok)).unwrap();
/// assert_eq!(inventory.ids().next(), Some(RawId::Int(1)));
/// let mut broken = SimSource::new(SimConfig::default().with_records(500).with_fail_at(2));
/// let err = rt.block_on(collect(&Contract::new("s"), &mut broken)).unwrap_err();
/// assert_eq!(err.reasons[0].kind.as_str(), "page_failed");
/// ```
///
/// # Errors
/// `IncompleteRead` for every outcome but `verified`.
pub async fn collect<S: PageSource>(
    contract: &Contract,
    source: &mut S,
) -> Result<Inventory, IncompleteRead> {
    let rec = Reconciler::new(contract);
    match scan_with(contract, rec, MemoryLog::default(), now_ms(), source).await {
        Err(e) => Err(IncompleteRead {
            receipt: None,
            reasons: Vec::new(),
            error: Some(e),
        }),
        Ok(done) => {
            let receipt = done.receipt();
            if receipt.coverage_status == Status::Verified && done.meta.server_count.is_none() {
                Ok(Inventory {
                    receipt,
                    ids: done.reconciler.ids().clone(),
                    codec: done.reconciler.codec().clone(),
                })
            } else {
                Err(IncompleteRead {
                    reasons: receipt.violations.clone(),
                    receipt: Some(Box::new(receipt)),
                    error: None,
                })
            }
        }
    }
}
