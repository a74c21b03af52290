//! The page journal of the default shared mode (docs/FORMAT.md §10a), through the library and
//! the real binary with real kills.
//!
//! The failures this guards against: a journal record that is acknowledged and then lost (a
//! dropped writer's, or one an exclusive writer never folded), or a journal applied to a store
//! it does not continue (another store, a stale generation, a store restored from a backup),
//! and a reader that sees anything but a committed state while a scan writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scanledger::{
    digest, now_ms, Contract, Item, Page, Raise, Reconciler, RunId, RunState, Store, StoreOptions,
};

use crate::util;

const CONTRACT: &str = r#"{"source": "journal-sim", "page_size": 20}"#;

fn page(i: u64, per_page: u64) -> Page {
    {
        let mut page = Page::default();
        page.items = (i * per_page..(i + 1) * per_page).map(Item::int).collect();
        page.next = Some(format!("c{}", i + 1));
        page.size_bytes = 8 * per_page;
        page
    }
}

/// Checks what `load` does not: the chain recomputes from the page log, and the page log's
/// items are the run's records. Returns the run's pages.
fn check_run(store: &Store, run: RunId) -> u32 {
    let snap = store.read().unwrap();
    let loaded = snap.load(run).unwrap_or_else(|e| panic!("{run}: {e}"));
    let rec = &loaded.reconciler;
    rec.check_invariants();
    let p = rec.progress();
    assert_eq!(loaded.pages.len() as u32, p.pages_observed);
    let items: u64 = loaded.pages.iter().map(|x| u64::from(x.n_items)).sum();
    assert_eq!(
        items, p.records_observed,
        "{run}: page log and counts disagree"
    );
    if !loaded.pages.is_empty() {
        let chain = digest::chain_of(
            rec.query_digest(),
            p.pinned_snapshot.as_deref(),
            loaded.pages.iter().map(|x| &x.cursor_hash),
        );
        assert_eq!(chain, p.chain, "{run}: the chain does not recompute");
    }
    p.pages_observed
}

#[test]
fn a_dropped_writers_acknowledged_pages_survive_the_next_run_on_the_same_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let mut store = Store::open(&path, StoreOptions::new()).unwrap();
    assert!(store.journaled());
    let c = Contract::new("a");
    let mut rec = Reconciler::new(&c);
    let (mut w, _) = store.begin(&c, now_ms()).unwrap();
    let first = w.run();
    for i in 0..3 {
        let seen = rec.observe(&page(i, 10));
        w.checkpoint(&rec, seen.delta).unwrap();
        assert_eq!(w.pending_pages(), 0, "page {i} acknowledged");
    }
    // The scan future is dropped (a timeout, say): its acknowledged pages stay.
    drop(w);
    let c2 = Contract::new("b");
    let mut rec2 = Reconciler::new(&c2);
    let (mut w2, _) = store.begin(&c2, now_ms()).unwrap();
    let seen = rec2.observe(&page(100, 10));
    w2.checkpoint(&rec2, seen.delta).unwrap();
    w2.finish(&rec2, now_ms()).unwrap();
    assert_eq!(check_run(&store, first), 3, "the dropped writer's pages");
    assert_eq!(store.read().unwrap().ids(first).unwrap().len(), 30);
    drop(store);
    let reader = Store::open_read(&path).unwrap();
    assert_eq!(check_run(&reader, first), 3);
    let runs = reader.read().unwrap().runs().unwrap();
    assert_eq!(runs.len(), 2);
}

/// A scan in a child process printing `ack run-N page P` to a pipe we read.
struct Scan {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    acked: u32,
}

impl Scan {
    fn start(store: &str, contract: &str, source: &str, extra: &[&str]) -> Scan {
        let mut args = vec![
            "--store",
            store,
            "scan",
            "--contract",
            contract,
            "--source",
            source,
            "--ack-pages",
        ];
        args.extend_from_slice(extra);
        Scan::spawn(&args)
    }

