//! The reconciliation core: observes pages and decides what to request next or why a run stopped.
//!
//! `Reconciler` is a pure state machine. It does no IO, reads no clock, takes no lock and never
//! awaits: the collector feeds it pages and failures, the store persists what each page changed
//! (the `Delta` that `observe` returns) and its `Progress`, the receipt reads it. It applies the
//! rules R1-R16 of the reference's rules table exactly, one step per rule group
//! (`observe.rs`); findings are `Violation`s (data), never errors. It keeps no record of what the
//! store has persisted.
//!
//! Invariants (checked by `check_invariants`):
//! - `unique_ids_observed == ids.len()` and `records_observed == unique + duplicate_ids`;
//! - a finished run has no pending request unless it stopped on a transient cause (a limit, a
//!   failed page), in which case the request is kept so the run can be resumed;
//! - `verified` only after a terminal page with the contract's end signal and no violation;
//! - `all_records_in_snapshot` only when every page was served from the pinned snapshot.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codec::{IdCodec, Interner};
use crate::contract::{Contract, EndSignal, Mode, SnapshotPolicy, PAGES_PER_RUN_MAX};
use crate::digest::{self, Hash};
use crate::idset::IdSet;

mod merge;
mod observe;

pub use merge::PartitionCheck;
#[cfg(test)]
mod tests;
mod types;

pub use types::{
    ConclusionScope, Delta, FetchFailure, Limit, Observation, PageLog, Request, Status, Step,
    Violation, ViolationKind,
};

/// IDs named in one violation's detail before it says "and N more".
const DETAIL_IDS_MAX: usize = 5;

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
    /// The snapshot the run is pinned to: the contract's, or the first page's echo. The cursor
    /// chain starts from it and the receipt names it.
    pub pinned_snapshot: Option<String>,
    /// The snapshot pages are compared with (R5): the pinned one, until a `high_water`
    /// continuation is served from another, which the run then follows (and is `spliced`).
    pub serving_snapshot: Option<String>,
    /// A terminal page with the end signal was observed.
    pub terminal_observed: bool,
    /// The run is finished (until a resume reopens it).
    pub finished: bool,
    /// The `high_water` policy continued the run with a fresh request.
    pub high_water_used: bool,
    /// Since the last `high_water` continuation, no page has echoed the snapshot the run is
    /// pinned to: the continuation may come from another collection state.
    pub high_water_unconfirmed: bool,
    /// A `high_water` continuation was served from another snapshot: the run spans two
    /// collection states, so it concludes at most about the live collection.
    pub spliced: bool,
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

impl Progress {
    /// The status a run with this progress has: the worst status any violation forces;
    /// `unknown` while unfinished or without a terminal page; `verified` only after the end
    /// signal with no violation. It needs no ID: a report that reads only the progress (a
    /// run's side of a comparison) judges exactly as the reconciler does.
    #[must_use]
    pub fn status(&self) -> Status {
        let worst = self
            .violations
            .iter()
            .map(|v| v.kind.status())
            .max()
            .unwrap_or(Status::Verified)
            .max(self.violations_dropped_worst.unwrap_or(Status::Verified));
        if worst == Status::Failed {
            return Status::Failed;
        }
        if !self.terminal_observed || !self.finished {
            return Status::Unknown;
        }
        worst
    }

    /// What a receipt of this progress may conclude: all records of the snapshot, all live
    /// records, or nothing.
    #[must_use]
    pub fn conclusion_scope(&self) -> ConclusionScope {
        if self.status() != Status::Verified {
            return ConclusionScope::None;
        }
        if self.pinned_snapshot.is_some() && !self.spliced && !self.high_water_unconfirmed {
            ConclusionScope::AllRecordsInSnapshot
        } else {
            ConclusionScope::AllRecordsLive
        }
    }
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
    key_range: Option<crate::contract::KeyRange>,
}

