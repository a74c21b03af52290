//! Comparisons across collections: two runs of different scopes, possibly in two store files
//! (a migration's source and target), and the content digests of two runs.
//!
//! Reads only through the two `Snapshot`s it is given (one per store file; the same one twice
//! when both runs live in one file). `int` and `prefixed` IDs are compared as numbers (under one
//! prefix); `string` IDs by their original bytes, through the digest every interned string is
//! stored with, never by the numbers each scope's interner happened to give them.
//! Invariants: in the `RunDiff` returned here `added` is in the new run's ID space and `removed`
//! in the old run's (one space for `int` and `prefixed`); the content comparison reads only the
//! 64-byte accumulators (docs/FORMAT.md §11), never a bitmap or a row.

use std::collections::BTreeMap;

use super::diff::{self, Diff, NotComparable};
use super::{comparable_of, DiffError, RunDiff};
use crate::content::ContentAcc;
use crate::contract::IdCodecKind;
use crate::digest::Hash;
use crate::idset::IdSet;
use crate::receipt::RunId;
use crate::store::{ReadError, RunHeader, ScopeKey, Snapshot};

/// Checks that two runs' IDs can be compared across scopes: one codec, and for `prefixed` one
/// prefix. The scopes may differ.
///
/// # Errors
/// `NotComparable::OtherCodec` or `OtherPrefix`, naming both runs.
pub fn comparable_across(old: &RunHeader, new: &RunHeader) -> Result<(), NotComparable> {
    let (mut a, b) = (comparable_of(old), comparable_of(new));
    // The scope is allowed to differ: compare the rest as if it were the same.
    a.source = b.source;
    a.tenant = b.tenant;
    diff::comparable(&a, &b)
}

/// Diffs two runs of possibly different scopes, each read through its own snapshot (pass the
/// same snapshot twice for two runs of one store). Equal finished runs cost two run-record
/// reads (their stored roots, which are functions of the ID sets alone); `int` and `prefixed`
/// runs then compare Merkle leaves and load only differing partitions, `string` runs compare
/// the digests of their strings.
///
/// # Errors
/// `NotComparable` for other codecs or prefixes; `Read` when a run is unknown or damaged.
pub fn diff_across(
    old_snap: &Snapshot<'_>,
    old: RunId,
    new_snap: &Snapshot<'_>,
    new: RunId,
) -> Result<RunDiff, DiffError> {
    let old_h = old_snap.header(old)?;
    let new_h = new_snap.header(new)?;
    comparable_across(&old_h, &new_h)?;
    if let (Some(a), Some(b)) = (old_h.merkle_root, new_h.merkle_root) {
        if a == b {
            return Ok(RunDiff {
                old: old_h,
                new: new_h,
                diff: Diff::default(),
                partitions_loaded: 0,
            });
        }
    }
    if old_h.contract.id_codec == IdCodecKind::String {
        let (diff, loaded) = strings_diff_of(old_snap, &old_h, new_snap, &new_h)?;
        return Ok(RunDiff {
            old: old_h,
            new: new_h,
            diff,
            partitions_loaded: loaded,
        });
    }
    super::diff_of_leaves(old_snap, old_h, new_snap, new_h)
}

/// The diff of two `string` runs by the digests of their strings, and the bitmaps it read.
pub(crate) fn strings_diff_of(
    old_snap: &Snapshot<'_>,
    old_h: &RunHeader,
    new_snap: &Snapshot<'_>,
    new_h: &RunHeader,
) -> Result<(Diff, u64), ReadError> {
    let old_ids = old_snap.ids(old_h.run_id)?;
    let new_ids = new_snap.ids(new_h.run_id)?;
    let loaded = (old_ids.partition_count() + new_ids.partition_count()) as u64;
    let a = digests_of(old_snap, old_h, &old_ids)?;
    let b = digests_of(new_snap, new_h, &new_ids)?;
    Ok((strings_diff(&a, &b), loaded))
}

