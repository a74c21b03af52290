//! Crash tests with real kills.
//!
//! The failure this guards against: a scan killed between writing a page's IDs and its cursor
//! (or its counts, or between a journal record and its fold) resumes from the wrong place,
//! counting a page twice or skipping one, and still ends `verified`; or a page the scan
//! acknowledged is gone. The test drives the real binary on a slow simulated source, sends
//! SIGKILL at random instants (sometimes to the resume after a first kill too), then opens the
//! store read-only (which must not write it) and checks that every acknowledged page is
//! there, that counts equal bitmap cardinalities, that the cursor chain recomputes from the
//! page log, and that resuming ends with exactly the Merkle root, counts and chain of an
//! uninterrupted run. Modes: the default shared mode (the page journal, folded every few
//! records so that kills land around folds), group commit, `--exclusive`, and a contract that
//! restarts on an expired cursor. `SCANLEDGER_CRASH_ITERS` sets the number of kills of the
//! default mode (default 100; the others run a third of it; the soak in the README runs
//! 2,000) and `SCANLEDGER_CRASH_SEED` the seed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scanledger::{digest, RunId, Status, Store};

use crate::util;

// 4 ms per page: the scan, not the binary's start, takes most of a run, so kills land mid-run.
const SOURCE: &str = "sim:records=400,delay_ms=4,label_every=9";
const CONTRACT: &str = r#"{"source": "crash-sim", "tenant": "t", "page_size": 20}"#;
const RESTART_CONTRACT: &str =
    r#"{"source": "crash-sim", "page_size": 20, "on_expired_cursor": "restart"}"#;

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

/// One way of writing the store.
struct Mode {
    name: &'static str,
    contract: &'static str,
    source: &'static str,
    /// Options of `scan` and `resume`.
    opts: &'static [&'static str],
}

const MODES: [Mode; 4] = [
    Mode {
        name: "shared, journal folded every 4 records",
        contract: CONTRACT,
        source: SOURCE,
        opts: &["--fold-every", "4"],
    },
    Mode {
        name: "shared, group commit of 3 pages",
        contract: CONTRACT,
        source: SOURCE,
        opts: &["--checkpoint-every", "3", "--fold-every", "2"],
    },
    Mode {
        name: "exclusive",
        contract: CONTRACT,
        source: SOURCE,
        opts: &["--exclusive"],
    },
    Mode {
        name: "shared, restart on an expired cursor at page 8",
        contract: RESTART_CONTRACT,
        source: "sim:records=400,delay_ms=4,label_every=9,expire_at=8",
        opts: &["--fold-every", "3"],
    },
];

fn iterations(mode: usize) -> u32 {
    let iters: u32 = std::env::var("SCANLEDGER_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    if mode == 0 {
        iters
    } else {
        (iters / 3).max(1)
    }
}

/// The last page each run acknowledged (`ack run-N page P` lines).
fn acks(stderr: &str, into: &mut BTreeMap<u64, u32>) {
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("ack run-") else {
            continue;
        };
        let Some((run, page)) = rest.split_once(" page ") else {
            continue;
        };
        if let (Ok(run), Ok(page)) = (run.parse::<u64>(), page.trim().parse::<u32>()) {
            let e = into.entry(run).or_insert(0);
            *e = (*e).max(page);
        }
    }
}

