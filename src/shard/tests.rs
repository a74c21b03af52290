#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use super::*;
use crate::contract::{Contract, KeyRange};
use crate::idset::PARTITION_WIDTH;

fn plan(n: u32) -> Plan {
    Plan::new(
        &Contract::new("customers"),
        "sim:records=1000",
        None,
        false,
        Split {
            by: "min_max".into(),
            lo: 1,
            last: 1000,
        },
        split(1, 10_000_000, n).unwrap(),
        "2026-12-01T00:00:00.000Z".into(),
        "00".repeat(16),
    )
    .unwrap()
}

#[track_caller]
fn check_cover(shards: &[KeyRange], n: usize) {
    assert_eq!(shards.len(), n);
    assert_eq!(shards[0].lo, 0);
    assert_eq!(shards[n - 1].hi, u64::MAX);
    for w in shards.windows(2) {
        assert_eq!(w[0].hi, w[1].lo);
        assert_eq!(w[1].lo % PARTITION_WIDTH, 0);
        assert!(w[0].lo < w[0].hi);
    }
}

#[test]
fn splits_cover_the_key_space_on_partition_boundaries() {
    check_cover(&split(0, 100_000_000, 8).unwrap(), 8);
    // A span smaller than the shards' partitions still gives one partition per shard.
    check_cover(&split(1, 1000, 8).unwrap(), 8);
    check_cover(&split(0, u64::MAX, 64).unwrap(), 64);
    check_cover(&split(0, 0, 1).unwrap(), 1);
    assert!(split(5, 4, 2).is_err());
    assert!(split(0, 10, 0).is_err());
    assert!(split(0, 10, crate::contract::SHARDS_MAX + 1).is_err());
    // Near the top of the space the bounds move down: the shards below the data are empty.
    check_cover(&split(u64::MAX - 10, u64::MAX - 1, 3).unwrap(), 3);
    check_cover(&split(u64::MAX - 10, u64::MAX - 1, 2).unwrap(), 2);
    let top = split(u64::MAX - 3 * PARTITION_WIDTH, u64::MAX, 8).unwrap();
    check_cover(&top, 8);
    assert_eq!(top[7].lo, u64::MAX - (PARTITION_WIDTH - 1));
    check_cover(
        &split(0, u64::MAX, crate::contract::SHARDS_MAX).unwrap(),
        4096,
    );
    check_cover(
        &split(u64::MAX, u64::MAX, crate::contract::SHARDS_MAX).unwrap(),
        4096,
    );
    // Equal by the statistics: 8 shards over 10 M dense IDs hold about 1.25 M each.
    let s = split(0, 9_999_999, 8).unwrap();
    let width = s[1].hi - s[1].lo;
    assert!(width.abs_diff(1_250_000) <= PARTITION_WIDTH, "{width}");
}

#[test]
fn a_plan_round_trips_and_refuses_an_edit() {
    let p = plan(4);
    let text = p.to_json();
    let back = Plan::from_json(&text).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.digest(), p.digest());
    // Any edit of the body (here a shard bound) breaks the digest.
    let edited = text.replacen("\"lo\": 0", "\"lo\": 1", 1);
    assert!(Plan::from_json(&edited).is_err());
    let edited = text.replace("customers", "suppliers");
    assert!(matches!(
        Plan::from_json(&edited),
        Err(PlanError::Digest { .. })
    ));
    // Two plans made alike differ by their nonce.
    let mut q = plan(4);
    q.nonce = "11".repeat(16);
    assert_ne!(q.digest(), p.digest());
}

#[test]
fn shard_contracts_share_the_base_digest_and_name_the_plan() {
    let p = plan(3);
    let base = crate::digest::contract_digest(&p.contract);
    let mut qds = Vec::new();
    for k in 0..3 {
        let c = p.shard_contract(k).unwrap();
        assert_eq!(crate::digest::contract_digest(&c), base);
        assert_eq!(c.scope.shard.as_ref().unwrap().plan, p.digest());
        assert_eq!(c.scope.key_range, Some(p.shards[k as usize]));
        // The contract file round-trips, key range and shard included.
        assert_eq!(Contract::from_value(&c.to_value()).unwrap(), c);
        qds.push(crate::digest::query_digest(&c.scope));
    }
    assert!(p.shard_contract(3).is_none());
    qds.sort();
    qds.dedup();
    assert_eq!(qds.len(), 3, "each shard's query digest is its own");
    assert_ne!(
        crate::digest::query_digest(&p.contract.scope),
        crate::digest::query_digest(&p.shard_contract(0).unwrap().scope)
    );
}

