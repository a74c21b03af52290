//! Merges compose: the merged runs of sub-plans, merged under their outer plan, are the merge
//! of all their shards (root, counts, labels, chain, verdict), and a sub-merge that is not
//! verified makes the outer merge not verified.
#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::{Path, PathBuf};

use super::*;
use crate::contract::{Contract, Item, Page, RawId};
use crate::receipt::Receipt;
use crate::reconcile::{Reconciler, Status, Step};
use crate::store::{Store, StoreOptions};

/// The collection: every third ID from 5 below 600,000, and two near the top of the space.
fn collection() -> impl Iterator<Item = u64> {
    (5..600_000u64).step_by(3).chain([u64::MAX - 7, u64::MAX])
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// The second page repeats the first page's cursor: the shard's run is failed.
    RepeatedCursor,
}

/// Scans shard `k` of `plan` into a new store at `path`: its range's IDs in pages of 5,000,
/// every 11th labelled.
fn scan(plan: &Plan, k: u32, path: &Path, fault: Fault) {
    let c = plan.shard_contract(k).unwrap();
    let range = c.scope.key_range.unwrap();
    let ids: Vec<u64> = collection().filter(|id| range.contains(*id)).collect();
    let chunks: Vec<&[u64]> = if ids.is_empty() {
        vec![&[]]
    } else {
        ids.chunks(5_000).collect()
    };
    let mut store = Store::open(path, StoreOptions::new()).unwrap();
    let mut rec = Reconciler::new(&c);
    let (mut w, _) = store.begin(&c, 1).unwrap();
    for (i, chunk) in chunks.iter().enumerate() {
        let next = if fault == Fault::RepeatedCursor && i > 0 {
            Some("c1".to_owned())
        } else {
            (i + 1 < chunks.len()).then(|| format!("c{}", i + 1))
        };
        let page = Page {
            items: chunk
                .iter()
                .map(|id| {
                    let mut item = Item::new(RawId::Int(*id));
                    if id % 11 == 0 {
                        item.labels.push("eleventh".into());
                    }
                    item
                })
                .collect(),
            next,
            size_bytes: 10,
            ..Page::default()
        };
        let seen = rec.observe(&page);
        w.checkpoint(&rec, seen.delta).unwrap();
        if matches!(seen.step, Step::Done) {
            break;
        }
    }
    w.finish(&rec, 2).unwrap();
}

/// Merges `stores` under `plan` into a new store at `out`; its receipt.
fn merge(plan: &Plan, stores: &[PathBuf], out: &Path) -> Receipt {
    let opened: Vec<Store> = stores
        .iter()
        .map(|p| Store::open_read(p).unwrap())
        .collect();
    let views: Vec<ShardStore<'_>> = stores
        .iter()
        .zip(&opened)
        .map(|(p, s)| ShardStore {
            path: p.clone(),
            snapshot: s.read().unwrap(),
        })
        .collect();
    let mut target = Store::open(out, StoreOptions::new()).unwrap();
    let run = merge_into(plan, &views, &mut target, || 3).unwrap().run;
    let receipt = target.read().unwrap().receipt(run).unwrap();
    receipt
}

fn outer_plan() -> Plan {
    let c = Contract::new("customers");
    let split = Split {
        by: "min_max".into(),
        lo: 0,
        last: 600_000,
    };
    let ranges = super::split(0, 600_000, 2).unwrap();
    let at = "2026-12-02T00:00:00.000Z".to_owned();
    Plan::new(&c, "sim", None, false, split, ranges, at, "00".repeat(16)).unwrap()
}

fn sub_plan(outer: &Plan, k: u32) -> Plan {
    Plan::within(
        outer,
        k,
        2,
        "2026-12-02T00:00:01.000Z".into(),
        format!("{k:032}"),
    )
    .unwrap()
}

/// Scans every shard of `plan` into `dir` (`faults[j]` for shard j) and merges them into
/// `out`.
fn scan_and_merge(plan: &Plan, dir: &Path, name: &str, faults: &[Fault]) -> (Receipt, PathBuf) {
    let mut stores = Vec::new();
    for (j, fault) in faults.iter().enumerate() {
        let path = dir.join(format!("{name}-{j}.redb"));
        scan(plan, u32::try_from(j).unwrap(), &path, *fault);
        stores.push(path);
    }
    let out = dir.join(format!("{name}-merged.redb"));
    (merge(plan, &stores, &out), out)
}

