//! The answers about a store's runs and a run's receipt: `runs` (`RunsReport`), `verify`
//! (`VerifyReport`) and `page` (`PageReport`), as every face gives them.
//!
//! Reads through one `Snapshot`; `verify_report` recomputes every field of a receipt from the
//! store (`verify_receipt`) and says both whether the receipt matches its store and what status
//! it claims: a receipt can match its store and still be no inventory's.

use std::path::Path;

use serde::Serialize;

use super::verify::Mismatch;
use crate::receipt::{Receipt, RunId};
use crate::reconcile::Status;
use crate::store::{ReadError, RunState, RunSummary, Snapshot, StopCause};

/// A run as a user names it, on the command line or in a tool's arguments: `run-N`, `N`
/// (exactly as run IDs are written: no sign, no leading zero), or `latest`, the newest run of
/// the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRef {
    /// A run by its ID.
    Id(RunId),
    /// The newest run.
    Latest,
}

/// Text that names no run and no filter of runs: what a user typed, in the words every face
/// says it with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunTextError {
    /// Not `run-N`, `N` or `latest`.
    #[error("{0:?} is not a run (run-N, N or latest)")]
    NotARun(String),
    /// Not a status or a state (`RunFilter::NAMES`).
    #[error("{0:?} is not a status or a state ({names})", names = RunFilter::NAMES.join(", "))]
    NotAFilter(String),
}

impl std::str::FromStr for RunRef {
    type Err = RunTextError;
    fn from_str(s: &str) -> Result<RunRef, RunTextError> {
        if s == "latest" {
            return Ok(RunRef::Latest);
        }
        match s.parse::<RunId>() {
            Ok(run) if run.to_string() == s || run.0.to_string() == s => Ok(RunRef::Id(run)),
            _ => Err(RunTextError::NotARun(s.to_owned())),
        }
    }
}

/// Why a `RunRef` names no run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunRefError {
    /// `latest` in a store without runs.
    #[error("`latest` names the newest run, and the store has no run yet")]
    NoRun,
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl RunRef {
    /// The run this names in the store `snap` reads.
    ///
    /// # Errors
    /// `NoRun` for `latest` in an empty store; `Read`.
    pub fn resolve(self, snap: &Snapshot<'_>) -> Result<RunId, RunRefError> {
        match self {
            RunRef::Id(run) => Ok(run),
            RunRef::Latest => snap.latest()?.ok_or(RunRefError::NoRun),
        }
    }
}

/// One run as `runs` lists it (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunRow {
    /// The run, `run-N`.
    pub run_id: String,
    /// Its scope's source.
    pub source: String,
    /// Its scope's tenant.
    pub tenant: Option<String>,
    /// `running`, `interrupted`, `finished` or `superseded`.
    pub state: RunState,
    /// Its coverage status.
    pub coverage_status: Status,
    /// Pages observed.
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339; null while it runs.
    pub finished_at: Option<String>,
    /// The MCP server an `mcp:` run spoke to, as it introduced itself (`NAME VERSION`); null
    /// for every other source.
    pub mcp_server: Option<String>,
    /// The error that stopped the run, while it is what left the run `interrupted`
    /// (`{message, pages_observed, at}`); null otherwise.
    pub stopped_by: Option<StopCause>,
}

/// The MCP server a recorded source spec spoke to (`NAME VERSION`), for an MCP run.
#[must_use]
pub fn mcp_server_of(spec: &str) -> Option<&str> {
    spec.rsplit_once(crate::source::PROVENANCE_MARK)
        .map(|(_, server)| server)
}

impl RunRow {
    fn of(r: &RunSummary, snap: &Snapshot<'_>) -> RunRow {
        RunRow {
            run_id: r.run_id.to_string(),
            source: r.source.clone(),
            tenant: r.tenant.clone(),
            state: r.state,
            coverage_status: r.coverage_status,
            pages_observed: r.pages_observed,
            unique_ids_observed: r.unique_ids_observed,
            started_at: r.started_at.clone(),
            finished_at: r.finished_at.clone(),
            mcp_server: snap
                .header(r.run_id)
                .ok()
                .and_then(|h| h.source_spec)
                .and_then(|spec| mcp_server_of(&spec).map(str::to_owned)),
            stopped_by: r.stopped_by.clone(),
        }
    }
}

/// The answer of `receipt RUN`: the run's receipt and what the store says about the run
/// beside it (docs/REFERENCE.md §8). The receipt is the run's evidence and keeps its format;
/// the rest is how the run stands now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ReceiptReport {
    /// The receipt, as the store recomputes it.
    pub receipt: Receipt,
    /// The run's state.
    pub state: RunState,
    /// The MCP server an `mcp:` run spoke to (`NAME VERSION`).
    pub mcp_server: Option<String>,
    /// The error that stopped the run, while it is what left the run `interrupted`.
    pub stopped_by: Option<StopCause>,
}

/// The receipt of `run` in the store `snap` reads, with the run's state, its MCP server and
/// the error that stopped it.
///
/// # Errors
/// `UnknownRun`, or `ReadError` when unreadable or damaged.
pub fn receipt_report(snap: &Snapshot<'_>, run: RunId) -> Result<ReceiptReport, ReadError> {
    let receipt = snap.receipt(run)?;
    let header = snap.header(run)?;
    Ok(ReceiptReport {
        receipt,
        state: header.state,
        mcp_server: header
            .source_spec
            .as_deref()
            .and_then(mcp_server_of)
            .map(str::to_owned),
        stopped_by: header.stopped_by,
    })
}