/// A verified whole run of IDs `1..=3` and `70000`, stored with `shards` as its list.
fn stored_merge(
    dir: &std::path::Path,
    shards: &crate::receipt::MergedFrom,
) -> Result<(crate::store::Store, crate::receipt::RunId), crate::store::WriteError> {
    let contract = Contract::new("customers");
    let mut rec = crate::reconcile::Reconciler::new(&contract);
    let page = crate::contract::Page {
        items: [1, 2, 3, 70_000]
            .into_iter()
            .map(crate::contract::Item::int)
            .collect(),
        next: None,
        ..crate::contract::Page::default()
    };
    let obs = rec.observe(&page);
    assert_eq!(rec.status(), crate::reconcile::Status::Verified);
    let mut store =
        crate::store::Store::open(&dir.join("m.redb"), crate::store::StoreOptions::new()).unwrap();
    let pages = obs.delta.page.into_iter().collect();
    let run = store.write_merged(&contract, &rec, pages, Some(shards), 0, 1)?;
    Ok((store, run))
}

#[test]
fn verify_checks_a_verified_merged_runs_shard_list_against_its_bitmaps() {
    use crate::receipt::{MergedFrom, ShardEntry, ShardFinding, ShardRange};
    let dir = tempfile::tempdir().unwrap();
    let root_of = |ids: &[u64]| {
        let mut set = crate::idset::IdSet::new();
        for id in ids {
            set.insert(*id);
        }
        crate::digest::display(&crate::digest::merkle_root(&set))
    };
    let entry = |k: u32, lo, hi, ids: &[u64]| ShardEntry {
        index: k,
        key_range: ShardRange { lo, hi },
        finding: ShardFinding::Merged,
        store: Some(format!("shard-{k}.redb")),
        run_id: Some("run-1".to_owned()),
        coverage_status: Some(crate::reconcile::Status::Verified),
        unique_ids_observed: ids.len() as u64,
        merkle_root: Some(root_of(ids)),
    };
    let good = MergedFrom {
        plan_digest: crate::digest::display(&[1u8; 32]),
        shards: vec![
            entry(0, 0, PARTITION_WIDTH, &[1, 2, 3]),
            entry(1, PARTITION_WIDTH, u64::MAX, &[70_000]),
        ],
    };
    let (store, run) = stored_merge(dir.path(), &good).unwrap();
    let snap = store.read().unwrap();
    let receipt = snap.receipt(run).unwrap();
    assert_eq!(receipt.shards.as_ref(), Some(&good.shards));
    assert_eq!(
        serde_json::to_string(&receipt).unwrap(),
        serde_json::to_string(&snap.receipt_loaded(run).unwrap()).unwrap()
    );
    assert_eq!(
        crate::evidence::verify_receipt(&snap, &receipt).unwrap(),
        []
    );
    drop(snap);
    drop(store);

    // A list whose shard 1 claims another root than the bitmaps give its range: the stored
    // receipt repeats the record, and verify names the store as inconsistent.
    let mut wrong = good.clone();
    wrong.shards[1].merkle_root = Some(root_of(&[70_001]));
    let other = tempfile::tempdir().unwrap();
    let (store, run) = stored_merge(other.path(), &wrong).unwrap();
    let snap = store.read().unwrap();
    let receipt = snap.receipt(run).unwrap();
    let m = crate::evidence::verify_receipt(&snap, &receipt).unwrap();
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(
        m.iter().all(|m| m.field == "shards[1].merkle_root"),
        "{m:?}"
    );
    assert!(m
        .iter()
        .any(|m| m.found_in == crate::evidence::FoundIn::Store));
    drop(snap);
    drop(store);

    // A list that is not a plan's is refused before anything is written.
    let mut gap = good;
    gap.shards[1].key_range.lo += PARTITION_WIDTH;
    let third = tempfile::tempdir().unwrap();
    assert!(matches!(
        stored_merge(third.path(), &gap),
        Err(crate::store::WriteError::InvalidRun { .. })
    ));
}

#[test]
fn every_id_of_the_key_space_is_in_exactly_one_shard() {
    for n in [1, 2, 3, 8, 64] {
        let p = plan(n);
        for id in [0, 1, PARTITION_WIDTH, 1 << 63, u64::MAX - 1, u64::MAX] {
            let holding = p.shards.iter().filter(|r| r.contains(id)).count();
            assert_eq!(holding, 1, "{n} shards, ID {id}");
        }
        assert!(p.shards[p.shards.len() - 1].to_end());
    }
}

