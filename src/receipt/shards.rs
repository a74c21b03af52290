//! What a merged run's receipt says of the plan it was merged from: the receipt keys
//! `plan_digest` and `shards` (docs/FORMAT.md §6), present only in the receipt of a run that
//! `merge` wrote, so an ordinary receipt keeps exactly its 33 keys.
//!
//! Pure. One entry per shard of the plan, in shard order: its key range, what the merge found
//! (`merged`, `unfinished`, `missing`, `conflict`), and for a shard whose run was taken, that
//! run's store file, ID, status, unique count and Merkle root, which a reviewer compares with
//! the shard's own receipt. `verify` rebuilds the list from the merged run's record and, for a
//! verified run, recomputes each entry's count and root from the merged ID bitmaps in the
//! shard's range (`range_evidence`), so an edited entry fails it.

use serde::{Deserialize, Serialize};

use crate::contract::SHARDS_MAX;
use crate::idset::{partition_of, IdSet, PARTITION_WIDTH};
use crate::reconcile::Status;

/// The receipt keys a merged run's receipt adds to `RECEIPT_KEYS`, in their order: both or
/// neither.
pub const RECEIPT_MERGED_KEYS: [&str; 2] = ["plan_digest", "shards"];

/// Shard entries the readable layout prints before "and N more" (the JSON has every one).
const TEXT_SHARDS_MAX: usize = 16;

/// A shard's key range, as in the plan: `[lo, hi)`, to the end of the ID space (2^64 - 1
/// included) when `hi` is 2^64 - 1 (`KeyRange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRange {
    /// The first ID of the shard.
    pub lo: u64,
    /// One past its last ID, or 2^64 - 1: to the end.
    pub hi: u64,
}

impl ShardRange {
    /// The same range as a contract's `KeyRange` (`None` when empty).
    #[must_use]
    pub fn key_range(self) -> Option<crate::contract::KeyRange> {
        crate::contract::KeyRange::new(self.lo, self.hi)
    }

    /// The range as people read it: `[LO, HI)`, or `[LO, 2^64-1]` to the end.
    #[must_use]
    pub fn shown(self) -> String {
        self.key_range()
            .map_or_else(|| format!("[{}, {})", self.lo, self.hi), |r| r.shown())
    }
}

/// What the merge found of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ShardFinding {
    /// Exactly one attempt, finished at its end: taken into the union.
    Merged,
    /// Exactly one attempt, which has not reached its end (`shard_missing`): taken into the
    /// union, and the merged run is not verified.
    Unfinished,
    /// No attempt in the shard stores (`shard_missing`): nothing taken.
    Missing,
    /// Several attempts (`shard_conflict`): none taken.
    Conflict,
}

impl ShardFinding {
    /// The name receipts use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ShardFinding::Merged => "merged",
            ShardFinding::Unfinished => "unfinished",
            ShardFinding::Missing => "missing",
            ShardFinding::Conflict => "conflict",
        }
    }

    /// Whether the shard's run was taken into the union.
    #[must_use]
    pub fn taken(self) -> bool {
        matches!(self, ShardFinding::Merged | ShardFinding::Unfinished)
    }
}

/// One shard of a merged run's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardEntry {
    /// The shard's index in the plan, from 0; an entry's index is its position.
    pub index: u32,
    /// Its key range.
    pub key_range: ShardRange,
    /// What the merge found.
    pub finding: ShardFinding,
    /// The file name of the shard store its run was taken from; null when none was.
    pub store: Option<String>,
    /// That run, `run-N` in that store.
    pub run_id: Option<String>,
    /// That run's status.
    pub coverage_status: Option<Status>,
    /// That run's unique IDs (0 when none was taken).
    pub unique_ids_observed: u64,
    /// That run's Merkle root, as its own receipt shows it.
    pub merkle_root: Option<String>,
}

