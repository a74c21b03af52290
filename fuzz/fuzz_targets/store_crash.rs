//! Random operation sequences on a store with power cuts, checked against a model after every
//! step, as redb's crash fuzzer does: begin, checkpoint (pages of IDs, some labelled, some runs
//! of `string` IDs), finish, restart, drop of a writer (a scan future dropped), resume,
//! reopen, a reader in another handle beside the writer, and a power cut armed at a random
//! operation of the simulated disk under the store and its page journal, in the shared mode
//! (journal) or `--exclusive`, with group commit and folds among the pages.
//!
//! The model keeps, per run, the pages handed to the store and how many of them were
//! acknowledged (a checkpoint that returned with nothing pending, a finish, a restart). With
//! no crash, the store must hold exactly the acknowledged pages (a dropped writer loses only
//! what it had not acknowledged). After a crash the disk keeps a random subset of what was not
//! synced (torn writes included); a reader (which must not write) and then a writer must
//! agree, and hold for every run between the acknowledged and the handed pages, exactly their
//! IDs, a run record that matches its page log and bitmaps, a chain that recomputes, and every
//! acknowledged finish or supersession. The model then adopts what survived, and goes on.

#![no_main]

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::sim_disk::{Loss, SimDisk};
use scanledger::{
    digest, Contract, IdCodecKind, Item, Page, Raise, RawId, Reconciler, RunId, RunState,
    RunWriter, Store, StoreOptions,
};
use scanledger_fuzz::Bounded;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    /// Begin a run (of `string` IDs when true); drops a live writer first.
    Begin(bool),
    /// A page of `n % 40 + 1` IDs (half of them labelled when the flag is set).
    Checkpoint(u8, bool),
    /// The terminal page, then finish.
    End,
    /// Finish as it is (a partial run).
    Finish,
    /// Supersede the run and begin its successor, in one transaction.
    Restart,
    /// Drop the writer.
    Drop,
    /// Resume the newest interrupted run; drops a live writer first.
    Resume,
    /// Close and reopen the store; drops a live writer first.
    Reopen,
    /// A reader in another handle, beside the writer if one lives.
    Peek,
    /// A power cut after `n % 48` more disk operations.
    Crash(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    every: u8,
    fold: u8,
    exclusive: bool,
    ops: Bounded<Op, 48>,
}

/// What the model knows of one run.
#[derive(Debug, Clone, Default, PartialEq)]
struct ModelRun {
    string: bool,
    /// Pages handed to the store, in order (each page's IDs).
    issued: Vec<Vec<u64>>,
    /// How many of them are acknowledged (durable).
    acked: usize,
    /// The state the store must show; `None` while unknown (after a crash, until adopted).
    state: Option<RunState>,
    /// Its begin is durable.
    exists: bool,
    /// Its terminal page was observed.
    terminal: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    runs: Vec<ModelRun>,
}

impl Model {
    fn run(&mut self, id: RunId) -> &mut ModelRun {
        let i = usize::try_from(id.0 - 1).expect("run index");
        if self.runs.len() <= i {
            self.runs.resize(i + 1, ModelRun::default());
        }
        &mut self.runs[i]
    }
}

const PAGES_MAX: usize = 200;

fn contract(string: bool) -> Contract {
    let mut c = Contract::new("fuzz");
    c.page_size = 100;
    if string {
        c.id_codec = IdCodecKind::String;
    }
    c
}

fn page(
    run: RunId,
    idx: usize,
    n: u8,
    labelled: bool,
    string: bool,
    last: bool,
) -> (Page, Vec<u64>) {
    let count = u64::from(n % 40) + 1;
    // Unique per (run, page), spread over partitions.
    let ids: Vec<u64> = (0..count)
        .map(|j| run.0 * 100_000_000 + idx as u64 * 70_001 + j * 3)
        .collect();
    let items = ids
        .iter()
        .enumerate()
        .map(|(j, id)| {
            let mut item = Item::new(if string {
                RawId::Str(format!("s-{id}"))
            } else {
                RawId::Int(*id)
            });
            item.labels = if labelled && j % 2 == 0 {
                vec!["l".to_owned()]
            } else {
                Vec::new()
            };
            item.content = None;
            item
        })
        .collect();
    let p = {
        let mut page = Page::default();
        page.items = items;
        page.next = (!last).then(|| format!("c{}-{}", run.0, idx + 1));
        page.size_bytes = 8 * count;
        page
    };
    (p, ids)
}

/// The disk lost power: this session stops here.
#[derive(Debug)]
struct Crashed;