#[track_caller]
fn same_collection(nested: &Receipt, flat: &Receipt) {
    let (a, b) = (
        serde_json::to_value(nested).unwrap(),
        serde_json::to_value(flat).unwrap(),
    );
    for key in [
        "merkle_root",
        "partitions",
        "unique_ids_observed",
        "records_observed",
        "duplicate_ids",
        "pages_observed",
        "cursor_chain_digest",
        "labels",
        "query_digest",
        "coverage_status",
        "conclusion_scope",
        "snapshot_id",
        "terminal_cursor_observed",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
}

#[test]
fn a_merge_of_sub_plan_merges_is_the_merge_of_all_their_shards() {
    let dir = tempfile::tempdir().unwrap();
    let outer = outer_plan();
    let subs = [sub_plan(&outer, 0), sub_plan(&outer, 1)];
    // A sub-plan is a plan file of format 3 that round-trips; the outer plan stays format 2.
    for (k, s) in subs.iter().enumerate() {
        let text = s.to_json();
        assert!(text.contains(PLAN_FORMAT_WITHIN), "{text}");
        assert_eq!(Plan::from_json(&text).unwrap(), *s);
        assert_eq!(s.cover(), outer.shards[k]);
        assert_eq!(
            crate::digest::contract_digest(&s.contract),
            crate::digest::contract_digest(&outer.shard_contract(k as u32).unwrap())
        );
    }
    assert!(outer.to_json().contains(PLAN_FORMAT));
    assert!(!outer.to_json().contains(PLAN_FORMAT_WITHIN));
    // A sub-plan whose shards do not cover its range is refused.
    let mut short = subs[0].clone();
    short.shards.pop();
    assert!(Plan::from_json(&short.to_json()).is_err());

    // The flat plan: the four shards of the two sub-plans, in one plan.
    let ranges: Vec<_> = subs.iter().flat_map(|s| s.shards.clone()).collect();
    let flat = Plan::new(
        &outer.contract,
        "sim",
        None,
        false,
        outer.split.clone(),
        ranges,
        outer.created_at.clone(),
        "11".repeat(16),
    )
    .unwrap();
    let ok = [Fault::None; 4];
    let (flat_receipt, _) = scan_and_merge(&flat, dir.path(), "flat", &ok);
    assert_eq!(flat_receipt.coverage_status, Status::Verified);
    let (r0, m0) = scan_and_merge(&subs[0], dir.path(), "a", &ok[..2]);
    let (r1, m1) = scan_and_merge(&subs[1], dir.path(), "b", &ok[..2]);
    assert_eq!(
        (r0.coverage_status, r1.coverage_status),
        (Status::Verified, Status::Verified)
    );
    let nested = merge(
        &outer,
        &[m0.clone(), m1.clone()],
        &dir.path().join("nested.redb"),
    );
    same_collection(&nested, &flat_receipt);
    assert_eq!(nested.coverage_status, Status::Verified);
    let shards = nested.shards.as_ref().unwrap();
    assert!(shards
        .iter()
        .all(|s| s.finding == crate::receipt::ShardFinding::Merged));
    // The unique count equals the collection's.
    assert_eq!(nested.unique_ids_observed, collection().count() as u64);

    // A sub-merge that is failed (one of its shards repeated a cursor) makes the outer merge
    // failed; one with a shard missing (unknown) makes it unknown: never verified.
    let (bad, m_bad) = scan_and_merge(
        &subs[1],
        dir.path(),
        "c",
        &[Fault::RepeatedCursor, Fault::None],
    );
    assert_eq!(bad.coverage_status, Status::Failed);
    let outer_bad = merge(
        &outer,
        &[m0.clone(), m_bad],
        &dir.path().join("outer-bad.redb"),
    );
    assert_eq!(outer_bad.coverage_status, Status::Failed);
    let one = dir.path().join("d-0.redb");
    scan(&subs[1], 0, &one, Fault::None);
    let m_missing = dir.path().join("d-merged.redb");
    let missing = merge(&subs[1], &[one], &m_missing);
    assert_eq!(missing.coverage_status, Status::Unknown);
    let outer_missing = merge(
        &outer,
        &[m0, m_missing],
        &dir.path().join("outer-missing.redb"),
    );
    assert_eq!(outer_missing.coverage_status, Status::Unknown);
    // A sub-plan's merged run is not a shard of another plan.
    let mut other = outer_plan();
    other.nonce = "22".repeat(16);
    let foreign = merge(&other, &[m1], &dir.path().join("foreign.redb"));
    assert_eq!(foreign.coverage_status, Status::Failed);
}