    fn spawn(args: &[&str]) -> Scan {
        let mut child = Command::new(util::bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Scan {
            child,
            lines: rx,
            acked: 0,
        }
    }

    /// Waits until page `n` of `run` is acknowledged (or the scan ends).
    fn wait_for_ack(&mut self, run: &str, n: u32) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.acked < n && Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => self.note(run, &line),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        assert!(self.acked >= n, "page {n} was never acknowledged");
    }

    fn note(&mut self, run: &str, line: &str) {
        if let Some(rest) = line.strip_prefix(&format!("ack {run} page ")) {
            if let Ok(p) = rest.trim().parse::<u32>() {
                self.acked = self.acked.max(p);
            }
        }
    }

    /// SIGKILLs the scan; returns the last page it acknowledged.
    fn kill(mut self, run: &str) -> u32 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Lines already written before the kill are still in the pipe.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.note(run, &line);
        }
        self.acked
    }
}

fn receipt(store: &str, run: &str) -> serde_json::Value {
    let (code, out, err) = util::run(&["--store", store, "--json", "receipt", run]);
    assert!(code == 0 || code == 3, "receipt exit {code}: {err}");
    serde_json::from_str(&out).expect("receipt JSON")
}

fn same_run(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    for field in [
        "coverage_status",
        "merkle_root",
        "unique_ids_observed",
        "records_observed",
        "duplicate_ids",
        "pages_observed",
        "cursor_chain_digest",
        "partitions",
    ] {
        assert_eq!(a[field], b[field], "{what}: {field} differs");
    }
}

const SLOW: &str = "sim:records=2000,delay_ms=3";

fn reference(dir: &Path, contract: &str, source: &str) -> serde_json::Value {
    let store = dir.join("reference.redb").to_string_lossy().into_owned();
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "scan",
        "--contract",
        contract,
        "--source",
        source,
    ]);
    assert_eq!(code, 0, "reference scan: {err}");
    receipt(&store, "1")
}

#[test]
fn an_exclusive_writer_after_a_kill_folds_the_journal_and_nothing_applies_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "c.json", CONTRACT);
    let reference = reference(dir.path(), &contract, SLOW);
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let mut scan = Scan::start(&store, &contract, SLOW, &[]);
    scan.wait_for_ack("run-1", 5);
    let acked = scan.kill("run-1");
    {
        let s = Store::open(store.as_ref(), StoreOptions::new().exclusive(true)).unwrap();
        assert!(!s.journaled());
        assert!(
            check_run(&s, RunId(1)) >= acked,
            "an exclusive writer lost acknowledged pages"
        );
    }
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "resume",
        "1",
        "--exclusive",
        "--source",
        SLOW,
    ]);
    assert_eq!(code, 0, "{err}");
    same_run(
        &receipt(&store, "1"),
        &reference,
        "after the exclusive resume",
    );
    // A shared writer and a reader later must not apply anything again.
    drop(Store::open(store.as_ref(), StoreOptions::new()).unwrap());
    same_run(
        &receipt(&store, "1"),
        &reference,
        "after a shared writer opened",
    );
    let r = Store::open_read(store.as_ref()).unwrap();
    let runs = r.read().unwrap().runs().unwrap();
    assert_eq!(runs[0].state, RunState::Finished);
}

