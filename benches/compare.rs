//! scanledger against SQLite on identical generated workloads, measured in one process run.
//!
//! Run:  cargo bench --bench compare --features bench-sqlite   (1 M and 10 M IDs, 3 repeats)
//!       COMPARE_SIZES=1000000 COMPARE_REPEATS=5 cargo bench --bench compare --features bench-sqlite
//!       COMPARE_DIR=/path/on/the/disk/to/measure cargo bench --bench compare --features bench-sqlite
//!
//! Workloads (fixed seed): `dense` (IDs 0, 1, 2, ...), `density20` (each of 0, 1, 2, ... kept
//! with probability 1/5), `customer-N` (the strings `customer-N` of the dense numbers, the
//! `prefixed` codec here, TEXT in SQLite); pages of 1,000 IDs. Cases, each against SQLite in WAL
//! mode with `synchronous=FULL` and a `(run, id)` primary key `WITHOUT ROWID`:
//! - durable ingest, one commit per page (scanledger's default and `--exclusive`);
//! - group commit, one commit per 10 pages;
//! - bytes per ID of the final files;
//! - diff of two runs 1% apart (scanledger `diff_runs`; SQLite `EXCEPT` both ways);
//! - resume-ready time after a kill: open the file and load the run to continue it, on the
//!   files a SIGKILL leaves (copied while the writer lives, journal records unfolded), and
//!   the syncs that costs against a resume after a clean stop;
//! - a slow source (pages 1.1 s apart, `COMPARE_SLOW_PAGES`, default 12; 0 skips it): syncs
//!   per page in the default mode;
//! - the floor: appending a page-sized record (8 KiB) to a file with one `fdatasync` each.
//!
//! It prints medians, IDs per second and the ratios scanledger/SQLite and per-page/floor, all
//! from this run. benches/RESULTS.md keeps one full run with the machine described.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{SplitMix64, SEED};

use rusqlite::{params, Connection};
use scanledger::{
    now_ms, Contract, IdCodecKind, Item, Page, Raise, RawId, Reconciler, RunId, Step, Store,
    StoreOptions,
};

const IDS_PER_PAGE: usize = 1_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Dense,
    Density20,
    Customer,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Dense => "dense",
            Shape::Density20 => "density20",
            Shape::Customer => "customer-N",
        }
    }
}

/// The IDs of a workload, page by page; `skip_every` drops every k-th ID (a run 1% apart).
fn pages(shape: Shape, n_ids: u64, skip_every: Option<u64>) -> Vec<Vec<u64>> {
    let mut rng = SplitMix64(SEED);
    let mut out = Vec::new();
    let mut page = Vec::with_capacity(IDS_PER_PAGE);
    let mut next = 0u64;
    let mut made = 0u64;
    while made < n_ids {
        let id = next;
        next += 1;
        if shape == Shape::Density20 && !rng.next_u64().is_multiple_of(5) {
            continue;
        }
        made += 1;
        if skip_every.is_some_and(|k| made.is_multiple_of(k)) {
            continue;
        }
        page.push(id);
        if page.len() == IDS_PER_PAGE {
            out.push(std::mem::take(&mut page));
        }
    }
    if !page.is_empty() {
        out.push(page);
    }
    out
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn contract(shape: Shape) -> Contract {
    let mut c = Contract::new(shape.name());
    c.page_size = IDS_PER_PAGE as u32;
    if shape == Shape::Customer {
        c.id_codec = IdCodecKind::Prefixed;
        c.id_prefix = Some("customer-".to_owned());
    }
    c
}

fn page_of(shape: Shape, ids: &[u64], i: usize) -> Page {
    {
        let mut page = Page::default();
        page.items = ids
            .iter()
            .map(|id| match shape {
                Shape::Customer => Item::new(RawId::Str(format!("customer-{id}"))),
                _ => Item::int(*id),
            })
            .collect();
        // Never the end: a long traversal's steady state.
        page.next = Some(format!("c{i}"));
        page.size_bytes = 8 * ids.len() as u64;
        page
    }
}

/// Ingests `pages` into a fresh run of `store`; returns the time and the run.
fn sl_ingest(store: &mut Store, shape: Shape, pages: &[Vec<u64>]) -> (Duration, RunId) {
    let c = contract(shape);
    let built: Vec<Page> = pages
        .iter()
        .enumerate()
        .map(|(i, ids)| page_of(shape, ids, i))
        .collect();
    let mut rec = Reconciler::new(&c);
    let (mut writer, _) = store.begin(&c, now_ms()).expect("begin");
    let start = Instant::now();
    for p in &built {
        let seen = rec.observe(p);
        assert!(matches!(seen.step, Step::Continue(_)));
        writer.checkpoint(&rec, seen.delta).expect("checkpoint");
    }
    writer.commit(&rec).expect("commit");
    let took = start.elapsed();
    let run = writer.run();
    writer.finish(&rec, now_ms()).expect("finish");
    (took, run)
}

fn sqlite(path: &Path) -> Connection {
    let c = Connection::open(path).expect("sqlite opens");
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE IF NOT EXISTS ids (run INTEGER NOT NULL, id ANY NOT NULL,
           PRIMARY KEY (run, id)) WITHOUT ROWID, STRICT;
         CREATE TABLE IF NOT EXISTS pages (run INTEGER NOT NULL, page INTEGER NOT NULL,
           cursor TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (run, page)) WITHOUT ROWID;",
    )
    .expect("sqlite schema");
    c
}

