//! Merging a plan's shards: 64 shard stores holding 100 M dense IDs in all (by default),
//! merged into one run as `scanledger merge` does (open every shard store read-only, stream
//! their partitions into the merged run, committed in one transaction).
//!
//! Targets: at most 2 s and at most 512 MB peak RSS for 64 shards of 100 M dense IDs.
//! Each merge runs in a child process (this binary, re-run with `--child`), which reports its
//! wall time and its peak RSS (`VmHWM` of /proc/self/status) so the setup's memory is not
//! counted; the figures are the medians of the runs.
//!
//! `cargo bench --bench merge` (100 M IDs, 64 shards, 3 runs);
//! `cargo bench --bench merge -- IDS SHARDS RUNS STEP` for other sizes: STEP 1 is dense IDs
//! (full partitions, which roaring keeps as runs: the cheapest case), STEP 5 every fifth ID
//! (bitmap containers of 8 KiB per partition: the memory a random-ID table costs). The
//! merged root is checked against the root of the whole ID set computed here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use roaring::RoaringBitmap;
use scanledger::shard::{self, Plan, ShardStore, Split};
use scanledger::{Contract, IdSet, PageLog, Reconciler, Store, StoreOptions, PARTITION_WIDTH};

const TARGET_SECONDS: f64 = 2.0;
const TARGET_RSS_MB: f64 = 512.0;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(Path::new(&args[1]));
        return;
    }
    if args.first().map(String::as_str) == Some("--setup") {
        // `--setup DIR IDS SHARDS STEP`: the plan and shard stores only, kept in DIR, for
        // benches/merge_memory.sh to merge with the release binary; the root in DIR/root.
        let dir = Path::new(&args[1]);
        let num = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
        std::fs::create_dir_all(dir).expect("setup dir");
        let shards = u32::try_from(num(3, 64)).expect("shards");
        let (_, root) = setup(dir, num(2, 100_000_000), shards, num(4, 1).max(1));
        std::fs::write(dir.join("root"), root).expect("write root");
        return;
    }
    let n_ids: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000_000);
    let n_shards: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let step: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    let (plan, expected_root) = setup(dir.path(), n_ids, n_shards, step);
    let setup_s = t.elapsed().as_secs_f64();
    let shard_bytes: u64 = (0..n_shards)
        .map(|k| {
            std::fs::metadata(dir.path().join(format!("shard-{k}.redb"))).map_or(0, |m| m.len())
        })
        .sum();
    let plan_bytes = std::fs::metadata(dir.path().join("plan.json")).map_or(0, |m| m.len());
    println!(
        "merge: {n_ids} IDs (every {step}) in {n_shards} shards (setup {setup_s:.1} s); plan {plan_bytes} bytes, shard stores {:.1} MB in all ({:.2} MB per shard)",
        shard_bytes as f64 / 1e6,
        shard_bytes as f64 / 1e6 / f64::from(n_shards)
    );
    let exe = std::env::current_exe().expect("own path");
    let mut secs = Vec::new();
    let mut rss = Vec::new();
    let mut out_bytes = 0;
    for run in 0..runs {
        let _ = std::fs::remove_file(dir.path().join("merged.redb"));
        let out = Command::new(&exe)
            .args(["--child", &dir.path().to_string_lossy()])
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut fields = text.split_whitespace();
        let s: f64 = fields.next().and_then(|f| f.parse().ok()).expect("seconds");
        let kb: f64 = fields.next().and_then(|f| f.parse().ok()).expect("VmHWM");
        let root = fields.next().unwrap_or("?").to_owned();
        println!(
            "  run {run}: {s:.3} s, peak RSS {:.1} MB, root {root}",
            kb / 1024.0
        );
        assert_eq!(root, expected_root, "the merged root is the whole set's");
        secs.push(s);
        rss.push(kb / 1024.0);
        out_bytes = std::fs::metadata(dir.path().join("merged.redb")).map_or(0, |m| m.len());
    }
    let (s, m) = (median(&mut secs), median(&mut rss));
    println!(
        "merge median: {s:.3} s ({:.1} M IDs/s), peak RSS {m:.1} MB, merged store {:.1} MB; targets {TARGET_SECONDS} s ({:.2}x) and {TARGET_RSS_MB} MB ({:.2}x) {}",
        n_ids as f64 / s / 1e6,
        out_bytes as f64 / 1e6,
        s / TARGET_SECONDS,
        m / TARGET_RSS_MB,
        if s <= TARGET_SECONDS && m <= TARGET_RSS_MB { "met" } else { "NOT met" }
    );
    let _ = plan;
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Writes the plan and one store per shard, each holding its shard's share of the IDs
/// `0, step, 2 * step, ...` (`n_ids` of them) as one finished, verified run of the shard's
/// contract; returns the plan and the Merkle root of the whole set.
fn setup(dir: &Path, n_ids: u64, n_shards: u32, step: u64) -> (Plan, String) {
    let contract = Contract::new("customers");
    let n_ids_space = n_ids * step;
    // The whole set's root, folded partition by partition (shards and their partitions
    // come in order), and its size.
    let mut whole = scanledger::digest::MerkleFold::new();
    let mut whole_len = 0u64;
    let mut scratch = Vec::new();
    let ranges = shard::split(0, n_ids_space - 1, n_shards).expect("split");
    let plan = Plan::new(
        &contract,
        "sim:records=N",
        None,
        false,
        Split {
            by: "min_max".into(),
            lo: 0,
            last: n_ids_space - 1,
        },
        ranges,
        "2026-12-01T00:00:00.000Z".into(),
        "00".repeat(16),
    )
    .expect("plan");
    std::fs::write(dir.join("plan.json"), plan.to_json()).expect("write plan");
    for k in 0..n_shards {
        let c = plan.shard_contract(k).expect("shard");
        let r = c.scope.key_range.expect("range");
        let (lo, hi) = (r.lo.min(n_ids_space), r.hi.min(n_ids_space));
        let mut ids = IdSet::new();
        let mut part = lo / PARTITION_WIDTH;
        while part * PARTITION_WIDTH < hi {
            let first = (part * PARTITION_WIDTH).max(lo);
            let last = ((part + 1) * PARTITION_WIDTH).min(hi);
            let base = part * PARTITION_WIDTH;
            let mut b = RoaringBitmap::new();
            if step == 1 {
                b.insert_range((first - base) as u32..(last - base) as u32);
            } else {
                let start = first.div_ceil(step) * step;
                b = RoaringBitmap::from_sorted_iter(
                    (start..last)
                        .step_by(step as usize)
                        .map(|id| (id - base) as u32),
                )
                .expect("sorted");
            }
            whole.push(&scanledger::digest::leaf_hash(part, &b, &mut scratch));
            whole_len += b.len();
            ids.set_partition(part, b);
            part += 1;
        }
        let n = ids.len();
        let mut progress = Reconciler::new(&c).progress().clone();
        // As a scan of pages of 10,000 would leave it.
        let pages: Vec<PageLog> = (0..n.div_ceil(10_000).max(1))
            .map(|i| PageLog {
                page_idx: u32::try_from(i + 1).expect("pages"),
                cursor_hash: scanledger::digest::cursor_hash(None),
                n_items: u32::try_from((n - (i * 10_000).min(n)).min(10_000)).expect("items"),
                size_bytes: 0,
                at_ms: 0,
            })
            .collect();
        progress.pages_observed = u32::try_from(pages.len()).expect("pages");
        progress.records_observed = n;
        progress.next = None;
        progress.finished = true;
        progress.terminal_observed = true;
        progress.pinned_snapshot = Some("sim-1".into());
        progress.serving_snapshot = Some("sim-1".into());
        progress.chain = scanledger::digest::chain_of(
            &scanledger::digest::query_digest(&c.scope),
            Some("sim-1"),
            pages.iter().map(|p| &p.cursor_hash),
        );
        let rec = Reconciler::restore(
            &c,
            progress,
            ids,
            Vec::new(),
            pages.iter().map(|p| p.cursor_hash),
            scanledger::IdCodec::new(c.id_codec, None),
        );
        let mut store =
            Store::open(&dir.join(format!("shard-{k}.redb")), StoreOptions::new()).expect("store");
        store
            .write_merged(&c, &rec, pages, None, 0, 1)
            .expect("write shard");
    }
    assert_eq!(whole_len, n_ids, "the shards hold every ID");
    (plan, scanledger::digest::display(&whole.root()))
}

