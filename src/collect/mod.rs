//! The async collector: drives a `PageSource` through a `Reconciler`, page by page, under the
//! contract's budgets, timeouts, retries and policies, checkpointing through a `RunSink`.
//!
//! It owns the tokio boundary of the crate (with `source`, whose delays use tokio's timer).
//! Pages of one run depend on each other (each request needs the previous cursor), so the
//! collector is one sequential future: no task is spawned, nothing is detached, and no store
//! transaction lives across an `.await` (the sink is synchronous and called between awaits).
//! Every await on a source is bounded by `tokio::time::timeout`; every loop has a bound.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::contract::{Contract, ExpiredPolicy, Mode, Page, PAGES_PER_RUN_MAX, RESTARTS_MAX};
use crate::digest;
use crate::error::Error;
use crate::idset::IdSet;
use crate::receipt::{rfc3339, Receipt, RunId, RunMeta};
use crate::reconcile::{FetchFailure, Limit, Reconciler, Status, Step, Violation};
use crate::source::{FetchError, PageRequest, PageSource};

/// First retry backoff; doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(50);
/// Longest backoff between two attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Milliseconds since the Unix epoch.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One page's entry in the page log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLog {
    /// 1-based page index within the run.
    pub page_idx: u32,
    /// `digest::cursor_hash` of the page's `next` cursor.
    pub cursor_hash: digest::Hash,
    /// Items on the page.
    pub n_items: u32,
    /// Bytes of the response.
    pub size_bytes: u64,
    /// When it was observed, ms since the epoch.
    pub at_ms: u64,
}

/// Where the collector records runs. The store implements it durably; `MemorySink` keeps
/// nothing. Every method is synchronous and returns before the next await.
pub trait RunSink {
    /// A run begins; returns its ID. `contract` is the run's effective contract; the sink may
    /// prime `rec` (the store loads the collection's string interner into its codec).
    ///
    /// # Errors
    /// When the run cannot be recorded.
    fn begin(
        &mut self,
        contract: &Contract,
        restarted_from: Option<RunId>,
        started_at_ms: u64,
        rec: &mut Reconciler,
    ) -> Result<RunId, Error>;
    /// The reconciler changed (a page was observed, a request failed, a policy switched the
    /// request): persist what changed, atomically with `page` when there is one.
    ///
    /// # Errors
    /// When the checkpoint cannot be written; the run must not go on.
    fn checkpoint(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        page: Option<&PageLog>,
    ) -> Result<(), Error>;
    /// The run is finished (for now: a resumable stop can be reopened).
    ///
    /// # Errors
    /// When the final state cannot be written.
    fn finish(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        finished_at_ms: u64,
    ) -> Result<(), Error>;
    /// `old` was replaced by `new` (a restart).
    ///
    /// # Errors
    /// When the link cannot be written.
    fn supersede(&mut self, old: RunId, new: RunId) -> Result<(), Error>;
    /// `count` mode got a server-side count for the run.
    ///
    /// # Errors
    /// When it cannot be recorded.
    fn server_count(&mut self, _run: RunId, _n: u64) -> Result<(), Error> {
        Ok(())
    }
}

/// A sink that records nothing: for in-memory collection and tests.
#[derive(Debug, Default)]
pub struct MemorySink {
    next_id: u64,
}

impl RunSink for MemorySink {
    fn begin(
        &mut self,
        _: &Contract,
        _: Option<RunId>,
        _: u64,
        _: &mut Reconciler,
    ) -> Result<RunId, Error> {
        self.next_id += 1;
        Ok(RunId(self.next_id))
    }
    fn checkpoint(
        &mut self,
        _: RunId,
        _: &mut Reconciler,
        _: Option<&PageLog>,
    ) -> Result<(), Error> {
        Ok(())
    }
    fn finish(&mut self, _: RunId, _: &mut Reconciler, _: u64) -> Result<(), Error> {
        Ok(())
    }
    fn supersede(&mut self, _: RunId, _: RunId) -> Result<(), Error> {
        Ok(())
    }
}

