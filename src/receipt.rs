//! The completeness receipt (docs/REFERENCE.md §7): from a run's state to the JSON a reviewer can check.
//!
//! Pure: the caller supplies the run's metadata (ID, times, links); nothing here reads a clock
//! or a file. Field names are exactly those of docs/REFERENCE.md §7; `docs/FORMAT.md` describes each.
//! A receipt never carries a raw cursor: the chain digest stands for the traversal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::codec::IdCodec;
use crate::contract::Contract;
use crate::digest;
use crate::idset::IdSet;
use crate::reconcile::{Reconciler, Status, Violation};

mod shards;
mod text;

pub(crate) use shards::{check_cover_of, check_shape};
pub use shards::{
    range_evidence, MergedFrom, ShardEntry, ShardFinding, ShardRange, RECEIPT_MERGED_KEYS,
};
pub use text::{range_words, Emphasis};

/// Version of the receipt format this build writes.
pub const RECEIPT_FORMAT_VERSION: u32 = 2;
/// ID ranges listed per label, per diff side, per missing list before "and N more".
pub const RANGES_SHOWN_MAX: usize = 32;

/// A run's identity in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunId(pub u64);

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run-{}", self.0)
    }
}

impl std::str::FromStr for RunId {
    type Err = String;
    fn from_str(s: &str) -> Result<RunId, String> {
        let digits = s.strip_prefix("run-").unwrap_or(s);
        digits
            .parse()
            .map(RunId)
            .map_err(|_| format!("{s:?} is not a run ID (run-N or N)"))
    }
}

/// What the receipt builder needs to know that the reconciler does not.
#[derive(Debug, Clone)]
pub struct RunMeta {
    /// The run.
    pub run_id: RunId,
    /// Restarts that led to this run (0 for a first run).
    pub restarts: u32,
    /// When the run began, RFC 3339.
    pub started_at: String,
    /// When it finished, RFC 3339; `None` while it runs.
    pub finished_at: Option<String>,
    /// The run this one replaced, if it was a restart.
    pub restarted_from: Option<RunId>,
    /// The run that replaced this one, if it was superseded.
    pub superseded_by: Option<RunId>,
    /// The server-side count, when `count` mode got one.
    pub server_count: Option<u64>,
    /// The plan and shards of a run `merge` wrote; `None` for every other run.
    pub merged: Option<MergedFrom>,
}

/// ID ranges of a set in their original form, capped, with the total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ranges {
    /// `"FIRST..LAST"` strings, the first `RANGES_SHOWN_MAX`.
    pub ranges: Vec<String>,
    /// How many ranges there are in all.
    pub ranges_total: u64,
}

impl Ranges {
    /// The ranges of a set, rendered by the codec.
    #[must_use]
    pub fn of(set: &IdSet, codec: &IdCodec) -> Ranges {
        let mut fold = RangesFold::default();
        for (p, b) in set.partitions() {
            fold.push_partition(p, b, codec);
        }
        fold.finish(codec).0
    }
}

/// [`Ranges::of`] fed one partition at a time, in ascending order: what a reader that
/// streams a set keeps (the ranges shown, the open range, two counts), whatever its size.
#[derive(Debug, Clone, Default)]
pub struct RangesFold {
    ranges: Vec<String>,
    total: u64,
    count: u64,
    open: Option<(u64, u64)>,
}

impl RangesFold {
    /// The next partition (its low 16 bits); partitions come in ascending order.
    pub fn push_partition(&mut self, p: u64, bitmap: &roaring::RoaringBitmap, codec: &IdCodec) {
        let base = p << crate::idset::PARTITION_BITS;
        self.count = self.count.saturating_add(bitmap.len());
        for low in bitmap {
            let id = base | u64::from(low);
            self.open = match self.open {
                Some((first, last)) if last.checked_add(1) == Some(id) => Some((first, id)),
                Some((first, last)) => {
                    self.close(first, last, codec);
                    Some((id, id))
                }
                None => Some((id, id)),
            };
        }
    }

    fn close(&mut self, first: u64, last: u64, codec: &IdCodec) {
        if self.ranges.len() < RANGES_SHOWN_MAX {
            self.ranges
                .push(format!("{}..{}", codec.render(first), codec.render(last)));
        }
        self.total = self.total.saturating_add(1);
    }

