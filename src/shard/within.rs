//! Plans of plans: a shard of a plan divided by a plan of its own (a *sub-plan*), whose merged
//! run is then that shard's run in the outer plan's merge, so merges compose:
//! `merge(merge(A, B), merge(C, D))` is a run of the outer plan with the root, counts and
//! verdict of `merge(A, B, C, D)`.
//!
//! A sub-plan is a plan file of format `scanledger-plan/3`: the same keys as format 2, but its
//! `contract` is the outer plan's contract of the shard it divides (with that shard's
//! `key_range` and its `shard` reference to the outer plan), and its shards cover exactly that
//! key range instead of the whole key space. Its own shards' contracts name the sub-plan (a
//! shard contract carries one plan reference), and the run `merge` writes of the sub-plan runs
//! under the sub-plan's `contract`: to the outer plan's merge it is an attempt of its shard
//! like any other, checked the same way (the contract's digest, the key range, every ID within
//! it), and its findings are carried, so a sub-merge that is not verified makes the outer merge
//! not verified. Format 2 plans are written and read as before.
//!
//! Invariants: a sub-plan's shards are disjoint, contiguous, partition-aligned and cover its
//! contract's key range; its contract's digest is the outer plan's shard contract's.

use serde_json::Value;

use crate::contract::{Contract, KeyRange, SHARDS_MAX};
use crate::idset::PARTITION_WIDTH;

use super::plan::{Plan, Split};

/// The `format` of a sub-plan's file: a plan whose shards divide one shard of another plan.
pub const PLAN_FORMAT_WITHIN: &str = "scanledger-plan/3";

/// The whole key space, which a plan of format 2 covers.
const WHOLE: KeyRange = KeyRange {
    lo: 0,
    hi: KeyRange::END,
};

impl Plan {
    /// The key range the plan's shards cover: the whole key space, or for a sub-plan the
    /// range of the outer plan's shard it divides.
    #[must_use]
    pub fn cover(&self) -> KeyRange {
        self.contract.scope.key_range.unwrap_or(WHOLE)
    }

    /// Whether the plan divides a shard of another plan (format 3).
    #[must_use]
    pub fn is_sub_plan(&self) -> bool {
        self.contract.scope.shard.is_some()
    }

    /// The plan file's `format`.
    pub(super) fn format(&self) -> &'static str {
        if self.is_sub_plan() {
            PLAN_FORMAT_WITHIN
        } else {
            super::PLAN_FORMAT
        }
    }

    /// The plan file's `contract`: the base contract, or a sub-plan's whole (its key range and
    /// its reference to the outer plan included).
    pub(super) fn contract_value(&self) -> Value {
        if self.is_sub_plan() {
            self.contract.to_value()
        } else {
            self.contract.base().to_value()
        }
    }

    /// Checks that the shards cover [`Plan::cover`] as a plan's must (each ID in exactly one).
    pub(crate) fn check_cover(&self) -> Result<(), super::plan::ShardsError> {
        if !self.is_sub_plan() {
            return super::plan::check_shards(&self.shards);
        }
        if self.contract.scope.key_range.is_none() {
            return Err(super::plan::ShardsError::Within(
                "a sub-plan's contract has a key_range".to_owned(),
            ));
        }
        check_within(&self.shards, self.cover()).map_err(super::plan::ShardsError::Within)
    }

    /// A sub-plan: shard `index` of `outer` divided into `n` shards of equal widths (in
    /// partitions) of its key range. The sub-plan's contract is `outer`'s contract of that
    /// shard; snapshot and source are `outer`'s.
    ///
    /// # Errors
    /// A sentence when `outer` has no such shard, or `n` is 0, above `SHARDS_MAX` or above
    /// the partitions of the shard's range.
    pub fn within(
        outer: &Plan,
        index: u32,
        n: u32,
        created_at: String,
        nonce: String,
    ) -> Result<Plan, String> {
        let contract = outer.shard_contract(index).ok_or_else(|| {
            format!(
                "--shard {index}: the plan has shards 0 to {}",
                outer.shards.len().saturating_sub(1)
            )
        })?;
        let range = contract
            .scope
            .key_range
            .ok_or_else(|| "the outer plan's shard has no key range".to_owned())?;
        let shards = split_within(range, n)?;
        Ok(Plan {
            contract,
            source: outer.source.clone(),
            snapshot_id: outer.snapshot_id.clone(),
            snapshot_held: outer.snapshot_held,
            split: Split {
                by: "within".to_owned(),
                lo: range.lo,
                last: range.last(),
            },
            shards,
            created_at,
            nonce,
        })
    }
}