/// A finished (or stopped) run as the collector leaves it.
#[derive(Debug)]
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

    /// The process exit code: the receipt's, except that `count` mode answered by a
    /// server-side count is a successful command (0).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        if self.meta.server_count.is_some() {
            return 0;
        }
        self.reconciler.status().exit_code()
    }
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

/// Runs a scan of `contract` over `source`, recording through `sink`.
///
/// ```
/// use scanledger::{collect, Contract, SimConfig, SimSource, Status};
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let mut source = SimSource::new(SimConfig { records: 250, ..SimConfig::default() });
/// let contract = Contract::new("sim");
/// let done = rt
///     .block_on(collect::scan(&contract, &mut source, &mut collect::MemorySink::default()))
///     .unwrap();
/// assert_eq!(done.reconciler.status(), Status::Verified);
/// assert_eq!(done.receipt().unique_ids_observed, 250);
/// ```
///
/// # Errors
/// A source that cannot go on (`FetchError::Fatal`) or a sink that cannot record. Page
/// failures, limits and violations are not errors: they are in the result's receipt.
pub async fn scan<S: PageSource, K: RunSink>(
    contract: &Contract,
    source: &mut S,
    sink: &mut K,
) -> Result<ScanResult, Error> {
    let started = now_ms();
    let mut rec = Reconciler::new(contract);
    let run = sink.begin(contract, None, started, &mut rec)?;
    let mut meta = RunMeta {
        run_id: run,
        restarts: 0,
        started_at: rfc3339(started),
        finished_at: None,
        restarted_from: None,
        superseded_by: None,
        server_count: None,
    };
    if contract.mode == Mode::Count {
        if let Some(n) = tokio::time::timeout(
            Duration::from_millis(contract.limits.page_timeout_ms()),
            source.count(),
        )
        .await
        .ok()
        .flatten()
        {
            meta.server_count = Some(n);
            sink.server_count(run, n)?;
            return finish(contract.clone(), meta, rec, sink);
        }
    }
    drive(contract.clone(), meta, rec, source, sink, None).await
}

/// Continues a stored run that a crash or a transient stop interrupted.
///
/// # Errors
/// As [`scan`].
pub async fn resume<S: PageSource, K: RunSink>(
    contract: Contract,
    meta: RunMeta,
    rec: Reconciler,
    source: &mut S,
    sink: &mut K,
    deadline_seconds: Option<u64>,
) -> Result<ScanResult, Error> {
    drive(contract, meta, rec, source, sink, deadline_seconds).await
}

fn finish<K: RunSink>(
    contract: Contract,
    mut meta: RunMeta,
    mut rec: Reconciler,
    sink: &mut K,
) -> Result<ScanResult, Error> {
    let at = now_ms();
    sink.finish(meta.run_id, &mut rec, at)?;
    meta.finished_at = Some(rfc3339(at));
    Ok(ScanResult {
        contract,
        meta,
        reconciler: rec,
    })
}

enum Fetched {
    Page(Page),
    Failed(FetchFailure, String),
    Expired,
    Invalid(String),
    Deadline,
}

