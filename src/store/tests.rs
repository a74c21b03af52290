//! Power-loss tests of the store through redb's `StorageBackend` trait.
//!
//! The bug this guards against: a checkpoint that is not atomic (IDs written without the
//! cursor, or the page log without the counts) would, after a power cut, resume from a
//! cursor that does not match the stored IDs and count a page twice or lose one. The
//! simulated disk keeps what was synced; at a crash point it keeps the synced image plus a
//! prefix of the writes issued since (none, half, or all of them), then fails every further
//! operation. After "reboot" the store must be at some committed page, its counts must match
//! its bitmaps and page log, and resuming must end with exactly the reference run's Merkle
//! root, unique count and cursor chain.

use std::sync::{Arc, Mutex};

use super::*;
use crate::digest;
use crate::receipt::Receipt;
use crate::source::{SimConfig, SimSource};

#[derive(Debug, Clone)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Disk {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<Op>,
    ops: usize,
    crash_after_ops: Option<usize>,
    crashed: bool,
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(offset, data) => {
            let end = *offset as usize + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[*offset as usize..end].copy_from_slice(data);
        }
        Op::SetLen(len) => image.resize(*len as usize, 0),
    }
}

#[derive(Debug, Clone, Default)]
struct LossyBackend(Arc<Mutex<Disk>>);

fn io_err(what: &str) -> std::io::Error {
    std::io::Error::other(what.to_owned())
}

impl LossyBackend {
    fn from_image(image: Vec<u8>) -> LossyBackend {
        LossyBackend(Arc::new(Mutex::new(Disk {
            durable: image.clone(),
            current: image,
            ..Disk::default()
        })))
    }

    fn arm(&self, after_ops: usize) {
        let mut d = self.0.lock().expect("disk lock");
        d.ops = 0;
        d.crash_after_ops = Some(after_ops);
    }

    fn ops(&self) -> usize {
        self.0.lock().expect("disk lock").ops
    }

    /// The disk after the power cut: the synced image plus the first `keep` of `n` pending
    /// writes, where `keep` is `n * keep_num / 2`.
    fn image_after_crash(&self, keep_num: usize) -> Vec<u8> {
        let d = self.0.lock().expect("disk lock");
        let mut image = d.durable.clone();
        let keep = d.pending.len() * keep_num / 2;
        for op in &d.pending[..keep] {
            apply(&mut image, op);
        }
        image
    }

    fn step(&self, op: Option<Op>) -> std::io::Result<()> {
        let mut d = self.0.lock().expect("disk lock");
        if d.crashed {
            return Err(io_err("power lost"));
        }
        d.ops += 1;
        if d.crash_after_ops.is_some_and(|n| d.ops > n) {
            d.crashed = true;
            return Err(io_err("power lost"));
        }
        match op {
            Some(op) => {
                let mut cur = std::mem::take(&mut d.current);
                apply(&mut cur, &op);
                d.current = cur;
                d.pending.push(op);
            }
            None => {
                d.durable = d.current.clone();
                d.pending.clear();
            }
        }
        Ok(())
    }
}

