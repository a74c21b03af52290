//! The whole-system deterministic simulation: seeded schedules of source faults
//! (`source::sim::faults`) and of power cuts of the simulated disk (`simdisk.rs`) between and
//! inside checkpoints, with resumes, against a model that knows the true collection.
//!
//! Invariants, checked for every seed:
//! - `verified` only when the run read the collection of the snapshot it names completely,
//!   exactly once: its unique and observed counts equal the model's, no duplicate, and its
//!   Merkle root is the root of the true set (computed by `digest`);
//! - nothing acknowledged is lost across a power cut: every run keeps at least the pages its
//!   writer acknowledged, with counts that match its bitmaps and page log (`check_run`);
//! - no run that keeps no request keeps a key (`check_no_stale_keys`);
//! - the same collection (keys dense, spread over the whole space with 0 and 2^64 - 1, or
//!   `signed` from -2^63 to 2^63 - 1) planned as 1 to 6 shards pinned to the source's snapshot,
//!   each shard scanned with the same faults and resumed, and merged: the merged run is
//!   `verified` only as the model allows, and then, on the single scan's snapshot, with the
//!   single scan's root and counts.
//!
//! `SCANLEDGER_SIM_SEEDS=N` runs seeds 0..N (default 2,000), `SCANLEDGER_SIM_FROM=F` with it seeds
//! F..F+N (a soak split over processes); `SCANLEDGER_SIM_SEED=S` runs seed
//! S alone. A failing seed prints its one-line reproducer.

use super::{check_no_stale_keys, check_run, Acks, Watched};
use crate::contract::{ExpiredPolicy, SnapshotPolicy};
use crate::error::Error;
use crate::idset::IdSet;
use crate::receipt::Receipt;
use crate::source::sim::faults::{self, FaultStats, FaultySource, Keys, Mix};
use crate::store::simdisk::{Loss, SimDisk};
use crate::store::*;

/// What one seed did.
#[derive(Debug, Default)]
struct Outcome {
    faults: FaultStats,
    kills: u64,
    status: Option<Status>,
    resumes: u64,
    /// The merged run's status, and its shards.
    merged: Option<Status>,
    shards: u64,
}

fn runtime() -> tokio::runtime::Runtime {
    // Paused time: backoff and timeouts advance the clock instead of waiting.
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
}

fn scan(
    store: &mut Store,
    c: &Contract,
    src: &mut FaultySource,
    acks: &Acks,
) -> Result<Receipt, Error> {
    let (w, _) = store.begin(c, 0)?;
    let log = Watched {
        w,
        acks: acks.clone(),
        fail_after: None,
    };
    let done = runtime().block_on(crate::collect::scan_with(
        c,
        Reconciler::new(c),
        log,
        0,
        src,
    ))?;
    Ok(done.receipt())
}

fn resume(
    store: &mut Store,
    run: RunId,
    src: &mut FaultySource,
    acks: &Acks,
) -> Result<Receipt, Error> {
    let raise = Raise {
        max_pages: Some(crate::contract::PAGES_PER_RUN_MAX),
        ..Raise::default()
    };
    let (w, loaded) = store.resume(run, &raise)?;
    let log = Watched {
        w,
        acks: acks.clone(),
        fail_after: None,
    };
    let done = runtime().block_on(crate::collect::resume_with(loaded, log, None, src))?;
    Ok(done.receipt())
}

/// Checks a receipt against the model (the collection of `records` laid out by `keys`).
fn check_verdict(r: &Receipt, records: u64, keys: Keys, what: &str) -> Result<(), String> {
    if r.coverage_status != Status::Verified {
        return Ok(());
    }
    let version: u64 = r
        .snapshot_id
        .as_deref()
        .and_then(|s| s.strip_prefix("snap-v"))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{what}: verified without the source's snapshot: {r:?}"))?;
    let truth = faults::truth(records, version);
    let mut set = IdSet::new();
    for n in &truth {
        set.insert(keys.id(*n));
    }
    let root = crate::digest::display(&crate::digest::merkle_root(&set));
    let n = truth.len() as u64;
    if r.unique_ids_observed != n || r.records_observed != n || r.duplicate_ids != 0 {
        return Err(format!(
            "{what}: verified with {} unique of {} observed ({} duplicates), the snapshot holds {n}",
            r.unique_ids_observed, r.records_observed, r.duplicate_ids
        ));
    }
    if r.merkle_root != root {
        return Err(format!(
            "{what}: verified with root {}, the true set's is {root}",
            r.merkle_root
        ));
    }
    Ok(())
}