/// The pure reconciliation state machine of one run.
#[derive(Debug, Clone)]
pub struct Reconciler {
    settings: Settings,
    query_digest: String,
    codec: IdCodec,
    ids: IdSet,
    labels: Vec<IdSet>,
    /// Content accumulators by leaf (partition, or bucket for the `string` codec).
    content: BTreeMap<u64, crate::content::ContentAcc>,
    /// The first 16 bytes of the hash of every cursor of the traversal (R3): two distinct
    /// cursors share them with probability about n^2 / 2^129 (1e-27 for a million pages), and
    /// they take half the memory of whole hashes.
    seen_cursors: HashSet<u128>,
    progress: Progress,
    scratch_ids: Vec<u64>,
    scratch_dups: Vec<u64>,
}

impl Reconciler {
    /// A fresh run of `contract`.
    ///
    /// ```
    /// use scanledger::{Contract, Item, Page, Reconciler, Step, Status};
    /// let mut r = Reconciler::new(&Contract::new("s"));
    /// let page = Page::new(vec![Item::int(1), Item::int(2)]);
    /// let seen = r.observe(&page);
    /// assert_eq!(seen.step, Step::Done);
    /// assert_eq!(seen.delta.partitions, vec![0]);
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
                key_range: contract.scope.key_range,
            },
            query_digest,
            codec: IdCodec::new(contract.id_codec, contract.id_prefix.clone()),
            ids: IdSet::new(),
            labels: Vec::new(),
            content: BTreeMap::new(),
            seen_cursors: HashSet::new(),
            progress: Progress {
                pages_observed: 0,
                records_observed: 0,
                bytes_observed: 0,
                duplicate_ids: 0,
                chain,
                next: Some(Request::First),
                pinned_snapshot: contract.snapshot_id.clone(),
                serving_snapshot: contract.snapshot_id.clone(),
                terminal_observed: false,
                finished: false,
                high_water_used: false,
                high_water_unconfirmed: false,
                spliced: false,
                violations: Vec::new(),
                violations_dropped: 0,
                violations_dropped_worst: None,
                limits_hit: Vec::new(),
                label_names: Vec::new(),
                last_key: None,
                id_prefix: contract.id_prefix.clone(),
                echoed_total: None,
            },
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
        r.seen_cursors = cursor_hashes
            .into_iter()
            .filter(|h| *h != none)
            .map(|h| cursor_key(&h))
            .collect();
        r.progress = progress;
        // The store checks what it decodes; a restored run that breaks an invariant is a bug
        // of the store's or of the run that wrote it, caught here in debug builds and tests.
        if cfg!(debug_assertions) {
            r.check_invariants();
        }
        r
    }

    /// Gives a restored run its content accumulators (the store keeps them per leaf).
    pub fn set_content(&mut self, content: BTreeMap<u64, crate::content::ContentAcc>) {
        self.content = content;
    }

    /// Gives the `string` codec the dictionary of the run's (source, tenant), so runs over one
    /// collection share IDs. The store supplies it when a run begins.
    pub fn set_interner(&mut self, interner: Interner) {
        *self.codec.interner_mut() = interner;
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

    /// The run's budgets and mode after a resume (`resume --max-pages ...`, a sample going on
    /// as a full scan): the store records the same contract with the run.
    pub fn apply_contract(&mut self, contract: &Contract) {
        self.settings.max_pages = contract.limits.max_pages().min(PAGES_PER_RUN_MAX);
        self.settings.max_records = contract.limits.max_records;
        self.settings.max_bytes = contract.limits.max_bytes;
        self.settings.mode = contract.mode;
    }

    /// Records a `count`-mode answer from the source's own authorized count: the run ends
    /// without a traversal (no ID set, so its coverage stays `unknown`), and a count that
    /// disagrees with the contract's `expected_count` is R10.
    pub fn counted_by_source(&mut self, n: u64, expected: Option<u64>) {
        if let Some(e) = expected.filter(|e| *e != n) {
            self.record(
                ViolationKind::CountMismatch,
                0,
                format!("the source counts {n} records, the contract expects {e}"),
            );
        }
        self.progress.finished = true;
        self.progress.next = None;
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

    /// Stops the run because a budget ran out. The deadline is reported on the page whose
    /// request it cut; the other budgets on the page that spent them.
    pub fn stop_on_limit(&mut self, limit: Limit) {
        if self.progress.finished {
            return;
        }
        let page_idx = match limit {
            Limit::Deadline => self.progress.pages_observed.saturating_add(1),
            _ => self.progress.pages_observed,
        };
        if !self.progress.limits_hit.contains(&limit) {
            self.progress.limits_hit.push(limit);
        }
        let detail = match limit {
            Limit::Sample => format!(
                "sample of {} items taken; the items are the first in source order",
                self.progress.records_observed
            ),
            Limit::Deadline => "the deadline passed before the end signal".to_owned(),
            Limit::Interrupted => {
                "the operator stopped the scan at a page boundary; resume continues it".to_owned()
            }
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
        self.progress.high_water_unconfirmed = true;
        self.progress.next = Some(req.clone());
        Some(req)
    }

    /// The budget the run has already spent, if any: checked before each request, so a run
    /// resumed without raising the budget that stopped it fetches nothing more.
    #[must_use]
    pub fn budget_exhausted(&self) -> Option<Limit> {
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

    fn record(&mut self, kind: ViolationKind, page: u32, detail: String) {
        if self.progress.violations.len() < crate::contract::VIOLATIONS_KEPT_MAX {
            self.progress
                .violations
                .push(Violation { kind, page, detail });
        } else {
            self.progress.violations_dropped = self.progress.violations_dropped.saturating_add(1);
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
        self.progress.status()
    }

    /// What a receipt may conclude: all records of the snapshot, all live records, or nothing.
    #[must_use]
    pub fn conclusion_scope(&self) -> ConclusionScope {
        self.progress.conclusion_scope()
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

    /// The content accumulators by leaf; empty when no record carried a content digest.
    #[must_use]
    pub fn content(&self) -> &BTreeMap<u64, crate::content::ContentAcc> {
        &self.content
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

    /// The query digest of the contract.
    #[must_use]
    pub fn query_digest(&self) -> &str {
        &self.query_digest
    }

    /// The end signal the run follows.
    #[must_use]
    pub fn end_signal(&self) -> EndSignal {
        self.settings.end_signal
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

    /// Checks the invariants: every one, over every ID (O(IDs)). `restore` runs it in debug
    /// builds and tests, `observe` runs [`Reconciler::check_step`] (the part one page can
    /// break), and the fuzz targets run it after every step.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_invariants(&self) {
        self.ids.check_invariants();
        for l in &self.labels {
            l.check_invariants();
            assert!(
                l.difference(&self.ids).is_empty(),
                "a label holds an unseen ID"
            );
        }
        self.check_progress();
    }

    /// The invariants one observed page can break, in O(1) plus the partitions it touched:
    /// the counts, the status against the evidence, and every partition of the ID and label
    /// sets the page changed. `observe` runs it in debug builds and tests.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_step(&self, delta: &Delta) {
        for part in &delta.partitions {
            self.ids.check_partition(*part);
        }
        for (label, part) in &delta.label_partitions {
            let Some(l) = usize::try_from(*label)
                .ok()
                .and_then(|i| self.labels.get(i))
            else {
                panic!("a delta names label {label}, which the run does not have");
            };
            l.check_partition(*part);
            if let Some(bits) = l.partition(*part) {
                let ids = self.ids.partition(*part);
                assert!(
                    ids.is_some_and(|ids| bits.is_subset(ids)),
                    "a label holds an unseen ID in partition {part}"
                );
            }
        }
        self.check_progress();
    }

    /// The progress's invariants (O(1)).
    fn check_progress(&self) {
        self.check_progress_of(self.ids.len());
    }

    /// The progress's invariants for a run of `unique` IDs (a streamed merge's union is in
    /// the store, not here).
    fn check_progress_of(&self, unique: u64) {
        let p = &self.progress;
        assert_eq!(
            p.records_observed,
            unique + p.duplicate_ids,
            "records = unique + duplicates"
        );
        assert_eq!(self.labels.len(), p.label_names.len());
        if self.status() == Status::Verified {
            assert!(p.terminal_observed);
            assert!(p.limits_hit.is_empty());
        }
        if p.terminal_observed {
            assert!(p.next.is_none());
        }
        if p.spliced {
            assert!(p.high_water_used, "only a high-water continuation splices");
        }
    }
}

/// The key of a cursor hash in the loop-detection set.
fn cursor_key(h: &Hash) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    u128::from_le_bytes(b)
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
