//! The reconciliation core: observes pages and decides what to request next or why a run stopped.
//!
//! `Reconciler` is a pure state machine. It does no IO, reads no clock, takes no lock and never
//! awaits: the collector feeds it pages and failures, the store persists its `Progress` and
//! bitmaps, the receipt reads it. It applies the rules R1-R16 of SPEC §2 exactly; findings are
//! `Violation`s (data), never errors.
//!
//! Invariants (checked by `check_invariants`):
//! - `unique_ids_observed == ids.len()` and `records_observed == unique + duplicate_ids`;
//! - a finished run has no pending request unless it stopped on a transient cause (a limit, a
//!   failed page), in which case the request is kept so the run can be resumed;
//! - `verified` only after a terminal page with the contract's end signal and no violation.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codec::IdCodec;
use crate::contract::{
    Contract, EndSignal, Mode, Page, SnapshotPolicy, CURSOR_LEN_MAX, ITEMS_PER_PAGE_MAX,
    LABELS_PER_ITEM_MAX, LABELS_PER_RUN_MAX, LABEL_LEN_MAX, PAGES_PER_RUN_MAX, PAGE_SIZE_BYTES_MAX,
    VIOLATIONS_KEPT_MAX,
};
use crate::digest::{self, Hash};
use crate::idset::IdSet;

#[cfg(test)]
mod tests;

/// IDs named in one violation's detail before it says "and N more".
const DETAIL_IDS_MAX: usize = 5;

/// The coverage status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

    /// The process exit code of SPEC §8.
    #[must_use]
    pub fn exit_code(self) -> i32 {
        match self {
            Status::Verified => 0,
            Status::Unknown => 3,
            Status::Failed => 4,
        }
    }
}

/// The kinds of violation of SPEC §2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
            | K::InvalidPage => Status::Failed,
            K::MissingCompletionEvidence
            | K::TruncatedPage
            | K::LimitReached
            | K::PageFailed
            | K::AccessDenied
            | K::ExpiredCursor => Status::Unknown,
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
        }
    }
}

/// One finding: what, on which page (1-based; 0 for the run as a whole), and the particulars.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// What a run knows about itself apart from its ID sets: small, persisted on every checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Pages observed.
    pub pages_observed: u32,
    /// Items returned, duplicates included.
    pub records_observed: u64,
    /// Bytes of page responses.
    pub bytes_observed: u64,
    /// Items whose ID had been seen before in this run.
    pub duplicate_ids: u64,
    /// The cursor chain digest so far.
    pub chain: Hash,
    /// What to request next, if anything.
    pub next: Option<Request>,
    /// The snapshot the run is pinned to.
    pub pinned_snapshot: Option<String>,
    /// A terminal page with the end signal was observed.
    pub terminal_observed: bool,
    /// The run is finished (until a resume reopens it).
    pub finished: bool,
    /// The `high_water` policy continued the run with a fresh request.
    pub high_water_used: bool,
    /// After a `high_water` continuation, the source echoed the pinned snapshot again.
    pub high_water_pinned: bool,
    /// After a `high_water` continuation, the source echoed another snapshot.
    pub high_water_unpinned: bool,
    /// Findings, the first `VIOLATIONS_KEPT_MAX`.
    pub violations: Vec<Violation>,
    /// Findings past the kept ones.
    pub violations_dropped: u64,
    /// The worst status the dropped findings force.
    pub violations_dropped_worst: Option<Status>,
    /// Budgets that stopped the run.
    pub limits_hit: Vec<Limit>,
    /// Label names, in order of first appearance; label `i` is bitmap `i`.
    pub label_names: Vec<String>,
    /// The last ID of the last page, for `high_water`.
    pub last_key: Option<u64>,
    /// The prefix of the `prefixed` codec, once learned.
    pub id_prefix: Option<String>,
    /// The last total the source echoed (a count of the scope), if any.
    pub echoed_total: Option<u64>,
}