/// Runs one seed to its end.
fn simulate(seed: u64) -> Result<Outcome, String> {
    let mut rng = Mix(seed);
    let records = rng.below(40);
    let mut rates = [0u64; 9];
    if rng.chance(700) {
        for (kind, rate) in rates.iter_mut().enumerate() {
            if rng.chance(400) {
                *rate = if kind == 8 {
                    1 + rng.below(15)
                } else {
                    1 + rng.below(120)
                };
            }
        }
    }
    // The key layout and the shards, from a generator of their own (so the single scan's
    // schedule of faults and cuts is the one this seed always had, on the laid-out keys).
    let mut srng = Mix(seed ^ 0x5348_4152_4453);
    let keys = match srng.below(3) {
        0 => Keys::Dense,
        1 => Keys::Spread,
        _ => Keys::Signed,
    };
    let mut src = FaultySource::new(seed, records, rates);
    src.keys = keys;
    let mut c = Contract::new("sim");
    c.id_codec = keys.codec();
    c.page_size = 1 + rng.below(12) as u32;
    c.on_expired_cursor = match rng.below(3) {
        0 => ExpiredPolicy::Block,
        _ => ExpiredPolicy::Restart,
    };
    c.on_snapshot_change = if rng.chance(500) {
        SnapshotPolicy::Restart
    } else {
        SnapshotPolicy::Block
    };
    if rng.chance(300) {
        c.limits.max_pages = Some(1 + rng.below(4) as u32);
    }
    let mut options = StoreOptions::new()
        .checkpoint_every(1 + rng.below(3) as u32)
        .fold_every(1 + rng.below(5) as u32);
    if rng.chance(300) {
        options = options.exclusive(true);
    }
    let what = format!(
        "seed {seed} ({records} records, keys {keys:?}, pages of {}, faults {rates:?}, {options:?})",
        c.page_size
    );
    let mut disk = SimDisk::new();
    let acks = Acks::default();
    let mut out = Outcome::default();
    let mut final_receipt = None;
    for attempt in 0..16u32 {
        // A cut during the open itself: the next open finds what it left.
        if attempt < 12 && rng.chance(100) {
            disk.crash_after(rng.below(20));
        } else {
            disk.disarm();
        }
        let acked = acks.all();
        let mut store = match Store::open_simulated(&disk, options) {
            Ok(s) => s,
            Err(_) if disk.crashed() => {
                out.kills += 1;
                disk = disk.after_crash(Loss::Random(rng.next()));
                continue;
            }
            // Cut while the file was created, before its format committed: nothing was
            // acknowledged; start over on a fresh disk.
            Err(e) if acked.iter().all(|(_, p)| *p == 0) => {
                let _ = e;
                disk = SimDisk::new();
                continue;
            }
            Err(e) => return Err(format!("{what}: reopen after a power cut: {e}")),
        };
        if disk.crashed() {
            drop(store);
            out.kills += 1;
            disk = disk.after_crash(Loss::Random(rng.next()));
            continue;
        }
        for (run, pages) in &acked {
            if *pages > 0 {
                let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    check_run(&store, RunId(*run), *pages, &what);
                    check_no_stale_keys(&store, &what);
                }));
                if check.is_err() {
                    return Err(format!(
                        "{what}: acknowledged pages or keys after a power cut"
                    ));
                }
            }
        }
        // The cut during the scan, armed after the checks (which read the disk).
        if attempt < 12 && rng.chance(450) {
            disk.crash_after(rng.below(150));
        } else {
            disk.disarm();
        }
        let last = match store.read().map(|s| s.runs()) {
            Ok(Ok(runs)) => runs.first().map(|r| r.run_id),
            _ if disk.crashed() => None,
            Ok(Err(e)) | Err(e) => return Err(format!("{what}: runs: {e}")),
        };
        let result = match last {
            None => scan(&mut store, &c, &mut src, &acks),
            Some(run) => {
                out.resumes += 1;
                resume(&mut store, run, &mut src, &acks)
            }
        };
        match result {
            _ if disk.crashed() => {
                drop(store);
                out.kills += 1;
                disk = disk.after_crash(Loss::Random(rng.next()));
            }
            Ok(r) => {
                check_verdict(&r, records, keys, &what)?;
                let done =
                    r.coverage_status == Status::Verified || r.coverage_status == Status::Failed;
                final_receipt = Some(r);
                if done {
                    break;
                }
            }
            Err(Error::Write(WriteError::NotResumable { .. })) => {
                let run = last.unwrap_or(RunId(1));
                let (r, state) = store
                    .read()
                    .and_then(|s| Ok((s.receipt(run)?, s.header(run)?.state)))
                    .map_err(|e| format!("{what}: receipt: {e}"))?;
                check_verdict(&r, records, keys, &what)?;
                // A snapshot change under `restart` ends in a new run, however the process
                // died between the page that showed it and the restart.
                let changed = r
                    .violations
                    .iter()
                    .any(|v| v.kind == ViolationKind::SnapshotChanged);
                if changed
                    && c.on_snapshot_change == SnapshotPolicy::Restart
                    && state != RunState::Superseded
                    && r.restarts < crate::contract::RESTARTS_MAX
                {
                    return Err(format!(
                        "{what}: {run} saw the snapshot change under on_snapshot_change restart, and no restart followed (lost across a power cut)"
                    ));
                }
                final_receipt = Some(r);
                break;
            }
            Err(e) => return Err(format!("{what}: attempt {attempt}: {e}")),
        }
    }
    out.faults = src.stats;
    // Every attempt cut: no receipt to compare a merge with.
    let Some(single) = final_receipt else {
        return Ok(out);
    };
    out.status = Some(single.coverage_status);
    if !seed.is_multiple_of(shard_every()) {
        return Ok(out);
    }
    let shards = 1 + srng.below(6) as u32;
    let merged = sharded(seed, &c, &src, rates, shards, &mut srng, &what)?;
    out.merged = Some(merged.coverage_status);
    out.shards = u64::from(shards);
    // The merge never says more than the model, and on the single scan's snapshot it says
    // what the single scan says.
    check_verdict(
        &merged,
        records,
        keys,
        &format!("{what}, merged from {shards} shards"),
    )?;
    // Nor less: shards each merged whole and verified make a verified merge.
    let entries = merged.shards.as_deref().unwrap_or_default();
    let all_verified = !entries.is_empty()
        && entries.iter().all(|e| {
            e.finding == crate::receipt::ShardFinding::Merged
                && e.coverage_status == Some(Status::Verified)
        });
    if all_verified && merged.coverage_status != Status::Verified {
        return Err(format!(
            "{what}: {shards} shards each verified, merged {}: {:?}",
            merged.coverage_status.as_str(),
            merged.violations
        ));
    }
    if merged.coverage_status == Status::Verified
        && single.coverage_status == Status::Verified
        && merged.snapshot_id == single.snapshot_id
    {
        for (field, m, s) in [
            ("merkle_root", &merged.merkle_root, &single.merkle_root),
            (
                "unique_ids_observed",
                &merged.unique_ids_observed.to_string(),
                &single.unique_ids_observed.to_string(),
            ),
            (
                "records_observed",
                &merged.records_observed.to_string(),
                &single.records_observed.to_string(),
            ),
        ] {
            if m != s {
                return Err(format!(
                    "{what}: merged from {shards} shards, {field} {m}, the single scan's {s}"
                ));
            }
        }
    }
    Ok(out)
}

