//! Reconciliation core: `Reconciler::observe` over pages of 1,000 `int` IDs.
//!
//! Run:   cargo bench --bench reconcile
//! One:   cargo bench --bench reconcile -- 'reconcile/observe/random'
//! Save:  cargo bench --bench reconcile -- --save-baseline main
//! Diff:  cargo bench --bench reconcile -- --baseline main
//!
//! Back of the envelope: a dense page is one partition lookup and 1,000 bitmap inserts
//! (a few ns each), plus two SHA-256 blocks for the cursor chain, so ~5 µs per page and
//! well above the 50 M IDs/s target; a random page touches ~8 partitions in turn, so every
//! ID pays a `BTreeMap` lookup (~20 ns): the 10 M IDs/s target leaves room for that.
//!
//! Datasets come from a fixed seed so that every run times the same pages:
//! - `dense`: IDs `0..100_000` in order, 1,000 per page;
//! - `sparse`: every fifth ID of `0..500_000` in order (sorted, array containers);
//! - `random`: 100,000 distinct IDs of a fixed permutation of `0..500_000`, in that order.

use std::hint::black_box;

mod common;
use common::{SplitMix64, SEED};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use scanledger::{Contract, Item, Page, Reconciler, Step};

/// IDs per page, as the targets are stated.
const IDS_PER_PAGE: usize = 1_000;
/// Pages observed per timed iteration (100k IDs into a fresh `Reconciler`).
const PAGES_PER_ITER: usize = 100;
/// The random dataset draws from a space this many times larger than the IDs it keeps.
const SPACE_FACTOR: u64 = 5;

/// A Fisher-Yates permutation of `0..space`, seeded.
fn permutation(space: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..space).collect();
    let mut rng = SplitMix64(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// Pages of `IDS_PER_PAGE` IDs in the given order, each with a fresh cursor but the last.
fn pages_of(ids: &[u64]) -> Vec<Page> {
    let n_pages = ids.len().div_ceil(IDS_PER_PAGE);
    ids.chunks(IDS_PER_PAGE)
        .enumerate()
        .map(|(i, chunk)| {
            let mut page = Page::default();
            page.items = chunk.iter().copied().map(Item::int).collect();
            page.next = (i + 1 < n_pages).then(|| format!("c{i}"));
            page
        })
        .collect()
}

fn datasets() -> Vec<(&'static str, Vec<Page>)> {
    let n = (IDS_PER_PAGE * PAGES_PER_ITER) as u64;
    let dense: Vec<u64> = (0..n).collect();
    let sparse: Vec<u64> = (0..n).map(|i| i * SPACE_FACTOR).collect();
    let mut random = permutation(n * SPACE_FACTOR, SEED);
    random.truncate(n as usize);
    vec![
        ("dense", pages_of(&dense)),
        ("sparse", pages_of(&sparse)),
        ("random", pages_of(&random)),
    ]
}

fn observe(c: &mut Criterion) {
    let contract = Contract::new("bench");
    let mut group = c.benchmark_group("reconcile");
    group.sample_size(20);
    group.warm_up_time(std::time::Duration::from_secs(1));
    group.measurement_time(std::time::Duration::from_secs(3));
    for (name, pages) in datasets() {
        let n_ids: usize = pages.iter().map(|p| p.items.len()).sum();
        group.throughput(Throughput::Elements(n_ids as u64));
        group.bench_with_input(BenchmarkId::new("observe", name), &pages, |b, pages| {
            b.iter_batched(
                || Reconciler::new(&contract),
                |mut r| {
                    let mut last = Step::Done;
                    for page in pages {
                        last = r.observe(black_box(page)).step;
                    }
                    // The dataset is clean: the last page must end the run verified, or the
                    // bench is timing a failure path instead of the common one.
                    assert_eq!(last, Step::Done);
                    assert_eq!(r.ids().len(), n_ids as u64);
                    r
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, observe);
criterion_main!(benches);
