//! Laws of the diff, checked against a `BTreeSet<u64>` model on small sets whose partitions
//! take all three roaring container kinds (sparse arrays, runs, dense bitmaps).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::digest;

/// A set built from sparse IDs, a consecutive run, and a dense random block, all over a few
/// partitions so that old and new share some of them.
fn id_set() -> impl Strategy<Value = BTreeSet<u64>> {
    let sparse = proptest::collection::btree_set(0u64..(4 << 16), 0..200);
    let run = (0u64..(4 << 16), 0u64..10_000);
    let dense = proptest::option::of((0u64..4, proptest::collection::vec(any::<u16>(), 5_000)));
    (sparse, run, dense).prop_map(|(mut s, (start, len), dense)| {
        s.extend(start..start + len);
        if let Some((p, lows)) = dense {
            s.extend(lows.into_iter().map(|l| (p << 16) | u64::from(l)));
        }
        s
    })
}

fn to_set(m: &BTreeSet<u64>) -> IdSet {
    m.iter().copied().collect()
}

#[track_caller]
fn check(old: &BTreeSet<u64>, new: &BTreeSet<u64>) {
    let (o, n) = (to_set(old), to_set(new));
    let d = between(&o, &n);
    d.check_invariants(&o, &n);
    // Counts equal the naive set differences.
    let added: BTreeSet<u64> = new.difference(old).copied().collect();
    let removed: BTreeSet<u64> = old.difference(new).copied().collect();
    assert_eq!(d.added.iter().collect::<BTreeSet<u64>>(), added);
    assert_eq!(d.removed.iter().collect::<BTreeSet<u64>>(), removed);
    assert_eq!(d.added_count(), added.len() as u64);
    assert_eq!(d.removed_count(), removed.len() as u64);
    // Applying the diff to old gives new.
    assert_eq!(d.apply(&o), n);
    // The leaf-driven path (what the store does) agrees with the direct one, and loads
    // exactly the partitions that differ.
    let differing = differing_partitions(&digest::leaves(&o), &digest::leaves(&n));
    assert_eq!(differing, d.partitions_differing);
    let via_leaves = of_partitions(
        differing
            .iter()
            .map(|p| (*p, o.partition(*p), n.partition(*p))),
    );
    assert_eq!(via_leaves, d);
    // The diff is empty exactly when the sets (and so the roots) are equal.
    assert_eq!(d.is_empty(), old == new);
    assert_eq!(
        d.is_empty(),
        digest::merkle_root(&o) == digest::merkle_root(&n)
    );
}

proptest! {
    // Each case builds sets of up to ~15 000 IDs and hashes them; 64 cases keep the run short.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn diff_matches_the_model(old in id_set(), new in id_set()) {
        check(&old, &new);
    }

    #[test]
    fn diff_of_a_set_with_itself_is_empty(s in id_set()) {
        let set = to_set(&s);
        let d = between(&set, &set);
        prop_assert!(d.is_empty());
        prop_assert_eq!(d.added_count() + d.removed_count(), 0);
        prop_assert!(differing_partitions(&digest::leaves(&set), &digest::leaves(&set)).is_empty());
    }

    #[test]
    fn diff_of_a_small_edit(s in id_set(), edits in proptest::collection::vec(0u64..(4 << 16), 1..50)) {
        let mut new = s.clone();
        for e in edits {
            if !new.remove(&e) {
                new.insert(e);
            }
        }
        check(&s, &new);
    }

    #[test]
    fn gaps_match_the_model(s in proptest::collection::btree_set(0u64..300, 0..100), lo in 0u64..300, width in 0u64..300) {
        let hi = lo + width;
        let set = to_set(&s);
        let r = RangeList::gaps(&set, lo, hi);
        let missing: Vec<u64> = (lo..=hi).filter(|i| !s.contains(i)).collect();
        prop_assert_eq!(r.ids_total, missing.len() as u128);
        let expanded: Vec<u64> = r.shown.iter().flat_map(|(a, b)| *a..=*b).collect();
        if r.ranges_total as usize <= RANGES_SHOWN_MAX {
            prop_assert_eq!(expanded, missing);
        }
    }
}

#[test]
fn diff_of_disjoint_partitions() {
    let old: BTreeSet<u64> = (0..10).collect();
    let new: BTreeSet<u64> = (1 << 20..(1 << 20) + 10).collect();
    check(&old, &new);
    let d = between(&to_set(&old), &to_set(&new));
    assert_eq!(d.partitions_differing, vec![0, 16]);
}

#[test]
fn diff_against_empty() {
    let s: BTreeSet<u64> = (0..70_000).collect();
    check(&BTreeSet::new(), &s);
    check(&s, &BTreeSet::new());
    check(&BTreeSet::new(), &BTreeSet::new());
}

#[test]
fn ranges_cap_and_count() {
    let s: IdSet = (0..100u64).map(|i| i * 2).collect();
    let r = RangeList::of(&s);
    assert_eq!(r.shown.len(), RANGES_SHOWN_MAX);
    assert_eq!(r.ranges_total, 100);
    assert_eq!(r.ids_total, 100);
}

#[test]
fn gaps_over_the_whole_id_space() {
    let s: IdSet = [0, u64::MAX].into_iter().collect();
    let r = RangeList::gaps(&s, 0, u64::MAX);
    assert_eq!(r.shown, vec![(1, u64::MAX - 1)]);
    assert_eq!(r.ids_total, u128::from(u64::MAX) - 1);
    let empty = RangeList::gaps(&IdSet::new(), 0, u64::MAX);
    assert_eq!(empty.ids_total, u128::from(u64::MAX) + 1);
    let full_at_end = RangeList::gaps(&[u64::MAX].into_iter().collect(), u64::MAX - 2, u64::MAX);
    assert_eq!(full_at_end.shown, vec![(u64::MAX - 2, u64::MAX - 1)]);
}