    /// The ranges and the number of IDs pushed.
    #[must_use]
    pub fn finish(mut self, codec: &IdCodec) -> (Ranges, u64) {
        if let Some((first, last)) = self.open.take() {
            self.close(first, last, codec);
        }
        let ranges = Ranges {
            ranges: self.ranges,
            ranges_total: self.total,
        };
        (ranges, self.count)
    }

    /// The label summary of the IDs pushed.
    #[must_use]
    pub fn label_summary(self, codec: &IdCodec) -> LabelSummary {
        let (r, count) = self.finish(codec);
        LabelSummary {
            count,
            ranges: r.ranges,
            ranges_total: r.ranges_total,
        }
    }
}

/// What a receipt takes from a run's state: its progress and what its sets come to. Built
/// from a reconciler ([`ReceiptFacts::of`]) or, without loading the sets, by the store from a
/// run's record and its partitions read one batch at a time (`Snapshot::receipt`).
#[derive(Debug, Clone)]
pub struct ReceiptFacts<'a> {
    /// The run's progress.
    pub progress: &'a crate::reconcile::Progress,
    /// The query digest of the run's scope.
    pub query_digest: String,
    /// Unique IDs.
    pub unique_ids: u64,
    /// The Merkle root (over partitions, or over string digests for the `string` codec).
    pub root: digest::Hash,
    /// The root's leaves: non-empty partitions (string-tree buckets for `string`).
    pub partitions: u64,
    /// The content root, when the run has content accumulators.
    pub content_root: Option<digest::Hash>,
    /// One summary per label, by name.
    pub labels: BTreeMap<String, LabelSummary>,
}

impl<'a> ReceiptFacts<'a> {
    /// The facts of a reconciler's state (its sets in memory).
    #[must_use]
    pub fn of(rec: &'a Reconciler) -> ReceiptFacts<'a> {
        let p = rec.progress();
        let (root, partitions) = merkle_root_of(rec.ids(), rec.codec());
        let labels = p
            .label_names
            .iter()
            .zip(rec.labels())
            .map(|(name, set)| {
                let mut fold = RangesFold::default();
                for (part, b) in set.partitions() {
                    fold.push_partition(part, b, rec.codec());
                }
                (name.clone(), fold.label_summary(rec.codec()))
            })
            .collect();
        ReceiptFacts {
            progress: p,
            query_digest: rec.query_digest().to_owned(),
            unique_ids: rec.ids().len(),
            root,
            partitions,
            content_root: (!rec.content().is_empty())
                .then(|| crate::content::root(rec.content().iter().map(|(l, a)| (*l, a)))),
            labels,
        }
    }
}

/// One label's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSummary {
    /// IDs carrying the label.
    pub count: u64,
    /// `"FIRST..LAST"` strings, the first `RANGES_SHOWN_MAX`.
    pub ranges: Vec<String>,
    /// How many ranges there are in all.
    pub ranges_total: u64,
}

