//! The durable store as the collector drives it: `Reconciler::observe` then
//! `RunWriter::checkpoint` per page, on a real file (fsync included).
//!
//! Run:   cargo bench --bench store
//! One:   cargo bench --bench store -- 'store_checkpoint/'
//! Save:  cargo bench --bench store -- --save-baseline main
//! Diff:  cargo bench --bench store -- --baseline main
//!
//! The bench setup prints (stderr) the store file's bytes per ID for 10 M IDs, dense and at
//! 20 % density, and the wall time of building each.
//!
//! Back of the envelope: a durable commit costs one or two fsyncs (~0.2-0.3 ms here), so a
//! 1,000-ID page per commit gives at most ~3-5 M IDs/s and the rest of a checkpoint (encode
//! one or two 8 KiB bitmaps, rewrite the run record) must stay well below the fsync; with
//! one durable commit per 10 pages the fsync is amortised and ~10 M IDs/s is in reach.
//! A checkpoint touches only the partitions the page changed, so its cost must not grow
//! with the run (the `store_checkpoint` pair). Loading a 10 M-ID run reads ~150 dense
//! partitions (~1.3 MB) and 10,000 page records, so ~10 ms is expected.
//!
//! Datasets (fixed seed): `dense` is IDs `0, 1, 2, …` in order; `density20` keeps each ID
//! of `0, 1, 2, …` with probability 1/5, in order (one 8 KiB bitmap container per partition).

use std::hint::black_box;

use std::time::{Duration, Instant};

mod common;
use common::{SplitMix64, SEED};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use scanledger::{
    now_ms, Contract, Delta, Item, Page, Raise, Reconciler, RunId, RunWriter, Step, Store,
    StoreOptions,
};

/// IDs per page, as the targets are stated.
const IDS_PER_PAGE: usize = 1_000;
/// Pages ingested per timed iteration of the ingest benches (one group-commit period).
const PAGES_PER_ITER: usize = 10;
/// Pages of the large runs (10 M IDs).
const LARGE_RUN_PAGES: u64 = 10_000;
/// Group-commit period used to build the large runs quickly, outside the timing.
const LARGE_RUN_CHECKPOINT_EVERY: u32 = 1_000;
/// The empty-run baseline starts a fresh store after this many pages, so it stays small.
const EMPTY_RUN_PAGES_MAX: u64 = 100;

/// The shape of the IDs a page generator produces.
#[derive(Clone, Copy)]
enum Shape {
    Dense,
    Density20,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Dense => "dense",
            Shape::Density20 => "density20",
        }
    }
}

/// Produces the pages of one traversal in order: sorted IDs, a fresh cursor on every page.
struct PageGen {
    shape: Shape,
    next_id: u64,
    pages_made: u64,
    rng: SplitMix64,
}

impl PageGen {
    fn new(shape: Shape) -> PageGen {
        PageGen {
            shape,
            next_id: 0,
            pages_made: 0,
            rng: SplitMix64(SEED),
        }
    }

    fn page(&mut self) -> Page {
        let mut items = Vec::with_capacity(IDS_PER_PAGE);
        while items.len() < IDS_PER_PAGE {
            let id = self.next_id;
            self.next_id += 1;
            let keep = match self.shape {
                Shape::Dense => true,
                Shape::Density20 => self.rng.next_u64().is_multiple_of(5),
            };
            if keep {
                items.push(Item::int(id));
            }
        }
        self.pages_made += 1;
        // Never the end: the benches measure the steady state of a long traversal.
        Page::new(items)
            .with_next(format!("c{}", self.pages_made))
            .with_size_bytes(8 * IDS_PER_PAGE as u64)
    }

    fn pages(&mut self, n: usize) -> Vec<Page> {
        (0..n).map(|_| self.page()).collect()
    }
}

/// One open run being ingested: its writer and its reconciler.
struct Ingest<'s> {
    writer: RunWriter<'s>,
    rec: Reconciler,
}