#[test]
fn a_store_restored_from_a_backup_never_takes_a_newer_journal() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "c.json", CONTRACT);
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let backup = dir.path().join("backup.redb");
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "scan",
        "--contract",
        &contract,
        "--source",
        "sim:records=200",
    ]);
    assert_eq!(code, 0, "{err}");
    std::fs::copy(&store, &backup).unwrap();
    let mut scan = Scan::start(&store, &contract, SLOW, &[]);
    scan.wait_for_ack("run-2", 3);
    let acked = scan.kill("run-2");
    assert!(acked >= 3);
    assert!(
        Path::new(&format!("{store}.journal")).exists(),
        "the kill left a journal"
    );
    // The operator restores the backup; the journal of the newer state stays beside it.
    std::fs::copy(&backup, &store).unwrap();
    let (code, out, err) = util::run(&["--store", &store, "--json", "runs"]);
    assert_eq!(code, 0, "{err}");
    let runs: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{out}");
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "scan",
        "--contract",
        &contract,
        "--source",
        "sim:records=300",
    ]);
    assert_eq!(code, 0, "a scan on the restored store: {err}");
    let r = receipt(&store, "2");
    assert_eq!(r["unique_ids_observed"], 300);
    assert_eq!(r["coverage_status"], "verified");
    let s = Store::open_read(store.as_ref()).unwrap();
    assert_eq!(s.read().unwrap().runs().unwrap().len(), 2);
    assert_eq!(check_run(&s, RunId(2)), 15);
}

#[test]
fn a_reader_after_a_kill_right_after_a_fold_sees_every_acknowledged_page() {
    // Page 64 is the 64th journal record: its checkpoint folds the journal into the store.
    for kill_at in [1u32, 63, 64, 65, 70] {
        let dir = tempfile::tempdir().unwrap();
        let contract = util::write(dir.path(), "c.json", CONTRACT);
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        let mut scan = Scan::start(&store, &contract, SLOW, &[]);
        scan.wait_for_ack("run-1", kill_at);
        let acked = scan.kill("run-1");
        let reader = Store::open_read(store.as_ref()).unwrap();
        let pages = check_run(&reader, RunId(1));
        assert!(
            pages >= acked,
            "kill after page {kill_at}: {acked} acknowledged, a reader sees {pages}"
        );
        drop(reader);
        // The file was not written by the reader, and a writer then agrees with it.
        let w = Store::open(store.as_ref(), StoreOptions::new()).unwrap();
        assert!(check_run(&w, RunId(1)) >= pages);
    }
}

#[test]
fn readers_during_a_live_scan_see_committed_states_that_advance() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "c.json", CONTRACT);
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let source = "sim:records=8000,delay_ms=2";
    let mut scan = Scan::start(&store, &contract, source, &[]);
    scan.wait_for_ack("run-1", 1);
    let mut seen = Vec::new();
    let mut copies = 0;
    let mut reads = 0;
    while scan.child.try_wait().unwrap().is_none() && reads < 2_000 {
        let reader = match Store::open_read(store.as_ref()) {
            Ok(r) => r,
            Err(e) => panic!("a reader during the scan: {e}"),
        };
        copies += u32::from(reader.reads_recovered_copy());
        let pages = check_run(&reader, RunId(1));
        if seen.last() != Some(&pages) {
            seen.push(pages);
        }
        reads += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = scan.child.wait().unwrap();
    assert!(status.success());
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(seen, sorted, "a later reader saw fewer pages: {seen:?}");
    assert!(
        seen.iter().filter(|p| **p > 0 && **p < 400).count() >= 2,
        "readers saw no progress during the scan: {seen:?} over {reads} reads"
    );
    assert_eq!(
        copies, 0,
        "a reader copied the store while its writer was alive"
    );
    let mut rest = String::new();
    let _ = scan
        .child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut rest));
}

#[test]
fn a_resume_after_a_kill_reads_the_journal_and_ends_as_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "c.json", CONTRACT);
    let reference = reference(dir.path(), &contract, SLOW);
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let mut scan = Scan::start(&store, &contract, SLOW, &[]);
    scan.wait_for_ack("run-1", 10);
    let acked = scan.kill("run-1");
    let mut s = Store::open(store.as_ref(), StoreOptions::new()).unwrap();
    let (w, loaded) = s.resume(RunId(1), &Raise::default()).unwrap();
    assert!(loaded.reconciler.progress().pages_observed >= acked);
    drop(w);
    drop(s);
    let (code, _, err) = util::run(&["--store", &store, "resume", "1", "--source", SLOW]);
    assert_eq!(code, 0, "{err}");
    same_run(&receipt(&store, "1"), &reference, "resumed");
}