#[test]
fn a_plan_of_an_earlier_format_is_refused_saying_why() {
    let text = plan(2).to_json().replace(PLAN_FORMAT, "scanledger-plan/1");
    let e = Plan::from_json(&text).unwrap_err().to_string();
    assert!(e.contains("earlier build") && e.contains("2^64-1"), "{e}");
}

#[test]
fn merge_names_the_ids_a_plan_leaves_in_no_shard_or_in_two() {
    let w = PARTITION_WIDTH;
    let cases: [(Vec<(u64, u64)>, &str); 4] = [
        (
            vec![(0, w), (2 * w, u64::MAX)],
            "the IDs 65536 to 131071 are in no shard",
        ),
        (
            vec![(0, 2 * w), (w, u64::MAX)],
            "the IDs 65536 to 131071 are in shards 0 and 1 both",
        ),
        (
            vec![(0, w), (w, u64::MAX - 1)],
            "the IDs 18446744073709551614 to 18446744073709551615 are in no shard",
        ),
        (vec![(w, u64::MAX)], "the IDs 0 to 65535 are in no shard"),
    ];
    for (ranges, want) in cases {
        let mut p = plan(2);
        p.shards = ranges
            .iter()
            .map(|(lo, hi)| KeyRange::new(*lo, *hi).unwrap())
            .collect();
        let m = merge(&p, &[]).unwrap();
        let found = m.reconciler.progress().violations.iter().any(|v| {
            v.kind == crate::reconcile::ViolationKind::ShardMismatch && v.detail.contains(want)
        });
        assert!(found, "{want}: {:?}", m.reconciler.progress().violations);
        assert_eq!(m.reconciler.status(), crate::reconcile::Status::Failed);
    }
}

#[test]
fn a_contract_with_a_range_or_the_string_codec_is_not_plannable() {
    let mut c = Contract::new("customers");
    assert_eq!(check_plannable(&c), Ok(()));
    c.scope.key_range = KeyRange::new(0, 10);
    assert_eq!(check_plannable(&c), Err(Unplannable::Scoped));
    assert_eq!(Unplannable::Scoped.field(), "key_range");
    let mut c = Contract::new("customers");
    c.id_codec = crate::contract::IdCodecKind::String;
    assert_eq!(check_plannable(&c), Err(Unplannable::StringCodec));
    let split = Split {
        by: "min_max".into(),
        lo: 0,
        last: 9,
    };
    let e = Plan::new(
        &c,
        "sim",
        None,
        false,
        split,
        split_ranges(),
        String::new(),
        String::new(),
    );
    assert!(matches!(
        e,
        Err(PlanError::Unplannable(Unplannable::StringCodec))
    ));
}

fn split_ranges() -> Vec<KeyRange> {
    super::split(0, 9, 2).unwrap()
}

#[test]
fn the_hold_is_pinged_within_a_third_of_the_idle_timeout() {
    use std::time::Duration;
    assert_eq!(ping_every(None), Duration::from_secs(15));
    assert_eq!(ping_every(Some(30_000)), Duration::from_secs(10));
    assert_eq!(ping_every(Some(60)), Duration::from_millis(100));
    assert_eq!(ping_every(Some(3_600_000)), Duration::from_secs(15));
}

#[test]
fn a_held_snapshot_is_released_by_a_verified_merge_only() {
    let held = |snapshot: &str| {
        let mut p = plan(2);
        p.snapshot_id = Some(snapshot.to_owned());
        p.snapshot_held = true;
        p
    };
    assert_eq!(held_after_merge(&plan(2), true, &[]), None);
    let dir = std::path::Path::new("d");
    let h = held_after_merge(&held("s1"), true, &[]).unwrap();
    assert!(h.released && h.text(&dir.join("plan.json"), dir).contains("releases"));
    let h = held_after_merge(&held("s1"), false, &[]).unwrap();
    assert!(!h.released);
    assert!(h.text(&dir.join("plan.json"), dir).contains("stays held"));
    assert_eq!(
        serde_json::to_value(&h).unwrap(),
        serde_json::json!({"snapshot_id": "s1", "released": false, "retry_shards": []})
    );
    let h = held_after_merge(&held("mysql-sync:x"), false, &[]).unwrap();
    assert!(h.synchronized && h.text(&dir.join("plan.json"), dir).contains("cannot join"));
}