/// One merge, as `scanledger merge` does it; prints seconds, VmHWM in kB and the root.
fn child(dir: &Path) {
    let t = Instant::now();
    let text = std::fs::read_to_string(dir.join("plan.json")).expect("plan");
    let plan = Plan::from_json(&text).expect("plan");
    let mut paths: Vec<PathBuf> = Vec::new();
    for k in 0..plan.shards.len() {
        paths.push(dir.join(format!("shard-{k}.redb")));
    }
    let stores: Vec<Store> = paths
        .iter()
        .map(|p| Store::open_read_streaming(p).expect("open shard"))
        .collect();
    let views: Vec<ShardStore<'_>> = stores
        .iter()
        .zip(&paths)
        .map(|(s, p)| ShardStore {
            path: p.clone(),
            snapshot: s.read().expect("read"),
        })
        .collect();
    let mut out = Store::open(&dir.join("merged.redb"), StoreOptions::new()).expect("out");
    let run = shard::merge_into(&plan, &views, &mut out, || 1)
        .expect("merge")
        .run;
    drop(views);
    drop(stores);
    let receipt = out.read().expect("read").receipt(run).expect("receipt");
    assert_eq!(
        receipt.coverage_status,
        scanledger::Status::Verified,
        "{:?}",
        receipt.violations
    );
    let s = t.elapsed().as_secs_f64();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("0")
        .to_owned();
    println!("{s} {hwm} {}", receipt.merkle_root);
}