/// What `runs --status` selects: a coverage status or a lifecycle state, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFilter {
    /// Runs with this coverage status.
    Status(Status),
    /// Runs in this lifecycle state.
    State(RunState),
}

impl RunFilter {
    /// Every filter's name: the statuses, then the states.
    pub const NAMES: [&'static str; 7] = [
        "verified",
        "unknown",
        "failed",
        "running",
        "interrupted",
        "finished",
        "superseded",
    ];
}

impl std::str::FromStr for RunFilter {
    type Err = RunTextError;
    fn from_str(s: &str) -> Result<RunFilter, RunTextError> {
        let states = [
            RunState::Running,
            RunState::Interrupted,
            RunState::Finished,
            RunState::Superseded,
        ];
        let statuses = [Status::Verified, Status::Unknown, Status::Failed];
        (statuses
            .into_iter()
            .find(|x| x.as_str() == s)
            .map(RunFilter::Status))
        .or_else(|| {
            states
                .into_iter()
                .find(|x| x.as_str() == s)
                .map(RunFilter::State)
        })
        .ok_or_else(|| RunTextError::NotAFilter(s.to_owned()))
    }
}

/// Which runs `runs` lists.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunsQuery {
    /// Only runs with this status or in this state.
    pub filter: Option<RunFilter>,
    /// Only runs of this source.
    pub source: Option<String>,
    /// At most this many (the newest).
    pub limit: Option<usize>,
}

/// The answer of `runs`: the runs of a store, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunsReport {
    /// The runs selected.
    pub runs: Vec<RunRow>,
    /// Runs in the store, whatever the query selected.
    #[serde(skip)]
    pub store_total: usize,
}

/// The runs of the store `snap` reads that `query` selects, newest first.
///
/// # Errors
/// `ReadError` when the store is unreadable or damaged.
pub fn runs_report(snap: &Snapshot<'_>, query: &RunsQuery) -> Result<RunsReport, ReadError> {
    let all = snap.runs()?;
    let runs = all
        .iter()
        .filter(|r| match query.filter {
            Some(RunFilter::Status(s)) => r.coverage_status == s,
            Some(RunFilter::State(s)) => r.state == s,
            None => true,
        })
        .filter(|r| query.source.as_deref().is_none_or(|s| r.source == s))
        .take(query.limit.unwrap_or(usize::MAX))
        .map(|r| RunRow::of(r, snap))
        .collect();
    Ok(RunsReport {
        runs,
        store_total: all.len(),
    })
}

/// The answer of `verify RECEIPT`: whether every field of the receipt recomputes from the
/// store, and what the receipt claims (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The receipt's run, as the receipt names it.
    pub run_id: String,
    /// The store it was checked against.
    pub store: String,
    /// Every field of the receipt recomputes from the store.
    pub matches: bool,
    /// The status the receipt claims (and, when it matches, the store's evidence gives).
    pub coverage_status: Status,
    /// The receipt matches and its run is verified: the one case a collection-wide claim holds.
    pub verified: bool,
    /// The first mismatch, in receipt field order.
    pub first_mismatch: Option<Mismatch>,
    /// Every mismatch.
    pub mismatches: Vec<Mismatch>,
}

impl VerifyReport {
    /// The status the answer stands for: `failed` for a receipt that does not match, else the
    /// receipt's own.
    #[must_use]
    pub fn status(&self) -> Status {
        if self.matches {
            self.coverage_status
        } else {
            Status::Failed
        }
    }
}

/// Verifies `receipt` against the store `snap` reads (at `store`).
///
/// # Errors
/// `ReadError` when the store or the run's records are unreadable or damaged.
pub fn verify_report(
    snap: &Snapshot<'_>,
    store: &Path,
    receipt: &Receipt,
) -> Result<VerifyReport, ReadError> {
    let mismatches = super::verify_receipt(snap, receipt)?;
    let matches = mismatches.is_empty();
    Ok(VerifyReport {
        run_id: receipt.run_id.clone(),
        store: store.display().to_string(),
        matches,
        coverage_status: receipt.coverage_status,
        verified: matches && receipt.coverage_status == Status::Verified,
        first_mismatch: mismatches.first().cloned(),
        mismatches,
    })
}

/// The answer of `page RUN`: one page of a recorded run's IDs (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PageReport {
    /// The run, `run-N`.
    pub run_id: String,
    /// Its coverage status: a page of a run that is not verified is no inventory's page.
    pub coverage_status: Status,
    /// The IDs in their original form (numbers for the `int` codec, strings otherwise).
    pub ids: Vec<serde_json::Value>,
    /// The token of the next page; null after the last.
    pub next_token: Option<String>,
}

/// The page of `run` that `token` points to, as `page` answers it (see `page_of_run`).
///
/// # Errors
/// As `page_of_run`.
pub fn page_report(
    snap: &Snapshot<'_>,
    run: RunId,
    token: Option<&str>,
    size: u32,
    ttl_seconds: u64,
    now_ms: u64,
) -> Result<PageReport, super::PageRunError> {
    let page = super::page_of_run(snap, run, token, size, ttl_seconds, now_ms)?;
    Ok(PageReport {
        run_id: page.run.to_string(),
        coverage_status: page.coverage_status,
        ids: page.ids,
        next_token: page.next_token,
    })
}