/// What a merged run was merged from: the plan's digest and its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedFrom {
    /// The plan's digest (docs/FORMAT.md §12).
    pub plan_digest: String,
    /// One entry per shard of the plan, in shard order.
    pub shards: Vec<ShardEntry>,
}

/// A merged run's shard list that is not a plan's: the first problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ShardListError {
    /// No shard, or more than `SHARDS_MAX`.
    #[error("a plan has from 1 to {SHARDS_MAX} shards")]
    Count,
    /// An entry whose index is not its position.
    #[error("shards[{k}].index must be {k}, not {index}")]
    Index {
        /// The position.
        k: usize,
        /// The index it holds.
        index: u32,
    },
    /// An empty list, where a cover is checked.
    #[error("the list has no shard")]
    Empty,
    /// The first range does not begin where the cover does (0 for a whole key space).
    #[error("shard 0 does not begin at {lo}")]
    Start {
        /// Where the cover begins.
        lo: u64,
    },
    /// The last range does not run to the end of the cover (2^64 - 1 for a whole key space).
    #[error("the last shard does not end at {hi}")]
    End {
        /// Where the cover ends.
        hi: u64,
    },
    /// A range with no ID.
    #[error("shard {k}'s range {range} is empty")]
    EmptyRange {
        /// The shard.
        k: usize,
        /// Its range, as shown.
        range: String,
    },
    /// A range that does not begin at a partition boundary.
    #[error("shard {k} begins at {lo}, not at a partition boundary")]
    Unaligned {
        /// The shard.
        k: usize,
        /// Where it begins.
        lo: u64,
    },
    /// Two ranges that do not meet.
    #[error("shard {k} ends at {hi} but shard {} begins at {next}", k + 1)]
    Apart {
        /// The first shard.
        k: usize,
        /// Where it ends.
        hi: u64,
        /// Where the next begins.
        next: u64,
    },
}

/// Checks the entries' shape beyond their types: from 1 to `SHARDS_MAX`, each index its
/// position.
///
/// # Errors
/// The first problem.
pub(crate) fn check_shape(shards: &[ShardEntry]) -> Result<(), ShardListError> {
    if shards.is_empty() || shards.len() > SHARDS_MAX as usize {
        return Err(ShardListError::Count);
    }
    for (k, s) in shards.iter().enumerate() {
        if s.index as usize != k {
            return Err(ShardListError::Index { k, index: s.index });
        }
    }
    Ok(())
}

/// Checks that the ranges cover the key space as a plan's must (docs/FORMAT.md §12): the
/// first `lo` 0, each `hi` the next `lo`, the last `hi` 2^64 - 1 (to the end, that ID
/// included), every bound but the last a multiple of the partition width.
///
/// # Errors
/// The first problem.
#[cfg(test)]
pub(crate) fn check_cover(shards: &[ShardEntry]) -> Result<(), ShardListError> {
    check_cover_of(shards, None)
}

/// [`check_cover`] of the key range `cover` (a sub-plan's, which divides one shard of another
/// plan) instead of the whole key space when given.
///
/// # Errors
/// The first problem.
pub(crate) fn check_cover_of(
    shards: &[ShardEntry],
    cover: Option<crate::contract::KeyRange>,
) -> Result<(), ShardListError> {
    let (Some(first), Some(last)) = (shards.first(), shards.last()) else {
        return Err(ShardListError::Empty);
    };
    let (lo, hi) = cover.map_or((0, u64::MAX), |r| (r.lo, r.hi));
    if first.key_range.lo != lo {
        return Err(ShardListError::Start { lo });
    }
    if last.key_range.hi != hi {
        return Err(ShardListError::End { hi });
    }
    for (k, s) in shards.iter().enumerate() {
        let r = s.key_range;
        if r.lo >= r.hi {
            return Err(ShardListError::EmptyRange {
                k,
                range: r.shown(),
            });
        }
        if (k > 0 || cover.is_some()) && !r.lo.is_multiple_of(PARTITION_WIDTH) {
            return Err(ShardListError::Unaligned { k, lo: r.lo });
        }
        if let Some(next) = shards.get(k + 1) {
            if next.key_range.lo != r.hi {
                let (hi, next) = (r.hi, next.key_range.lo);
                return Err(ShardListError::Apart { k, hi, next });
            }
        }
    }
    Ok(())
}