/// An error is only allowed once the disk has crashed.
fn or_crash<T, E: std::fmt::Display>(
    disk: &SimDisk,
    r: Result<T, E>,
    what: &str,
) -> Result<T, Crashed> {
    match r {
        Ok(v) => Ok(v),
        Err(_) if disk.crashed() => Err(Crashed),
        Err(e) => panic!("{what} failed without a power cut: {e}"),
    }
}

/// One run as a store shows it.
struct Seen {
    id: RunId,
    state: RunState,
    string: bool,
    pages: usize,
    terminal: bool,
    ids: BTreeSet<u64>,
    n_ids: u64,
    records: u64,
}

/// Reads every run of a store, checking what needs no model (invariants, the page log against
/// the run record, the chain).
fn observe(store: &Store, disk: &SimDisk) -> Result<Vec<Seen>, Crashed> {
    let snap = or_crash(disk, store.read(), "read")?;
    let runs = or_crash(disk, snap.runs(), "runs")?;
    let mut out = Vec::new();
    for r in runs.iter().rev() {
        let loaded = or_crash(disk, snap.load(r.run_id), "load")?;
        let rec = &loaded.reconciler;
        rec.check_invariants();
        let p = rec.progress();
        assert_eq!(
            loaded.pages.len() as u32,
            p.pages_observed,
            "{}: page log",
            r.run_id
        );
        if !loaded.pages.is_empty() {
            let chain = digest::chain_of(
                rec.query_digest(),
                p.pinned_snapshot.as_deref(),
                loaded.pages.iter().map(|x| &x.cursor_hash),
            );
            assert_eq!(chain, p.chain, "{}: the chain does not recompute", r.run_id);
        }
        let ids = or_crash(disk, snap.ids(r.run_id), "ids")?;
        out.push(Seen {
            id: r.run_id,
            state: r.state,
            string: loaded.contract.id_codec == IdCodecKind::String,
            pages: p.pages_observed as usize,
            terminal: p.terminal_observed,
            n_ids: ids.len(),
            ids: ids.iter().collect(),
            records: p.records_observed,
        });
    }
    Ok(out)
}

/// Checks what a store shows against the model: exactly (`exact`), or within what a crash may
/// leave, adopting what survived.
fn check(seen: &[Seen], model: &mut Model, exact: bool, what: &str) {
    for s in seen {
        let m = model.run(s.id);
        if !m.exists && m.issued.is_empty() {
            // A begin whose commit returned an error yet reached the disk.
            assert!(!exact, "{what}: {} appeared", s.id);
            m.string = s.string;
        }
    }
    for (i, m) in model.runs.iter_mut().enumerate() {
        let id = RunId(i as u64 + 1);
        let Some(s) = seen.iter().find(|s| s.id == id) else {
            assert!(!m.exists, "{what}: {id} was begun durably and is gone");
            assert_eq!(m.acked, 0, "{what}: {id} lost acknowledged pages");
            *m = ModelRun::default();
            continue;
        };
        let k = s.pages;
        if exact {
            assert_eq!(k, m.acked, "{what}: {id} pages");
        } else {
            assert!(
                m.acked <= k && k <= m.issued.len(),
                "{what}: {id} has {k} pages, {} acknowledged and {} handed to the store",
                m.acked,
                m.issued.len()
            );
        }
        let want: BTreeSet<u64> = m.issued[..k].iter().flatten().copied().collect();
        if m.string {
            assert_eq!(s.n_ids, want.len() as u64, "{what}: {id} strings");
        } else {
            assert_eq!(s.ids, want, "{what}: {id} IDs");
        }
        assert_eq!(s.records, want.len() as u64, "{what}: {id} records");
        match m.state {
            Some(RunState::Finished) | Some(RunState::Superseded) => {
                assert_eq!(m.state, Some(s.state), "{what}: {id} state");
            }
            Some(RunState::Interrupted) if exact => {
                assert_eq!(s.state, RunState::Interrupted, "{what}: {id} state");
            }
            _ => {}
        }
        m.issued.truncate(k);
        m.acked = k;
        m.exists = true;
        m.terminal = s.terminal;
        m.state = Some(s.state);
    }
}

/// A reader in another handle, beside the writer if one lives: a committed state (at most the
/// pages handed over, exactly their IDs), and it writes nothing.
fn peek(disk: &SimDisk, model: &Model) {
    let before = disk.ops();
    let Ok(reader) = Store::open_read_simulated(disk) else {
        return; // an exclusive writer refuses readers; a cut disk refuses everything
    };
    if let Ok(seen) = observe(&reader, disk) {
        for s in &seen {
            let Some(m) = model.runs.get(s.id.0 as usize - 1) else {
                continue;
            };
            assert!(
                s.pages <= m.issued.len(),
                "peek: {} has {} pages of {}",
                s.id,
                s.pages,
                m.issued.len()
            );
            if !m.string {
                let want: BTreeSet<u64> = m.issued[..s.pages].iter().flatten().copied().collect();
                assert_eq!(s.ids, want, "peek: {} IDs", s.id);
            }
        }
    }
    drop(reader);
    assert_eq!(disk.ops(), before, "a reader wrote the disk");
}