impl redb::StorageBackend for LossyBackend {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.lock().expect("disk lock").current.len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let d = self.0.lock().expect("disk lock");
        let start = offset as usize;
        let end = start + out.len();
        if end > d.current.len() {
            return Err(io_err("read past the end"));
        }
        out.copy_from_slice(&d.current[start..end]);
        Ok(())
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.step(Some(Op::SetLen(len)))
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.step(None)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.step(Some(Op::Write(offset, data.to_vec())))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

fn sim() -> SimSource {
    SimSource::new(SimConfig {
        records: 300,
        label_every: Some(7),
        ..SimConfig::default()
    })
}

fn contract() -> Contract {
    let mut c = Contract::new("sim");
    c.page_size = 20;
    c
}

struct Reference {
    root: String,
    chain: String,
    unique: u64,
    labels: u64,
    ops: usize,
}

fn reference(options: StoreOptions) -> Reference {
    let backend = LossyBackend::default();
    let mut store = Store::open_backend(backend.clone(), options, false).expect("create store");
    backend.arm(usize::MAX);
    let done = runtime()
        .block_on(crate::collect::scan(&contract(), &mut sim(), &mut store))
        .expect("reference scan");
    let r = done.receipt();
    assert_eq!(r.coverage_status, Status::Verified);
    Reference {
        root: r.merkle_root,
        chain: r.cursor_chain_digest,
        unique: r.unique_ids_observed,
        labels: r.labels["needs_migration"].count,
        ops: backend.ops(),
    }
}

/// Checks a reopened store and finishes its run; returns the final receipt.
fn recover_and_finish(image: Vec<u8>, options: StoreOptions) -> (Receipt, &'static str) {
    let backend = LossyBackend::from_image(image);
    let mut store = Store::open_backend(backend, options, false).expect("reopen after crash");
    let runs = store
        .read()
        .expect("read")
        .runs()
        .expect("runs after crash");
    if runs.is_empty() {
        // The crash came before the run's first commit: nothing was acknowledged.
        let r = runtime()
            .block_on(crate::collect::scan(&contract(), &mut sim(), &mut store))
            .expect("fresh scan")
            .receipt();
        return (r, "fresh");
    }
    assert_eq!(runs.len(), 1);
    {
        let snap = store.read().expect("read");
        let loaded = snap.load(RunId(1)).expect("load after crash");
        let rec = &loaded.reconciler;
        rec.check_invariants();
        // The chain recomputes from the page log.
        let pages = &loaded.pages;
        assert_eq!(pages.len() as u32, rec.progress().pages_observed);
        let items: u64 = pages.iter().map(|p| u64::from(p.n_items)).sum();
        assert_eq!(items, rec.progress().records_observed);
        if !pages.is_empty() {
            let chain = digest::chain_of(
                rec.query_digest(),
                rec.progress().pinned_snapshot.as_deref(),
                pages.iter().map(|p| &p.cursor_hash),
            );
            assert_eq!(
                chain,
                rec.progress().chain,
                "chain does not recompute from the page log"
            );
        }
    }
    match runtime().block_on(crate::collect::resume(
        &mut store,
        RunId(1),
        &Raise::default(),
        &mut sim(),
    )) {
        Ok(done) => (done.receipt(), "resumed"),
        Err(crate::Error::Write(WriteError::NotResumable { .. })) => (
            store
                .read()
                .expect("read")
                .receipt(RunId(1))
                .expect("receipt"),
            "finished",
        ),
        Err(e) => panic!("resume refused: {e}"),
    }
}

fn power_loss_at_every_point(options: StoreOptions) {
    let reference = reference(options);
    assert!(
        reference.ops > 10,
        "the reference run issued too few writes to test"
    );
    // Every crash point up to 150, then a stride, so the test stays quick.
    let stride = (reference.ops / 150).max(1);
    let mut points = 0;
    let mut paths = std::collections::BTreeMap::new();
    for crash_after in (0..=reference.ops).step_by(stride) {
        for keep_num in 0..=2 {
            let backend = LossyBackend::default();
            let mut store =
                Store::open_backend(backend.clone(), options, false).expect("create store");
            backend.arm(crash_after);
            let outcome =
                runtime().block_on(crate::collect::scan(&contract(), &mut sim(), &mut store));
            drop(store);
            if crash_after >= reference.ops {
                assert!(outcome.is_ok());
            }
            let image = backend.image_after_crash(keep_num);
            let (r, path) = recover_and_finish(image, options);
            *paths.entry(path).or_insert(0) += 1;
            assert_eq!(
                r.coverage_status,
                Status::Verified,
                "crash after {crash_after} ops"
            );
            assert_eq!(
                r.merkle_root, reference.root,
                "crash after {crash_after} ops"
            );
            assert_eq!(r.unique_ids_observed, reference.unique);
            assert_eq!(r.duplicate_ids, 0, "a page was counted twice");
            assert_eq!(
                r.cursor_chain_digest, reference.chain,
                "crash after {crash_after} ops"
            );
            assert_eq!(r.labels["needs_migration"].count, reference.labels);
            points += 1;
        }
    }
    assert!(points >= 30);
    // Every recovery path was exercised: before the first commit, mid-run, after the end.
    for path in ["fresh", "resumed", "finished"] {
        assert!(
            paths.get(path).copied().unwrap_or(0) > 0,
            "no crash point took the {path} path: {paths:?}"
        );
    }
}

#[test]
fn power_loss_with_a_checkpoint_per_page_resumes_exactly() {
    power_loss_at_every_point(StoreOptions::default());
}

#[test]
fn power_loss_with_group_commit_resumes_exactly() {
    power_loss_at_every_point(StoreOptions::new().checkpoint_every(4));
}