#[allow(clippy::too_many_lines)] // One loop with every exit in sight reads better than pieces.
async fn drive<S: PageSource, K: RunSink>(
    mut contract: Contract,
    mut meta: RunMeta,
    mut rec: Reconciler,
    source: &mut S,
    sink: &mut K,
    deadline_override: Option<u64>,
) -> Result<ScanResult, Error> {
    let deadline = deadline_override
        .or(contract.limits.deadline_seconds)
        .map(|s| Instant::now() + Duration::from_secs(s));
    let mut high_water_turns = 0u32;
    // Bound: every turn observes a page, stops the run, or counts a restart/high-water turn.
    let turns_max = u64::from(PAGES_PER_RUN_MAX) * u64::from(RESTARTS_MAX + 1)
        + u64::from(RESTARTS_MAX) * 2
        + 2;
    for _turn in 0..turns_max {
        let Some(request) = rec.next_request().cloned() else {
            break;
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            rec.stop_on_limit(Limit::Deadline);
            sink.checkpoint(meta.run_id, &mut rec, None)?;
            break;
        }
        let preq = PageRequest {
            request: request.clone(),
            page_size: contract.page_size,
            snapshot: rec.progress().pinned_snapshot.clone(),
            query: contract.scope.query.clone(),
        };
        match fetch_with_retries(&contract, source, &preq, deadline).await? {
            Fetched::Page(page) => {
                let before = rec.progress().pages_observed;
                let step = rec.observe(&page);
                let log = PageLog {
                    page_idx: rec.progress().pages_observed,
                    cursor_hash: digest::cursor_hash(page.next.as_deref()),
                    n_items: u32::try_from(page.items.len()).unwrap_or(u32::MAX),
                    size_bytes: page.size_bytes,
                    at_ms: now_ms(),
                };
                // A page rejected before ingest (R5, R6, R7, R16) is not in the page log.
                let observed = log.page_idx > before;
                sink.checkpoint(meta.run_id, &mut rec, observed.then_some(&log))?;
                if step == Step::Restart {
                    match restart(&mut contract, &mut meta, &mut rec, sink)? {
                        true => continue,
                        false => break,
                    }
                }
            }
            Fetched::Failed(kind, detail) => {
                rec.fetch_failed(kind, detail);
                sink.checkpoint(meta.run_id, &mut rec, None)?;
            }
            Fetched::Invalid(detail) => {
                rec.page_invalid(detail);
                sink.checkpoint(meta.run_id, &mut rec, None)?;
            }
            Fetched::Deadline => {
                rec.stop_on_limit(Limit::Deadline);
                sink.checkpoint(meta.run_id, &mut rec, None)?;
            }
            Fetched::Expired => match contract.on_expired_cursor {
                ExpiredPolicy::Block => {
                    rec.fetch_failed(
                        FetchFailure::ExpiredCursor,
                        format!("{} expired; the policy is block", request.describe()),
                    );
                    sink.checkpoint(meta.run_id, &mut rec, None)?;
                }
                ExpiredPolicy::HighWater => {
                    high_water_turns += 1;
                    let switched = if high_water_turns <= RESTARTS_MAX {
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
                    sink.checkpoint(meta.run_id, &mut rec, None)?;
                }
                ExpiredPolicy::Restart => {
                    rec.fetch_failed(
                        FetchFailure::ExpiredCursor,
                        format!(
                            "{} expired; restarting under a fresh snapshot",
                            request.describe()
                        ),
                    );
                    sink.checkpoint(meta.run_id, &mut rec, None)?;
                    if !restart(&mut contract, &mut meta, &mut rec, sink)? {
                        break;
                    }
                }
            },
        }
    }
    finish(contract, meta, rec, sink)
}

/// Ends the current run as superseded and begins a new one under a fresh snapshot.
/// Returns false when the restart budget is spent (the current run stays as it is).
fn restart<K: RunSink>(
    contract: &mut Contract,
    meta: &mut RunMeta,
    rec: &mut Reconciler,
    sink: &mut K,
) -> Result<bool, Error> {
    if meta.restarts >= RESTARTS_MAX {
        return Ok(false);
    }
    let old = meta.run_id;
    let at = now_ms();
    sink.finish(old, rec, at)?;
    // The new run pins to whatever snapshot the source serves now; never spliced with the old.
    contract.snapshot_id = None;
    *rec = Reconciler::new(contract);
    let new = sink.begin(contract, Some(old), at, rec)?;
    sink.supersede(old, new)?;
    *meta = RunMeta {
        run_id: new,
        restarts: meta.restarts + 1,
        started_at: rfc3339(at),
        finished_at: None,
        restarted_from: Some(old),
        superseded_by: None,
        server_count: None,
    };
    Ok(true)
}

async fn fetch_with_retries<S: PageSource>(
    contract: &Contract,
    source: &mut S,
    req: &PageRequest,
    deadline: Option<Instant>,
) -> Result<Fetched, Error> {
    let page_timeout = Duration::from_millis(contract.limits.page_timeout_ms());
    let attempts = contract.limits.retries().saturating_add(1);
    let mut last = FetchFailure::Timeout;
    let mut throttle = None;
    for attempt in 0..attempts {
        let mut timeout = page_timeout;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Fetched::Deadline);
            }
            timeout = timeout.min(left);
        }
        match tokio::time::timeout(timeout, source.fetch(req)).await {
            Ok(Ok(page)) => return Ok(Fetched::Page(page)),
            Ok(Err(FetchError::Fatal(e))) => return Err(Error::Source(e)),
            Ok(Err(FetchError::Forbidden)) => {
                return Ok(Fetched::Failed(
                    FetchFailure::Forbidden,
                    format!("access denied on {}", req.request.describe()),
                ))
            }
            Ok(Err(FetchError::ExpiredCursor)) => return Ok(Fetched::Expired),
            Ok(Err(FetchError::InvalidPage { detail })) => return Ok(Fetched::Invalid(detail)),
            Ok(Err(FetchError::ServerError)) => last = FetchFailure::ServerError,
            Ok(Err(FetchError::Throttled { retry_after })) => {
                last = FetchFailure::ServerError;
                throttle = Some(retry_after);
            }
            Ok(Err(FetchError::Timeout)) | Err(_) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Fetched::Deadline);
                }
                last = FetchFailure::Timeout;
            }
        }
        if attempt + 1 < attempts {
            let mut backoff = BACKOFF_BASE
                .saturating_mul(1u32 << attempt.min(16))
                .min(BACKOFF_MAX);
            if let Some(asked) = throttle.take() {
                backoff = backoff.max(asked);
            }
            // The wait never runs past the deadline.
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if backoff >= left {
                    tokio::time::sleep(left).await;
                    return Ok(Fetched::Deadline);
                }
            }
            tokio::time::sleep(backoff).await;
        }
    }
    let what = match last {
        FetchFailure::ServerError => "a server error",
        _ => "a timeout",
    };
    Ok(Fetched::Failed(
        last,
        format!(
            "{} failed with {what} after {attempts} attempt(s)",
            req.request.describe()
        ),
    ))
}