/// The IDs of `ids` in `range`, as a set of whole partitions: the range's bounds are
/// partition-aligned (the last shard's runs to the end, the ID 2^64 - 1 included).
#[must_use]
pub fn range_evidence(ids: &IdSet, range: ShardRange) -> IdSet {
    let mut out = IdSet::new();
    let Some(r) = range.key_range() else {
        return out;
    };
    let (lo_part, last_part) = (partition_of(r.lo), partition_of(r.last()));
    for (part, bitmap) in ids.partitions() {
        if part < lo_part || part > last_part {
            continue;
        }
        let mut kept = bitmap.clone();
        if part == lo_part || part == last_part {
            // A bound off a partition's edge (a plan's list has none): cut to the range.
            let base = part * PARTITION_WIDTH;
            let low = |id: u64| u32::try_from(id.saturating_sub(base).min(65_535)).unwrap_or(0);
            let mut mask = roaring::RoaringBitmap::new();
            mask.insert_range(low(r.lo)..=low(r.last()));
            kept &= mask;
        }
        if !kept.is_empty() {
            out.set_partition(part, kept);
        }
    }
    out
}

impl ShardEntry {
    /// The entry as one line of the readable layout (terminal-safe), without the label.
    #[must_use]
    pub fn summary(&self) -> String {
        let r = self.key_range;
        let head = format!("{} {}", self.index, r.shown());
        match (&self.store, &self.run_id) {
            (Some(store), Some(run)) if self.finding.taken() => format!(
                "{head}: {} of {}, {}{}, {} IDs, {}",
                super::terminal_safe(run),
                super::terminal_safe(store),
                self.coverage_status.map_or("-", Status::as_str),
                if self.finding == ShardFinding::Unfinished {
                    " (unfinished)"
                } else {
                    ""
                },
                self.unique_ids_observed,
                self.merkle_root.as_deref().unwrap_or("no root"),
            ),
            _ => match self.finding {
                ShardFinding::Conflict => {
                    format!("{head}: conflict (several attempts, none merged)")
                }
                _ => format!("{head}: missing (no run in the shard stores)"),
            },
        }
    }

    /// Whether the entry is a merged shard whose run is verified.
    pub(crate) fn clean(&self) -> bool {
        self.finding == ShardFinding::Merged && self.coverage_status == Some(Status::Verified)
    }
}