/// Every how many seeds the sharded scan runs too: `SCANLEDGER_SIM_SHARD_EVERY` (1 in a soak),
/// by default every 8th seed, which keeps a plain `cargo test` short.
fn shard_every() -> u64 {
    std::env::var("SCANLEDGER_SIM_SHARD_EVERY")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(8)
}

/// The seed's collection as a plan of `shards` shards pinned to the source's snapshot now (as
/// a coordinator holds it), each shard scanned into its own store from a source with the same
/// faults (resumed while it can go on), and merged: the merged run's receipt.
fn sharded(
    seed: u64,
    c: &Contract,
    single: &FaultySource,
    rates: [u64; 9],
    shards: u32,
    rng: &mut Mix,
    what: &str,
) -> Result<Receipt, String> {
    let version = single.version;
    let snapshot = format!("snap-v{version}");
    // The span a plan divides: the whole space, or the members' smallest and largest IDs.
    let (lo, last) = if rng.chance(500) {
        (0, u64::MAX - 1)
    } else {
        let ids: Vec<u64> = faults::truth(single.records, version)
            .into_iter()
            .map(|n| single.keys.id(n))
            .collect();
        match (ids.iter().min(), ids.iter().max()) {
            (Some(lo), Some(last)) => (*lo, *last),
            _ => (0, u64::MAX - 1),
        }
    };
    let ranges = crate::shard::split(lo, last, shards)
        .map_err(|e| format!("{what}: split of {lo}..={last}: {e}"))?;
    let split = crate::shard::Split {
        by: "min_max".to_owned(),
        lo,
        last,
    };
    let plan = crate::shard::Plan::new(
        c,
        "sim",
        Some(snapshot),
        true,
        split,
        ranges,
        "2026-12-01T00:00:00.000Z".to_owned(),
        format!("{seed:032x}"),
    )
    .map_err(|e| format!("{what}: plan: {e}"))?;
    let mut disks = Vec::new();
    for k in 0..plan.shards.len() {
        let index = u32::try_from(k).unwrap_or(u32::MAX);
        let contract = plan
            .shard_contract(index)
            .ok_or_else(|| format!("{what}: no shard {k}"))?;
        let mut src = FaultySource::new(seed ^ (u64::from(index) + 1) << 32, single.records, rates);
        src.keys = single.keys;
        src.version = version;
        src.range = contract.scope.key_range;
        let disk = SimDisk::new();
        let mut store = Store::open_simulated(&disk, StoreOptions::new())
            .map_err(|e| format!("{what}: shard {k}: open: {e}"))?;
        let acks = Acks::default();
        let mut result = scan(&mut store, &contract, &mut src, &acks);
        for _ in 0..6 {
            match &result {
                Ok(r) if r.coverage_status == Status::Unknown => {}
                _ => break,
            }
            let run = store
                .read()
                .and_then(|s| s.runs())
                .map_err(|e| format!("{what}: shard {k}: runs: {e}"))?
                .first()
                .map(|r| r.run_id)
                .ok_or_else(|| format!("{what}: shard {k}: no run"))?;
            result = resume(&mut store, run, &mut src, &acks);
        }
        match result {
            Ok(_) | Err(Error::Write(WriteError::NotResumable { .. })) => {}
            Err(e) => return Err(format!("{what}: shard {k}: {e}")),
        }
        drop(store);
        disks.push(disk);
    }
    let stores: Vec<Store> = disks
        .iter()
        .map(|d| Store::open_simulated(d, StoreOptions::new()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: reopen a shard store: {e}"))?;
    let views = stores
        .iter()
        .enumerate()
        .map(|(k, s)| {
            Ok(crate::shard::ShardStore {
                path: format!("shard-{k}.redb").into(),
                snapshot: s.read()?,
            })
        })
        .collect::<Result<Vec<_>, ReadError>>()
        .map_err(|e| format!("{what}: read a shard store: {e}"))?;
    let merged = crate::shard::merge(&plan, &views).map_err(|e| format!("{what}: merge: {e}"))?;
    // The streamed merge, into a store of its own: the same run, field for field.
    let streamed_disk = SimDisk::new();
    let mut streamed = Store::open_simulated(&streamed_disk, StoreOptions::new())
        .map_err(|e| format!("{what}: streamed store: {e}"))?;
    let started = merged.started_at_ms;
    let streamed_run = crate::shard::merge_into(&plan, &views, &mut streamed, || started)
        .map_err(|e| format!("{what}: streamed merge: {e}"))?
        .run;
    drop(views);
    let disk = SimDisk::new();
    let mut target = Store::open_simulated(&disk, StoreOptions::new())
        .map_err(|e| format!("{what}: merged store: {e}"))?;
    let run = target
        .write_merged(
            &plan.contract,
            &merged.reconciler,
            merged.pages,
            Some(&merged.merged_from),
            merged.started_at_ms,
            merged.started_at_ms,
        )
        .map_err(|e| format!("{what}: write the merged run: {e}"))?;
    let a = target.read().map_err(|e| format!("{what}: {e}"))?;
    let b = streamed.read().map_err(|e| format!("{what}: {e}"))?;
    same_run(&a, run, &b, streamed_run).map_err(|e| format!("{what}: streamed merge: {e}"))?;
    a.receipt(run)
        .map_err(|e| format!("{what}: merged receipt: {e}"))
}

/// The run `ra` of `a` and `rb` of `b` are the same: receipt, page log, ID and label sets,
/// content, leaves.
fn same_run(a: &Snapshot<'_>, ra: RunId, b: &Snapshot<'_>, rb: RunId) -> Result<(), String> {
    let text = |e: ReadError| e.to_string();
    let (x, y) = (a.receipt(ra).map_err(text)?, b.receipt(rb).map_err(text)?);
    // The receipt built without loading the sets is the loaded run's, byte for byte.
    for (snap, run, streamed) in [(a, ra, &x), (b, rb, &y)] {
        let loaded = snap.receipt_loaded(run).map_err(text)?;
        let json = |r: &Receipt| serde_json::to_string(r).map_err(|e| e.to_string());
        if json(streamed)? != json(&loaded)? {
            return Err(format!(
                "the streamed receipt of {run} is not the loaded one"
            ));
        }
    }
    let (x, y) = (
        serde_json::to_value(&x).map_err(|e| e.to_string())?,
        serde_json::to_value(&y).map_err(|e| e.to_string())?,
    );
    if x != y {
        return Err(format!("receipts differ:\n{x}\n{y}"));
    }
    let (la, lb) = (a.load(ra).map_err(text)?, b.load(rb).map_err(text)?);
    let (p, q) = (la.reconciler.progress(), lb.reconciler.progress());
    if p != q {
        return Err(format!("progress differs:\n{p:?}\n{q:?}"));
    }
    if la.reconciler.ids() != lb.reconciler.ids() {
        return Err("ID sets differ".into());
    }
    if la.reconciler.labels() != lb.reconciler.labels() {
        return Err("label sets differ".into());
    }
    if la.reconciler.content() != lb.reconciler.content() {
        return Err("content differs".into());
    }
    if la.pages != lb.pages {
        return Err("page logs differ".into());
    }
    if a.leaves(ra).map_err(text)? != b.leaves(rb).map_err(text)? {
        return Err("leaves differ".into());
    }
    if la.stored_root != lb.stored_root {
        return Err("roots differ".into());
    }
    Ok(())
}

#[test]
fn simulation() {
    let seeds: Vec<u64> = match std::env::var("SCANLEDGER_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SCANLEDGER_SIM_SEED is a number")],
        Err(_) => {
            let var = |name: &str| std::env::var(name).ok().and_then(|n| n.parse().ok());
            let n: u64 = var("SCANLEDGER_SIM_SEEDS").unwrap_or(2_000);
            // A soak split over processes: each runs its own slice of seeds.
            let from: u64 = var("SCANLEDGER_SIM_FROM").unwrap_or(0);
            (from..from.saturating_add(n)).collect()
        }
    };
    let mut faults = [0u64; 9];
    let (mut kills, mut resumes, mut shards) = (0u64, 0u64, 0u64);
    let mut statuses = std::collections::BTreeMap::new();
    let mut merged = std::collections::BTreeMap::new();
    let mut failures = Vec::new();
    for seed in &seeds {
        match simulate(*seed) {
            Ok(o) => {
                for (a, b) in faults.iter_mut().zip(o.faults) {
                    *a += b;
                }
                kills += o.kills;
                resumes += o.resumes;
                shards += o.shards;
                *merged
                    .entry(o.merged.map_or("none", |s| s.as_str()))
                    .or_insert(0u64) += 1;
                *statuses
                    .entry(o.status.map_or("none", |s| s.as_str()))
                    .or_insert(0u64) += 1;
            }
            Err(e) => {
                eprintln!("{e}\nreproduce: SCANLEDGER_SIM_SEED={seed} cargo test --lib simulation");
                failures.push(*seed);
            }
        }
    }
    let by_kind: Vec<String> = faults::KINDS
        .iter()
        .zip(faults)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    eprintln!(
        "simulation: {} seeds, {kills} power cuts, {resumes} resumes, verdicts {statuses:?}, merged from {shards} shards {merged:?}, faults: {}",
        seeds.len(),
        by_kind.join(", ")
    );
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}

