//! The vocabulary of reconciliation: statuses, violation kinds, limits, requests, steps, and
//! what one observed page changed (`Delta`). Pure data.

use serde::{Deserialize, Serialize};

use crate::digest::{self, Hash};

/// The coverage status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// A collection-wide claim is allowed.
    Verified,
    /// Coverage could not be established.
    Unknown,
    /// The enumeration is shown to be defective.
    Failed,
}

impl Status {
    /// The name receipts use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Verified => "verified",
            Status::Unknown => "unknown",
            Status::Failed => "failed",
        }
    }
}

/// What a receipt may conclude about the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConclusionScope {
    /// Every record of the pinned snapshot was read exactly once.
    AllRecordsInSnapshot,
    /// Every record of the live collection was read, with no snapshot pinning the pages (or
    /// a continuation served from another snapshot): a weaker claim.
    AllRecordsLive,
    /// Nothing may be concluded about the whole collection.
    None,
}

impl ConclusionScope {
    /// The name receipts use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ConclusionScope::AllRecordsInSnapshot => "all_records_in_snapshot",
            ConclusionScope::AllRecordsLive => "all_records_live",
            ConclusionScope::None => "none",
        }
    }
}

/// The kinds of violation of docs/REFERENCE.md §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// R3.
    RepeatedCursor,
    /// R4.
    DuplicateId,
    /// R5.
    SnapshotChanged,
    /// R6.
    QueryChanged,
    /// R7.
    ContradictoryCompletion,
    /// R8.
    MissingCompletionEvidence,
    /// R9.
    TruncatedPage,
    /// R10.
    CountMismatch,
    /// R11.
    PartitionMismatch,
    /// R12.
    LimitReached,
    /// R13.
    PageFailed,
    /// R14.
    AccessDenied,
    /// R15.
    ExpiredCursor,
    /// R16.
    InvalidPage,
    /// Merge: a shard of the plan has no finished run among the shard stores.
    ShardMissing,
    /// Merge: a shard has more than one attempt among the shard stores.
    ShardConflict,
    /// Merge: a run of the shard stores is of another plan, contract, snapshot or key range.
    ShardMismatch,
}

impl ViolationKind {
    /// The status the violation forces.
    #[must_use]
    pub fn status(self) -> Status {
        use ViolationKind as K;
        match self {
            K::RepeatedCursor
            | K::DuplicateId
            | K::SnapshotChanged
            | K::QueryChanged
            | K::ContradictoryCompletion
            | K::CountMismatch
            | K::PartitionMismatch
            | K::InvalidPage
            | K::ShardConflict
            | K::ShardMismatch => Status::Failed,
            K::MissingCompletionEvidence
            | K::TruncatedPage
            | K::LimitReached
            | K::PageFailed
            | K::AccessDenied
            | K::ExpiredCursor
            | K::ShardMissing => Status::Unknown,
        }
    }

    /// Whether the stop is transient: resuming the run may still reach the end.
    #[must_use]
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ViolationKind::LimitReached
                | ViolationKind::PageFailed
                | ViolationKind::AccessDenied
                | ViolationKind::ExpiredCursor
        )
    }

    /// The snake-case name receipts use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        use ViolationKind as K;
        match self {
            K::RepeatedCursor => "repeated_cursor",
            K::DuplicateId => "duplicate_id",
            K::SnapshotChanged => "snapshot_changed",
            K::QueryChanged => "query_changed",
            K::ContradictoryCompletion => "contradictory_completion",
            K::MissingCompletionEvidence => "missing_completion_evidence",
            K::TruncatedPage => "truncated_page",
            K::CountMismatch => "count_mismatch",
            K::PartitionMismatch => "partition_mismatch",
            K::LimitReached => "limit_reached",
            K::PageFailed => "page_failed",
            K::AccessDenied => "access_denied",
            K::ExpiredCursor => "expired_cursor",
            K::InvalidPage => "invalid_page",
            K::ShardMissing => "shard_missing",
            K::ShardConflict => "shard_conflict",
            K::ShardMismatch => "shard_mismatch",
        }
    }
}

