//! The edges of the key space through plan, shards and merge: the IDs 0 and 2^64 - 1, and
//! `signed` keys from -2^63 to 2^63 - 1, each lie in exactly one shard, so the merged run has the
//! verdict, counts and Merkle root of one plain scan of the same collection, for any number of
//! shards. Before, a plan's last shard ended just before 2^64 - 1: a replay shard dropped that
//! ID and the merged run was `verified` with one ID fewer than the single scan.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::shards::{merge, plan, s, same_collection, scan_shard, sl_json};
use crate::util::Env;

/// Plans `n` shards, scans each, merges: the merged receipt, which must be the single scan's.
#[track_caller]
fn sharded_is_single(env: &Env, name: &str, contract: &Value, source: &str, n: u32) {
    let (code, single) = env.scan(&format!("{name}-single"), contract, source);
    let plan_path = plan(env, name, contract, source, n, &[]);
    let mut stores = Vec::new();
    for k in 0..n {
        let store = env.path().join(format!("{name}-{k}.redb"));
        scan_shard(&plan_path, k, &store, &[]);
        stores.push(store);
    }
    let (merged_code, m, err) = merge(
        &plan_path,
        &env.path().join(format!("{name}-m.redb")),
        &stores,
    );
    assert_eq!(merged_code, code, "{name}, {n} shards: {err}\n{m}");
    same_collection(&m["receipt"], &single);
}

#[test]
fn the_top_id_zero_and_negative_keys_merge_to_the_single_scans_root() {
    let env = Env::new();
    // int: 0 and 2^64 - 1 and IDs between, in pages of 2.
    let ids: Vec<Value> = [0, 1, 65_536, 1 << 40, 1 << 63, u64::MAX - 1, u64::MAX]
        .iter()
        .map(|i| json!(i))
        .collect();
    let source = env.replay("int.jsonl", &ids, 2, "snap-int");
    let contract = json!({"source": "customers", "page_size": 2});
    let (code, single) = env.scan("int-whole", &contract, &source);
    assert_eq!((code, &single["unique_ids_observed"]), (0, &json!(7)));
    for n in [1, 2, 3, 5] {
        sharded_is_single(&env, &format!("int{n}"), &contract, &source, n);
    }
    // signed: the smallest and largest keys (IDs 0 and 2^64 - 1), negatives, zero.
    let keys: Vec<Value> = [i64::MIN, -5, -1, 0, 7, i64::MAX]
        .iter()
        .map(|i| json!(i))
        .collect();
    let source = env.replay("signed.jsonl", &keys, 2, "snap-signed");
    let contract = json!({"source": "customers", "page_size": 2, "id_codec": "signed"});
    let (code, single) = env.scan("signed-whole", &contract, &source);
    assert_eq!((code, &single["unique_ids_observed"]), (0, &json!(6)));
    for n in [1, 2, 4] {
        sharded_is_single(&env, &format!("signed{n}"), &contract, &source, n);
    }
    // sim: dense IDs at the top of the space (a min_max split) and from 0.
    let contract = json!({"source": "customers", "page_size": 300});
    let top = format!("sim:records=1000,start={}", u64::MAX - 999);
    // (All in the top partition: the shards below it are empty.)
    for n in [1, 2, 3] {
        sharded_is_single(&env, &format!("top{n}"), &contract, &top, n);
    }
    for n in [1, 3] {
        sharded_is_single(
            &env,
            &format!("zero{n}"),
            &contract,
            "sim:records=1000,start=0",
            n,
        );
    }
}

/// A plan file of an earlier build (`scanledger-plan/1`, whose last shard left out 2^64 - 1)
/// is refused with a sentence that says so, by `scan --plan` and `merge`.
#[test]
fn a_plan_of_an_earlier_format_is_refused() {
    let env = Env::new();
    let contract = json!({"source": "customers", "page_size": 100});
    let plan_path = plan(&env, "p", &contract, "sim:records=100", 2, &[]);
    let text = std::fs::read_to_string(&plan_path).unwrap();
    std::fs::write(
        &plan_path,
        text.replace("scanledger-plan/2", "scanledger-plan/1"),
    )
    .unwrap();
    let store = env.path().join("s0.redb");
    let (code, _, err) = sl_json(&[
        "--store",
        &s(&store),
        "scan",
        "--plan",
        &s(&plan_path),
        "--shard",
        "0",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("earlier build") && err.contains("make the plan again"),
        "{err}"
    );
}
