//! `digest::merkle_root` is a function of the ID set alone: the same set built in another
//! insertion order, through `insert_many`, or from run-compressed bitmaps (as a store or
//! another roaring writer may hand them over) has the same leaves and root, and every leaf
//! body is the canonical one of docs/FORMAT.md.

#![no_main]

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::{digest, IdSet};
use scanledger::{partition_of, PARTITION_BITS};
use scanledger_fuzz::{canonical_leaf_body, Bounded};

#[derive(Arbitrary, Debug)]
struct Input {
    singles: Bounded<(u8, u16), 512>,
    /// (partition, first low, length % 10,000): runs that make dense and run containers.
    runs: Bounded<(u8, u16, u16), 4>,
    /// Chunk size for `insert_many`.
    chunk: u8,
}

fn id(p: u8, low: u16) -> u64 {
    (u64::from(p % 8) << PARTITION_BITS) | u64::from(low)
}

fuzz_target!(|input: Input| {
    let mut ids: Vec<u64> = input.singles.0.iter().map(|(p, l)| id(*p, *l)).collect();
    for (p, first, len) in &input.runs.0 {
        // Long enough to cross the 4,096-ID array bound, short enough to keep a run fast.
        let last = first.saturating_add(len % 10_000);
        ids.extend((*first..last).map(|l| id(*p, l)));
    }
    let model: BTreeSet<u64> = ids.iter().copied().collect();

    let forward: IdSet = ids.iter().copied().collect();
    let backward: IdSet = ids.iter().rev().copied().collect();
    let sorted: IdSet = model.iter().copied().collect();
    let mut many = IdSet::new();
    let (mut dups, mut touched) = (Vec::new(), Vec::new());
    for chunk in ids.chunks(usize::from(input.chunk.max(1))) {
        many.insert_many(chunk, &mut dups, &mut touched);
    }
    assert_eq!(dups.len(), ids.len() - model.len());
    let mut compressed = IdSet::new();
    for (p, b) in sorted.partitions() {
        let mut b = b.clone();
        b.optimize();
        compressed.set_partition(p, b);
    }

    let root = digest::merkle_root(&sorted);
    let leaves = digest::leaves(&sorted);
    for set in [&forward, &backward, &many, &compressed] {
        set.check_invariants();
        assert_eq!(set.len(), model.len() as u64);
        assert_eq!(
            digest::leaves(set),
            leaves,
            "leaves depend on insertion order"
        );
        assert_eq!(
            digest::merkle_root(set),
            root,
            "root depends on insertion order"
        );
    }
    assert_eq!(
        digest::merkle_root_of_leaves(leaves.iter().map(|(_, h)| h)),
        root
    );
    if model.is_empty() {
        assert_eq!(root, digest::sha256(b""));
    }

    let mut body = Vec::new();
    for (p, b) in compressed.partitions() {
        let lows: Vec<u16> = model
            .iter()
            .filter(|v| partition_of(**v) == p)
            .map(|v| *v as u16)
            .collect();
        digest::leaf_body(b, &mut body);
        assert_eq!(
            body,
            canonical_leaf_body(&lows),
            "leaf body of partition {p}"
        );
    }
});
