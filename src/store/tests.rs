//! Power-loss tests of the store and its page journal on a simulated disk (`simdisk.rs`).
//!
//! The bug this guards against: a checkpoint that is not atomic (IDs written without the
//! cursor, or the page log without the counts), a journal record acknowledged and then lost,
//! or a journal applied over a state it does not continue. At every operation of a scan (a
//! write, length change or sync of the store or the journal, the journal's creation or
//! removal) the power goes; the disk a reboot finds keeps each file's synced image plus a
//! subset of what was issued since (none, a prefix, all, or a random subset with torn
//! writes). Then a reader (which must not write) and a writer must both see at least every
//! page the scan acknowledged, with counts that match the bitmaps and the page log, and
//! resuming must end with exactly the Merkle root, unique count, labels and cursor chain of
//! an uninterrupted run. Configurations: the default shared mode (journal, per-page
//! checkpoints, folds among the pages), group commit, `--exclusive`, a restart, and a scan
//! dropped mid-run whose successor resumes on the same handle.

mod simulation;

use std::sync::{Arc, Mutex};

use super::simdisk::{Loss, SimDisk};
use super::*;
use crate::collect::Error;
use crate::collect::RunLog;
use crate::digest;
use crate::receipt::Receipt;
use crate::reconcile::{Delta, Reconciler};
use crate::source::{SimConfig, SimSource};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

#[derive(Clone, Copy, Debug)]
struct Case {
    options: StoreOptions,
    /// The source's cursor expires once at this page; the contract restarts on it.
    restart_at: Option<u32>,
    /// The scan is dropped after this many pages; the same handle then resumes it.
    drop_after: Option<u32>,
}

fn sim(case: &Case) -> SimSource {
    SimSource::new(SimConfig {
        records: 200,
        label_every: Some(7),
        expire_at: case.restart_at,
        ..SimConfig::default()
    })
}

fn contract(case: &Case) -> Contract {
    let mut c = Contract::new("sim");
    c.page_size = 20;
    if case.restart_at.is_some() {
        c.on_expired_cursor = crate::contract::ExpiredPolicy::Restart;
    }
    c
}

/// The last page each run acknowledged: a checkpoint that returned with nothing pending, or
/// a finish.
#[derive(Debug, Default, Clone)]
pub(super) struct Acks(Arc<Mutex<std::collections::BTreeMap<u64, u32>>>);

impl Acks {
    pub(super) fn set(&self, run: RunId, page: u32) {
        let mut m = self.0.lock().expect("acks");
        let e = m.entry(run.0).or_insert(0);
        *e = (*e).max(page);
    }
    pub(super) fn all(&self) -> Vec<(u64, u32)> {
        self.0
            .lock()
            .expect("acks")
            .iter()
            .map(|(r, p)| (*r, *p))
            .collect()
    }
}

/// The run's writer, noting what it acknowledged; fails its checkpoint after `fail_after`
/// pages (a scan dropped at that point).
pub(super) struct Watched<'s> {
    pub(super) w: RunWriter<'s>,
    pub(super) acks: Acks,
    pub(super) fail_after: Option<u32>,
}

impl RunLog for Watched<'_> {
    fn run(&self) -> RunId {
        self.w.run()
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        let page = delta.page.as_ref().map(|p| p.page_idx);
        if let (Some(p), Some(n)) = (page, self.fail_after) {
            if p > n {
                return Err(Error::Write(WriteError::Poisoned {
                    path: "<dropped>".into(),
                }));
            }
        }
        self.w.checkpoint(rec, delta)?;
        if let Some(p) = page {
            if self.w.pending_pages() == 0 {
                self.acks.set(self.w.run(), p);
            }
        }
        Ok(())
    }
    fn set_server_count(&mut self, n: u64) {
        self.w.set_server_count(n);
    }
    fn finish(self, rec: &Reconciler, at: u64) -> Result<(), Error> {
        let run = self.w.run();
        let pages = rec.progress().pages_observed;
        self.w.finish(rec, at)?;
        self.acks.set(run, pages);
        Ok(())
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        let old = self.w.run();
        let pages = rec.progress().pages_observed;
        let w = self.w.restart(rec, contract, at)?;
        self.acks.set(old, pages);
        Ok(Watched {
            w,
            acks: self.acks,
            fail_after: self.fail_after,
        })
    }
}