/// One finding: what, on which page (1-based; 0 for the run as a whole), and the particulars.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Violation {
    /// What rule fired.
    pub kind: ViolationKind,
    /// The page it fired on (1-based), or the last page for end-of-run checks.
    pub page: u32,
    /// Particulars; never a raw cursor.
    pub detail: String,
}

/// A budget that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Limit {
    /// `max_pages`.
    MaxPages,
    /// `max_records`.
    MaxRecords,
    /// `max_bytes`.
    MaxBytes,
    /// `deadline_seconds`.
    Deadline,
    /// The sample size of `sample N` mode.
    Sample,
    /// The operator stopped the scan (Ctrl-C): it stopped at a page boundary, resumable.
    Interrupted,
}

impl Limit {
    /// The name receipts use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxPages => "max_pages",
            Limit::MaxRecords => "max_records",
            Limit::MaxBytes => "max_bytes",
            Limit::Deadline => "deadline",
            Limit::Sample => "sample",
            Limit::Interrupted => "interrupted",
        }
    }
}

/// What to ask the source for next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The first page (no cursor).
    First,
    /// The page a cursor points to.
    Cursor(String),
    /// A fresh request for what follows an ordering key (the `high_water` policy).
    After(String),
}

impl Request {
    /// The cursor, if the request has one.
    #[must_use]
    pub fn cursor(&self) -> Option<&str> {
        match self {
            Request::Cursor(c) => Some(c),
            _ => None,
        }
    }

    /// A description safe for logs and errors: cursors appear only as fingerprints.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Request::First => digest::cursor_fingerprint(None),
            Request::Cursor(c) => digest::cursor_fingerprint(Some(c)),
            Request::After(k) => format!("the page after key {k}"),
        }
    }
}

/// How a page request ended when it produced no page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FetchFailure {
    /// Timed out (per page or against the deadline) on every attempt.
    Timeout,
    /// The source answered with a server error on every attempt.
    ServerError,
    /// The source refused access.
    Forbidden,
    /// The source said the cursor expired and the policy is `block`.
    ExpiredCursor,
}

/// The result of observing a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Request this next.
    Continue(Request),
    /// The snapshot changed and the policy says restart: begin a new run.
    Restart,
    /// The run is finished; read its status.
    Done,
}

/// One page's entry in the page log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageLog {
    /// 1-based page index within the run.
    pub page_idx: u32,
    /// `digest::cursor_hash` of the page's `next` cursor.
    pub cursor_hash: Hash,
    /// Items on the page.
    pub n_items: u32,
    /// Bytes of the response.
    pub size_bytes: u64,
    /// When it was observed, ms since the epoch; the core reads no clock, so it leaves 0 and
    /// the collector stamps it.
    pub at_ms: u64,
}

/// What one observed page changed, for the store to persist: the reconciler returns it and
/// keeps no record of what was persisted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// The page's log entry, when the page was ingested (a page refused before ingest by R5,
    /// R6, R7 or R16 is not in the page log).
    pub page: Option<PageLog>,
    /// Partitions of the ID set the page changed, ascending.
    pub partitions: Vec<u64>,
    /// (label index, partition) pairs the page changed, ascending.
    pub label_partitions: Vec<(u32, u64)>,
    /// Strings the `string` codec interned for the page, with the IDs it gave them, ascending.
    pub interned: Vec<(u64, String)>,
    /// Content leaves whose accumulator the page changed, ascending.
    pub content_leaves: Vec<u64>,
    /// The page's IDs as stored (encoded), ascending, without repeats: what a journal needs
    /// to redo the page without copying whole partitions.
    pub ids: Vec<u64>,
    /// (label index, ID) pairs the page added, in page order.
    pub label_ids: Vec<(u32, u64)>,
}

impl Delta {
    /// Whether the page changed nothing that is stored apart from the run's progress.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.page.is_none()
            && self.partitions.is_empty()
            && self.label_partitions.is_empty()
            && self.interned.is_empty()
            && self.content_leaves.is_empty()
            && self.ids.is_empty()
            && self.label_ids.is_empty()
    }
}

/// The result of observing a page: what to do next, and what the page changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "the step says whether the run goes on, the delta what to persist"]
pub struct Observation {
    /// What to do next.
    pub step: Step,
    /// What the page changed.
    pub delta: Delta,
}