fn sq_ingest(
    c: &mut Connection,
    shape: Shape,
    run: i64,
    pages: &[Vec<u64>],
    every: usize,
) -> Duration {
    let start = Instant::now();
    for (g, group) in pages.chunks(every).enumerate() {
        let txn = c.transaction().expect("txn");
        {
            let mut ins = txn
                .prepare_cached("INSERT INTO ids (run, id) VALUES (?1, ?2)")
                .expect("prepare");
            let mut pg = txn
                .prepare_cached("INSERT INTO pages (run, page, cursor, n) VALUES (?1, ?2, ?3, ?4)")
                .expect("prepare");
            for (i, ids) in group.iter().enumerate() {
                for id in ids {
                    match shape {
                        Shape::Customer => ins.execute(params![run, format!("customer-{id}")]),
                        // SQLite integers are signed 64-bit; these IDs stay below 2^63.
                        _ => ins.execute(params![run, *id as i64]),
                    }
                    .expect("insert");
                }
                let page_no = (g * every + i) as i64;
                pg.execute(params![
                    run,
                    page_no,
                    format!("c{page_no}"),
                    ids.len() as i64
                ])
                .expect("insert page");
            }
        }
        txn.commit().expect("commit");
    }
    start.elapsed()
}

fn file_bytes(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// Appends an 8 KiB record and `fdatasync`s, `n` times: the cost of one durable page.
fn floor(dir: &Path, n: usize) -> Duration {
    let path = dir.join("floor.bin");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("floor file");
    let record = vec![0x5au8; 8 * IDS_PER_PAGE];
    let start = Instant::now();
    for _ in 0..n {
        f.write_all(&record).expect("append");
        f.sync_data().expect("fdatasync");
    }
    let took = start.elapsed();
    drop(f);
    let _ = std::fs::remove_file(path);
    took / u32::try_from(n).unwrap_or(u32::MAX)
}

/// The files a SIGKILL of the writer leaves now: copies of the store, its journal and its key
/// file (every write the writer made is in the page cache, so a copy is what a kill leaves).
fn copy_as_killed(from: &Path, to: &Path) {
    std::fs::copy(from, to).expect("copy the store");
    let beside = |p: &Path, ext: &str| {
        let mut s = p.as_os_str().to_owned();
        s.push(ext);
        PathBuf::from(s)
    };
    for ext in [".journal", ".keys"] {
        let _ = std::fs::remove_file(beside(to, ext));
        if beside(from, ext).exists() {
            std::fs::copy(beside(from, ext), beside(to, ext))
                .expect("copy a file beside the store");
        }
    }
}

/// Syncs and time of opening a store for writing and reopening `run` to resume it.
fn resume_cost(path: &Path, run: RunId) -> (u64, Duration) {
    let t = Instant::now();
    let mut s = Store::open(path, StoreOptions::new()).expect("open");
    let (w, loaded) = s.resume(run, &Raise::default()).expect("resume");
    let took = t.elapsed();
    assert!(loaded.reconciler.progress().pages_observed > 0);
    drop(w);
    let syncs = s.syncs();
    // The writer's close (folding nothing) is not part of being ready.
    std::mem::drop(s);
    (syncs, took)
}

/// The crash-resume case: a run of `pages` pages killed with its journal unfolded, against
/// the same run stopped cleanly. Returns (clean syncs, killed syncs, killed median time).
fn crash_resume(
    dir: &Path,
    shape: Shape,
    pages: &[Vec<u64>],
    repeats: usize,
) -> (u64, u64, Duration) {
    let live = dir.join("cr-live.redb");
    let killed = dir.join("cr-killed.redb");
    let clean = dir.join("cr-clean.redb");
    for p in [&live, &killed, &clean] {
        let _ = std::fs::remove_file(p);
    }
    let c = contract(shape);
    let mut store = Store::open(&live, StoreOptions::new()).expect("store");
    let (mut w, _) = store.begin(&c, now_ms()).expect("begin");
    let mut rec = Reconciler::new(&c);
    // Fewer pages than a fold takes: they are all in the journal at the kill.
    for (i, ids) in pages.iter().enumerate().take(40) {
        let seen = rec.observe(&page_of(shape, ids, i));
        w.checkpoint(&rec, seen.delta).expect("checkpoint");
    }
    let run = w.run();
    copy_as_killed(&live, &killed);
    drop(w);
    drop(store);
    let (clean_syncs, _) = {
        copy_as_killed(&live, &clean);
        resume_cost(&clean, run)
    };
    let mut killed_syncs = 0;
    let mut times = Vec::new();
    let image = dir.join("cr-image.redb");
    copy_as_killed(&killed, &image);
    for _ in 0..repeats {
        copy_as_killed(&image, &killed);
        let (syncs, took) = resume_cost(&killed, run);
        killed_syncs = syncs;
        times.push(took);
    }
    for p in [&live, &killed, &clean, &image] {
        let _ = std::fs::remove_file(p);
        for ext in [".journal", ".keys"] {
            let mut j = p.as_os_str().to_owned();
            j.push(ext);
            let _ = std::fs::remove_file(PathBuf::from(j));
        }
    }
    (clean_syncs, killed_syncs, median(times))
}

/// Syncs per page of the default mode when pages come `gap` apart.
fn slow_source(dir: &Path, n_pages: usize, gap: Duration) -> f64 {
    let path = dir.join("slow.redb");
    let _ = std::fs::remove_file(&path);
    let c = contract(Shape::Dense);
    let mut store = Store::open(&path, StoreOptions::new()).expect("store");
    let (mut w, _) = store.begin(&c, now_ms()).expect("begin");
    let mut rec = Reconciler::new(&c);
    let before = w_syncs(&w);
    for i in 0..n_pages {
        std::thread::sleep(gap);
        let ids: Vec<u64> = (i as u64 * 1_000..(i as u64 + 1) * 1_000).collect();
        let seen = rec.observe(&page_of(Shape::Dense, &ids, i));
        w.checkpoint(&rec, seen.delta).expect("checkpoint");
    }
    let after = w_syncs(&w);
    drop(w);
    drop(store);
    let _ = std::fs::remove_file(&path);
    (after - before) as f64 / n_pages as f64
}

fn w_syncs(w: &scanledger::RunWriter<'_>) -> u64 {
    w.syncs()
}

fn rate(n: u64, d: Duration) -> String {
    format!("{:.2} M IDs/s", n as f64 / d.as_secs_f64() / 1e6)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used by this harness.
    let sizes: Vec<u64> = std::env::var("COMPARE_SIZES")
        .unwrap_or_else(|_| "1000000,10000000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let repeats: usize = std::env::var("COMPARE_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    let base = std::env::var_os("COMPARE_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = tempfile::tempdir_in(&base).expect("tempdir");
    println!(
        "compare: {} CPUs, files in {}, {repeats} repeats, medians",
        std::thread::available_parallelism().map_or(0, usize::from),
        base.display()
    );
    let floor_page = median((0..repeats).map(|_| floor(dir.path(), 300)).collect());
    println!(
        "floor: append 8 KiB + fdatasync: {:.0} µs per page",
        floor_page.as_secs_f64() * 1e6
    );

    let slow_pages: usize = std::env::var("COMPARE_SLOW_PAGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    if slow_pages > 0 {
        let per_page = slow_source(dir.path(), slow_pages, Duration::from_millis(1_100));
        println!(
            "slow source: {slow_pages} pages 1.1 s apart, default mode: {per_page:.2} fsyncs/page"
        );
    }

    for &n in &sizes {
        for shape in [Shape::Dense, Shape::Density20, Shape::Customer] {
            let a = pages(shape, n, None);
            let b = pages(shape, n, Some(100));
            let n_pages = a.len() as u32;
            println!(
                "\n== {} IDs, {}, {} pages of {IDS_PER_PAGE}",
                n,
                shape.name(),
                n_pages
            );
            for (label, every, exclusive) in [
                ("durable, every page", 1u32, false),
                ("durable, every page, --exclusive", 1, true),
                ("group commit every 10 pages", 10, false),
            ] {
                let mut sl = Vec::new();
                let mut sq = Vec::new();
                let mut sl_bytes = 0;
                let mut sq_bytes = 0;
                let mut syncs = 0u64;
                for r in 0..repeats {
                    let sl_path = dir.path().join(format!("sl-{r}.redb"));
                    let _ = std::fs::remove_file(&sl_path);
                    let mut store = Store::open(
                        &sl_path,
                        StoreOptions::new()
                            .checkpoint_every(every)
                            .exclusive(exclusive),
                    )
                    .expect("store");
                    let before = store.syncs();
                    let (took, _) = sl_ingest(&mut store, shape, &a);
                    syncs = store.syncs() - before;
                    sl.push(took);
                    drop(store);
                    sl_bytes = file_bytes(std::slice::from_ref(&sl_path));
                    let _ = std::fs::remove_file(&sl_path);
                    if exclusive {
                        continue; // SQLite has no exclusive mode to set beside this one
                    }
                    let sq_path = dir.path().join(format!("sq-{r}.db"));
                    let _ = std::fs::remove_file(&sq_path);
                    let mut c = sqlite(&sq_path);
                    sq.push(sq_ingest(&mut c, shape, 1, &a, every as usize));
                    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                        .expect("checkpoint");
                    drop(c);
                    sq_bytes = file_bytes(&[sq_path.clone(), sq_path.with_extension("db-wal")]);
                    let _ = std::fs::remove_file(&sq_path);
                }
                let sl_m = median(sl);
                let per_page = sl_m / n_pages.max(1);
                let mut line = format!(
                    "  {label:<36} scanledger {} ({:.0} µs/page, {:.2}x floor, {:.2} fsyncs/page)",
                    rate(n, sl_m),
                    per_page.as_secs_f64() * 1e6,
                    per_page.as_secs_f64() / floor_page.as_secs_f64(),
                    syncs as f64 / f64::from(n_pages.max(1)),
                );
                if !sq.is_empty() {
                    let sq_m = median(sq);
                    line.push_str(&format!(
                        " | SQLite {} | scanledger {:.2}x SQLite",
                        rate(n, sq_m),
                        sq_m.as_secs_f64() / sl_m.as_secs_f64()
                    ));
                }
                println!("{line}");
                if every == 10 {
                    println!(
                        "  {:<36} scanledger {:.3} B/ID | SQLite {:.2} B/ID | {:.1}x smaller",
                        "bytes per ID",
                        sl_bytes as f64 / n as f64,
                        sq_bytes as f64 / n as f64,
                        sq_bytes as f64 / sl_bytes.max(1) as f64
                    );
                }
            }
            // Diff and resume on one store holding both runs, and one SQLite file.
            let sl_path = dir.path().join("diff.redb");
            let _ = std::fs::remove_file(&sl_path);
            let mut store =
                Store::open(&sl_path, StoreOptions::new().checkpoint_every(1_000)).expect("store");
            let (_, ra) = sl_ingest(&mut store, shape, &a);
            let (_, rb) = sl_ingest(&mut store, shape, &b);
            let mut resumable = Reconciler::new(&contract(shape));
            let (mut w, _) = store.begin(&contract(shape), now_ms()).expect("begin");
            for (i, ids) in a.iter().enumerate() {
                let seen = resumable.observe(&page_of(shape, ids, i));
                w.checkpoint(&resumable, seen.delta).expect("checkpoint");
            }
            w.commit(&resumable).expect("commit");
            let rr = w.run();
            drop(w);
            drop(store);
            let store = Store::open_read(&sl_path).expect("reopen");
            let sl_diff = median(
                (0..repeats.max(5))
                    .map(|_| {
                        let t = Instant::now();
                        let snap = store.read().expect("read");
                        let d = scanledger::diff_runs(&snap, ra, rb).expect("diff");
                        assert_eq!(d.diff.removed_count(), n / 100);
                        t.elapsed()
                    })
                    .collect(),
            );
            drop(store);
            let sl_resume = median(
                (0..repeats)
                    .map(|_| {
                        let t = Instant::now();
                        let mut s = Store::open(&sl_path, StoreOptions::new()).expect("open");
                        let (_, loaded) = s.resume(rr, &Raise::default()).expect("resume");
                        assert_eq!(loaded.reconciler.ids().len(), n);
                        t.elapsed()
                    })
                    .collect(),
            );
            let (clean_syncs, killed_syncs, killed_time) =
                crash_resume(dir.path(), shape, &a, repeats);
            let sq_path = dir.path().join("diff.db");
            let _ = std::fs::remove_file(&sq_path);
            let mut c = sqlite(&sq_path);
            sq_ingest(&mut c, shape, 1, &a, 1_000);
            sq_ingest(&mut c, shape, 2, &b, 1_000);
            let sq_diff = median(
                (0..repeats.max(5))
                    .map(|_| {
                        let t = Instant::now();
                        let removed: i64 = c
                            .query_row(
                                "SELECT count(*) FROM (SELECT id FROM ids WHERE run = 1
                                 EXCEPT SELECT id FROM ids WHERE run = 2)",
                                [],
                                |r| r.get(0),
                            )
                            .expect("except");
                        let added: i64 = c
                            .query_row(
                                "SELECT count(*) FROM (SELECT id FROM ids WHERE run = 2
                                 EXCEPT SELECT id FROM ids WHERE run = 1)",
                                [],
                                |r| r.get(0),
                            )
                            .expect("except");
                        assert_eq!((removed as u64, added), (n / 100, 0));
                        t.elapsed()
                    })
                    .collect(),
            );
            drop(c);
            let sq_resume = median(
                (0..repeats)
                    .map(|_| {
                        let t = Instant::now();
                        let c = sqlite(&sq_path);
                        let (pages, last): (i64, String) = c
                            .query_row(
                                "SELECT count(*), max(cursor) FROM pages WHERE run = 1",
                                [],
                                |r| Ok((r.get(0)?, r.get(1)?)),
                            )
                            .expect("resume state");
                        assert!(pages > 0 && !last.is_empty());
                        t.elapsed()
                    })
                    .collect(),
            );
            println!(
                "  {:<36} scanledger {:.2} ms | SQLite EXCEPT both ways {:.1} ms | {:.0}x faster",
                "diff of two runs 1% apart",
                sl_diff.as_secs_f64() * 1e3,
                sq_diff.as_secs_f64() * 1e3,
                sq_diff.as_secs_f64() / sl_diff.as_secs_f64()
            );
            println!(
                "  {:<36} scanledger {:.1} ms (open + load the run, stopped cleanly) | SQLite {:.1} ms (open + read the last page)",
                "resume-ready",
                sl_resume.as_secs_f64() * 1e3,
                sq_resume.as_secs_f64() * 1e3
            );
            println!(
                "  {:<36} scanledger {:.1} ms, {killed_syncs} syncs (killed with 40 pages in the journal) | {clean_syncs} syncs after a clean stop",
                "resume-ready after a kill",
                killed_time.as_secs_f64() * 1e3,
            );
            let _ = std::fs::remove_file(&sl_path);
            let _ = std::fs::remove_file(&sq_path);
        }
    }
}