/// Drives one writer through the ops until it finishes, restarts out of the ops, is dropped or
/// the disk is cut.
fn drive(
    disk: &SimDisk,
    mut w: RunWriter<'_>,
    mut rec: Reconciler,
    ops: &[Op],
    i: &mut usize,
    model: &mut Model,
    every: u32,
) -> Result<(), Crashed> {
    let mut pending = 0u32;
    loop {
        let run = w.run();
        let string = model.run(run).string;
        let Some(&op) = ops.get(*i) else {
            break;
        };
        *i += 1;
        match op {
            Op::Checkpoint(n, labelled) => {
                let idx = model.run(run).issued.len();
                if idx >= PAGES_MAX || model.run(run).terminal {
                    continue;
                }
                let (p, ids) = page(run, idx, n, labelled, string, false);
                let seen = rec.observe(&p);
                model.run(run).issued.push(ids);
                or_crash(disk, w.checkpoint(&rec, seen.delta), "checkpoint")?;
                pending += 1;
                if w.pending_pages() == 0 {
                    let m = model.run(run);
                    m.acked = m.issued.len();
                    pending = 0;
                }
                assert!(
                    pending < every,
                    "{pending} pages pending with groups of {every}"
                );
            }
            Op::Crash(n) => disk.crash_after(u64::from(n % 48)),
            Op::Peek => peek(disk, model),
            Op::End | Op::Finish => {
                let m = model.run(run);
                if matches!(op, Op::End) && !m.terminal && m.issued.len() < PAGES_MAX {
                    let (p, ids) = page(run, m.issued.len(), 3, false, string, true);
                    let seen = rec.observe(&p);
                    m.issued.push(ids);
                    m.terminal = true;
                    or_crash(disk, w.checkpoint(&rec, seen.delta), "checkpoint")?;
                }
                or_crash(disk, w.finish(&rec, 1), "finish")?;
                let m = model.run(run);
                m.acked = m.issued.len();
                m.state = Some(RunState::Finished);
                return Ok(());
            }
            Op::Restart => {
                let next = or_crash(disk, w.restart(&rec, &contract(string), 1), "restart")?;
                let m = model.run(run);
                m.acked = m.issued.len();
                m.state = Some(RunState::Superseded);
                *model.run(next.run()) = ModelRun {
                    string,
                    exists: true,
                    state: Some(RunState::Running),
                    ..ModelRun::default()
                };
                let mut fresh = Reconciler::new(&contract(string));
                if string {
                    fresh.set_interner(rec.codec().interner().clone());
                }
                rec = fresh;
                w = next;
                pending = 0;
            }
            Op::Drop | Op::Begin(_) | Op::Resume | Op::Reopen => {
                if !matches!(op, Op::Drop) {
                    *i -= 1; // the session loop carries it out
                }
                break;
            }
        }
    }
    // The writer is dropped: what it had not acknowledged goes.
    let run = w.run();
    drop(w);
    let m = model.run(run);
    m.issued.truncate(m.acked);
    m.state = Some(RunState::Interrupted);
    Ok(())
}

/// Runs one op with no writer alive; `Ok(false)` asks for a reopen.
fn step(
    store: &mut Store,
    disk: &SimDisk,
    op: Op,
    ops: &[Op],
    i: &mut usize,
    model: &mut Model,
    every: u32,
) -> Result<bool, Crashed> {
    match op {
        Op::Begin(string) => {
            let c = contract(string);
            let (w, interner) = or_crash(disk, store.begin(&c, 1), "begin")?;
            let mut rec = Reconciler::new(&c);
            if let Some(int) = interner {
                rec.set_interner(int);
            }
            *model.run(w.run()) = ModelRun {
                string,
                exists: true,
                state: Some(RunState::Running),
                ..ModelRun::default()
            };
            drive(disk, w, rec, ops, i, model, every)?;
        }
        Op::Resume => {
            let Some(run) = model
                .runs
                .iter()
                .rposition(|m| m.exists && m.state == Some(RunState::Interrupted) && !m.terminal)
                .map(|k| RunId(k as u64 + 1))
            else {
                return Ok(true);
            };
            let (w, loaded) = or_crash(disk, store.resume(run, &Raise::default()), "resume")?;
            assert_eq!(
                loaded.reconciler.progress().pages_observed as usize,
                model.run(run).acked,
                "{run} resumed from another page than the last acknowledged"
            );
            model.run(run).state = Some(RunState::Running);
            drive(disk, w, loaded.reconciler, ops, i, model, every)?;
        }
        Op::Reopen => return Ok(false),
        Op::Crash(n) => disk.crash_after(u64::from(n % 48)),
        Op::Peek => peek(disk, model),
        Op::Checkpoint(..) | Op::End | Op::Finish | Op::Restart | Op::Drop => {}
    }
    Ok(true)
}