/// The settings of the reconciler, taken from the contract.
#[derive(Debug, Clone)]
struct Settings {
    end_signal: EndSignal,
    expected_count: Option<u64>,
    expected_partitions: Option<Vec<(u64, u64)>>,
    max_pages: u32,
    max_records: Option<u64>,
    max_bytes: Option<u64>,
    mode: Mode,
    on_snapshot_change: SnapshotPolicy,
    query: Value,
}

/// The pure reconciliation state machine of one run.
#[derive(Debug, Clone)]
pub struct Reconciler {
    settings: Settings,
    query_digest: String,
    codec: IdCodec,
    ids: IdSet,
    labels: Vec<IdSet>,
    seen_cursors: HashSet<Hash>,
    progress: Progress,
    touched: Vec<u64>,
    touched_labels: Vec<(u32, u64)>,
    scratch_ids: Vec<u64>,
    scratch_dups: Vec<u64>,
}

impl Reconciler {
    /// A fresh run of `contract`.
    ///
    /// ```
    /// use scanledger::{Contract, Item, Page, Reconciler, Step, Status};
    /// let mut r = Reconciler::new(&Contract::new("s"));
    /// let page = Page { items: vec![Item::int(1), Item::int(2)], ..Page::default() };
    /// assert_eq!(r.observe(&page), Step::Done);
    /// assert_eq!(r.status(), Status::Verified);
    /// ```
    #[must_use]
    pub fn new(contract: &Contract) -> Reconciler {
        let query_digest = digest::query_digest(&contract.scope);
        let chain = digest::chain_start(&query_digest, contract.snapshot_id.as_deref());
        Reconciler {
            settings: Settings {
                end_signal: contract.end_signal,
                expected_count: contract.expected_count,
                expected_partitions: contract.expected_partitions.clone(),
                max_pages: contract.limits.max_pages(),
                max_records: contract.limits.max_records,
                max_bytes: contract.limits.max_bytes,
                mode: contract.mode,
                on_snapshot_change: contract.on_snapshot_change,
                query: contract.scope.query.clone(),
            },
            query_digest,
            codec: IdCodec::new(contract.id_codec, contract.id_prefix.clone()),
            ids: IdSet::new(),
            labels: Vec::new(),
            seen_cursors: HashSet::new(),
            progress: Progress {
                pages_observed: 0,
                records_observed: 0,
                bytes_observed: 0,
                duplicate_ids: 0,
                chain,
                next: Some(Request::First),
                pinned_snapshot: contract.snapshot_id.clone(),
                terminal_observed: false,
                finished: false,
                high_water_used: false,
                high_water_pinned: false,
                high_water_unpinned: false,
                violations: Vec::new(),
                violations_dropped: 0,
                violations_dropped_worst: None,
                limits_hit: Vec::new(),
                label_names: Vec::new(),
                last_key: None,
                id_prefix: contract.id_prefix.clone(),
                echoed_total: None,
            },
            touched: Vec::new(),
            touched_labels: Vec::new(),
            scratch_ids: Vec::new(),
            scratch_dups: Vec::new(),
        }
    }

    /// Rebuilds a run from what the store kept: progress, ID sets, label sets, the cursor
    /// hashes of its page log (for loop detection) and the codec with its interner.
    ///
    /// # Panics
    /// If the label sets do not match the label names: the store checks this when decoding.
    #[must_use]
    pub fn restore(
        contract: &Contract,
        progress: Progress,
        ids: IdSet,
        labels: Vec<IdSet>,
        cursor_hashes: impl IntoIterator<Item = Hash>,
        mut codec: IdCodec,
    ) -> Reconciler {
        assert_eq!(
            labels.len(),
            progress.label_names.len(),
            "label sets and names differ"
        );
        let mut r = Reconciler::new(contract);
        codec.set_prefix(progress.id_prefix.clone());
        r.codec = codec;
        r.ids = ids;
        r.labels = labels;
        let none = digest::cursor_hash(None);
        r.seen_cursors = cursor_hashes.into_iter().filter(|h| *h != none).collect();
        r.progress = progress;
        r
    }

