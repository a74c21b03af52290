//! Migration verification costs, through the library with a synthetic SQL-like source (no
//! server: scanning 10 M rows from one is too slow for this machine's budget; benches/mysql.rs
//! measures the same ratio against a real MariaDB table).
//!
//! Run:   cargo bench --bench migration
//!        MIGRATION_SCAN_ROWS=1000000 MIGRATION_DIFF_IDS=1000000,10000000 cargo bench --bench migration
//!
//! 1. Scanning N rows into a store file with content digests against without: the source
//!    computes each row's `content::record_hash` over three typed values (an integer, a decimal
//!    and a text, as a SQL source does from its row), the reconciler adds it to its
//!    partition's accumulator and every checkpoint writes the touched accumulators (64 bytes a
//!    partition). Target: at most 1.5x. Rounds alternate the order; medians are printed.
//! 2. `diff --content` of two runs (two collections, one store file each) with 0.1% of the rows
//!    changed: `diff_across` (equal roots: two run-record reads) then `content_diff` (the
//!    64-byte accumulators of each partition, no bitmap). Target: at most 50 ms at 10 M IDs.
//!
//! Back of the envelope: 10 M IDs are 153 partitions, so the content comparison reads and
//! compares 2 x 153 x 64 bytes, microseconds; the cost is the snapshot and two run records.
//! A content digest is one SHA-256 of ~60 bytes (~0.3 us) and one of 72 bytes for the entry,
//! against a per-row cost of the scan itself of ~1 us at group commit.

use std::time::{Duration, Instant};

use scanledger::content::{record_hash, ContentValue};
use scanledger::{
    content_diff, diff_across, scan, Contract, FetchError, Item, Page, PageRequest, PageSource,
    RawId, Request, Status, Store, StoreOptions,
};

const PAGE_SIZE: u64 = 10_000;

/// Rows 1..=n in keyset pages, each with a content digest unless `content` is off; rows for
/// which `changed` holds carry another email.
struct Synth {
    n: u64,
    content: bool,
    changed: fn(u64) -> bool,
}

impl PageSource for Synth {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let start = match &req.request {
            Request::First => 1,
            Request::Cursor(c) => c
                .strip_prefix("after:")
                .and_then(|k| k.parse::<u64>().ok())
                .map_or(1, |k| k + 1),
            Request::After(k) => k.parse::<u64>().map_or(1, |k| k + 1),
        };
        let end = (start + PAGE_SIZE - 1).min(self.n);
        let mut items = Vec::with_capacity(PAGE_SIZE as usize);
        for id in start..=end {
            let content = self.content.then(|| {
                let email = if (self.changed)(id) {
                    format!("changed{id}@example.com")
                } else {
                    format!("user{id}@example.com")
                };
                let amount = format!("{}.{:02}", id % 1000, id % 100);
                record_hash(&[
                    ContentValue::Int(i128::from(id % 7)),
                    ContentValue::Decimal(&amount),
                    ContentValue::Text(&email),
                ])
                .expect("hashable")
            });
            let item = Item::new(RawId::Int(id));
            items.push(match content {
                Some(digest) => item.with_content(digest),
                None => item,
            });
        }
        let next = (end < self.n).then(|| format!("after:{end}"));
        let page = Page::new(items)
            .with_complete(next.is_none())
            .with_snapshot("synthetic");
        Ok(match next {
            Some(cursor) => page.with_next(cursor),
            None => page,
        })
    }
}

