//! The replay source on its own (no reconciler, no store): the indexing pass that reads every
//! line's request key when a file is opened, and the fetch (the full parse) of every page in
//! order.
//!
//! Run:   cargo bench --bench replay
//! One:   cargo bench --bench replay -- 'replay/open/'
//!
//! Datasets: `customer` is 1 M `customer-N` string IDs (the prefixed codec's shape) listed in
//! pages of 1,000, one JSON line per page (~19.5 MB); `int` is the same IDs as integers;
//! `range_prefixed` is one `{"range": [1, 100000], "prefix": "customer-"}` page (the
//! generator's expansion, one string allocated per ID), against `format_baseline`, the same
//! items made with `format!`.
//!
//! Back of the envelope: serde_json skims JSON at ~1 GB/s when it keeps nothing and checks
//! nothing (IgnoredAny), ~0.5 GB/s when a visitor sees every string (UTF-8 checked); a
//! listed string ID is ~19.5 bytes, so ~25-50 M IDs/s per pass is the ceiling of a parse,
//! and the end-to-end target of 10 M IDs/s leaves the store and the reconciler
//! most of the budget only if both passes together stay under ~40 ns per ID.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use scanledger::ReplaySource;
use scanledger::{Item, RawId, Request};

/// IDs per page, as the targets are stated.
const IDS_PER_PAGE: u64 = 1_000;
/// IDs of a listed dataset.
const IDS: u64 = 1_000_000;
/// IDs of the generator's page.
const RANGE_IDS: u64 = 100_000;

fn cursor(page: u64) -> String {
    format!("c{page}")
}

/// Writes `IDS` IDs in pages of `IDS_PER_PAGE`, each ID rendered by `id`.
fn write_listed(path: &Path, id: impl Fn(u64) -> String) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let pages = IDS / IDS_PER_PAGE;
    for page in 0..pages {
        let key = if page == 0 {
            "null".to_owned()
        } else {
            format!("\"{}\"", cursor(page))
        };
        let next = if page + 1 < pages {
            format!("\"{}\"", cursor(page + 1))
        } else {
            "null".to_owned()
        };
        let items: Vec<String> = (1..=IDS_PER_PAGE)
            .map(|i| id(page * IDS_PER_PAGE + i))
            .collect();
        writeln!(
            f,
            "{{\"cursor\": {key}, \"items\": [{}], \"next\": {next}, \"snapshot\": \"s1\"}}",
            items.join(", ")
        )
        .expect("write");
    }
    f.flush().expect("flush");
}

/// Every page of a listed file, in order; returns the IDs served.
fn fetch_all(source: &mut ReplaySource) -> u64 {
    let mut served = 0u64;
    let mut request = Request::First;
    for _ in 0..=IDS / IDS_PER_PAGE {
        let page = source.answer(&request).expect("a page");
        served += page.items.len() as u64;
        match page.next {
            Some(c) => request = Request::Cursor(c),
            None => break,
        }
    }
    assert_eq!(served, IDS);
    served
}

fn bench_replay(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let customer = dir.path().join("customer.jsonl");
    let int = dir.path().join("int.jsonl");
    write_listed(&customer, |n| format!("\"customer-{n}\""));
    write_listed(&int, |n| n.to_string());
    let range = dir.path().join("range.jsonl");
    std::fs::write(
        &range,
        format!(
            "{{\"cursor\": null, \"items\": {{\"range\": [1, {RANGE_IDS}], \"prefix\": \"customer-\"}}, \"next\": null}}\n"
        ),
    )
    .expect("write");

    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    for (name, path) in [("customer", &customer), ("int", &int)] {
        g.throughput(Throughput::Elements(IDS));
        g.bench_with_input(BenchmarkId::new("open", name), path, |b, p| {
            b.iter(|| black_box(ReplaySource::open(p).expect("open")));
        });
        g.bench_with_input(BenchmarkId::new("fetch_all", name), path, |b, p| {
            let mut source = ReplaySource::open(p).expect("open");
            // Lines answer successive requests; with one line per key the last repeats, so
            // one source serves every iteration.
            b.iter(|| black_box(fetch_all(&mut source)));
        });
        g.bench_with_input(
            BenchmarkId::new("open_and_fetch_all", name),
            path,
            |b, p| {
                b.iter(|| {
                    let mut source = ReplaySource::open(p).expect("open");
                    black_box(fetch_all(&mut source))
                });
            },
        );
    }
    g.throughput(Throughput::Elements(RANGE_IDS));
    g.bench_with_input(
        BenchmarkId::new("fetch", "range_prefixed"),
        &range,
        |b, p| {
            let mut source = ReplaySource::open(p).expect("open");
            b.iter(|| {
                let page = source.answer(&Request::First).expect("a page");
                assert_eq!(page.items.len() as u64, RANGE_IDS);
                black_box(page)
            });
        },
    );
    // The same IDs made with `format!`, the way generators were expanded before: the ratio
    // of the two is what writing the digits into an exact-size string saves.
    g.bench_function(BenchmarkId::new("format_baseline", "range_prefixed"), |b| {
        b.iter(|| {
            let items: Vec<Item> = (1..=RANGE_IDS)
                .map(|id| Item::new(RawId::Str(format!("customer-{id}"))))
                .collect();
            black_box(items)
        });
    });
    g.finish();
}

criterion_group!(benches, bench_replay);
criterion_main!(benches);