    /// Reopens a run that stopped on a transient cause (a limit, a failed page, a sample),
    /// dropping those findings so it can go on to the end. Returns false, changing nothing,
    /// when the run cannot go on: it has a lasting finding or nothing left to request.
    pub fn reopen(&mut self) -> bool {
        let p = &mut self.progress;
        if p.next.is_none() || p.terminal_observed {
            return false;
        }
        // A failure is final. A truncation warning (R9) stays in the run and keeps it
        // `unknown`, but does not stop the traversal, so the run may still go on.
        if p.violations
            .iter()
            .any(|v| v.kind.status() == Status::Failed)
            || p.violations_dropped_worst == Some(Status::Failed)
        {
            return false;
        }
        p.violations.retain(|v| !v.kind.is_transient());
        p.limits_hit.clear();
        p.finished = false;
        true
    }

    /// Raises the budgets of a reopened run (`resume --max-pages ...`).
    pub fn raise_limits(
        &mut self,
        max_pages: Option<u32>,
        max_records: Option<u64>,
        max_bytes: Option<u64>,
    ) {
        if let Some(n) = max_pages {
            self.settings.max_pages = n.min(PAGES_PER_RUN_MAX);
        }
        if max_records.is_some() {
            self.settings.max_records = max_records;
        }
        if max_bytes.is_some() {
            self.settings.max_bytes = max_bytes;
        }
        if matches!(self.settings.mode, Mode::Sample(_)) {
            // A resumed sample continues as a full scan (SPEC §4).
            self.settings.mode = Mode::All;
        }
    }