fn scan(
    store: &mut Store,
    case: &Case,
    acks: &Acks,
    fail_after: Option<u32>,
) -> Result<Receipt, Error> {
    let c = contract(case);
    let (w, _) = store.begin(&c, crate::collect::now_ms())?;
    let log = Watched {
        w,
        acks: acks.clone(),
        fail_after,
    };
    let rec = Reconciler::new(&c);
    let done = runtime().block_on(crate::collect::scan_with(
        &c,
        rec,
        log,
        crate::collect::now_ms(),
        &mut sim(case),
    ))?;
    Ok(done.receipt())
}

fn resume(store: &mut Store, run: RunId, case: &Case, acks: &Acks) -> Result<Receipt, Error> {
    let (w, loaded) = store.resume(run, &Raise::default())?;
    let log = Watched {
        w,
        acks: acks.clone(),
        fail_after: None,
    };
    let done = runtime().block_on(crate::collect::resume_with(
        loaded,
        log,
        None,
        &mut sim(case),
    ))?;
    Ok(done.receipt())
}

/// What a scan does to a fresh disk: a scan (dropped and resumed on the same handle when the
/// case says so).
fn workload(disk: &SimDisk, case: &Case, acks: &Acks) -> Result<Receipt, Error> {
    let mut store = Store::open_simulated(disk, case.options)?;
    match case.drop_after {
        None => scan(&mut store, case, acks, None),
        Some(n) => {
            let dropped = scan(&mut store, case, acks, Some(n));
            assert!(dropped.is_err() || disk.crashed());
            resume(&mut store, RunId(1), case, acks)
        }
    }
}

struct Reference {
    root: String,
    chain: String,
    unique: u64,
    labels: u64,
    ops: u64,
    syncs: u64,
}

fn reference(case: &Case) -> Reference {
    let disk = SimDisk::new();
    let acks = Acks::default();
    let r = workload(&disk, case, &acks).expect("reference scan");
    assert_eq!(r.coverage_status, Status::Verified);
    let runs = acks.all();
    if case.restart_at.is_some() {
        assert_eq!(r.run_id, "run-2", "the reference restarted: {runs:?}");
        assert_eq!(runs.len(), 2, "{runs:?}");
    }
    if let Some(n) = case.drop_after {
        assert!(
            runs[0].1 > n,
            "the dropped run was resumed to its end: {runs:?}"
        );
    }
    Reference {
        root: r.merkle_root,
        chain: r.cursor_chain_digest,
        unique: r.unique_ids_observed,
        labels: r.labels["needs_migration"].count,
        ops: disk.ops(),
        syncs: disk.syncs(),
    }
}