/// The completeness receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Receipt {
    /// The run.
    pub run_id: String,
    /// The scope's source.
    pub source: String,
    /// The scope's tenant.
    pub tenant: Option<String>,
    /// `sha256:` + hex of the scope's canonical JSON.
    pub query_digest: String,
    /// The snapshot the run was pinned to; null for a live scan.
    pub snapshot_id: Option<String>,
    /// `all`, `sample N` or `count`.
    pub mode: String,
    /// The ID codec: `int`, `prefixed` or `string` (the string codec's root is over the
    /// digests of the original strings).
    pub id_codec: crate::contract::IdCodecKind,
    /// The end signal the run followed; `empty_page` is a weaker claim than the others.
    pub end_signal: crate::contract::EndSignal,
    /// Pages observed.
    pub pages_observed: u32,
    /// The contract's expected count.
    pub records_expected: Option<u64>,
    /// Items returned, duplicates included.
    pub records_observed: u64,
    /// Unique IDs.
    pub unique_ids_observed: u64,
    /// Items whose ID was seen before.
    pub duplicate_ids: u64,
    /// The cursor chain digest.
    pub cursor_chain_digest: String,
    /// A terminal page with the end signal was observed.
    pub terminal_cursor_observed: bool,
    /// Budgets that stopped the run.
    pub limits_hit: Vec<String>,
    /// `verified`, `unknown` or `failed`.
    pub coverage_status: Status,
    /// `all_records_in_snapshot`, `all_records_live` or `none`.
    pub conclusion_scope: crate::reconcile::ConclusionScope,
    /// Findings.
    pub violations: Vec<Violation>,
    /// Findings past the kept ones.
    #[serde(default)]
    pub violations_dropped: u64,
    /// The Merkle root over partitions.
    pub merkle_root: String,
    /// Non-empty partitions.
    pub partitions: u64,
    /// The root over the per-leaf content accumulators (docs/FORMAT.md §11), when the source
    /// gave content digests; null otherwise.
    pub content_root: Option<String>,
    /// Per label: count and ranges.
    pub labels: BTreeMap<String, LabelSummary>,
    /// What a reference has that this run lacks, when a reference is given.
    pub missing_id_ranges: Option<Ranges>,
    /// Restarts that led to this run.
    pub restarts: u32,
    /// The run this one replaced.
    pub restarted_from: Option<String>,
    /// The run that replaced this one.
    pub superseded_by: Option<String>,
    /// The digest of the plan a merged run was merged from; absent (not null) from the
    /// receipt of any other run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_digest: Option<String>,
    /// A merged run's shards, one entry per shard of its plan in shard order; absent (not
    /// null) from the receipt of any other run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardEntry>>,
    /// `count` mode: the total, only when it is one (server count or verified traversal).
    pub count_total: Option<u64>,
    /// R6 fired: the receipt is rejected as evidence for the contract's query.
    pub rejected: bool,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339; null while the run is in progress.
    pub finished_at: Option<String>,
    /// Receipt format version.
    pub format_version: u32,
}