/// Checks a plan file's `format` (`PLAN_FORMAT` or `PLAN_FORMAT_WITHIN`) against its
/// contract's scope: a plan's base contract has no key range and no shard, a sub-plan's has
/// both (the outer plan's shard). The problem names its key.
pub(super) fn check_format(
    format: &str,
    contract: &Contract,
) -> Result<(), (&'static str, String)> {
    let within = format == PLAN_FORMAT_WITHIN;
    if format != super::PLAN_FORMAT && !within {
        return Err((
            "format",
            format!(
                "{format:?} is not read by this build (it reads {:?} and {PLAN_FORMAT_WITHIN:?})",
                super::PLAN_FORMAT
            ),
        ));
    }
    let scoped = (
        contract.scope.key_range.is_some(),
        contract.scope.shard.is_some(),
    );
    if !within && scoped != (false, false) {
        let problem = "the base contract has no key_range and no shard";
        return Err(("contract", problem.to_owned()));
    }
    if within && scoped != (true, true) {
        let problem =
            "a sub-plan's contract is its outer plan's shard contract: a key_range and a shard";
        return Err(("contract", problem.to_owned()));
    }
    Ok(())
}

/// Cuts `range` (partition-aligned at its start) into `n` shards of equal widths in
/// partitions, each bound a partition boundary; the first begins at `range.lo`, the last ends
/// at `range.hi`.
///
/// ```
/// use scanledger::{shard::split_within, KeyRange};
/// let r = KeyRange::new(65_536, 4 * 65_536).unwrap();
/// let s = split_within(r, 3).unwrap();
/// assert_eq!(s.iter().map(|s| (s.lo, s.hi)).collect::<Vec<_>>(),
///            [(65_536, 131_072), (131_072, 196_608), (196_608, 262_144)]);
/// assert!(split_within(r, 4).is_err());
/// ```
///
/// # Errors
/// A sentence when `n` is 0 or above `SHARDS_MAX` or the range's partitions, or the range
/// does not begin at a partition boundary.
pub fn split_within(range: KeyRange, n: u32) -> Result<Vec<KeyRange>, String> {
    if n == 0 || n > SHARDS_MAX {
        return Err(format!("--shards: from 1 to {SHARDS_MAX}"));
    }
    if !range.lo.is_multiple_of(PARTITION_WIDTH) {
        return Err(format!(
            "the range {} does not begin at a partition boundary",
            range.shown()
        ));
    }
    let first = range.lo / PARTITION_WIDTH;
    let parts = u128::from(range.last() / PARTITION_WIDTH - first) + 1;
    if u128::from(n) > parts {
        return Err(format!(
            "--shards {n}: the range {} holds {parts} partitions, and each shard needs one",
            range.shown()
        ));
    }
    let mut edges = vec![range.lo];
    for j in 1..u128::from(n) {
        // Within the range: parts * j / n < parts, so the bound is below range.last().
        let offset = parts * j / u128::from(n) * u128::from(PARTITION_WIDTH);
        let bound = u64::try_from(u128::from(range.lo) + offset)
            .map_err(|_| "the key space overflows".to_owned())?;
        edges.push(bound);
    }
    edges.push(range.hi);
    edges
        .windows(2)
        .map(|w| KeyRange::new(w[0], w[1]).ok_or_else(|| "an empty shard".to_owned()))
        .collect()
}

/// Checks that `shards` cover `cover` exactly: in order, contiguous, each bound between two
/// shards a partition boundary.
pub(crate) fn check_within(shards: &[KeyRange], cover: KeyRange) -> Result<(), String> {
    let (Some(first), Some(last)) = (shards.first(), shards.last()) else {
        return Err(format!("from 1 to {SHARDS_MAX} shards"));
    };
    if shards.len() > SHARDS_MAX as usize {
        return Err(format!("from 1 to {SHARDS_MAX} shards"));
    }
    if first.lo != cover.lo || last.hi != cover.hi {
        return Err(format!(
            "the shards cover {} to {}, not the sub-plan's key range {}",
            first.lo,
            last.last(),
            cover.shown()
        ));
    }
    for (k, w) in shards.windows(2).enumerate() {
        if w[0].hi != w[1].lo {
            return Err(format!(
                "shard {k} ends at {} and shard {} begins at {}: every ID in exactly one shard",
                w[0].hi,
                k + 1,
                w[1].lo
            ));
        }
        if !w[1].lo.is_multiple_of(PARTITION_WIDTH) {
            return Err(format!(
                "shard {} begins at {}, not at a partition boundary (a multiple of {PARTITION_WIDTH})",
                k + 1,
                w[1].lo
            ));
        }
    }
    Ok(())
}
