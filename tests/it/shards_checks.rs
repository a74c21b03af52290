//! What a shard checks and what the merge checks.
//!
//! The bug: `plan` copied the contract's `expected_count` and `expected_partitions` into every
//! shard's contract, so each shard held the whole collection's figures against its slice: on a
//! collection that matched its expectations exactly, every shard failed (`count_mismatch`,
//! `partition_mismatch`) and so did the merge. Simulated here with `sim:` collections whose
//! counts are known: a shard expects only the partitions of its own range and no total, and the
//! merge checks the total and every partition on the union, so an exact collection merges
//! `verified` and a wrong expectation still fails the merge (never a shard that cannot see it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::shards::{kinds, merge, plan, scan_shard};
use crate::util::Env;

/// The partition counts of the IDs `start..start + records` (the `sim:` source's).
fn partitions(start: u64, records: u64) -> Value {
    let mut m = serde_json::Map::new();
    let end = start + records;
    let mut p = start >> 16;
    while p << 16 < end {
        let lo = (p << 16).max(start);
        let hi = ((p + 1) << 16).min(end);
        m.insert(p.to_string(), json!(hi - lo));
        p += 1;
    }
    Value::Object(m)
}

/// Plans `contract` over `source` in `n` shards, scans each, merges; (each shard's exit code
/// and violation kinds, the merge's exit code and receipt).
fn sharded(
    env: &Env,
    name: &str,
    contract: &Value,
    source: &str,
    n: u32,
) -> (Vec<(i32, Vec<String>)>, i32, Value) {
    let plan_path = plan(env, name, contract, source, n, &[]);
    let mut shards = Vec::new();
    let mut stores = Vec::new();
    for k in 0..n {
        let store = env.path().join(format!("{name}-shard-{k}.redb"));
        let (code, r) = scan_shard(&plan_path, k, &store, &[]);
        shards.push((code, kinds(&r)));
        stores.push(store);
    }
    let (code, m, err) = merge(
        &plan_path,
        &env.path().join(format!("{name}-merged.redb")),
        &stores,
    );
    assert!(m.is_object(), "merge: {err}");
    (shards, code, m["receipt"].clone())
}

#[test]
fn a_collection_that_matches_exactly_merges_verified() {
    let env = Env::new();
    // 300,000 IDs from 1: 5 partitions, one partly filled at each end; 4 shards.
    let source = "sim:records=300000,start=1";
    let contract = json!({
        "source": "customers",
        "page_size": 10000,
        "expected_count": 300_000,
        "expected_partitions": partitions(1, 300_000),
    });
    let (code, single) = env.scan("single", &contract, source);
    assert_eq!(code, 0, "the single scan matches: {single}");
    let (shards, code, merged) = sharded(&env, "exact", &contract, source, 4);
    for (k, (code, kinds)) in shards.iter().enumerate() {
        assert_eq!(*code, 0, "shard {k} checks only its own part: {kinds:?}");
    }
    assert_eq!(code, 0, "{merged}");
    assert_eq!(merged["coverage_status"], "verified");
    assert_eq!(merged["records_expected"], 300_000);
    crate::shards::same_collection(&merged, &single);
}

#[test]
fn the_merge_checks_the_total_and_every_partition_on_the_union() {
    let env = Env::new();
    let source = "sim:records=300000,start=1";
    // One ID too many in all: no shard can tell, the merge does.
    let contract = json!({"source": "customers", "page_size": 10000, "expected_count": 300_001});
    let (shards, code, merged) = sharded(&env, "total", &contract, source, 4);
    assert!(shards.iter().all(|(c, _)| *c == 0), "{shards:?}");
    assert_eq!(code, 4, "{merged}");
    assert_eq!(kinds(&merged), ["count_mismatch"]);

    // Partition 2 expected one ID short: the shard holding it fails, and so does the merge;
    // the other shards verify.
    let mut parts = partitions(1, 300_000);
    parts["2"] = json!(65_535);
    let contract = json!({"source": "customers", "page_size": 10000, "expected_partitions": parts});
    let (shards, code, merged) = sharded(&env, "part", &contract, source, 4);
    let failed: Vec<usize> = (0..4).filter(|k| shards[*k].0 != 0).collect();
    assert_eq!(failed.len(), 1, "{shards:?}");
    assert_eq!(shards[failed[0]].1, ["partition_mismatch"]);
    assert_eq!(code, 4, "{merged}");
    assert!(
        kinds(&merged).contains(&"partition_mismatch".to_owned()),
        "{merged}"
    );

    // A partition past the data expected non-empty: the shard whose range holds it fails,
    // and the merge with it.
    let mut parts = partitions(1, 300_000);
    parts["900"] = json!(1);
    let contract = json!({"source": "customers", "page_size": 10000, "expected_partitions": parts});
    let (_, code, merged) = sharded(&env, "far", &contract, source, 4);
    assert_eq!(code, 4, "{merged}");
    assert!(
        kinds(&merged).contains(&"partition_mismatch".to_owned()),
        "{merged}"
    );
}
