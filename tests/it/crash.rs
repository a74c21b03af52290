//! Crash tests with real kills.
//!
//! The failure this guards against: a scan killed between writing a page's IDs and its cursor
//! (or its counts) resumes from the wrong place, counting a page twice or skipping one, and
//! still ends `verified`. The test drives the real binary on a slow simulated source, sends
//! SIGKILL at random instants, reopens the store and checks that every acknowledged page is
//! there, that counts equal bitmap cardinalities, that the cursor chain recomputes from the
//! page log, and that `resume` ends with exactly the Merkle root, counts and chain of an
//! uninterrupted run. `SCANLEDGER_CRASH_ITERS` sets the number of kills (default 100; the
//! soak in the README runs 2,000) and `SCANLEDGER_CRASH_SEED` the seed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scanledger::{digest, RunId, Status, Store};

use crate::util;

const SOURCE: &str = "sim:records=400,delay_ms=2,label_every=9";
const CONTRACT: &str = r#"{"source": "crash-sim", "tenant": "t", "page_size": 20}"#;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn receipt_json(store: &str, run: &str) -> serde_json::Value {
    let (code, out, err) = util::run(&["--store", store, "--json", "receipt", run]);
    assert!(code == 0 || code == 3, "receipt exit {code}: {err}");
    serde_json::from_str(&out).expect("receipt JSON")
}

#[test]
fn sigkill_at_random_instants_loses_nothing_and_resumes_exactly() {
    let iters: u32 = std::env::var("SCANLEDGER_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("SCANLEDGER_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "contract.json", CONTRACT);

    // The uninterrupted reference run, timed to pick kill instants across its whole length.
    let reference_store = dir
        .path()
        .join("reference.redb")
        .to_string_lossy()
        .into_owned();
    let t0 = Instant::now();
    let (code, _, err) = util::run(&[
        "--store",
        &reference_store,
        "scan",
        "--contract",
        &contract,
        "--source",
        SOURCE,
    ]);
    let run_ms = t0.elapsed().as_millis() as u64;
    assert_eq!(code, 0, "reference scan: {err}");
    let reference = receipt_json(&reference_store, "1");

    let mut rng = Lcg(seed);
    let mut outcomes = std::collections::BTreeMap::new();
    for i in 0..iters {
        let store = dir
            .path()
            .join(format!("crash-{i}.redb"))
            .to_string_lossy()
            .into_owned();
        let mut child = Command::new(util::bin())
            .args([
                "--store",
                &store,
                "scan",
                "--contract",
                &contract,
                "--source",
                SOURCE,
                "--ack-pages",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let kill_after = Duration::from_millis(rng.next() % (run_ms + 20));
        std::thread::sleep(kill_after);
        let _ = child.kill(); // SIGKILL on Unix; an error means it had already exited.
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let acked = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("ack run-1 page "))
            .filter_map(|n| n.trim().parse::<u32>().ok())
            .max()
            .unwrap_or(0);

        let outcome = check_after_kill(&store, acked, i);
        *outcomes
            .entry(if status.success() {
                "completed".to_owned()
            } else {
                outcome.to_owned()
            })
            .or_insert(0u32) += 1;

        // Resume (or rescan) to the end and compare with the reference.
        let (code, _, err) = if outcome == "no run" {
            util::run(&[
                "--store",
                &store,
                "scan",
                "--contract",
                &contract,
                "--source",
                SOURCE,
            ])
        } else {
            util::run(&["--store", &store, "resume", "1", "--source", SOURCE])
        };
        assert!(
            code == 0 || err.contains("cannot be resumed"),
            "iteration {i}: resume exit {code}: {err}"
        );
        let r = receipt_json(&store, "1");
        for field in [
            "coverage_status",
            "merkle_root",
            "unique_ids_observed",
            "records_observed",
            "duplicate_ids",
            "pages_observed",
            "cursor_chain_digest",
            "partitions",
            "labels",
        ] {
            assert_eq!(
                r[field], reference[field],
                "iteration {i} (seed {seed}): {field} differs"
            );
        }
        let _ = std::fs::remove_file(&store);
    }
    eprintln!("crash outcomes over {iters} kills: {outcomes:?}");
    if iters >= 50 {
        assert!(
            outcomes.get("mid-run").copied().unwrap_or(0) >= iters / 5,
            "too few kills landed mid-run to mean anything: {outcomes:?}"
        );
    }
}

/// Opens the killed store through the library and checks its invariants. Returns where the
/// kill landed: "no run", "mid-run" or "finished".
fn check_after_kill(store: &str, acked: u32, i: u32) -> &'static str {
    if !std::path::Path::new(store).exists() {
        assert_eq!(acked, 0);
        return "no run";
    }
    let s = match Store::open_read(store.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            // Killed while creating the file, before the format record committed.
            assert_eq!(
                acked, 0,
                "iteration {i}: store unreadable after acked pages: {e}"
            );
            std::fs::remove_file(store).unwrap();
            return "no run";
        }
    };
    let snap = s.read().unwrap();
    let runs = snap.runs().unwrap();
    if runs.is_empty() {
        assert_eq!(acked, 0);
        drop(snap);
        drop(s);
        std::fs::remove_file(store).unwrap();
        return "no run";
    }
    // load() itself checks bitmap cardinality against the run record and the page log length.
    let loaded = snap
        .load(RunId(1))
        .unwrap_or_else(|e| panic!("iteration {i}: {e}"));
    let rec = &loaded.reconciler;
    rec.check_invariants();
    let p = rec.progress();
    assert!(
        p.pages_observed >= acked,
        "iteration {i}: {acked} pages acknowledged, {} stored",
        p.pages_observed
    );
    let pages = &loaded.pages;
    let items: u64 = pages.iter().map(|x| u64::from(x.n_items)).sum();
    assert_eq!(
        items, p.records_observed,
        "iteration {i}: page log and counts disagree"
    );
    if !pages.is_empty() {
        let chain = digest::chain_of(
            rec.query_digest(),
            p.pinned_snapshot.as_deref(),
            pages.iter().map(|x| &x.cursor_hash),
        );
        assert_eq!(
            chain, p.chain,
            "iteration {i}: the chain does not recompute from the page log"
        );
    }
    if rec.status() == Status::Verified {
        "finished"
    } else {
        "mid-run"
    }
}