fn env_list(name: &str, default: &str) -> Vec<u64> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().parse().expect("a list of integers"))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Scans `source` as `name` into the store file `path` (created afresh): group commit every 50
/// pages, as a long scan would be run.
fn scan_into(
    rt: &tokio::runtime::Runtime,
    path: &std::path::Path,
    name: &str,
    mut source: Synth,
) -> Duration {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("redb.journal"));
    let mut contract = Contract::new(name);
    contract.page_size = PAGE_SIZE as u32;
    let mut store = Store::open(path, StoreOptions::new().checkpoint_every(50)).expect("store");
    let t0 = Instant::now();
    let done = rt
        .block_on(scan(&contract, &mut source, &mut store))
        .expect("scan");
    let took = t0.elapsed();
    assert_eq!(done.reconciler.status(), Status::Verified);
    took
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let rounds = 3;
    for n in env_list("MIGRATION_SCAN_ROWS", "1000000") {
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for content in if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                let t = scan_into(
                    &rt,
                    &dir.path().join("scan.redb"),
                    "bench",
                    Synth {
                        n,
                        content,
                        changed: |_| false,
                    },
                );
                if content { &mut with } else { &mut without }.push(t.as_secs_f64());
            }
        }
        let (a, b) = (median(without), median(with));
        println!(
            "scan {n} rows into a store (pages of {PAGE_SIZE}, group commit 50), {rounds} rounds, medians:\n  \
             without content: {a:.3} s ({:.2} M rows/s)\n  \
             with content digests: {b:.3} s ({:.2} M rows/s)\n  \
             ratio with/without: {:.2} (target <= 1.5)",
            n as f64 / a / 1e6,
            n as f64 / b / 1e6,
            b / a
        );
    }
    for n in env_list("MIGRATION_DIFF_IDS", "1000000") {
        let old_path = dir.path().join("from.redb");
        let new_path = dir.path().join("to.redb");
        let t_old = scan_into(
            &rt,
            &old_path,
            "orders-mysql",
            Synth {
                n,
                content: true,
                changed: |_| false,
            },
        );
        // 0.1% of the rows changed in the target: every 1000th.
        let t_new = scan_into(
            &rt,
            &new_path,
            "orders-pg",
            Synth {
                n,
                content: true,
                changed: |id| id % 1000 == 0,
            },
        );
        let old_store = Store::open_read(&old_path).expect("from store");
        let new_store = Store::open_read(&new_path).expect("to store");
        let mut took = Vec::new();
        let mut differing = 0;
        for _ in 0..21 {
            let t0 = Instant::now();
            let a = old_store.read().expect("snapshot");
            let b = new_store.read().expect("snapshot");
            let rd = diff_across(&a, scanledger::RunId(1), &b, scanledger::RunId(1)).expect("diff");
            let cd = content_diff(&a, scanledger::RunId(1), &b, scanledger::RunId(1))
                .expect("content diff");
            took.push(t0.elapsed().as_secs_f64() * 1e3);
            assert!(rd.diff.is_empty());
            differing = cd.leaves_differing.len();
        }
        // The whole command as a user runs it, once: open both files, diff, print JSON.
        let bin =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/scanledger");
        let cli = bin.exists().then(|| {
            let t0 = Instant::now();
            let out = std::process::Command::new(&bin)
                .arg("--store")
                .arg(&old_path)
                .args([
                    "--json",
                    "diff",
                    "run-1",
                    "run-1",
                    "--across",
                    "--content",
                    "--other-store",
                ])
                .arg(&new_path)
                .output()
                .expect("run the binary");
            assert!(out.status.success());
            t0.elapsed().as_secs_f64() * 1e3
        });
        println!(
            "diff --content of two runs of {n} IDs, 0.1% of rows changed (scans took {:.1} s and {:.1} s):\n  \
             diff_across + content_diff, two store files: {:.3} ms median of 21 (target <= 50 ms at 10 M), \
             {differing} of {} partitions differ{}",
            t_old.as_secs_f64(),
            t_new.as_secs_f64(),
            median(took),
            n.div_ceil(65_536),
            cli.map_or(String::new(), |ms| format!(
                "\n  the binary (target/release/scanledger diff --across --content --json, one run): {ms:.1} ms"
            ))
        );
        drop((old_store, new_store));
    }
}