    /// Observes one page and says what to do next.
    ///
    /// # Panics
    /// If the run is already finished: feeding a finished run is a bug of the caller.
    pub fn observe(&mut self, page: &Page) -> Step {
        assert!(!self.progress.finished, "observe on a finished run");
        let page_idx = self.progress.pages_observed.saturating_add(1);

        if let Some(detail) = self.page_bounds(page, page_idx) {
            return self.stop(ViolationKind::InvalidPage, page_idx, detail);
        }
        if let Some(echoed) = &page.snapshot {
            match &self.progress.pinned_snapshot {
                // The first page pins the run; a snapshot first echoed on a later page does
                // not, since the pages before it were not served from it: the run stays live.
                None if page_idx == 1 => self.progress.pinned_snapshot = Some(echoed.clone()),
                None => {}
                Some(pinned) if pinned == echoed => {
                    let p = &mut self.progress;
                    p.high_water_pinned |= p.high_water_used && !p.high_water_unpinned;
                }
                Some(_) if self.progress.high_water_used => {
                    // A fresh request after an expired cursor may be served from a newer
                    // collection state: not a defect (R5), but the claim drops to the live
                    // collection (SPEC §5).
                    self.progress.high_water_pinned = false;
                    self.progress.high_water_unpinned = true;
                }
                Some(_) => {
                    let detail = "the echoed snapshot differs from the pinned one".to_owned();
                    if self.settings.on_snapshot_change == SnapshotPolicy::Restart {
                        self.record(ViolationKind::SnapshotChanged, page_idx, detail);
                        self.progress.finished = true;
                        self.progress.next = None;
                        return Step::Restart;
                    }
                    return self.stop(ViolationKind::SnapshotChanged, page_idx, detail);
                }
            }
        }
        if let Some(echoed) = &page.query {
            if !same_query(&self.settings.query, echoed) {
                return self.stop(
                    ViolationKind::QueryChanged,
                    page_idx,
                    format!(
                        "the page echoes query {}, the contract's digest is {}",
                        digest::display(&digest::sha256(digest::canonical_json(echoed).as_bytes())),
                        self.query_digest
                    ),
                );
            }
        }
        match (page.complete, page.next.is_some()) {
            (Some(true), true) => {
                return self.stop(
                    ViolationKind::ContradictoryCompletion,
                    page_idx,
                    "complete: true together with a next cursor".to_owned(),
                )
            }
            (Some(false), false) => {
                return self.stop(
                    ViolationKind::ContradictoryCompletion,
                    page_idx,
                    "complete: false with no cursor to continue from".to_owned(),
                )
            }
            _ => {}
        }

        // Decode every ID and label before touching the sets, so a bad page changes nothing.
        let mut ids = std::mem::take(&mut self.scratch_ids);
        ids.clear();
        let mut new_labels: Vec<&str> = Vec::new();
        for (i, item) in page.items.iter().enumerate() {
            match self.codec.encode(&item.id) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.scratch_ids = ids;
                    return self.stop(
                        ViolationKind::InvalidPage,
                        page_idx,
                        format!("item {i}: {e}"),
                    );
                }
            }
            if let Some(detail) = self.check_labels(&item.labels, i, &mut new_labels) {
                self.scratch_ids = ids;
                return self.stop(ViolationKind::InvalidPage, page_idx, detail);
            }
        }
        self.progress.id_prefix = self.codec.prefix().map(str::to_owned);

        let mut dups = std::mem::take(&mut self.scratch_dups);
        dups.clear();
        self.ids.insert_many(&ids, &mut dups, &mut self.touched);
        for (item, id) in page.items.iter().zip(&ids) {
            for name in &item.labels {
                self.add_label(name, *id);
            }
        }
        let n_items = ids.len() as u64;
        self.progress.pages_observed = page_idx;
        self.progress.records_observed += n_items;
        self.progress.bytes_observed = self.progress.bytes_observed.saturating_add(page.size_bytes);
        self.progress.duplicate_ids += dups.len() as u64;
        if let Some(last) = ids.last() {
            self.progress.last_key = Some(*last);
        }
        if page_idx == 1 {
            // The chain starts from the snapshot the run is pinned to, which the first page
            // may have just supplied, so that it recomputes from the receipt alone.
            self.progress.chain =
                digest::chain_start(&self.query_digest, self.progress.pinned_snapshot.as_deref());
        }
        let next_hash = digest::cursor_hash(page.next.as_deref());
        self.progress.chain = digest::chain_next(&self.progress.chain, &next_hash);
        if !dups.is_empty() {
            let detail = self.describe_ids("duplicate IDs", &dups);
            self.record(ViolationKind::DuplicateId, page_idx, detail);
        }
        self.scratch_ids = ids;
        self.scratch_dups = dups;

        if page.next.is_some() && !self.seen_cursors.insert(next_hash) {
            return self.stop(
                ViolationKind::RepeatedCursor,
                page_idx,
                format!(
                    "{} was returned before in this traversal",
                    digest::cursor_fingerprint(page.next.as_deref())
                ),
            );
        }
        if page.truncated {
            self.record(
                ViolationKind::TruncatedPage,
                page_idx,
                "the source warned that this page was truncated".to_owned(),
            );
        }

        if page.total.is_some() {
            self.progress.echoed_total = page.total;
        }
        let terminal = match self.settings.end_signal {
            EndSignal::CursorAbsent => page.next.is_none(),
            EndSignal::CompleteFlag => page.complete == Some(true),
            EndSignal::Both => page.next.is_none() && page.complete == Some(true),
            // Page-number and offset pagination: the position is the items observed so far.
            EndSignal::Total => page
                .total
                .is_some_and(|t| self.progress.records_observed >= t),
            EndSignal::EmptyPage => page.items.is_empty(),
        };
        if !terminal && page.next.is_none() {
            return self.stop(
                ViolationKind::MissingCompletionEvidence,
                page_idx,
                "the last page has no cursor and no complete: true, which the contract requires"
                    .to_owned(),
            );
        }
        if terminal {
            self.progress.terminal_observed = true;
            self.end_checks(page_idx);
            self.progress.finished = true;
            self.progress.next = None;
            return Step::Done;
        }
        let next = match &page.next {
            Some(c) => Request::Cursor(c.clone()),
            // Under `complete_flag` a page with no cursor and no flag was handled above.
            None => {
                return self.stop(
                    ViolationKind::MissingCompletionEvidence,
                    page_idx,
                    "no cursor to continue from".to_owned(),
                )
            }
        };
        self.progress.next = Some(next.clone());
        if let Some(limit) = self.budget_exhausted() {
            self.stop_on_limit(limit);
            return Step::Done;
        }
        Step::Continue(next)
    }

    /// Records that the next page could not be fetched; the run stops, keeping its request.
    pub fn fetch_failed(&mut self, failure: FetchFailure, detail: String) {
        if self.progress.finished {
            return;
        }
        let page_idx = self.progress.pages_observed.saturating_add(1);
        let kind = match failure {
            FetchFailure::Timeout | FetchFailure::ServerError => ViolationKind::PageFailed,
            FetchFailure::Forbidden => ViolationKind::AccessDenied,
            FetchFailure::ExpiredCursor => ViolationKind::ExpiredCursor,
        };
        self.record(kind, page_idx, detail);
        self.progress.finished = true;
    }

    /// Records that the source's response to the next request is not a readable page (R16):
    /// the run fails and keeps no request.
    pub fn page_invalid(&mut self, detail: String) {
        if self.progress.finished {
            return;
        }
        let page_idx = self.progress.pages_observed.saturating_add(1);
        self.stop(ViolationKind::InvalidPage, page_idx, detail);
    }

    /// Stops the run because a budget ran out (the deadline, which the collector watches).
    pub fn stop_on_limit(&mut self, limit: Limit) {
        if self.progress.finished {
            return;
        }
        let page_idx = self.progress.pages_observed;
        if !self.progress.limits_hit.contains(&limit) {
            self.progress.limits_hit.push(limit);
        }
        let detail = match limit {
            Limit::Sample => format!(
                "sample of {} items taken; the items are the first in source order",
                self.progress.records_observed
            ),
            other => format!("{} reached before the end signal", other.as_str()),
        };
        self.record(ViolationKind::LimitReached, page_idx, detail);
        self.progress.finished = true;
    }

    /// Switches to a fresh request after the last ordering key (the `high_water` policy).
    /// Returns the request, or `None` when no key is known yet (nothing was observed).
    pub fn continue_after_high_water(&mut self) -> Option<Request> {
        let key = self.progress.last_key?;
        let req = Request::After(self.codec.render(key));
        self.progress.high_water_used = true;
        self.progress.high_water_pinned = false;
        self.progress.next = Some(req.clone());
        Some(req)
    }

    fn budget_exhausted(&self) -> Option<Limit> {
        let p = &self.progress;
        if let Mode::Sample(n) = self.settings.mode {
            if p.records_observed >= n {
                return Some(Limit::Sample);
            }
        }
        if p.pages_observed >= self.settings.max_pages {
            return Some(Limit::MaxPages);
        }
        if self
            .settings
            .max_records
            .is_some_and(|m| p.records_observed >= m)
        {
            return Some(Limit::MaxRecords);
        }
        if self
            .settings
            .max_bytes
            .is_some_and(|m| p.bytes_observed >= m)
        {
            return Some(Limit::MaxBytes);
        }
        None
    }

    fn end_checks(&mut self, page_idx: u32) {
        if let Some(total) = self.progress.echoed_total {
            // The source's own count of the scope (R10): a record skipped or served twice by
            // drifting offsets shows up here.
            let seen = self.ids.len();
            if seen != total {
                self.record(
                    ViolationKind::CountMismatch,
                    page_idx,
                    format!(
                        "the source echoed a total of {total} records, observed {seen} unique IDs"
                    ),
                );
            }
        }
        if let Some(expected) = self.settings.expected_count {
            let seen = self.ids.len();
            if seen != expected {
                self.record(
                    ViolationKind::CountMismatch,
                    page_idx,
                    format!("expected {expected} unique IDs, observed {seen}"),
                );
            }
        }
        if let Some(expected) = self.settings.expected_partitions.clone() {
            let mut differing = Vec::new();
            let mut listed = HashSet::with_capacity(expected.len());
            for (p, n) in &expected {
                listed.insert(*p);
                let seen = self
                    .ids
                    .partition(*p)
                    .map_or(0, roaring::RoaringBitmap::len);
                if seen != *n {
                    differing.push(format!("{p} (expected {n}, observed {seen})"));
                }
            }
            for (p, b) in self.ids.partitions() {
                if !listed.contains(&p) {
                    differing.push(format!("{p} (expected 0, observed {})", b.len()));
                }
            }
            if !differing.is_empty() {
                let total = differing.len();
                differing.truncate(16);
                let more = if total > 16 {
                    format!(" and {} more", total - 16)
                } else {
                    String::new()
                };
                self.record(
                    ViolationKind::PartitionMismatch,
                    page_idx,
                    format!("partitions differ: {}{more}", differing.join(", ")),
                );
            }
        }
    }

    fn page_bounds(&self, page: &Page, page_idx: u32) -> Option<String> {
        if page.items.len() as u64 > u64::from(ITEMS_PER_PAGE_MAX) {
            return Some(format!(
                "{} items exceed the bound of {ITEMS_PER_PAGE_MAX} per page",
                page.items.len()
            ));
        }
        if page.size_bytes > PAGE_SIZE_BYTES_MAX {
            return Some(format!(
                "{} bytes exceed the bound of {PAGE_SIZE_BYTES_MAX} per page",
                page.size_bytes
            ));
        }
        if let Some(c) = &page.next {
            if c.len() > CURSOR_LEN_MAX {
                return Some(format!(
                    "cursor of {} bytes exceeds the bound of {CURSOR_LEN_MAX}",
                    c.len()
                ));
            }
            if c.is_empty() {
                return Some("an empty string is not a cursor".to_owned());
            }
        }
        if page_idx > PAGES_PER_RUN_MAX {
            return Some(format!("more than {PAGES_PER_RUN_MAX} pages in one run"));
        }
        None
    }

    /// Checks one item's labels; `new_labels` collects the names this page introduces, so
    /// that the per-run bound holds within a page too.
    fn check_labels<'p>(
        &self,
        labels: &'p [String],
        item: usize,
        new_labels: &mut Vec<&'p str>,
    ) -> Option<String> {
        if labels.len() > LABELS_PER_ITEM_MAX {
            return Some(format!(
                "item {item}: {} labels exceed the bound of {LABELS_PER_ITEM_MAX}",
                labels.len()
            ));
        }
        for l in labels {
            if l.is_empty() || l.len() > LABEL_LEN_MAX {
                return Some(format!(
                    "item {item}: a label name must be 1 to {LABEL_LEN_MAX} bytes"
                ));
            }
            if !self.progress.label_names.contains(l) && !new_labels.contains(&l.as_str()) {
                if self.progress.label_names.len() + new_labels.len() >= LABELS_PER_RUN_MAX {
                    return Some(format!(
                        "item {item}: more than {LABELS_PER_RUN_MAX} distinct labels in one run"
                    ));
                }
                new_labels.push(l);
            }
        }
        None
    }

    fn add_label(&mut self, name: &str, id: u64) {
        let idx = match self.progress.label_names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.progress.label_names.push(name.to_owned());
                self.labels.push(IdSet::new());
                self.labels.len() - 1
            }
        };
        if self.labels[idx].insert(id) {
            // At most LABELS_PER_RUN_MAX labels, so the index fits a u32.
            let key = (idx as u32, crate::idset::partition_of(id));
            if self.touched_labels.last() != Some(&key) {
                self.touched_labels.push(key);
            }
        }
    }

    fn describe_ids(&self, what: &str, ids: &[u64]) -> String {
        let shown: Vec<String> = ids
            .iter()
            .take(DETAIL_IDS_MAX)
            .map(|id| self.codec.render(*id))
            .collect();
        let more = if ids.len() > DETAIL_IDS_MAX {
            format!(" and {} more", ids.len() - DETAIL_IDS_MAX)
        } else {
            String::new()
        };
        format!("{} {what}: {}{more}", ids.len(), shown.join(", "))
    }

    fn record(&mut self, kind: ViolationKind, page: u32, detail: String) {
        if self.progress.violations.len() < VIOLATIONS_KEPT_MAX {
            self.progress
                .violations
                .push(Violation { kind, page, detail });
        } else {
            self.progress.violations_dropped += 1;
            let worst = self
                .progress
                .violations_dropped_worst
                .get_or_insert(Status::Verified);
            *worst = (*worst).max(kind.status());
        }
    }

    fn stop(&mut self, kind: ViolationKind, page: u32, detail: String) -> Step {
        self.record(kind, page, detail);
        self.progress.finished = true;
        // Only a transient stop (a limit, a failed request) keeps its request for a resume;
        // after any other finding there is nothing to continue from.
        if !kind.is_transient() {
            self.progress.next = None;
        }
        Step::Done
    }

    /// The status: the worst status any violation forces; `unknown` while unfinished or
    /// without a terminal page; `verified` only after the end signal with no violation.
    #[must_use]
    pub fn status(&self) -> Status {
        let worst = self
            .progress
            .violations
            .iter()
            .map(|v| v.kind.status())
            .max()
            .unwrap_or(Status::Verified);
        if worst == Status::Failed {
            return Status::Failed;
        }
        let worst = worst.max(
            self.progress
                .violations_dropped_worst
                .unwrap_or(Status::Verified),
        );
        if worst == Status::Failed {
            return Status::Failed;
        }
        if !self.progress.terminal_observed || !self.progress.finished {
            return Status::Unknown;
        }
        worst
    }

    /// What a receipt may conclude: all records of the snapshot, all live records, or nothing.
    #[must_use]
    pub fn conclusion_scope(&self) -> &'static str {
        if self.status() != Status::Verified {
            return "none";
        }
        let p = &self.progress;
        let pinned = p.pinned_snapshot.is_some()
            && (!p.high_water_used || (p.high_water_pinned && !p.high_water_unpinned));
        if pinned {
            "all_records_in_snapshot"
        } else {
            "all_records_live"
        }
    }

    /// The unique IDs observed.
    #[must_use]
    pub fn ids(&self) -> &IdSet {
        &self.ids
    }

    /// The label sets, in the order of `progress().label_names`.
    #[must_use]
    pub fn labels(&self) -> &[IdSet] {
        &self.labels
    }

    /// The persisted part of the state.
    #[must_use]
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The codec with its learned prefix and interner.
    #[must_use]
    pub fn codec(&self) -> &IdCodec {
        &self.codec
    }

    /// The codec, mutably (the store marks interned strings persisted).
    pub fn codec_mut(&mut self) -> &mut IdCodec {
        &mut self.codec
    }

    /// The query digest of the contract.
    #[must_use]
    pub fn query_digest(&self) -> &str {
        &self.query_digest
    }

    /// Whether the run is finished.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.progress.finished
    }

    /// What to request next, if anything.
    #[must_use]
    pub fn next_request(&self) -> Option<&Request> {
        if self.progress.finished {
            return None;
        }
        self.progress.next.as_ref()
    }

    /// Partitions of the ID set and (label, partition) pairs changed since the last call.
    pub fn take_touched(&mut self) -> (Vec<u64>, Vec<(u32, u64)>) {
        let mut parts = std::mem::take(&mut self.touched);
        parts.sort_unstable();
        parts.dedup();
        let mut labels = std::mem::take(&mut self.touched_labels);
        labels.sort_unstable();
        labels.dedup();
        (parts, labels)
    }

    /// Checks the invariants; for tests and fuzzing.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_invariants(&self) {
        let p = &self.progress;
        self.ids.check_invariants();
        assert_eq!(
            p.records_observed,
            self.ids.len() + p.duplicate_ids,
            "records = unique + duplicates"
        );
        assert_eq!(self.labels.len(), p.label_names.len());
        for l in &self.labels {
            l.check_invariants();
            assert!(
                l.difference(&self.ids).is_empty(),
                "a label holds an unseen ID"
            );
        }
        if self.status() == Status::Verified {
            assert!(p.terminal_observed);
            assert!(p.limits_hit.is_empty());
        }
        if p.terminal_observed {
            assert!(p.next.is_none());
        }
    }
}

/// The contract's query and the echoed one are the same JSON value; an absent contract query
/// matches an echoed `{}` or `null`.
fn same_query(contract: &Value, echoed: &Value) -> bool {
    match contract {
        Value::Null => match echoed {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            _ => false,
        },
        c => c == echoed,
    }
}
