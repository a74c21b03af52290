//! Merges compose, through the real binary: shard K of a plan divided by `plan --within`
//! (a sub-plan, format 3), each sub-plan's shards scanned and merged, and the merged runs
//! merged under the outer plan: the single scan's root, counts, labels and verdict; a
//! sub-merge that is not verified leaves the outer merge not verified.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::shards::{merge, plan, s, same_collection, scan_shard, sl_json};
use crate::util::Env;

/// `plan --within OUTER --shard K --shards N --out DIR`; the sub-plan's path.
fn plan_within(env: &Env, outer: &Path, k: u32, n: u32, dir: &str) -> PathBuf {
    let out = env.path().join(dir);
    let (k, n) = (k.to_string(), n.to_string());
    let (o, d) = (s(outer), s(&out));
    let args = [
        "plan", "--within", &o, "--shard", &k, "--shards", &n, "--out", &d,
    ];
    let (code, v, err) = sl_json(&args);
    assert_eq!(code, 0, "plan --within: {err}");
    assert_eq!(v["split"]["by"], "within");
    out.join("plan.json")
}

#[test]
fn a_merge_of_sub_plan_merges_has_the_single_scans_root_counts_and_verdict() {
    let env = Env::new();
    let source = "sim:records=300000,start=1,label_every=1000";
    let contract = json!({"source": "customers", "page_size": 5000});
    let (code, single) = env.scan("single", &contract, source);
    assert_eq!(code, 0, "{single}");
    let outer = plan(&env, "p", &contract, source, 2, &[]);
    let mut merged = Vec::new();
    for k in 0..2 {
        let sub = plan_within(&env, &outer, k, 2, &format!("p{k}"));
        let text = std::fs::read_to_string(&sub).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["format"], "scanledger-plan/3");
        let mut stores = Vec::new();
        for j in 0..2 {
            let store = env.path().join(format!("p{k}-shard-{j}.redb"));
            let (code, r) = scan_shard(&sub, j, &store, &[]);
            assert_eq!(code, 0, "sub-plan {k} shard {j}: {r}");
            stores.push(store);
        }
        let out = env.path().join(format!("p{k}-merged.redb"));
        let (code, m, err) = merge(&sub, &out, &stores);
        assert_eq!(code, 0, "merge of sub-plan {k}: {err}\n{m}");
        assert_eq!(m["receipt"]["coverage_status"], "verified");
        merged.push(out);
    }
    let out = env.path().join("merged.redb");
    let (code, m, err) = merge(&outer, &out, &merged);
    assert_eq!(code, 0, "outer merge: {err}\n{m}");
    let receipt = &m["receipt"];
    same_collection(receipt, &single);
    assert_eq!(receipt["labels"], single["labels"]);
    assert_eq!(receipt["coverage_status"], "verified");
    // Its stored receipt verifies against its store.
    let file = env.write("nested.receipt.json", &receipt.to_string());
    let (code, _, err) = sl_json(&["--store", &s(&out), "verify", &file]);
    assert_eq!(code, 0, "verify: {err}");

    // A sub-plan merged with a shard missing is unknown, and so is the outer merge.
    let sub = plan_within(&env, &outer, 1, 2, "q1");
    let store = env.path().join("q1-shard-0.redb");
    let (code, r) = scan_shard(&sub, 0, &store, &[]);
    assert_eq!(code, 0, "{r}");
    let partial = env.path().join("q1-merged.redb");
    let (_, m, _) = merge(&sub, &partial, &[store]);
    assert_eq!(m["receipt"]["coverage_status"], "unknown");
    let (code, m, _) = merge(
        &outer,
        &env.path().join("m2.redb"),
        &[merged[0].clone(), partial],
    );
    assert_ne!(code, 0);
    assert_eq!(m["receipt"]["coverage_status"], "unknown");
}