/// A complete inventory: returned only for a verified run.
#[derive(Debug)]
pub struct Inventory {
    /// The receipt (status `verified`).
    pub receipt: Receipt,
    /// Every unique ID of the collection.
    pub ids: IdSet,
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
        if let Some(e) = &self.error {
            write!(f, ": {e}")?;
        }
        for v in &self.reasons {
            write!(f, "; {} on page {}", v.kind.as_str(), v.page)?;
        }
        Ok(())
    }
}

impl std::error::Error for IncompleteRead {}

/// The all-or-fail read of the seeds: an `Inventory` only when the run is verified.
///
/// ```
/// use scanledger::{collect, Contract, SimConfig, SimSource};
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let mut ok = SimSource::new(SimConfig { records: 10, ..SimConfig::default() });
/// assert!(rt.block_on(collect::collect(&Contract::new("s"), &mut ok)).is_ok());
/// let mut broken = SimSource::new(SimConfig { records: 500, fail_at: Some(2), ..SimConfig::default() });
/// let err = rt.block_on(collect::collect(&Contract::new("s"), &mut broken)).unwrap_err();
/// assert_eq!(err.reasons[0].kind.as_str(), "page_failed");
/// ```
///
/// # Errors
/// `IncompleteRead` for every outcome but `verified`.
pub async fn collect<S: PageSource>(
    contract: &Contract,
    source: &mut S,
) -> Result<Inventory, IncompleteRead> {
    match scan(contract, source, &mut MemorySink::default()).await {
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