impl<'s> Ingest<'s> {
    fn begin(store: &'s mut Store) -> Ingest<'s> {
        let contract = Contract::new("bench");
        let rec = Reconciler::new(&contract);
        let (writer, _) = store.begin(&contract, now_ms()).expect("bench run begins");
        Ingest { writer, rec }
    }

    /// Reopens a stored run as `resume` does.
    fn resume(store: &'s mut Store, run: RunId) -> Ingest<'s> {
        let (writer, loaded) = store
            .resume(run, &Raise::default())
            .expect("the large run resumes");
        Ingest {
            writer,
            rec: loaded.reconciler,
        }
    }

    /// Observes a page (untimed by `checkpoint_timed`) and returns what it changed.
    fn observe(&mut self, page: &Page) -> Delta {
        let seen = self.rec.observe(page);
        assert!(
            matches!(seen.step, Step::Continue(_)),
            "the bench traversal must not stop: {:?}",
            seen.step
        );
        seen.delta
    }

    fn checkpoint(&mut self, delta: Delta) {
        self.writer
            .checkpoint(&self.rec, delta)
            .expect("bench checkpoint commits");
    }

    fn ingest(&mut self, page: &Page) {
        let delta = self.observe(page);
        self.checkpoint(delta);
    }

    /// Observes a page untimed, then returns the time its checkpoint took.
    fn checkpoint_timed(&mut self, page: &Page) -> Duration {
        let delta = self.observe(page);
        let start = Instant::now();
        self.checkpoint(delta);
        start.elapsed()
    }
}

fn options(checkpoint_every_pages: u32) -> StoreOptions {
    StoreOptions::new().checkpoint_every(checkpoint_every_pages)
}

/// Durable ingest throughput: observe + checkpoint, ten 1,000-ID pages per iteration.
fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_ingest");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements((PAGES_PER_ITER * IDS_PER_PAGE) as u64));
    // `exclusive`: the store held by the writer alone (one fsync per commit instead of two).
    for (every, exclusive) in [(1u32, false), (1, true), (10, false)] {
        for shape in [Shape::Dense, Shape::Density20] {
            let dir = tempfile::tempdir().expect("tempdir");
            let opts = options(every).exclusive(exclusive);
            let mut store =
                Store::open(&dir.path().join("ingest.redb"), opts).expect("bench store opens");
            let mut ing = Ingest::begin(&mut store);
            let mut gen = PageGen::new(shape);
            let op = if exclusive {
                format!("checkpoint_every_{every}_exclusive")
            } else {
                format!("checkpoint_every_{every}")
            };
            group.bench_function(BenchmarkId::new(op, shape.name()), |b| {
                b.iter_batched(
                    || gen.pages(PAGES_PER_ITER),
                    |pages| {
                        for page in &pages {
                            ing.ingest(black_box(page));
                        }
                        pages
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }

    group.finish();
}

/// A 10 M-ID run left open (running, resumable) in a store file.
struct LargeRun {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    run: RunId,
    gen: PageGen,
}

fn build_large_run(shape: Shape) -> LargeRun {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("large.redb");
    let start = Instant::now();
    let mut store =
        Store::open(&path, options(LARGE_RUN_CHECKPOINT_EVERY)).expect("bench store opens");
    let mut ing = Ingest::begin(&mut store);
    let mut gen = PageGen::new(shape);
    for _ in 0..LARGE_RUN_PAGES {
        let page = gen.page();
        ing.ingest(&page);
    }
    ing.writer.commit(&ing.rec).expect("the large run commits");
    let run = ing.writer.run();
    let n_ids = ing.rec.ids().len();
    drop(ing);
    drop(store);
    let bytes = std::fs::metadata(&path).expect("store file").len();
    eprintln!(
        "store size, {}: {n_ids} IDs over {} partitions, {bytes} bytes, {:.4} bytes/ID \
         (built in {:.1} s)",
        shape.name(),
        gen.next_id.div_ceil(1 << 16),
        bytes as f64 / n_ids as f64,
        start.elapsed().as_secs_f64(),
    );
    LargeRun {
        _dir: dir,
        path,
        run,
        gen,
    }
}

/// Loading a 10 M-ID run for resume, with the store already open and including the open.
fn resume(c: &mut Criterion, large: &[LargeRun]) {
    let mut group = c.benchmark_group("store_resume");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(LARGE_RUN_PAGES * IDS_PER_PAGE as u64));
    for l in large {
        let dataset = format!("{}_10M", l.gen.shape.name());
        let mut store = Store::open(&l.path, StoreOptions::new()).expect("large store opens");
        group.bench_function(BenchmarkId::new("resume", &dataset), |b| {
            b.iter(|| {
                let ing = Ingest::resume(&mut store, black_box(l.run));
                assert_eq!(ing.rec.ids().len(), LARGE_RUN_PAGES * IDS_PER_PAGE as u64);
            });
        });
        drop(store);
        group.bench_function(BenchmarkId::new("open_resume", &dataset), |b| {
            b.iter(|| {
                let mut store = Store::open(&l.path, StoreOptions::new()).expect("store opens");
                let ing = Ingest::resume(&mut store, black_box(l.run));
                black_box(ing.rec.ids().len())
            });
        });
    }
    group.finish();
}

/// Durable per-page checkpoint cost (the checkpoint alone, observe untimed) in a run that
/// already holds 10 M IDs versus one that holds at most 100 pages.
fn checkpoint_vs_size(c: &mut Criterion, large: LargeRun) {
    let mut group = c.benchmark_group("store_checkpoint");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(IDS_PER_PAGE as u64));

    // A fresh store every `EMPTY_RUN_PAGES_MAX` pages keeps the baseline run small. Each
    // writer borrows its store for good, so the small stores are leaked (a few, for a bench).
    let dir = tempfile::tempdir().expect("tempdir");
    let mut n_stores = 0u64;
    let mut fresh = || -> Ingest<'static> {
        n_stores += 1;
        let path = dir.path().join(format!("small-{n_stores}.redb"));
        let store: &'static mut Store =
            Box::leak(Box::new(Store::open(&path, options(1)).expect("store")));
        Ingest::begin(store)
    };
    let mut ing = fresh();
    let mut gen = PageGen::new(Shape::Dense);
    group.bench_function(BenchmarkId::new("per_page", "empty_run"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if gen.pages_made >= EMPTY_RUN_PAGES_MAX {
                    ing = fresh();
                    gen = PageGen::new(Shape::Dense);
                }
                let page = gen.page();
                total += ing.checkpoint_timed(&page);
            }
            total
        });
    });
    drop(ing);

    // Continue the large run as `resume` would: reload it, then checkpoint every page.
    let LargeRun {
        _dir,
        path,
        run,
        mut gen,
    } = large;
    let mut store = Store::open(&path, options(1)).expect("large store opens");
    let mut ing = Ingest::resume(&mut store, run);
    let dataset = format!("{}_10M_run", gen.shape.name());
    group.bench_function(BenchmarkId::new("per_page", dataset), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let page = gen.page();
                total += ing.checkpoint_timed(&page);
            }
            total
        });
    });
    group.finish();
}

fn large_runs(c: &mut Criterion) {
    let dense = build_large_run(Shape::Dense);
    let sparse = build_large_run(Shape::Density20);
    let large = [dense, sparse];
    resume(c, &large);
    let [dense, _] = large;
    checkpoint_vs_size(c, dense);
}

criterion_group!(benches, ingest, large_runs);
criterion_main!(benches);