/// A receipt text that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// Not strict JSON (a duplicate key, an inexact number, malformed).
    #[error("not a receipt: {0}")]
    Json(#[from] crate::json::JsonError),
    /// A key the receipt format requires is absent (an absent value is written as null).
    #[error("not a receipt: key {key:?} is missing")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// Another receipt format version.
    #[error("receipt format {found} is not read by this build (it reads format {RECEIPT_FORMAT_VERSION})")]
    Version {
        /// The version found.
        found: u64,
    },
    /// A key with a value of the wrong shape, or a key the format does not have.
    #[error("not a receipt: {0}")]
    Shape(#[source] crate::json::ConfigError),
    /// A merged run's keys (`RECEIPT_MERGED_KEYS`) not as the format has them: one without
    /// the other, null, or a shard list that is not a plan's.
    #[error("not a receipt: key {key:?}: {problem}")]
    Merged {
        /// The key.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// Every key of a receipt: all are present in every receipt (null where a value is absent).
/// The receipt of a merged run has `RECEIPT_MERGED_KEYS` too, after `superseded_by`.
pub const RECEIPT_KEYS: [&str; 33] = [
    "run_id",
    "source",
    "tenant",
    "query_digest",
    "snapshot_id",
    "mode",
    "id_codec",
    "end_signal",
    "pages_observed",
    "records_expected",
    "records_observed",
    "unique_ids_observed",
    "duplicate_ids",
    "cursor_chain_digest",
    "terminal_cursor_observed",
    "limits_hit",
    "coverage_status",
    "conclusion_scope",
    "violations",
    "violations_dropped",
    "merkle_root",
    "partitions",
    "content_root",
    "labels",
    "missing_id_ranges",
    "restarts",
    "restarted_from",
    "superseded_by",
    "count_total",
    "rejected",
    "started_at",
    "finished_at",
    "format_version",
];

impl Receipt {
    /// Reads a receipt strictly: duplicate keys, inexact numbers, unknown keys at any depth and
    /// missing keys are refused, as is another format version.
    ///
    /// # Errors
    /// `ReceiptError` naming what is wrong.
    pub fn from_json(text: &str) -> Result<Receipt, ReceiptError> {
        let v = crate::json::parse(text, crate::json::Numbers::Integers)?;
        if let Some(obj) = v.as_object() {
            if let Some(found) = obj
                .get("format_version")
                .and_then(serde_json::Value::as_u64)
            {
                if found != u64::from(RECEIPT_FORMAT_VERSION) {
                    return Err(ReceiptError::Version { found });
                }
            }
            if let Some(key) = RECEIPT_KEYS.iter().find(|k| !obj.contains_key(**k)) {
                return Err(ReceiptError::Missing { key });
            }
            let [plan, shards] = RECEIPT_MERGED_KEYS;
            let merged = |key: &'static str, problem: &str| ReceiptError::Merged {
                key,
                problem: problem.to_owned(),
            };
            for key in RECEIPT_MERGED_KEYS {
                if obj.get(key).is_some_and(serde_json::Value::is_null) {
                    return Err(merged(
                        key,
                        "is never null: it is absent unless the run was merged",
                    ));
                }
            }
            match (obj.contains_key(plan), obj.contains_key(shards)) {
                (true, false) => return Err(merged(shards, "is missing beside plan_digest")),
                (false, true) => return Err(merged(plan, "is missing beside shards")),
                _ => {}
            }
        }
        // The strict config layer: a struct is an object (never an array read by position),
        // and the error names the field, its line and column, and the key meant.
        let r: Receipt =
            crate::json::from_value(&v).map_err(|e| ReceiptError::Shape(e.placed(text)))?;
        if let Some(list) = &r.shards {
            check_shape(list).map_err(|e| merged_problem(e.to_string()))?;
        }
        Ok(r)
    }

    /// Builds the receipt of a run from its reconciler state (with the plan and shards when
    /// `meta` has them: a run `merge` wrote).
    #[must_use]
    pub fn build(contract: &Contract, meta: &RunMeta, rec: &Reconciler) -> Receipt {
        Receipt::from_facts(contract, meta, ReceiptFacts::of(rec))
    }

    /// Builds the receipt of a run from what it takes of the run's state: the same receipt
    /// as [`Receipt::build`] over a reconciler whose state gives these facts.
    #[must_use]
    pub fn from_facts(contract: &Contract, meta: &RunMeta, facts: ReceiptFacts<'_>) -> Receipt {
        let p = facts.progress;
        let status = p.status();
        let count_total = match contract.mode {
            crate::contract::Mode::Count => meta
                .server_count
                .or((status == Status::Verified).then_some(facts.unique_ids)),
            _ => None,
        };
        Receipt {
            run_id: meta.run_id.to_string(),
            source: contract.scope.source.clone(),
            tenant: contract.scope.tenant.clone(),
            query_digest: facts.query_digest,
            snapshot_id: p.pinned_snapshot.clone(),
            mode: contract.mode.name(),
            id_codec: contract.id_codec,
            end_signal: contract.end_signal,
            pages_observed: p.pages_observed,
            records_expected: contract.expected_count,
            records_observed: p.records_observed,
            unique_ids_observed: facts.unique_ids,
            duplicate_ids: p.duplicate_ids,
            cursor_chain_digest: digest::display(&p.chain),
            terminal_cursor_observed: p.terminal_observed,
            limits_hit: p.limits_hit.iter().map(|l| l.as_str().to_owned()).collect(),
            coverage_status: status,
            conclusion_scope: p.conclusion_scope(),
            violations: p.violations.clone(),
            violations_dropped: p.violations_dropped,
            merkle_root: digest::display(&facts.root),
            partitions: facts.partitions,
            content_root: facts.content_root.as_ref().map(digest::display),
            labels: facts.labels,
            missing_id_ranges: None,
            restarts: meta.restarts,
            restarted_from: meta.restarted_from.map(|r| r.to_string()),
            superseded_by: meta.superseded_by.map(|r| r.to_string()),
            plan_digest: meta.merged.as_ref().map(|m| m.plan_digest.clone()),
            shards: meta.merged.as_ref().map(|m| m.shards.clone()),
            count_total,
            rejected: p
                .violations
                .iter()
                .any(|v| v.kind == crate::reconcile::ViolationKind::QueryChanged),
            started_at: meta.started_at.clone(),
            finished_at: meta.finished_at.clone(),
            format_version: RECEIPT_FORMAT_VERSION,
        }
    }

    /// The plan and shards of a merged run's receipt; `None` for any other run.
    #[must_use]
    pub fn merged(&self) -> Option<MergedFrom> {
        Some(MergedFrom {
            plan_digest: self.plan_digest.clone()?,
            shards: self.shards.clone()?,
        })
    }
}

/// Text from a source, made safe for a terminal: control characters (which could move the
/// cursor, erase a line or forge one) and bidirectional overrides are shown escaped.
#[must_use]
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn merged_problem(problem: String) -> ReceiptError {
    ReceiptError::Merged {
        key: "shards",
        problem,
    }
}

/// The Merkle root a receipt carries and its number of leaves: over the ID partitions, or for
/// the `string` codec over the digests of the original strings (`digest::string_root`), so
/// that the root is a function of the set of strings whatever IDs an interner gave them.
///
/// # Panics
/// If a string ID of `ids` is not in the codec's interner: the reconciler interns every ID it
/// holds, and the store checks a loaded run's dictionary covers its IDs.
#[must_use]
pub fn merkle_root_of(ids: &IdSet, codec: &IdCodec) -> (digest::Hash, u64) {
    if codec.kind() != crate::contract::IdCodecKind::String {
        return (digest::merkle_root(ids), ids.partition_count() as u64);
    }
    let mut digests: Vec<digest::Hash> = ids
        .iter()
        .map(|id| {
            let s = codec
                .interner()
                .lookup(id)
                .expect("invariant: every string ID of a run is interned");
            digest::string_id_digest(s)
        })
        .collect();
    digest::string_root(&mut digests)
}

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds.
///
/// ```
/// assert_eq!(scanledger::rfc3339(0), "1970-01-01T00:00:00.000Z");
/// assert_eq!(scanledger::rfc3339(1_788_081_480_000), "2026-08-30T09:18:00.000Z");
/// ```
///
/// A time past the year 9999, which no clock gives (only a damaged record could hold one),
/// is shown as its milliseconds rather than as a date it is not.
#[must_use]
pub fn rfc3339(ms: u64) -> String {
    match i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
    {
        Some(t) => format!("{t:.3}"),
        None => format!("{ms} ms after 1970-01-01T00:00:00Z"),
    }
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    proptest::proptest! {
        /// The fold over partitions gives exactly the ranges, count and total of the IDs in
        /// order, runs across partition boundaries and the ends of the ID space included.
        #[test]
        fn ranges_folded_by_partition_are_the_ranges_of_the_ids(
            picks in proptest::collection::vec((0u64..6, 0u64..200), 0..300),
        ) {
            let bases = [0, 65_436, 131_000, 1 << 40, u64::MAX - 150, u64::MAX - 70_000];
            let set: crate::IdSet = picks
                .iter()
                .map(|&(b, off)| bases[b as usize].saturating_add(off))
                .collect();
            let codec = crate::codec::IdCodec::new(crate::contract::IdCodecKind::Int, None);
            let mut naive = Vec::new();
            for id in set.iter() {
                match naive.last_mut() {
                    Some((_, last)) if *last + 1 == id => *last = id,
                    _ => naive.push((id, id)),
                }
            }
            let mut fold = super::RangesFold::default();
            for (p, b) in set.partitions() {
                fold.push_partition(p, b, &codec);
            }
            let (r, count) = fold.finish(&codec);
            proptest::prop_assert_eq!(count, set.len());
            proptest::prop_assert_eq!(r.ranges_total, naive.len() as u64);
            let shown: Vec<String> = naive
                .iter()
                .take(super::RANGES_SHOWN_MAX)
                .map(|(a, b)| format!("{a}..{b}"))
                .collect();
            proptest::prop_assert_eq!(r.ranges, shown);
        }
    }

    #[test]
    fn timestamps_are_rfc_3339_utc_with_three_fraction_digits() {
        // Expected values from Python's datetime, an implementation of its own.
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (1_735_689_599_007, "2024-12-31T23:59:59.007Z"),
            (1_788_081_480_000, "2026-08-30T09:18:00.000Z"),
            (4_107_542_400_999, "2100-03-01T00:00:00.999Z"),
            (253_402_207_199_999, "9999-12-30T21:59:59.999Z"),
        ] {
            assert_eq!(rfc3339(ms), text, "{ms}");
        }
        // No clock gives these: shown as what they are, never as another date.
        assert_eq!(
            rfc3339(u64::MAX),
            "18446744073709551615 ms after 1970-01-01T00:00:00Z"
        );
        assert!(rfc3339(253_402_300_800_000).ends_with(" ms after 1970-01-01T00:00:00Z"));
    }
}
