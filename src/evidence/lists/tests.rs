//! The answers of `diff` and `missing` against the sets they compare, through a real store.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::Path;

use super::*;
use crate::contract::{Contract, Item, Page};
use crate::store::{Store, StoreOptions};

/// A store with one finished run per ID list, in order.
fn store_of(dir: &Path, runs: &[Vec<u64>]) -> Store {
    let mut store = Store::open(&dir.join("s.redb"), StoreOptions::new()).unwrap();
    for ids in runs {
        let contract = Contract::new("s");
        let mut rec = crate::reconcile::Reconciler::new(&contract);
        for (k, chunk) in ids.chunks(5_000).enumerate() {
            let _ = rec.observe(&Page {
                items: chunk.iter().map(|i| Item::int(*i)).collect(),
                next: Some(format!("c{k}")),
                ..Page::default()
            });
        }
        store
            .write_merged(&contract, &rec, Vec::new(), None, 0, 1)
            .unwrap();
    }
    store
}

#[test]
fn a_diff_report_counts_every_range_and_shows_the_first() {
    let dir = tempfile::tempdir().unwrap();
    // Ranges that straddle partition boundaries, and more ranges than are shown.
    let old: Vec<u64> = (0..200_000).filter(|i| i % 3 != 0).collect();
    let new: Vec<u64> = (65_530..65_540).chain([7, 500_000]).collect();
    let store = store_of(dir.path(), &[old.clone(), new.clone()]);
    let snap = store.read().unwrap();
    let at = |run| RunAt {
        snap: &snap,
        run: RunId(run),
        store: dir.path(),
    };
    let cmp = compare(at(1), at(2), false, false).unwrap();
    let r = diff_report(&cmp).unwrap();
    let (a, b): (IdSet, IdSet) = (old.into_iter().collect(), new.into_iter().collect());
    let d = crate::evidence::diff::between(&a, &b);
    assert_eq!(r.added_count, d.added_count());
    assert_eq!(r.removed_count, d.removed_count());
    assert_eq!(r.removed_ranges_total, d.removed.ranges().count() as u64);
    assert_eq!(
        r.added_ranges,
        [
            "65532..65532",
            "65535..65535",
            "65538..65538",
            "500000..500000"
        ]
    );
    assert_eq!(r.removed_ranges.len(), RANGES_SHOWN_MAX);
    assert_eq!(
        r.partitions_differing_total,
        d.partitions_differing.len() as u64
    );
    // Every range, as found, is the set's.
    let mut every = Vec::new();
    cmp.each_range(Which::Removed, None, |s| {
        every.push(s.to_owned());
        Ok(())
    })
    .unwrap();
    let want: Vec<String> = d
        .removed
        .ranges()
        .map(|(x, y)| format!("{x}..{y}"))
        .collect();
    assert_eq!(every, want);
}