/// Checks one run of a store after the crash: at least the acknowledged pages, counts that
/// match the bitmaps and the page log, a chain that recomputes.
pub(super) fn check_run(store: &Store, run: RunId, acked: u32, what: &str) {
    let snap = store.read().expect("read");
    let loaded = snap
        .load(run)
        .unwrap_or_else(|e| panic!("{what}: load {run}: {e}"));
    let rec = &loaded.reconciler;
    rec.check_invariants();
    // The receipt built without loading the sets is the loaded run's, byte for byte.
    let receipt = |r: Result<Receipt, ReadError>| {
        serde_json::to_string(&r.unwrap_or_else(|e| panic!("{what}: receipt {run}: {e}")))
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    assert_eq!(
        receipt(snap.receipt(run)),
        receipt(snap.receipt_loaded(run)),
        "{what}: the streamed receipt of {run} is not the loaded one"
    );
    let p = rec.progress();
    assert!(
        p.pages_observed >= acked,
        "{what}: {run} acknowledged {acked} pages, the store has {}",
        p.pages_observed
    );
    assert_eq!(loaded.pages.len() as u32, p.pages_observed, "{what}");
    let items: u64 = loaded.pages.iter().map(|x| u64::from(x.n_items)).sum();
    assert_eq!(
        items, p.records_observed,
        "{what}: page log and counts disagree"
    );
    if !loaded.pages.is_empty() {
        let chain = digest::chain_of(
            rec.query_digest(),
            p.pinned_snapshot.as_deref(),
            loaded.pages.iter().map(|x| &x.cursor_hash),
        );
        assert_eq!(chain, p.chain, "{what}: the chain does not recompute");
    }
}

/// No run that keeps no sealed request has a key left in the key file (a writer zeroes
/// what a cut between a finish and its erasure left), and every kept request opens.
pub(super) fn check_no_stale_keys(store: &Store, what: &str) {
    let snap = store.read().expect("read");
    for r in snap.runs().expect("runs") {
        let loaded = snap
            .load(r.run_id)
            .unwrap_or_else(|e| panic!("{what}: load {}: {e}", r.run_id));
        let keeps = matches!(
            loaded.reconciler.progress().next,
            Some(crate::reconcile::Request::Cursor(_) | crate::reconcile::Request::After(_))
        );
        if !keeps {
            assert!(
                store.with_keys(|k| k.get(r.run_id.0)).flatten().is_none(),
                "{what}: {} keeps no request, and its key is still in the key file",
                r.run_id
            );
        }
    }
}

/// After a crash: a reader, then a writer, then the scan carried to its end.
fn recover(image: &SimDisk, case: &Case, acks: &Acks, what: &str) -> (Receipt, &'static str) {
    let acked = acks.all();
    let before = image.ops();
    match Store::open_read_simulated(image) {
        Ok(reader) => {
            let runs = reader.read().expect("read").runs().expect("runs");
            for (run, pages) in &acked {
                if *pages > 0 {
                    assert!(
                        runs.iter().any(|r| r.run_id.0 == *run),
                        "{what}: run-{run} acknowledged {pages} pages and a reader does not find it"
                    );
                    check_run(&reader, RunId(*run), *pages, &format!("{what} (reader)"));
                }
            }
        }
        Err(e) => assert!(
            acked.iter().all(|(_, p)| *p == 0),
            "{what}: a reader cannot open the store after acknowledged pages: {e}"
        ),
    }
    assert_eq!(image.ops(), before, "{what}: the reader wrote the disk");
    let mut store = match Store::open_simulated(image, case.options) {
        Ok(s) => s,
        // Cut while the file was being created, before its format committed: a file that
        // is no store yet (as after a kill then); nothing was acknowledged, start over.
        Err(e) if acked.iter().all(|(_, p)| *p == 0) && !matches!(e, OpenError::Busy { .. }) => {
            let mut store = Store::open_simulated(&SimDisk::new(), case.options).expect("fresh");
            let r = scan(&mut store, case, acks, None).expect("fresh scan");
            return (r, "fresh");
        }
        Err(e) => panic!("{what}: reopen after the crash: {e}"),
    };
    for (run, pages) in &acked {
        if *pages > 0 {
            check_run(&store, RunId(*run), *pages, &format!("{what} (writer)"));
        }
    }
    check_no_stale_keys(&store, what);
    let runs = store.read().expect("read").runs().expect("runs");
    let Some(last) = runs.first() else {
        let r = scan(&mut store, case, acks, None).expect("fresh scan");
        return (r, "fresh");
    };
    let last = last.run_id;
    match resume(&mut store, last, case, acks) {
        Ok(r) => {
            check_no_stale_keys(&store, what);
            (r, "resumed")
        }
        Err(Error::Write(WriteError::NotResumable { .. })) => (
            store.read().expect("read").receipt(last).expect("receipt"),
            "finished",
        ),
        Err(e) => panic!("{what}: resume refused: {e}"),
    }
}

fn losses(point: u64) -> [Loss; 5] {
    [
        Loss::Prefix { keep: 0, of: 1 },
        Loss::Prefix { keep: 1, of: 2 },
        Loss::Prefix { keep: 1, of: 1 },
        Loss::Random(point.wrapping_mul(31).wrapping_add(7)),
        Loss::Random(point.wrapping_mul(131).wrapping_add(1)),
    ]
}

fn power_loss_at_every_point(case: Case) {
    let reference = reference(&case);
    assert!(
        reference.ops > 10,
        "the reference run issued too few operations"
    );
    // Every operation up to 400, then a stride, so the test stays quick.
    let stride = (reference.ops / 400).max(1);
    let mut paths = std::collections::BTreeMap::new();
    let mut points = 0;
    for crash_after in (0..=reference.ops).step_by(stride as usize) {
        for loss in losses(crash_after) {
            let what = format!("{case:?}, crash after {crash_after} ops, {loss:?}");
            let disk = SimDisk::new();
            disk.crash_after(crash_after);
            let acks = Acks::default();
            let outcome = workload(&disk, &case, &acks);
            if crash_after >= reference.ops {
                assert!(outcome.is_ok(), "{what}: {outcome:?}");
            }
            let image = disk.after_crash(loss);
            let (r, path) = recover(&image, &case, &acks, &what);
            *paths.entry(path).or_insert(0) += 1;
            assert_eq!(r.coverage_status, Status::Verified, "{what}");
            assert_eq!(r.merkle_root, reference.root, "{what}");
            assert_eq!(r.unique_ids_observed, reference.unique, "{what}");
            assert_eq!(r.duplicate_ids, 0, "{what}: a page was counted twice");
            assert_eq!(r.cursor_chain_digest, reference.chain, "{what}");
            assert_eq!(
                r.labels["needs_migration"].count, reference.labels,
                "{what}"
            );
            points += 1;
        }
    }
    assert!(points >= 100, "{points}");
    for path in ["fresh", "resumed", "finished"] {
        assert!(
            paths.get(path).copied().unwrap_or(0) > 0,
            "no crash point took the {path} path: {paths:?}"
        );
    }
    eprintln!(
        "{case:?}: {} ops and {} syncs uninterrupted; {points} crashes: {paths:?}",
        reference.ops, reference.syncs
    );
}

fn case(options: StoreOptions) -> Case {
    Case {
        options,
        restart_at: None,
        drop_after: None,
    }
}

#[test]
fn power_loss_in_the_shared_mode_with_folds_among_the_pages_resumes_exactly() {
    power_loss_at_every_point(case(StoreOptions::new().fold_every(3)));
}

#[test]
fn power_loss_in_the_shared_mode_with_one_fold_at_the_end_resumes_exactly() {
    power_loss_at_every_point(case(StoreOptions::new()));
}

#[test]
fn power_loss_with_group_commit_resumes_exactly() {
    power_loss_at_every_point(case(StoreOptions::new().checkpoint_every(3).fold_every(2)));
}

#[test]
fn power_loss_in_the_exclusive_mode_resumes_exactly() {
    power_loss_at_every_point(case(StoreOptions::new().exclusive(true)));
}

#[test]
fn power_loss_around_a_restart_resumes_exactly() {
    power_loss_at_every_point(Case {
        restart_at: Some(4),
        ..case(StoreOptions::new().fold_every(4))
    });
}

#[test]
fn power_loss_after_a_dropped_scan_resumed_on_the_same_handle_resumes_exactly() {
    power_loss_at_every_point(Case {
        drop_after: Some(5),
        ..case(StoreOptions::new().fold_every(4))
    });
}

#[test]
fn the_shared_mode_syncs_once_per_page_and_folds_cost_two() {
    // Pages 1..=9 of a 10-page run, folded every 4 records: 9 appends, two folds, the begin
    // and the finish commits.
    let c = case(StoreOptions::new().fold_every(4));
    let disk = SimDisk::new();
    let mut store = Store::open_simulated(&disk, c.options).expect("open");
    let opened = disk.syncs();
    let contract = contract(&c);
    let (mut w, _) = store.begin(&contract, 0).expect("begin");
    let begun = disk.syncs();
    let mut rec = Reconciler::new(&contract);
    let mut src = sim(&c);
    let rt = runtime();
    let mut per_page = Vec::new();
    for i in 0..9u32 {
        let req = crate::source::PageRequest {
            request: rec.next_request().cloned().expect("next"),
            page_size: 20,
            snapshot: None,
            query: contract.scope.query.clone(),
        };
        let page = rt
            .block_on(crate::source::PageSource::fetch(&mut src, &req))
            .expect("page");
        let before = disk.syncs();
        let seen = rec.observe(&page);
        w.checkpoint(&rec, seen.delta).expect("checkpoint");
        per_page.push(disk.syncs() - before);
        assert_eq!(w.pending_pages(), 0, "page {i} acknowledged");
    }
    drop(w);
    drop(store);
    let redb_commit = begun - opened;
    // Pages 4 and 8 fold: one append and one commit of the store (two syncs, three when
    // redb grows the file); every other page one sync (the first also creates the journal
    // and syncs the directory, and the run's key goes to the key file, created with its
    // directory synced, before the first request sealed under it: four).
    assert_eq!(
        redb_commit, 2,
        "a commit in the shared mode costs two syncs"
    );
    assert_eq!(per_page[0], 4, "{per_page:?}");
    for (i, n) in per_page.iter().enumerate().skip(1) {
        if (i + 1) % 4 == 0 {
            assert!((3..=4).contains(n), "page {}: {per_page:?}", i + 1);
        } else {
            assert_eq!(*n, 1, "page {}: {per_page:?}", i + 1);
        }
    }
}

fn plain_page(i: u64) -> crate::contract::Page {
    crate::contract::Page {
        items: (i * 10..(i + 1) * 10)
            .map(crate::contract::Item::int)
            .collect(),
        next: Some(format!("c{}", i + 1)),
        size_bytes: 80,
        ..crate::contract::Page::default()
    }
}

#[test]
fn records_a_clean_close_could_not_fold_are_read_through_a_copy_and_folded_by_the_next_writer() {
    // redb reports nothing to repair here (the file was closed cleanly), yet the journal holds
    // acknowledged pages: a reader must find them without writing, and the next writer fold
    // them.
    let disk = SimDisk::new();
    let options = StoreOptions::new();
    let mut store = Store::open_simulated(&disk, options).expect("open");
    let c = Contract::new("a");
    let mut rec = Reconciler::new(&c);
    let (mut w, _) = store.begin(&c, 0).expect("begin");
    for i in 0..3 {
        let seen = rec.observe(&plain_page(i));
        w.checkpoint(&rec, seen.delta).expect("checkpoint");
        assert_eq!(w.pending_pages(), 0);
    }
    drop(w);
    // As after a failed commit: the store is poisoned, so it closes without folding.
    store
        .poisoned
        .store(true, std::sync::atomic::Ordering::Relaxed);
    drop(store);
    assert!(!disk.writer_alive() && disk.journal_exists());
    let before = disk.ops();
    let reader = Store::open_read_simulated(&disk).expect("reader");
    assert!(
        reader.reads_recovered_copy(),
        "the reader folds into a copy"
    );
    check_run(&reader, RunId(1), 3, "reader");
    assert_eq!(
        reader
            .read()
            .expect("read")
            .ids(RunId(1))
            .expect("ids")
            .len(),
        30
    );
    drop(reader);
    assert_eq!(disk.ops(), before, "the reader wrote the disk");
    let writer = Store::open_simulated(&disk, options).expect("writer");
    check_run(&writer, RunId(1), 3, "writer");
    drop(writer);
    // Folded and closed: nothing left for a reader to copy.
    let reader = Store::open_read_simulated(&disk).expect("reader");
    assert!(!reader.reads_recovered_copy());
    check_run(&reader, RunId(1), 3, "reader after the fold");
}

#[test]
fn a_journal_of_another_store_is_set_aside_and_a_stale_one_never_applies() {
    // Two stores on two disks; the second's journal beside the first store.
    let a = SimDisk::new();
    let b = SimDisk::new();
    for disk in [&a, &b] {
        let mut store = Store::open_simulated(disk, StoreOptions::new()).expect("open");
        let c = Contract::new("x");
        let mut rec = Reconciler::new(&c);
        let (mut w, _) = store.begin(&c, 0).expect("begin");
        for i in 0..2 {
            let seen = rec.observe(&plain_page(i));
            w.checkpoint(&rec, seen.delta).expect("checkpoint");
        }
        drop(w);
        store
            .poisoned
            .store(true, std::sync::atomic::Ordering::Relaxed);
        drop(store);
    }
    // A reader of `a` with `b`'s journal: foreign, nothing applies, nothing is written.
    let mixed = a.with_journal_of(&b);
    let before = mixed.ops();
    let reader = Store::open_read_simulated(&mixed).expect("reader");
    assert!(!reader.reads_recovered_copy());
    check_run(&reader, RunId(1), 0, "foreign journal");
    assert_eq!(
        reader
            .read()
            .expect("read")
            .header(RunId(1))
            .expect("header")
            .pages_observed,
        0
    );
    drop(reader);
    assert_eq!(mixed.ops(), before);
    // A writer sets it aside and goes on; its own journal then works as usual.
    let writer = Store::open_simulated(&mixed, StoreOptions::new()).expect("writer");
    assert_eq!(
        writer
            .read()
            .expect("read")
            .header(RunId(1))
            .expect("header")
            .pages_observed,
        0
    );
    drop(writer);
    // `a`'s own journal, once `a` has committed past it, is stale: the run goes on and
    // finishes, and then the old records beside it must not take it back.
    let old_journal = a.after_crash(Loss::Prefix { keep: 1, of: 1 });
    let mut store = Store::open_simulated(&a, StoreOptions::new()).expect("fold a");
    check_run(&store, RunId(1), 2, "a folded");
    let (mut w, loaded) = store.resume(RunId(1), &Raise::default()).expect("resume");
    let mut rec = loaded.reconciler;
    let seen = rec.observe(&plain_page(2));
    w.checkpoint(&rec, seen.delta).expect("checkpoint");
    w.finish(&rec, 1).expect("finish");
    drop(store);
    let stale = a.with_journal_of(&old_journal);
    for reader in [true, false] {
        let s = if reader {
            Store::open_read_simulated(&stale).expect("reader")
        } else {
            Store::open_simulated(&stale, StoreOptions::new()).expect("writer")
        };
        check_run(&s, RunId(1), 3, "beside a stale journal");
        let h = s.read().expect("read").header(RunId(1)).expect("header");
        assert_eq!((h.pages_observed, h.state), (3, RunState::Finished));
    }
}

/// Engine panics: redb panics on some damaged files, and `Engine::contain` turns a panic into
/// a damaged-store error. The bug this guards against: a store that caught one and then
/// answers a later call (a second panic, a wrong answer, a journal append no lock covers
/// any more), or keeps the file locked so no other handle can open it. The panic is injected
/// at every engine call of a scan on a real file (`engine::fault`, tests only).
mod engine_panic {
    use super::super::engine::fault;
    use super::*;

    const CLOSED: &str = "closed after an earlier failure inside the storage engine";
    const POISONED: &str = "refuses writes after an earlier failed one";

    fn said(e: &dyn std::fmt::Display) -> String {
        e.to_string()
    }

    /// Everything the broken store is asked afterwards is refused, with the reason.
    fn check_refuses_everything(store: &mut Store, what: &str) {
        let e = store.read().map(|_| ()).expect_err(what);
        assert!(said(&e).contains(CLOSED), "{what}: read: {e}");
        let e = store
            .begin(&Contract::new("sim"), 0)
            .map(|_| ())
            .expect_err(what);
        assert!(
            said(&e).contains(CLOSED) || said(&e).contains(POISONED),
            "{what}: begin: {e}"
        );
        let e = store
            .resume(RunId(1), &Raise::default())
            .map(|_| ())
            .expect_err(what);
        assert!(
            said(&e).contains(CLOSED) || said(&e).contains(POISONED),
            "{what}: resume: {e}"
        );
    }

    #[test]
    fn a_second_handle_is_busy_while_a_store_is_open() {
        // What the test below relies on: the file's locks exclude another handle of this
        // process (open-file-description locks), so a freed file is a released lock.
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s.redb");
        for options in [StoreOptions::new(), StoreOptions::new().exclusive(true)] {
            let store = Store::open(&path, options).expect("open");
            let second = Store::open(&path, options);
            assert!(matches!(second, Err(OpenError::Busy { .. })), "{second:?}");
            drop(store);
        }
    }

    #[test]
    fn an_engine_panic_at_any_call_of_a_scan_closes_the_store_and_frees_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        for (mode, options) in [
            ("shared", StoreOptions::new().fold_every(3)),
            ("exclusive", StoreOptions::new().exclusive(true)),
        ] {
            let case = case(options);
            let path = dir.path().join(format!("{mode}-ref.redb"));
            let mut store = Store::open(&path, options).expect("open");
            let before = fault::calls();
            let reference = scan(&mut store, &case, &Acks::default(), None).expect("scan");
            let total = fault::calls() - before;
            drop(store);
            assert!(total > 10, "{mode}: only {total} engine calls");
            let mut resumed = 0;
            for n in 0..total {
                let what = format!("{mode}: panic at engine call {n} of {total}");
                let path = dir.path().join(format!("{mode}-{n}.redb"));
                let mut store = Store::open(&path, options).expect("open");
                fault::panic_in(n);
                let result = scan(&mut store, &case, &Acks::default(), None);
                fault::disarm();
                let e = result.map(|_| ()).expect_err(&what);
                assert!(said(&e).contains("storage engine"), "{what}: {e}");
                check_refuses_everything(&mut store, &what);
                // The broken handle is still alive: its file and locks are released anyway.
                let mut second = Store::open(&path, options)
                    .unwrap_or_else(|e| panic!("{what}: a second handle: {e}"));
                let runs = second.read().expect("read").runs().expect("runs");
                drop(store);
                // What the second handle finds continues to the reference's answer.
                let receipt = match runs.first() {
                    Some(run) => {
                        assert_eq!(run.state, RunState::Interrupted, "{what}");
                        resumed += 1;
                        // Also when its terminal page is stored and only the finish was
                        // not: resuming writes the finish.
                        resume(&mut second, run.run_id, &case, &Acks::default())
                    }
                    None => scan(&mut second, &case, &Acks::default(), None),
                }
                .unwrap_or_else(|e| panic!("{what}: after: {e}"));
                assert_eq!(receipt.coverage_status, Status::Verified, "{what}");
                assert_eq!(receipt.merkle_root, reference.merkle_root, "{what}");
                assert_eq!(
                    receipt.cursor_chain_digest, reference.cursor_chain_digest,
                    "{what}"
                );
            }
            assert!(resumed > total / 2, "{mode}: {resumed} of {total} resumed");
        }
    }

    #[test]
    fn an_engine_panic_in_a_reader_closes_it_and_leaves_the_file_to_others() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s.redb");
        let case = case(StoreOptions::new());
        let mut store = Store::open(&path, case.options).expect("open");
        let reference = scan(&mut store, &case, &Acks::default(), None).expect("scan");
        drop(store);
        let reader = Store::open_read(&path).expect("open_read");
        fault::panic_in(0);
        let e = reader
            .read()
            .map(|_| ())
            .expect_err("a panic in begin_read");
        fault::disarm();
        assert!(said(&e).contains("inside the storage engine"), "{e}");
        for _ in 0..3 {
            let e = reader.read().map(|_| ()).expect_err("closed");
            assert!(said(&e).contains(CLOSED), "{e}");
        }
        let writer = Store::open(&path, case.options).expect("a writer beside it");
        let r = writer
            .read()
            .expect("read")
            .receipt(RunId(1))
            .expect("receipt");
        assert_eq!(r.merkle_root, reference.merkle_root);
        drop(writer);
        drop(reader);
        assert!(Store::open_read(&path).is_ok());
    }
}