impl MergedFrom {
    /// The readable lines: the plan, then the shards (all of them up to `TEXT_SHARDS_MAX`;
    /// past it, the ones not merged and verified first, then a count of the rest).
    #[must_use]
    pub fn text_lines(&self) -> Vec<(&'static str, String)> {
        let n = self.shards.len();
        let clean = self.shards.iter().filter(|s| s.clean()).count();
        let mut lines = vec![(
            "plan",
            format!(
                "{} ({n} shard{}, {clean} merged and verified)",
                super::terminal_safe(&self.plan_digest),
                if n == 1 { "" } else { "s" }
            ),
        )];
        let all = n <= TEXT_SHARDS_MAX;
        let shown: Vec<&ShardEntry> = self
            .shards
            .iter()
            .filter(|s| all || !s.clean())
            .take(TEXT_SHARDS_MAX)
            .collect();
        for s in &shown {
            lines.push(("shard", s.summary()));
        }
        if shown.len() < n {
            lines.push((
                "shard",
                format!(
                    "and {} more (every shard is in the JSON receipt)",
                    n - shown.len()
                ),
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn entry(k: u32, lo: u64, hi: u64) -> ShardEntry {
        ShardEntry {
            index: k,
            key_range: ShardRange { lo, hi },
            finding: ShardFinding::Merged,
            store: Some(format!("shard-{k}.redb")),
            run_id: Some("run-1".to_owned()),
            coverage_status: Some(Status::Verified),
            unique_ids_observed: 0,
            merkle_root: None,
        }
    }

    #[test]
    fn a_cover_of_the_key_space_passes_and_gaps_overlaps_and_unaligned_bounds_do_not() {
        let w = PARTITION_WIDTH;
        let good = vec![
            entry(0, 0, w),
            entry(1, w, 3 * w),
            entry(2, 3 * w, u64::MAX),
        ];
        assert_eq!(check_shape(&good), Ok(()));
        assert_eq!(check_cover(&good), Ok(()));
        let mut gap = good.clone();
        gap[1].key_range.hi = 2 * w;
        assert!(check_cover(&gap)
            .unwrap_err()
            .to_string()
            .contains("shard 1 ends"));
        let mut unaligned = good.clone();
        unaligned[1].key_range.lo = w + 1;
        unaligned[0].key_range.hi = w + 1;
        assert!(check_cover(&unaligned)
            .unwrap_err()
            .to_string()
            .contains("partition boundary"));
        let mut short = good.clone();
        short[2].key_range.hi = u64::MAX - 1;
        assert!(check_cover(&short).is_err());
        let mut renumbered = good;
        renumbered[2].index = 7;
        assert!(check_shape(&renumbered)
            .unwrap_err()
            .to_string()
            .contains("index"));
        assert!(check_shape(&[]).is_err());
    }

    #[test]
    fn the_evidence_of_a_range_is_its_partitions_and_the_last_runs_to_the_top_id() {
        let mut ids = IdSet::new();
        for id in [
            1,
            2,
            PARTITION_WIDTH,
            5 * PARTITION_WIDTH + 7,
            u64::MAX - 1,
            u64::MAX,
        ] {
            ids.insert(id);
        }
        let first = range_evidence(
            &ids,
            ShardRange {
                lo: 0,
                hi: PARTITION_WIDTH,
            },
        );
        assert_eq!(first.iter().collect::<Vec<_>>(), [1, 2]);
        let last = range_evidence(
            &ids,
            ShardRange {
                lo: PARTITION_WIDTH,
                hi: u64::MAX,
            },
        );
        assert_eq!(
            last.iter().collect::<Vec<_>>(),
            [
                PARTITION_WIDTH,
                5 * PARTITION_WIDTH + 7,
                u64::MAX - 1,
                u64::MAX
            ]
        );
        // A range off the partitions' edges keeps only its own IDs.
        let inner = range_evidence(
            &ids,
            ShardRange {
                lo: 2,
                hi: 5 * PARTITION_WIDTH + 7,
            },
        );
        assert_eq!(inner.iter().collect::<Vec<_>>(), [2, PARTITION_WIDTH]);
    }

    #[test]
    fn the_text_lists_every_shard_of_a_small_plan_and_the_troubled_ones_of_a_large_one() {
        let w = PARTITION_WIDTH;
        let mut shards: Vec<ShardEntry> = (0..40u32)
            .map(|k| entry(k, u64::from(k) * w, u64::from(k + 1) * w))
            .collect();
        shards[39].key_range.hi = u64::MAX;
        shards[20].finding = ShardFinding::Missing;
        shards[20].store = None;
        shards[20].run_id = None;
        shards[20].coverage_status = None;
        let m = MergedFrom {
            plan_digest: "sha256:00".to_owned(),
            shards,
        };
        let lines = m.text_lines();
        assert!(lines[0].1.contains("40 shards, 39 merged and verified"));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].1.starts_with("20 ["), "{lines:?}");
        assert!(lines[1].1.contains("missing"));
        assert!(lines[2].1.contains("and 39 more"));
        let small = MergedFrom {
            plan_digest: "sha256:00".to_owned(),
            shards: m.shards[..3].to_vec(),
        };
        let lines = small.text_lines();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].1.contains("run-1 of shard-0.redb, verified"));
    }
}