/// Runs the binary with `args` and SIGKILLs it after `kill_after`; returns whether it had
/// completed, and its stderr.
fn run_and_kill(args: &[&str], kill_after: Duration) -> (bool, String) {
    let mut child = Command::new(util::bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    std::thread::sleep(kill_after);
    let _ = child.kill(); // SIGKILL on Unix; an error means it had already exited.
    let status = child.wait().unwrap();
    (status.success(), reader.join().unwrap())
}

/// The latest run of a store, read through the library.
fn latest(store: &str) -> Option<RunId> {
    let s = Store::open_read(store.as_ref()).ok()?;
    let latest = s.read().unwrap().latest().unwrap();
    latest
}

#[test]
fn sigkill_at_random_instants_loses_nothing_and_resumes_exactly() {
    let seed: u64 = std::env::var("SCANLEDGER_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Lcg(seed);
    for (m, mode) in MODES.iter().enumerate() {
        sigkill_loop(mode, iterations(m), &mut rng, seed);
    }
}

fn sigkill_loop(mode: &Mode, iters: u32, rng: &mut Lcg, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "contract.json", mode.contract);
    let scan_args = |store: &str| -> Vec<String> {
        let mut a: Vec<String> = [
            "--store",
            store,
            "scan",
            "--contract",
            &contract,
            "--source",
            mode.source,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        a.extend(mode.opts.iter().map(|s| (*s).to_owned()));
        a
    };
    let resume_args = |store: &str, run: RunId| -> Vec<String> {
        let mut a: Vec<String> = [
            "--store",
            store,
            "resume",
            &run.to_string(),
            "--source",
            mode.source,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        a.extend(mode.opts.iter().map(|s| (*s).to_owned()));
        a
    };
    let strs = |v: &[String]| -> Vec<String> { v.to_vec() };

    // The uninterrupted reference run, timed to pick kill instants across its whole length.
    let reference_store = dir
        .path()
        .join("reference.redb")
        .to_string_lossy()
        .into_owned();
    let t0 = Instant::now();
    let args = strs(&scan_args(&reference_store));
    let (code, _, err) = util::run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let run_ms = t0.elapsed().as_millis() as u64;
    assert_eq!(code, 0, "{}: reference scan: {err}", mode.name);
    let reference_run = latest(&reference_store).unwrap();
    let reference = receipt_json(&reference_store, &reference_run.to_string());

    let mut outcomes = BTreeMap::new();
    for i in 0..iters {
        let what = format!("{} (seed {seed}), iteration {i}", mode.name);
        let store = dir
            .path()
            .join(format!("crash-{i}.redb"))
            .to_string_lossy()
            .into_owned();
        let mut acked = BTreeMap::new();
        let mut args = scan_args(&store);
        args.push("--ack-pages".to_owned());
        let kill_after = Duration::from_millis(rng.next() % (run_ms + 20));
        let (completed, stderr) = run_and_kill(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            kill_after,
        );
        acks(&stderr, &mut acked);
        let mut outcome = check_after_kill(&store, &acked, &what);
        // Every fourth kill that left a run mid-way, the resume is killed too.
        if outcome == "mid-run" && i % 4 == 1 {
            let run = latest(&store).unwrap();
            let mut args = resume_args(&store, run);
            args.push("--ack-pages".to_owned());
            let kill_after = Duration::from_millis(rng.next() % (run_ms + 20));
            let (_, stderr) = run_and_kill(
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
                kill_after,
            );
            acks(&stderr, &mut acked);
            outcome = check_after_kill(&store, &acked, &format!("{what}, after the resume's kill"));
            *outcomes.entry("resume killed".to_owned()).or_insert(0u32) += 1;
        }
        *outcomes
            .entry(if completed {
                "completed".to_owned()
            } else {
                outcome.to_owned()
            })
            .or_insert(0u32) += 1;

        // Resume (or rescan) to the end and compare with the reference.
        let (code, _, err) = match latest(&store) {
            None => {
                let args = scan_args(&store);
                util::run(&args.iter().map(String::as_str).collect::<Vec<_>>())
            }
            Some(run) => {
                let args = resume_args(&store, run);
                util::run(&args.iter().map(String::as_str).collect::<Vec<_>>())
            }
        };
        assert!(
            code == 0 || err.contains("cannot be resumed"),
            "{what}: resume exit {code}: {err}"
        );
        // (With the restart contract, a resumed run before page 8 meets the expiry again and
        // restarts once more: its run ID may differ, its content may not.)
        let last = latest(&store).unwrap();
        let r = receipt_json(&store, &last.to_string());
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
            assert_eq!(r[field], reference[field], "{what}: {field} differs");
        }
        let _ = std::fs::remove_file(&store);
        let _ = std::fs::remove_file(format!("{store}.journal"));
    }
    eprintln!(
        "{}: crash outcomes over {iters} kills: {outcomes:?}",
        mode.name
    );
    if iters >= 30 {
        assert!(
            outcomes.get("mid-run").copied().unwrap_or(0) >= iters / 5,
            "{}: too few kills landed mid-run to mean anything: {outcomes:?}",
            mode.name
        );
    }
}

/// Opens the killed store read-only through the library and checks its invariants against
/// what was acknowledged. Returns where the kill landed: "no run", "mid-run" or "finished".
fn check_after_kill(store: &str, acked: &BTreeMap<u64, u32>, what: &str) -> &'static str {
    let nothing_acked = acked.values().all(|p| *p == 0);
    if !std::path::Path::new(store).exists() {
        assert!(nothing_acked, "{what}: no store after acknowledged pages");
        return "no run";
    }
    let before = std::fs::read(store).unwrap();
    let s = match Store::open_read(store.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            // Killed while creating the file, before the format record committed.
            assert!(
                nothing_acked,
                "{what}: store unreadable after acknowledged pages: {e}"
            );
            std::fs::remove_file(store).unwrap();
            return "no run";
        }
    };
    let snap = s.read().unwrap();
    let runs = snap.runs().unwrap();
    if runs.is_empty() {
        assert!(nothing_acked, "{what}: no run after acknowledged pages");
        drop(snap);
        drop(s);
        std::fs::remove_file(store).unwrap();
        return "no run";
    }
    for (&run, &acked) in acked {
        // load() itself checks bitmap cardinality against the run record and the page log.
        let loaded = snap
            .load(RunId(run))
            .unwrap_or_else(|e| panic!("{what}: run-{run}: {e}"));
        let rec = &loaded.reconciler;
        rec.check_invariants();
        let p = rec.progress();
        assert!(
            p.pages_observed >= acked,
            "{what}: run-{run}: {acked} pages acknowledged, a reader sees {}",
            p.pages_observed
        );
        let pages = &loaded.pages;
        let items: u64 = pages.iter().map(|x| u64::from(x.n_items)).sum();
        assert_eq!(
            items, p.records_observed,
            "{what}: page log and counts disagree"
        );
        if !pages.is_empty() {
            let chain = digest::chain_of(
                rec.query_digest(),
                p.pinned_snapshot.as_deref(),
                pages.iter().map(|x| &x.cursor_hash),
            );
            assert_eq!(
                chain, p.chain,
                "{what}: the chain does not recompute from the page log"
            );
        }
    }
    drop(snap);
    drop(s);
    assert!(
        std::fs::read(store).unwrap() == before,
        "{what}: a reader wrote the store file"
    );
    if runs[0].state == scanledger::RunState::Finished
        && runs[0].coverage_status == Status::Verified
    {
        "finished"
    } else {
        "mid-run"
    }
}