/// A run's writer whose finish never lands (the process dies between the terminal page's
/// checkpoint and the finish record).
struct NoFinish<'s>(RunWriter<'s>);

impl RunLog for NoFinish<'_> {
    fn run(&self) -> RunId {
        self.0.run()
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        Ok(self.0.checkpoint(rec, delta)?)
    }
    fn set_server_count(&mut self, n: u64) {
        self.0.set_server_count(n);
    }
    fn finish(self, _: &Reconciler, _: u64) -> Result<(), Error> {
        Err(Error::Write(WriteError::Poisoned {
            path: "<died before the finish>".into(),
        }))
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        Ok(NoFinish(self.0.restart(rec, contract, at)?))
    }
}

/// A source that must not be asked: every fetch is an error no scan can continue through.
struct NoPages;

impl crate::source::PageSource for NoPages {
    async fn fetch(
        &mut self,
        _: &crate::source::PageRequest,
    ) -> Result<crate::contract::Page, crate::source::FetchError> {
        Err(crate::source::FetchError::Forbidden)
    }
}

#[test]
fn a_run_whose_writer_died_after_its_terminal_page_is_finished_by_resume() {
    for options in [StoreOptions::new(), StoreOptions::new().exclusive(true)] {
        let case = case(options);
        let want = reference(&case);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.redb");
        let mut store = Store::open(&path, options).expect("open");
        let c = contract(&case);
        let (w, _) = store.begin(&c, crate::collect::now_ms()).expect("begin");
        let died = runtime().block_on(crate::collect::scan_with(
            &c,
            Reconciler::new(&c),
            NoFinish(w),
            crate::collect::now_ms(),
            &mut sim(&case),
        ));
        assert!(died.is_err(), "{options:?}: the finish must have failed");
        drop(store);
        let mut store = Store::open(&path, options).expect("reopen");
        let runs = store.read().expect("read").runs().expect("runs");
        assert_eq!(runs.len(), 1, "{options:?}");
        assert_eq!(runs[0].state, RunState::Interrupted, "{options:?}");
        // The resume fetches nothing (a source that fails every page would fail it) and
        // writes the finish: the run is then what an uninterrupted scan gives.
        let (w, loaded) = store
            .resume(RunId(1), &Raise::default())
            .expect("resumable");
        let mut dead = NoPages;
        let done = runtime()
            .block_on(crate::collect::resume_with(loaded, w, None, &mut dead))
            .expect("resume");
        let r = done.receipt();
        assert_eq!(r.coverage_status, Status::Verified, "{options:?}");
        assert_eq!(r.merkle_root, want.root, "{options:?}");
        assert_eq!(r.unique_ids_observed, want.unique, "{options:?}");
        let runs = store.read().expect("read").runs().expect("runs");
        assert_eq!(runs[0].state, RunState::Finished, "{options:?}");
        let again = store.resume(RunId(1), &Raise::default()).map(|_| ());
        assert!(
            matches!(again, Err(WriteError::NotResumable { ref reason, .. }) if reason.contains("it saw its terminal page")),
            "{options:?}: a finished run is not resumed again: {again:?}"
        );
    }
}