/// The restart that a snapshot change under `on_snapshot_change: restart` calls for must not
/// be lost when the power goes between the page that showed the change and the restart's
/// transaction (an earlier build left the old run interrupted with a finding resuming cannot
/// change). Power goes at every operation of such a scan; recovery always ends verified over
/// the changed collection.
#[test]
fn a_snapshot_change_restart_survives_a_power_cut_at_every_operation() {
    let mut c = Contract::new("sim");
    c.page_size = 5;
    c.on_snapshot_change = SnapshotPolicy::Restart;
    // A cut before the change was recorded resumes on a cursor of the old snapshot, which
    // has expired: the same policy.
    c.on_expired_cursor = ExpiredPolicy::Restart;
    let source = || {
        let mut s = FaultySource::new(1, 30, [0; 9]);
        s.change_at_fetch = Some(3);
        s
    };
    let reference_disk = SimDisk::new();
    let mut store = Store::open_simulated(&reference_disk, StoreOptions::new()).expect("open");
    let r = scan(&mut store, &c, &mut source(), &Acks::default()).expect("reference");
    drop(store);
    assert_eq!(r.coverage_status, Status::Verified, "{r:?}");
    assert_eq!(r.restarts, 1);
    let ops = reference_disk.ops();
    let mut lost = Vec::new();
    for cut in 0..ops {
        let disk = SimDisk::new();
        disk.crash_after(cut);
        let mut src = source();
        let acks = Acks::default();
        if let Ok(mut store) = Store::open_simulated(&disk, StoreOptions::new()) {
            let _ = scan(&mut store, &c, &mut src, &acks);
        }
        let image = disk.after_crash(Loss::Prefix { keep: 1, of: 1 });
        let mut store = match Store::open_simulated(&image, StoreOptions::new()) {
            Ok(s) => s,
            Err(_) => Store::open_simulated(&SimDisk::new(), StoreOptions::new()).expect("fresh"),
        };
        let last = store
            .read()
            .expect("read")
            .runs()
            .expect("runs")
            .first()
            .map(|r| r.run_id);
        let r = match last {
            None => scan(&mut store, &c, &mut src, &acks),
            Some(run) => match resume(&mut store, run, &mut src, &acks) {
                // Finished before the cut: its receipt is the answer.
                Err(Error::Write(WriteError::NotResumable { .. })) => store
                    .read()
                    .and_then(|s| s.receipt(run))
                    .map_err(Error::Read),
                other => other,
            },
        };
        match r {
            Ok(r) if r.coverage_status == Status::Verified => {
                check_verdict(&r, 30, Keys::Dense, &format!("cut {cut}")).expect("verdict");
            }
            Ok(r) => lost.push(format!(
                "cut {cut}: {:?} {:?}",
                r.coverage_status, r.violations
            )),
            Err(e) => lost.push(format!("cut {cut}: {e}")),
        }
    }
    assert!(lost.is_empty(), "of {ops} cuts: {lost:#?}");
}
