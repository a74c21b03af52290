//! Digests: `digest::merkle_root` of a 10 M-ID `IdSet`.
//!
//! Run:   cargo bench --bench merkle
//! One:   cargo bench --bench merkle -- 'merkle/merkle_root/dense'
//! Save:  cargo bench --bench merkle -- --save-baseline main
//! Diff:  cargo bench --bench merkle -- --baseline main
//!
//! Back of the envelope: a leaf hashes its canonical body, 8 KiB for a partition holding
//! more than 4,096 IDs, 2 bytes per ID below that. Dense 10 M IDs are 153 full partitions
//! (1.25 MB to hash); at 20 % density they are 763 partitions of ~13,100 IDs (6.2 MB). With
//! SHA-NI (~1.5-2 GB/s) that is ~1 ms and ~4 ms, inside the 5 ms target only if building
//! the leaf bodies costs little next to hashing them. `sparse1` (1 % density, array
//! containers, 15,000 leaves, 20 MB of u16 bodies) has no target and shows the other path.
//! `dense_runs` is `dense` with run-compressed bitmaps: the same root, but today's
//! `leaf_body` rebuilds such a leaf value by value.
//!
//! Datasets (fixed seed): `dense` is IDs `0..10_000_000`; `density20` and `sparse1` keep each
//! ID of `0, 1, 2, …` with probability 1/5 and 1/100 until they hold 10 M IDs; `dense_runs`
//! holds the IDs of `dense` in run containers.

use std::hint::black_box;
use std::time::Duration;

mod common;
use common::{SplitMix64, SEED};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use roaring::RoaringBitmap;
use scanledger::{digest, IdSet};

/// IDs in every dataset.
const N_IDS: u64 = 10_000_000;

/// `N_IDS` IDs, each ID of `0, 1, 2, …` kept with probability `1 / one_in`, built one
/// partition bitmap at a time (inserting 10 M IDs one by one would dominate setup). With
/// `runs`, each bitmap is run-compressed (`RoaringBitmap::optimize`), as a store, a diff or
/// another roaring writer may hand it over.
fn with_density(one_in: u64, runs: bool) -> IdSet {
    let mut rng = SplitMix64(SEED);
    let mut set = IdSet::new();
    let mut id = 0u64;
    let mut left = N_IDS;
    while left > 0 {
        let p = id >> scanledger::PARTITION_BITS;
        let mut b = RoaringBitmap::new();
        while left > 0 && id >> scanledger::PARTITION_BITS == p {
            if one_in == 1 || rng.next_u64().is_multiple_of(one_in) {
                b.insert((id & (scanledger::PARTITION_WIDTH - 1)) as u32);
                left -= 1;
            }
            id += 1;
        }
        if runs {
            b.optimize();
        }
        set.set_partition(p, b);
    }
    assert_eq!(set.len(), N_IDS);
    set
}

fn merkle(c: &mut Criterion) {
    let mut group = c.benchmark_group("merkle");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(N_IDS));
    for (name, one_in, runs) in [
        ("dense", 1, false),
        ("dense_runs", 1, true),
        ("density20", 5, false),
        ("sparse1", 100, false),
    ] {
        let set = with_density(one_in, runs);
        eprintln!(
            "merkle dataset {name}: {} IDs in {} partitions",
            set.len(),
            set.partition_count()
        );
        group.bench_with_input(BenchmarkId::new("merkle_root", name), &set, |b, set| {
            b.iter(|| digest::merkle_root(black_box(set)));
        });
        group.bench_with_input(BenchmarkId::new("leaves", name), &set, |b, set| {
            b.iter(|| digest::leaves(black_box(set)));
        });
    }
    group.finish();
}

criterion_group!(benches, merkle);
criterion_main!(benches);