/// After a power cut: the disk keeps a random part of what was not synced; a reader (which
/// must write nothing) and then a writer must agree with the model, which adopts what
/// survived.
fn recover(
    disk: &mut SimDisk,
    model: &mut Model,
    crashes: &mut u64,
    i: usize,
    options: StoreOptions,
) {
    *disk = disk.after_crash(Loss::Random(*crashes ^ (i as u64) << 20));
    *crashes += 1;
    // A reader first: it must see at least what was acknowledged, and write nothing.
    let before = disk.ops();
    let mut by_reader = model.clone();
    if let Ok(reader) = Store::open_read_simulated(disk) {
        let seen = observe(&reader, disk).expect("a reader after a power cut");
        check(&seen, &mut by_reader, false, "a reader after a power cut");
    } else {
        assert!(
            model.runs.iter().all(|m| !m.exists),
            "no reader after a power cut, with runs"
        );
    }
    assert_eq!(
        disk.ops(),
        before,
        "a reader wrote the disk after a power cut"
    );
    match Store::open_simulated(disk, options) {
        Ok(s) => {
            let seen = observe(&s, disk).expect("a writer after a power cut");
            check(&seen, model, false, "a writer after a power cut");
            if by_reader.runs.iter().any(|m| m.exists) {
                assert_eq!(
                    &by_reader, model,
                    "the reader and the writer disagree after a power cut"
                );
            }
        }
        Err(_) if model.runs.iter().all(|m| !m.exists) => {
            *disk = SimDisk::new();
            *model = Model::default();
        }
        Err(e) => panic!("reopen after a power cut: {e}"),
    }
}

fuzz_target!(|input: Input| {
    let every = u32::from(input.every % 4) + 1;
    let options = StoreOptions::new()
        .checkpoint_every(every)
        .fold_every(u32::from(input.fold % 8) + 1)
        .exclusive(input.exclusive);
    let ops = input.ops.0;
    let mut disk = SimDisk::new();
    let mut model = Model::default();
    let mut i = 0usize;
    let mut crashes = 0u64;
    // Each turn is one session of the store; bounded by the ops (each session consumes one at
    // least, or recovers from a crash, which needs one to arm it).
    for _ in 0..(4 * ops.len() + 4) {
        let mut store = match Store::open_simulated(&disk, options) {
            Ok(s) => s,
            Err(e) if model.runs.iter().all(|m| !m.exists) => {
                // Cut while the file was created, before its format committed: no store yet.
                assert!(
                    disk.crashed() || crashes > 0,
                    "open failed with no power cut: {e}"
                );
                disk = SimDisk::new();
                model = Model::default();
                continue;
            }
            // A cut armed in the last session that falls inside this open.
            Err(_) if disk.crashed() => {
                recover(&mut disk, &mut model, &mut crashes, i, options);
                continue;
            }
            Err(e) => panic!("open after {crashes} power cuts: {e} ({e:?})"),
        };
        let mut finished = false;
        match observe(&store, &disk) {
            Ok(seen) => check(&seen, &mut model, true, "after opening"),
            Err(Crashed) => {}
        }
        while !disk.crashed() {
            let Some(&op) = ops.get(i) else {
                finished = true;
                break;
            };
            i += 1;
            match step(&mut store, &disk, op, &ops, &mut i, &mut model, every) {
                Ok(true) => {}
                Ok(false) | Err(Crashed) => break,
            }
            if disk.crashed() {
                break;
            }
            match observe(&store, &disk) {
                Ok(seen) if !disk.crashed() => {
                    check(&seen, &mut model, true, &format!("after {op:?}"))
                }
                _ => break,
            }
        }
        drop(store);
        if disk.crashed() {
            recover(&mut disk, &mut model, &mut crashes, i, options);
            continue;
        }
        if finished {
            // The last word: a fresh open agrees exactly.
            disk.disarm();
            let s = Store::open_simulated(&disk, options).expect("final open");
            let seen = observe(&s, &disk).expect("final read");
            check(&seen, &mut model, true, "at the end");
            break;
        }
    }
});