/// (digest of the original string, interned ID) of every ID of a `string` run, by digest.
fn digests_of(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ids: &IdSet,
) -> Result<Vec<(Hash, u64)>, ReadError> {
    let mut out = Vec::with_capacity(usize::try_from(ids.len()).unwrap_or(0).min(1 << 24));
    snap.for_each_string(&ScopeKey::of(&header.contract), ids, |id, _, d| {
        out.push((*d, id));
        Ok(())
    })?;
    out.sort_unstable();
    Ok(out)
}

/// The diff of two sets of strings given as sorted (digest, ID) lists: `added` holds the new
/// side's IDs of digests the old side lacks, `removed` the old side's IDs of digests the new
/// side lacks. Digests identify strings (SHA-256 of the original bytes).
fn strings_diff(old: &[(Hash, u64)], new: &[(Hash, u64)]) -> Diff {
    let mut added = IdSet::new();
    let mut removed = IdSet::new();
    let (mut i, mut j) = (0, 0);
    // Each step advances i or j or both: at most old.len() + new.len() steps.
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.0 == n.0 => {
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o.0 < n.0 => {
                removed.insert(o.1);
                i += 1;
            }
            (Some(_), Some(n)) | (None, Some(n)) => {
                added.insert(n.1);
                j += 1;
            }
            (Some(o), None) => {
                removed.insert(o.1);
                i += 1;
            }
            (None, None) => break,
        }
    }
    let mut parts: Vec<u64> = added
        .partitions()
        .chain(removed.partitions())
        .map(|(p, _)| p)
        .collect();
    parts.sort_unstable();
    parts.dedup();
    Diff {
        added,
        removed,
        partitions_differing: parts,
    }
}

/// What the content digests of two runs say.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContentDiff {
    /// The old run has content accumulators (its source named content columns or pointers),
    /// or holds no ID at all.
    pub old_has_content: bool,
    /// The same for the new run.
    pub new_has_content: bool,
    /// Leaves (partitions, or string buckets) whose accumulators differ or that one side
    /// lacks, ascending.
    pub leaves_differing: Vec<u64>,
    /// Leaves compared (the union of both sides').
    pub leaves_compared: u64,
}

impl ContentDiff {
    /// Whether both runs have content digests and every leaf agrees.
    #[must_use]
    pub fn is_equal(&self) -> bool {
        self.old_has_content && self.new_has_content && self.leaves_differing.is_empty()
    }
}

/// The leaves whose 64-byte accumulators differ between two maps (ascending by leaf). Equal
/// accumulators are equal content leaves (`content::leaf_hash` hashes the leaf and the
/// accumulator), so this is the Merkle-leaf comparison without hashing.
#[must_use]
pub fn differing_content_leaves(
    old: &BTreeMap<u64, ContentAcc>,
    new: &BTreeMap<u64, ContentAcc>,
) -> Vec<u64> {
    let mut out: Vec<u64> = old
        .iter()
        .filter(|(l, a)| new.get(l) != Some(a))
        .map(|(l, _)| *l)
        .chain(new.keys().filter(|l| !old.contains_key(l)).copied())
        .collect();
    out.sort_unstable();
    out
}

/// Compares the content accumulators of two runs leaf by leaf (two table reads of 64 bytes per
/// leaf; no bitmap is loaded). Both runs must use one ID codec (and prefix): the leaves are then
/// the same partitions, or for `string` the same buckets of the original strings, whatever the
/// store or scope.
///
/// # Errors
/// `NotComparable` for other codecs; `Read` when a run is unknown or damaged.
pub fn content_diff(
    old_snap: &Snapshot<'_>,
    old: RunId,
    new_snap: &Snapshot<'_>,
    new: RunId,
) -> Result<ContentDiff, DiffError> {
    let old_h = old_snap.header(old)?;
    let new_h = new_snap.header(new)?;
    comparable_across(&old_h, &new_h)?;
    let a = old_snap.content(old)?;
    let b = new_snap.content(new)?;
    let leaves_differing = differing_content_leaves(&a, &b);
    let leaves_compared = (a.len() + b.keys().filter(|l| !a.contains_key(l)).count()) as u64;
    Ok(ContentDiff {
        old_has_content: !a.is_empty() || old_h.unique_ids_observed == 0,
        new_has_content: !b.is_empty() || new_h.unique_ids_observed == 0,
        leaves_differing,
        leaves_compared,
    })
}

