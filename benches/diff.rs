//! `diff` of two runs loaded from the store, and the Merkle-leaf shortcut for equal runs.
//!
//! Run:   cargo bench --bench diff
//!
//! Back of the envelope: two equal finished runs compare two stored roots (two run-record
//! reads, microseconds). Two 10 M-ID runs that differ by 1% in every partition load ~150
//! bitmaps of 8 KiB per side (~2.5 MB) and subtract them: a few milliseconds; the target is
//! 25 ms. SQLite's `EXCEPT` on two 1 M-row runs takes ~1.2 s here, for scale.
//!
//! Datasets (deterministic `sim:` collections, dense IDs): `equal` is two scans of IDs
//! 1..=10 M; `shifted_1pct` compares 1..=10 M with 100,001..=10.1 M (100 k removed, 100 k
//! added, 1% of the IDs on each side, in the first and last partitions); `spread_1pct` is
//! 10 M IDs against the same IDs with every 100th removed and 100 k others added, so every
//! partition differs.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use scanledger::{
    Contract, Item, Page, PageRequest, PageSource, RunId, SimConfig, SimSource, Store, StoreOptions,
};

const RECORDS: u64 = 10_000_000;
const PAGE_SIZE: u32 = 100_000;

/// A source serving a fixed sorted ID list in pages, for the `spread` dataset.
struct ListSource(Vec<u64>);

impl PageSource for ListSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, scanledger::FetchError> {
        let offset: usize = req.request.cursor().map_or(0, |c| c.parse().unwrap_or(0));
        let end = (offset + PAGE_SIZE as usize).min(self.0.len());
        Ok({
            let mut page = Page::default();
            page.items = self.0[offset..end]
                .iter()
                .map(|id| Item::int(*id))
                .collect();
            page.next = (end < self.0.len()).then(|| end.to_string());
            page
        })
    }
}

fn contract() -> Contract {
    let mut c = Contract::new("bench-diff");
    c.page_size = PAGE_SIZE;
    c
}

fn scan<S: PageSource>(store: &mut Store, source: &mut S) -> RunId {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let done = rt
        .block_on(scanledger::scan(&contract(), source, store))
        .expect("bench scan");
    assert_eq!(done.reconciler.status(), scanledger::Status::Verified);
    done.meta.run_id
}

fn sim(start: u64) -> SimSource {
    SimSource::new({
        let mut config = SimConfig::default();
        config.records = RECORDS;
        config.start = start;
        config
    })
}

fn diff(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("diff.redb");
    let mut store = Store::open(&path, StoreOptions::new().checkpoint_every(1_000)).expect("store");
    let a = scan(&mut store, &mut sim(1));
    let a_again = scan(&mut store, &mut sim(1));
    let shifted = scan(&mut store, &mut sim(100_001));
    let spread: Vec<u64> = (1..=RECORDS)
        .filter(|id| id % 100 != 0)
        .chain(RECORDS + 1..=RECORDS + RECORDS / 100)
        .collect();
    let spread = scan(&mut store, &mut ListSource(spread));
    drop(store);
    let store = Store::open_read(&path).expect("store reopens read-only");

    let mut group = c.benchmark_group("diff");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(RECORDS));
    for (name, new) in [
        ("equal", a_again),
        ("shifted_1pct", shifted),
        ("spread_1pct", spread),
    ] {
        let d = scanledger::diff_runs(&store.read().expect("read"), a, new).expect("diff");
        eprintln!(
            "diff {name}: +{} -{} in {} differing partitions, {} partitions loaded",
            d.diff.added_count(),
            d.diff.removed_count(),
            d.diff.partitions_differing.len(),
            d.partitions_loaded
        );
        group.bench_function(BenchmarkId::new("diff_runs", name), |b| {
            b.iter(|| {
                let snap = store.read().expect("read");
                black_box(scanledger::diff_runs(&snap, black_box(a), black_box(new)).expect("diff"))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, diff);
criterion_main!(benches);
