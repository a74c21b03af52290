//! How a scan's cost grows with the collection: random IDs at 20 % density (the `sim` source's
//! fixed permutation, pages of 1,000 in random order) at 10 M and 100 M IDs, and dense IDs at
//! 1 billion, through the library into a real store, against these targets:
//! - 100 M random IDs take at most 11x the time of 10 M (median of the repeats);
//! - the bytes written to the file are at most 1.5x the final file's size;
//! - peak RSS of one run of 1 billion dense IDs at most 128 MB, of 100 M random IDs at most
//!   1.2x its store's size.
//!
//! Run:  cargo bench --bench scale                       (10 M and 100 M random, 3 repeats)
//!       SCALE_DENSE_1B=1 cargo bench --bench scale      (also 1 billion dense IDs, ~1 minute)
//!       SCALE_CHECKPOINT_EVERY=100 cargo bench --bench scale
//!       SCALE_EXCLUSIVE=1 cargo bench --bench scale     (also the random cases with
//!                                                        --exclusive: no page journal)
//!
//! Peak RSS is read from /proc/self/status (VmHWM) of a child process per case, so cases do
//! not share a high-water mark: the bench re-runs itself with `SCALE_CHILD=case`.

use std::path::Path;
use std::time::{Duration, Instant};

use scanledger::{Contract, SimConfig, SimSource, Store, StoreOptions};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// One scan in this process; prints `time_ms written size rss_kib journal_written`.
fn child(records: u64, random: bool, every: u32, exclusive: bool, dir: &Path) {
    let path = dir.join("scale.redb");
    let _ = std::fs::remove_file(&path);
    let options = StoreOptions::new()
        .checkpoint_every(every)
        .exclusive(exclusive);
    let mut store = Store::open(&path, options).expect("store");
    let mut c = Contract::new("scale");
    c.page_size = 1_000;
    let mut source = SimSource::new({
        let mut config = SimConfig::default();
        config.records = records;
        config.random = random;
        config
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let start = Instant::now();
    let done = rt
        .block_on(scanledger::scan(&c, &mut source, &mut store))
        .expect("scan");
    let took = start.elapsed();
    assert_eq!(done.receipt().unique_ids_observed, records);
    let written = store.bytes_written();
    let journal = store.journal_bytes_written();
    drop(store);
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    println!(
        "{} {written} {size} {} {journal}",
        took.as_millis(),
        peak_rss_kib()
    );
    let _ = std::fs::remove_file(&path);
}

struct Sample {
    time: Duration,
    written: u64,
    size: u64,
    rss_kib: u64,
    journal: u64,
}

fn run_child(records: u64, random: bool, every: u32, exclusive: bool) -> Sample {
    let exe = std::env::current_exe().expect("exe");
    let out = std::process::Command::new(exe)
        .env(
            "SCALE_CHILD",
            format!("{records},{random},{every},{exclusive}"),
        )
        .output()
        .expect("child");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let f: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    assert_eq!(
        f.len(),
        5,
        "child said: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Sample {
        time: Duration::from_millis(f[0]),
        written: f[1],
        size: f[2],
        rss_kib: f[3],
        journal: f[4],
    }
}

fn median_of(mut v: Vec<Sample>) -> Sample {
    v.sort_by_key(|s| s.time);
    let mid = v.len() / 2;
    v.swap_remove(mid)
}

fn main() {
    if let Ok(spec) = std::env::var("SCALE_CHILD") {
        let p: Vec<&str> = spec.split(',').collect();
        let dir = tempfile::tempdir().expect("tempdir");
        child(
            p[0].parse().expect("records"),
            p[1] == "true",
            p[2].parse().expect("every"),
            p[3] == "true",
            dir.path(),
        );
        return;
    }
    let repeats: usize = std::env::var("SCALE_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    let every: u32 = std::env::var("SCALE_CHECKPOINT_EVERY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    println!(
        "scale: pages of 1,000, a durable commit every {every} pages, {repeats} repeats, medians"
    );
    let mut modes = vec![false];
    if std::env::var_os("SCALE_EXCLUSIVE").is_some() {
        modes.push(true);
    }
    for exclusive in modes {
        let mode = if exclusive { "--exclusive" } else { "default" };
        let mut times = Vec::new();
        for records in [10_000_000u64, 100_000_000] {
            let s = median_of(
                (0..repeats)
                    .map(|_| run_child(records, true, every, exclusive))
                    .collect(),
            );
            println!(
                "random 20%, {:>4} M IDs, {mode}: {:>7.2} s | written {:.1} MB (page journal {:.1} MB) for a {:.1} MB file ({:.2}x) | peak RSS {:.1} MB ({:.2}x the file)",
                records / 1_000_000,
                s.time.as_secs_f64(),
                s.written as f64 / 1e6,
                s.journal as f64 / 1e6,
                s.size as f64 / 1e6,
                s.written as f64 / s.size.max(1) as f64,
                s.rss_kib as f64 / 1024.0,
                s.rss_kib as f64 * 1024.0 / s.size.max(1) as f64,
            );
            times.push(s.time);
        }
        println!(
            "random 20%, {mode}: 100 M took {:.2}x the time of 10 M (target at most 11x)",
            times[1].as_secs_f64() / times[0].as_secs_f64()
        );
    }
    if std::env::var_os("SCALE_DENSE_1B").is_some() {
        let s = run_child(1_000_000_000, false, every, false);
        println!(
            "dense, 1,000 M IDs: {:.1} s | file {:.1} MB | peak RSS {:.1} MB (target at most 128 MB)",
            s.time.as_secs_f64(),
            s.size as f64 / 1e6,
            s.rss_kib as f64 / 1024.0
        );
    }
}