/// The content accumulators of `int` IDs with their content digests, by partition, as a scan
/// builds them (docs/FORMAT.md §11); `None` when an ID has no digest (its source gave none).
#[must_use]
pub fn int_accumulators(
    contents: &BTreeMap<u64, Option<Hash>>,
) -> Option<BTreeMap<u64, ContentAcc>> {
    let mut out: BTreeMap<u64, ContentAcc> = BTreeMap::new();
    for (id, c) in contents {
        let c = c.as_ref()?;
        out.entry(crate::idset::partition_of(*id))
            .or_default()
            .add(&crate::content::entry(&id.to_le_bytes(), c));
    }
    Some(out)
}

/// The IDs both sides hold whose content digests differ, ascending.
#[must_use]
pub fn changed_ids(old: &BTreeMap<u64, Option<Hash>>, new: &BTreeMap<u64, Option<Hash>>) -> IdSet {
    old.iter()
        .filter(|(id, c)| new.get(id).is_some_and(|n| n != *c))
        .map(|(id, _)| *id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Hash {
        crate::digest::string_id_digest(s)
    }

    #[test]
    fn strings_are_compared_by_their_bytes_not_their_numbers() {
        // The same strings interned in other orders, and one string on each side alone.
        let mut old = vec![(d("a"), 0), (d("b"), 1), (d("c"), 2)];
        let mut new = vec![(d("c"), 0), (d("b"), 1), (d("z"), 2)];
        old.sort_unstable();
        new.sort_unstable();
        let diff = strings_diff(&old, &new);
        assert_eq!(
            diff.added.iter().collect::<Vec<_>>(),
            vec![2],
            "z, new's #2"
        );
        assert_eq!(
            diff.removed.iter().collect::<Vec<_>>(),
            vec![0],
            "a, old's #0"
        );
        assert!(strings_diff(&old, &old).is_empty());
    }

    #[test]
    fn rebuilt_accumulators_match_a_scan_and_name_changed_ids() {
        use crate::contract::{Contract, Item, Page, RawId};
        let item = |id: u64, c: u8| Item {
            content: Some([c; 32]),
            ..Item::new(RawId::Int(id))
        };
        let mut rec = crate::reconcile::Reconciler::new(&Contract::new("s"));
        let _ = rec.observe(&Page {
            items: vec![item(1, 7), item(70_000, 8), item(2, 9)],
            ..Page::default()
        });
        let old: BTreeMap<u64, Option<Hash>> = [
            (1, Some([7; 32])),
            (2, Some([9; 32])),
            (70_000, Some([8; 32])),
        ]
        .into();
        assert_eq!(int_accumulators(&old).as_ref(), Some(rec.content()));
        let mut new = old.clone();
        new.insert(2, Some([1; 32]));
        new.insert(3, Some([1; 32]));
        assert_eq!(changed_ids(&old, &new).iter().collect::<Vec<_>>(), vec![2]);
        new.insert(4, None);
        assert!(int_accumulators(&new).is_none());
    }

    #[test]
    fn content_leaves_differ_where_an_accumulator_does() {
        let acc = |b: u8| ContentAcc([b; 64]);
        let old: BTreeMap<u64, ContentAcc> = [(0, acc(1)), (1, acc(2)), (3, acc(4))].into();
        let new: BTreeMap<u64, ContentAcc> = [(0, acc(1)), (1, acc(9)), (2, acc(4))].into();
        assert_eq!(differing_content_leaves(&old, &new), vec![1, 2, 3]);
        assert!(differing_content_leaves(&old, &old).is_empty());
    }
}
