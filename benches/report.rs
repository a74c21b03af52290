//! The review packet: a report of a run with 10 million IDs over 155 partitions.
//!
//! Run:   cargo bench --bench report
//!
//! Target: under one second. Back of the envelope: rendering is a function of the
//! number of partitions (155 cells, a few lists capped at 32 entries), not of the IDs:
//! microseconds. Gathering from the store loads the run whole (155 bitmaps of ~8 KiB), builds
//! its receipt (the Merkle root hashes 40 MB of canonical IDs with SHA-256: ~100-200 ms on
//! this machine) and, with `--against`, diffs the two runs' leaves and loads the reference.
//!
//! Cases: `render/in_memory` renders a `ReportInput` built in memory (no store);
//! `gather_render/alone` and `gather_render/against` are `scanledger report` minus the file
//! write: `gather_from` on a real redb store, then `render`. Dataset: partition p (0..155)
//! holds 64,516 or 64,517 IDs scattered over its range (10,000,000 in all), every 1,000th
//! labelled; the reference lacks every 100th ID, so all 155 partitions differ.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use scanledger::PARTITION_WIDTH;
use scanledger::{
    gather_report, render_report, RangeSummary, ReportInput, ReportReference as Reference,
};
use scanledger::{
    Contract, IdCodecKind, Item, Page, PageRequest, PageSource, RawId, Receipt, RunId, Status,
    Store, StoreOptions,
};

const RECORDS: u64 = 10_000_000;
const PARTITIONS: u64 = 155;

/// IDs of partition `p`: 10 M spread as evenly as the partitions allow.
fn count_of(p: u64) -> u64 {
    RECORDS / PARTITIONS + u64::from(p < RECORDS % PARTITIONS)
}

/// Whether partition-local ID `low` is one of the partition's `n`: a scattered choice (the
/// multiplication by an odd number is a bijection modulo 2^16), so bitmaps are not one run.
fn kept(low: u64, n: u64) -> bool {
    (low * 7_919) % PARTITION_WIDTH < n
}

/// Serves partition k as page k; `sparse` drops every 100th ID.
struct PartitionSource {
    sparse: bool,
}

impl PageSource for PartitionSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, scanledger::FetchError> {
        let p: u64 = req.request.cursor().map_or(0, |c| c.parse().unwrap_or(0));
        let base = p * PARTITION_WIDTH;
        let n = count_of(p);
        let items = (0..PARTITION_WIDTH)
            .filter(|low| kept(*low, n) && (!self.sparse || low % 100 != 0))
            .map(|low| {
                let id = base + low;
                if low % 1_000 == 1 {
                    Item::new(RawId::Int(id)).with_labels(vec!["needs_migration".to_owned()])
                } else {
                    Item::int(id)
                }
            })
            .collect();
        Ok({
            let mut page = Page::default();
            page.items = items;
            page.next = (p + 1 < PARTITIONS).then(|| (p + 1).to_string());
            page.snapshot = Some("customers-2026-11-29".to_owned());
            page
        })
    }
}

fn scan(store: &mut Store, sparse: bool) -> RunId {
    let mut c = Contract::new("bench-report");
    c.page_size = 100_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let done = rt
        .block_on(scanledger::scan(&c, &mut PartitionSource { sparse }, store))
        .expect("bench scan");
    assert_eq!(done.reconciler.status(), Status::Verified);
    done.meta.run_id
}

/// The same shape as `gather` gives, built without a store.
fn in_memory(receipt: Receipt) -> ReportInput {
    let partitions: Vec<(u64, u64)> = (0..PARTITIONS).map(|p| (p, count_of(p))).collect();
    let ranges = |n: u64| RangeSummary {
        count: n,
        ranges: (0..32).map(|k| format!("{k}00..{k}99")).collect(),
        ranges_total: n,
    };
    ReportInput {
        receipt,
        state: "finished".to_owned(),
        stopped_by: None,
        id_codec: IdCodecKind::Int,
        id_prefix: None,
        expected_partitions: Some(partitions.clone()),
        reference: Some(Reference {
            run_id: "run-1".to_owned(),
            coverage_status: Status::Verified,
            snapshot_id: Some("customers-2026-11-22".to_owned()),
            unique_ids: RECORDS - RECORDS / 100,
            partitions: partitions.iter().map(|&(p, n)| (p, n - n / 100)).collect(),
            added: ranges(RECORDS / 100),
            removed: RangeSummary::default(),
            partitions_differing: (0..PARTITIONS).collect(),
        }),
        migration: None,
        partitions,
        generator: "bench".to_owned(),
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("report.redb");
    let mut store = Store::open(&path, StoreOptions::new().checkpoint_every(1_000)).expect("store");
    let reference = scan(&mut store, true);
    let run = scan(&mut store, false);
    drop(store);
    let store = Store::open_read(&path).expect("store reopens read-only");

    let gathered =
        gather_report(&store.read().expect("read"), run, Some(reference)).expect("gather");
    assert_eq!(gathered.receipt.unique_ids_observed, RECORDS);
    assert_eq!(gathered.partitions.len() as u64, PARTITIONS);
    let html = render_report(&gathered);
    eprintln!(
        "report of {} IDs in {} partitions against {}: {} bytes of HTML",
        RECORDS,
        gathered.partitions.len(),
        reference,
        html.len()
    );
    let input = in_memory(gathered.receipt.clone());

    let mut group = c.benchmark_group("report");
    group.throughput(Throughput::Elements(RECORDS));
    group.bench_function("render/in_memory", |b| {
        b.iter(|| black_box(render_report(black_box(&input))));
    });
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("gather_render/alone", |b| {
        b.iter(|| {
            let i = gather_report(&store.read().expect("read"), run, None).expect("gather");
            black_box(render_report(&i))
        });
    });
    group.bench_function("gather_render/against", |b| {
        b.iter(|| {
            let i =
                gather_report(&store.read().expect("read"), run, Some(reference)).expect("gather");
            black_box(render_report(&i))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
