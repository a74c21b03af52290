//! Shards through the real binary: `plan`, `scan --plan --shard K`, `merge`.
//!
//! The merged run of a plan has the single scan's root, counts and partitions, and every
//! fault has its documented status, never `verified`: a missing shard is `unknown`
//! (`shard_missing`), a shard run twice is `failed` (`shard_conflict`), a shard of another
//! plan is `failed` (`shard_mismatch`), an ID outside its shard's range is `failed`
//! (`invalid_page`), and a shard killed with SIGKILL and scanned again continues its own
//! run, so the merge is exact. The fault tests use `sim:` and `replay:` for speed; the
//! PostgreSQL test runs 8 shard processes at once in one held snapshot while another
//! connection writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::util::{self, Env};

/// `scanledger --json ARGS`; (exit code, stdout JSON or Null, stderr).
pub(crate) fn sl_json(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = util::run(&all);
    for text in [&out, &err] {
        assert!(
            !text.contains("sim-offset-") && !text.contains("rawcur_"),
            "a raw cursor was printed by {args:?}:\n{text}"
        );
    }
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

pub(crate) fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Plans `n` shards of `contract` over `source` into `dir`; returns the plan's path.
pub(crate) fn plan(
    env: &Env,
    dir: &str,
    contract: &Value,
    source: &str,
    n: u32,
    extra: &[&str],
) -> PathBuf {
    let c = env.write(&format!("{dir}.contract.json"), &contract.to_string());
    let out = env.path().join(dir);
    let n = n.to_string();
    let mut args = vec![
        "plan",
        "--contract",
        &c,
        "--source",
        source,
        "--shards",
        &n,
        "--out",
    ];
    let out_s = s(&out);
    args.push(&out_s);
    args.extend_from_slice(extra);
    let (code, v, err) = sl_json(&args);
    assert_eq!(code, 0, "plan: {err}");
    assert_eq!(
        v["shards"].as_array().map(Vec::len),
        Some(n.parse().unwrap())
    );
    out.join("plan.json")
}

/// Scans shard `k` of `plan` into `store`; (exit code, receipt).
pub(crate) fn scan_shard(plan: &Path, k: u32, store: &Path, extra: &[&str]) -> (i32, Value) {
    let k = k.to_string();
    let (p, st) = (s(plan), s(store));
    let mut args = vec!["--store", &st, "scan", "--plan", &p, "--shard", &k];
    args.extend_from_slice(extra);
    let (code, v, err) = sl_json(&args);
    assert!(v.is_object(), "shard {k}: no receipt: {err}");
    (code, v)
}

/// Merges `stores` under `plan` into `out`; (exit code, the merge's JSON).
pub(crate) fn merge(plan: &Path, out: &Path, stores: &[PathBuf]) -> (i32, Value, String) {
    let (p, o) = (s(plan), s(out));
    let names: Vec<String> = stores.iter().map(|p| s(p)).collect();
    let mut args = vec!["merge", "--plan", &p, "--out", &o];
    args.extend(names.iter().map(String::as_str));
    sl_json(&args)
}

pub(crate) fn kinds(receipt: &Value) -> Vec<String> {
    receipt["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The fields a merged receipt shares with the single scan of the same collection.
#[track_caller]
pub(crate) fn same_collection(merged: &Value, single: &Value) {
    for key in [
        "merkle_root",
        "partitions",
        "unique_ids_observed",
        "records_observed",
        "duplicate_ids",
        "query_digest",
        "coverage_status",
        "conclusion_scope",
        "snapshot_id",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
}

#[test]
fn a_merged_plan_has_the_single_scans_root_counts_and_partitions() {
    let env = Env::new();
    // 300 k dense IDs from 1 (5 partitions) with labels; 4 shards by the sim's statistics.
    let source = "sim:records=300000,start=1,label_every=1000";
    let contract = json!({"source": "customers", "page_size": 5000});
    let (code, single) = env.scan("single", &contract, source);
    assert_eq!(code, 0, "{single}");
    let plan_path = plan(&env, "p", &contract, source, 4, &[]);
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    assert_eq!(plan["split"]["by"], "min_max");
    let mut stores = Vec::new();
    for k in 0..4 {
        let store = env.path().join(format!("shard-{k}.redb"));
        let (code, r) = scan_shard(&plan_path, k, &store, &[]);
        assert_eq!(code, 0, "shard {k}: {r}");
        // A shard's receipt names its own scope: the key range is in its query digest.
        assert_ne!(r["query_digest"], single["query_digest"]);
        stores.push(store);
    }
    let out = env.path().join("merged.redb");
    let (code, m, err) = merge(&plan_path, &out, &stores);
    assert_eq!(code, 0, "merge: {err}\n{m}");
    let merged = &m["receipt"];
    same_collection(merged, &single);
    assert_eq!(merged["labels"], single["labels"]);
    assert_eq!(merged["coverage_status"], "verified");
    assert_eq!(m["shards"].as_array().unwrap().len(), 4);
    assert!(m["shards"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["coverage_status"] == "verified"));
    // The merged run is an ordinary run of its store: its stored receipt verifies.
    let receipt_file = env.write("merged.receipt.json", &merged.to_string());
    let (code, _, err) = sl_json(&["--store", &s(&out), "verify", &receipt_file]);
    assert_eq!(code, 0, "verify: {err}");
    // And diff against the single scan finds nothing.
    let (code, d, err) = sl_json(&[
        "--store",
        &s(&out),
        "diff",
        merged["run_id"].as_str().unwrap(),
        merged["run_id"].as_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(d["added_count"], 0);
}

#[test]
fn a_missing_shard_is_unknown_and_never_verified() {
    let env = Env::new();
    let source = "sim:records=200000";
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, source, 3, &[]);
    let mut stores = Vec::new();
    for k in [0, 2] {
        let store = env.path().join(format!("shard-{k}.redb"));
        assert_eq!(scan_shard(&plan_path, k, &store, &[]).0, 0);
        stores.push(store);
    }
    let (code, m, err) = merge(&plan_path, &env.path().join("m.redb"), &stores);
    assert_eq!(code, 3, "{err}\n{m}");
    let r = &m["receipt"];
    assert_eq!(r["coverage_status"], "unknown");
    assert_eq!(r["conclusion_scope"], "none");
    assert_eq!(kinds(r), ["shard_missing"]);
    assert!(m["shards"][1]["run_id"].is_null());
    // The stored receipt says which shard is missing, and verifies as what it is.
    let out = env.path().join("m.redb");
    let stored = stored_receipt(&out, &r["run_id"]);
    let findings: Vec<&str> = stored["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["finding"].as_str().unwrap())
        .collect();
    assert_eq!(findings, ["merged", "missing", "merged"]);
    for key in ["store", "run_id", "coverage_status", "merkle_root"] {
        assert!(stored["shards"][1][key].is_null(), "{key}");
    }
    assert_eq!(stored["shards"][1]["unique_ids_observed"], 0);
    let (code, v, err) = verify(&env, &out, "m.json", &stored);
    // It matches its store, and exits with its status: a matching unknown receipt is no pass.
    assert_eq!((code, &v["matches"]), (3, &json!(true)), "{err}\n{v}");
    // The Python verifier accepts it: the list's shape and cover are checked, its values are
    // not compared for a run that is not verified.
    let ids = env.path().join("m.txt");
    let run = stored["run_id"].as_str().unwrap();
    let (code, _, err) = util::run(&["--store", &s(&out), "export", run, "--output", &s(&ids)]);
    assert_eq!(code, 3, "{err}");
    let file = env.write("m.json", &stored.to_string());
    let (code, py, err) = crate::evidence::python_verifier(&[&file, &s(&ids)]);
    assert_eq!(code, 0, "{py}{err}");
    assert!(py.contains("not compared"), "{py}");
    // A list that no longer covers the key space is refused by both verifiers.
    let mut gap = stored.clone();
    gap["shards"][1]["key_range"]["hi"] = json!(1);
    assert_eq!(verify(&env, &out, "gap.json", &gap).0, 4);
    let file = env.write("gap.json", &gap.to_string());
    assert_eq!(crate::evidence::python_verifier(&[&file, &s(&ids)]).0, 4);
}

/// `merge` given a pattern the shell did not expand (no shard store exists yet) says so, and
/// makes no run; `plan --release` of a plan that holds no snapshot is refused.
#[test]
fn merge_of_an_unexpanded_pattern_and_release_of_an_unheld_plan_are_refused() {
    let env = Env::new();
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, "sim:records=1000", 2, &[]);
    let out = env.path().join("m.redb");
    let pattern = env.path().join("p").join("shard-*.redb");
    let (code, _, err) = merge(&plan_path, &out, &[pattern]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no shard store matches") && err.contains("shell passed it on as it is"),
        "{err}"
    );
    assert!(!out.exists(), "a merge of nothing made a store");
    let (code, _, err) = merge(&plan_path, &out, &[env.path().join("shard-9.redb")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no shard store at"), "{err}");
    let (code, _, err) = sl_json(&["plan", "--release", &s(&env.path().join("p"))]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no snapshot"), "{err}");
    assert!(!env.path().join("p").join("release").exists());
}

#[test]
fn a_shard_run_twice_is_failed() {
    let env = Env::new();
    let source = "sim:records=100000";
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, source, 2, &[]);
    let mut stores = Vec::new();
    for k in 0..2 {
        let store = env.path().join(format!("shard-{k}.redb"));
        assert_eq!(scan_shard(&plan_path, k, &store, &[]).0, 0);
        stores.push(store);
    }
    // Shard 1 again, in another store (a runner that retried into a fresh volume).
    let again = env.path().join("shard-1-again.redb");
    assert_eq!(scan_shard(&plan_path, 1, &again, &[]).0, 0);
    stores.push(again);
    let (code, m, err) = merge(&plan_path, &env.path().join("m.redb"), &stores);
    assert_eq!(code, 4, "{err}\n{m}");
    assert_eq!(m["receipt"]["coverage_status"], "failed");
    assert_eq!(kinds(&m["receipt"]), ["shard_conflict"]);
    let out = env.path().join("m.redb");
    let stored = stored_receipt(&out, &m["receipt"]["run_id"]);
    assert_eq!(stored["shards"][0]["finding"], "merged");
    assert_eq!(stored["shards"][1]["finding"], "conflict");
    assert!(stored["shards"][1]["run_id"].is_null());
    assert_eq!(verify(&env, &out, "m.json", &stored).1["matches"], true);
    // The same shard scanned again into its own store is not a second attempt: the store's
    // finished attempt is shown, and the merge is exact.
    let (code, r) = scan_shard(&plan_path, 1, &stores[1], &[]);
    assert_eq!(code, 0);
    assert_eq!(r["run_id"], "run-1");
    let (code, m, err) = merge(&plan_path, &env.path().join("m2.redb"), &stores[..2]);
    assert_eq!(code, 0, "{err}\n{m}");
}

#[test]
fn a_shard_of_another_plan_is_failed() {
    let env = Env::new();
    let source = "sim:records=100000";
    let contract = json!({"source": "customers", "page_size": 10000});
    let one = plan(&env, "one", &contract, source, 2, &[]);
    let two = plan(&env, "two", &contract, source, 2, &[]);
    let a = env.path().join("a.redb");
    let b = env.path().join("b.redb");
    assert_eq!(scan_shard(&one, 0, &a, &[]).0, 0);
    assert_eq!(scan_shard(&two, 1, &b, &[]).0, 0);
    let (code, m, err) = merge(&one, &env.path().join("m.redb"), &[a, b]);
    assert_eq!(code, 4, "{err}\n{m}");
    let k = kinds(&m["receipt"]);
    assert!(k.contains(&"shard_mismatch".to_owned()), "{k:?}");
    assert!(k.contains(&"shard_missing".to_owned()), "{k:?}");
    assert_eq!(m["receipt"]["coverage_status"], "failed");
    // An edited plan is refused outright.
    let text = std::fs::read_to_string(&one).unwrap();
    let edited = env.write(
        "edited.json",
        &text.replacen("\"page_size\": 10000", "\"page_size\": 9999", 1),
    );
    let (code, _, err) = sl_json(&[
        "merge",
        "--plan",
        &edited,
        "--out",
        &s(&env.path().join("x.redb")),
        &s(&env.path().join("a.redb")),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("edited"), "{err}");
}

#[test]
fn an_id_outside_its_shards_range_is_failed() {
    let env = Env::new();
    // Page 2 of shard 1 carries an ID of shard 0: a source that ignored the range.
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, "sim:records=200000", 2, &[]);
    let a = env.path().join("a.redb");
    let b = env.path().join("b.redb");
    assert_eq!(scan_shard(&plan_path, 0, &a, &[]).0, 0);
    let (code, r) = scan_shard(
        &plan_path,
        1,
        &b,
        &["--source", "sim:records=200000,stray_at=2"],
    );
    assert_eq!(code, 4, "{r}");
    assert_eq!(kinds(&r), ["invalid_page"]);
    assert!(r["violations"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("outside the contract's key range"));
    let (code, m, _) = merge(&plan_path, &env.path().join("m.redb"), &[a, b]);
    assert_eq!(code, 4);
    assert_eq!(m["receipt"]["coverage_status"], "failed");
    assert!(kinds(&m["receipt"]).contains(&"invalid_page".to_owned()));
    // Shard 1 stopped failed before its end: taken, unfinished, with its own root and count
    // (not its range's: one of its IDs is in shard 0's).
    let out = env.path().join("m.redb");
    let stored = stored_receipt(&out, &m["receipt"]["run_id"]);
    let e = &stored["shards"][1];
    assert_eq!(e["finding"], "unfinished");
    assert_eq!(e["unique_ids_observed"], r["unique_ids_observed"]);
    assert_eq!(e["coverage_status"], "failed");
    assert_eq!(e["merkle_root"], r["merkle_root"]);
    assert_eq!(verify(&env, &out, "m.json", &stored).1["matches"], true);
}

#[test]
fn a_replay_shard_keeps_only_its_range_and_http_without_range_params_is_refused() {
    let env = Env::new();
    // 200 IDs spread over 4 partitions, pages of 50; two shards split at partition 2.
    let ids: Vec<Value> = (0..200u64).map(|i| json!(i * 1000)).collect();
    let source = env.replay("r.jsonl", &ids, 50, "snap-1");
    let contract = json!({"source": "customers", "page_size": 50});
    let (code, single) = env.scan("single", &contract, &source);
    assert_eq!(code, 0);
    let plan_path = plan(
        &env,
        "p",
        &contract,
        &source,
        2,
        &["--key-space", "0..199000"],
    );
    let mut stores = Vec::new();
    let mut total = 0;
    for k in 0..2 {
        let store = env.path().join(format!("s{k}.redb"));
        let (code, r) = scan_shard(&plan_path, k, &store, &[]);
        assert_eq!(code, 0, "{r}");
        total += r["unique_ids_observed"].as_u64().unwrap();
        assert!(r["unique_ids_observed"].as_u64().unwrap() < 200);
        stores.push(store);
    }
    assert_eq!(total, 200);
    let (code, m, err) = merge(&plan_path, &env.path().join("m.redb"), &stores);
    assert_eq!(code, 0, "{err}");
    for key in [
        "merkle_root",
        "partitions",
        "unique_ids_observed",
        "snapshot_id",
        "conclusion_scope",
    ] {
        assert_eq!(m["receipt"][key], single[key], "{key}");
    }
    // An HTTP config without key_range_params cannot be asked for a slice: refused.
    let cfg = env.write(
        "h.json",
        &json!({"url": "http://127.0.0.1:9/items"}).to_string(),
    );
    let shard0 = plan_path.parent().unwrap().join("shard-0.json");
    let (code, _, err) = env.sl(&[
        "scan",
        "--contract",
        &s(&shard0),
        "--source",
        &format!("http:{cfg}"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("key_range_params"), "{err}");
}

#[test]
fn the_shard_index_comes_from_the_runners_environment() {
    let env = Env::new();
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, "sim:records=1000", 2, &[]);
    let run = |vars: &[(&str, &str)]| {
        let mut c = Command::new(util::bin());
        c.args([
            "--json",
            "--store",
            &s(&env.path().join("e.redb")),
            "scan",
            "--plan",
            &s(&plan_path),
            "--shard-from-env",
        ]);
        for v in [
            "JOB_COMPLETION_INDEX",
            "SLURM_ARRAY_TASK_ID",
            "SCANLEDGER_SHARD",
        ] {
            c.env_remove(v);
        }
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("JOB_COMPLETION_INDEX"), "{err}");
    let (code, err) = run(&[("JOB_COMPLETION_INDEX", "0"), ("SLURM_ARRAY_TASK_ID", "1")]);
    assert_eq!(code, 2);
    assert!(err.contains("disagree"), "{err}");
    let (code, err) = run(&[("SLURM_ARRAY_TASK_ID", "7")]);
    assert_eq!(code, 2);
    assert!(err.contains("shard 7"), "{err}");
    let (code, err) = run(&[("SCANLEDGER_SHARD", "1"), ("JOB_COMPLETION_INDEX", "1")]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_shard_killed_and_scanned_again_continues_its_own_run() {
    let env = Env::new();
    // Slow pages, so the kill lands mid-scan.
    let source = "sim:records=60000,delay_ms=20";
    let contract = json!({"source": "customers", "page_size": 1000});
    let plan_path = plan(&env, "p", &contract, source, 2, &[]);
    let a = env.path().join("a.redb");
    let b = env.path().join("b.redb");
    assert_eq!(scan_shard(&plan_path, 1, &b, &[]).0, 0);
    let mut child = Command::new(util::bin())
        .args([
            "--store",
            &s(&a),
            "scan",
            "--plan",
            &s(&plan_path),
            "--shard",
            "0",
            "--ack-pages",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut acks = 0;
    use std::io::BufRead;
    for line in std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
    {
        if line.starts_with("ack ") {
            acks += 1;
            if acks == 5 {
                break;
            }
        }
    }
    assert_eq!(acks, 5, "the shard scan ended before 5 pages");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Merged now, the killed shard is unknown: its run never reached its end.
    let (code, m, _) = merge(
        &plan_path,
        &env.path().join("m1.redb"),
        &[a.clone(), b.clone()],
    );
    assert_eq!(code, 3, "{m}");
    assert_eq!(kinds(&m["receipt"]), ["shard_missing"]);
    // Its entry names the run it took and says it is unfinished.
    let m1 = env.path().join("m1.redb");
    let stored = stored_receipt(&m1, &m["receipt"]["run_id"]);
    let e = &stored["shards"][0];
    assert_eq!(e["finding"], "unfinished", "{e}");
    assert_eq!(e["run_id"], "run-1");
    assert_eq!(e["store"], "a.redb");
    assert_eq!(e["coverage_status"], "unknown");
    assert_eq!(stored["shards"][1]["finding"], "merged");
    assert_eq!(
        verify(&env, &m1, "m1.json", &stored).0,
        3,
        "matches, unknown"
    );
    // Scanned again, the shard continues run-1 of its store; the merge is exact.
    let (code, r) = scan_shard(&plan_path, 0, &a, &["--source", "sim:records=60000"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["run_id"], "run-1");
    let (code, m, err) = merge(&plan_path, &env.path().join("m2.redb"), &[a, b]);
    assert_eq!(code, 0, "{err}\n{m}");
    let (code, single) = env.scan("single", &contract, "sim:records=60000");
    assert_eq!(code, 0);
    same_collection(&m["receipt"], &single);
}

#[test]
fn the_xargs_runner_scans_a_plan() {
    let env = Env::new();
    let contract = json!({"source": "customers", "page_size": 5000});
    let source = "sim:records=100000";
    let plan_path = plan(&env, "p", &contract, source, 4, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runners/xargs.sh");
    let out = Command::new("sh")
        .arg(&script)
        .arg(&plan_path)
        .arg("4")
        .env("SCANLEDGER_BIN", util::bin())
        .env("JOBS", "4")
        .current_dir(env.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let merged = plan_path.parent().unwrap().join("merged.redb");
    let (code, r, err) = sl_json(&["--store", &s(&merged), "receipt", "latest"]);
    assert_eq!(code, 0, "{err}");
    let (_, single) = env.scan("single", &contract, source);
    same_collection(&r, &single);
}

/// The keys of one entry of a merged receipt's `shards`.
const SHARD_ENTRY_KEYS: [&str; 8] = [
    "index",
    "key_range",
    "finding",
    "store",
    "run_id",
    "coverage_status",
    "unique_ids_observed",
    "merkle_root",
];

/// `verify FILE` against `store` of `receipt`; (exit code, the report).
fn verify(env: &Env, store: &Path, name: &str, receipt: &Value) -> (i32, Value, String) {
    let file = env.write(name, &receipt.to_string());
    sl_json(&["--store", &s(store), "verify", &file])
}

/// The stored receipt of the merged run in `store`: what `receipt`, `export` and `verify` see.
fn stored_receipt(store: &Path, run: &Value) -> Value {
    let (code, r, err) = sl_json(&["--store", &s(store), "receipt", run.as_str().unwrap()]);
    assert!(r.is_object(), "receipt: {code} {err}");
    r
}

#[test]
fn a_merged_runs_stored_receipt_lists_its_shards_and_verify_checks_every_entry() {
    let env = Env::new();
    let source = "sim:records=200000,start=1";
    let contract = json!({"source": "customers", "page_size": 10000});
    let plan_path = plan(&env, "p", &contract, source, 3, &[]);
    let plan_v: Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let mut stores = Vec::new();
    let mut shard_receipts = Vec::new();
    for k in 0..3 {
        let store = env.path().join(format!("shard-{k}.redb"));
        let (code, r) = scan_shard(&plan_path, k, &store, &[]);
        assert_eq!(code, 0, "shard {k}: {r}");
        // A shard's own receipt is an ordinary one: no merge keys.
        for key in scanledger::RECEIPT_MERGED_KEYS {
            assert!(r.get(key).is_none(), "shard {k}'s receipt has {key}");
        }
        shard_receipts.push(r);
        stores.push(store);
    }
    let out = env.path().join("merged.redb");
    let (code, m, err) = merge(&plan_path, &out, &stores);
    assert_eq!(code, 0, "merge: {err}\n{m}");
    let stored = stored_receipt(&out, &m["receipt"]["run_id"]);
    assert_eq!(stored, m["receipt"], "merge printed the stored receipt");
    assert_eq!(m["shards"], stored["shards"]);
    assert_eq!(stored["plan_digest"], plan_v["plan_digest"]);
    let list = stored["shards"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    let mut sum = 0;
    for (k, e) in list.iter().enumerate() {
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, SHARD_ENTRY_KEYS);
        let own = &shard_receipts[k];
        assert_eq!(e["index"], k);
        assert_eq!(
            e["key_range"], plan_v["shards"][k]["key_range"],
            "shard {k}"
        );
        assert_eq!(e["finding"], "merged");
        assert_eq!(e["store"], format!("shard-{k}.redb"));
        for key in [
            "run_id",
            "coverage_status",
            "unique_ids_observed",
            "merkle_root",
        ] {
            assert_eq!(e[key], own[key], "shard {k}: {key} is the shard receipt's");
        }
        sum += e["unique_ids_observed"].as_u64().unwrap();
    }
    assert_eq!(sum, stored["unique_ids_observed"].as_u64().unwrap());

    // verify passes on it, and fails on any entry edited.
    let (code, v, err) = verify(&env, &out, "merged.json", &stored);
    assert_eq!(code, 0, "verify: {err}\n{v}");
    let other_root = shard_receipts[0]["merkle_root"].clone();
    let edits: [(&str, &str, Value); 7] = [
        ("merkle_root", "shards[1].merkle_root", other_root),
        ("run_id", "shards[1].run_id", json!("run-2")),
        (
            "unique_ids_observed",
            "shards[1].unique_ids_observed",
            json!(1),
        ),
        (
            "coverage_status",
            "shards[1].coverage_status",
            json!("unknown"),
        ),
        ("finding", "shards[1].finding", json!("unfinished")),
        ("store", "shards[1].store", json!("elsewhere.redb")),
        (
            "key_range",
            "shards[1].key_range.lo",
            json!({"lo": 0, "hi": 65536}),
        ),
    ];
    for (key, field, value) in edits {
        let mut edited = stored.clone();
        edited["shards"][1][key] = value;
        let (code, v, err) = verify(&env, &out, "edited.json", &edited);
        assert_eq!(code, 4, "an edited {key} passed verify: {err}\n{v}");
        assert_eq!(v["first_mismatch"]["field"], field, "{v}");
    }
    let mut edited = stored.clone();
    edited["plan_digest"] = shard_receipts[0]["query_digest"].clone();
    assert_eq!(verify(&env, &out, "edited.json", &edited).0, 4);
    // Without its list, the receipt is not the merged run's.
    let mut bare = stored.clone();
    for key in scanledger::RECEIPT_MERGED_KEYS {
        bare.as_object_mut().unwrap().remove(key);
    }
    let (code, v, _) = verify(&env, &out, "bare.json", &bare);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["first_mismatch"]["field"], "plan_digest");
    // One key without the other, a null list, an unknown key in an entry: not a receipt.
    let mut half = stored.clone();
    half.as_object_mut().unwrap().remove("plan_digest");
    let mut null = stored.clone();
    null["shards"] = Value::Null;
    let mut unknown = stored.clone();
    unknown["shards"][0]["note"] = json!("x");
    let mut renumbered = stored.clone();
    renumbered["shards"][2]["index"] = json!(5);
    for (name, bad) in [
        ("half", half),
        ("null", null),
        ("unknown", unknown),
        ("renumbered", renumbered),
    ] {
        let (code, _, err) = verify(&env, &out, "bad.json", &bad);
        assert_eq!(code, 2, "{name}: {err}");
    }
    // A duplicate key inside an entry is refused by the strict reader.
    let text = stored.to_string().replacen(
        "\"finding\":\"merged\"",
        "\"finding\":\"merged\",\"finding\":\"merged\"",
        1,
    );
    let file = env.write("dup.json", &text);
    let (code, _, err) = sl_json(&["--store", &s(&out), "verify", &file]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("duplicate"), "{err}");
    // An ordinary run's receipt given a shard list fails verify: the list is the store's.
    let mut forged = shard_receipts[0].clone();
    forged["plan_digest"] = stored["plan_digest"].clone();
    forged["shards"] = stored["shards"].clone();
    let (code, v, _) = verify(&env, &stores[0], "forged.json", &forged);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["first_mismatch"]["field"], "plan_digest");

    // The text receipt has a short shards section.
    let (code, text, err) = util::run(&[
        "--store",
        &s(&out),
        "receipt",
        stored["run_id"].as_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let digest = plan_v["plan_digest"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "plan         {digest} (3 shards, 3 merged and verified)"
        )),
        "{text}"
    );
    let run1 = shard_receipts[1]["run_id"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "shard        1 [{}, {}): {run1} of shard-1.redb, verified",
            plan_v["shards"][1]["key_range"]["lo"], plan_v["shards"][1]["key_range"]["hi"]
        )),
        "{text}"
    );

    // The review packet lists them too, in a section of its own.
    let html_path = env.path().join("merged.html");
    let (code, _, err) = util::run(&[
        "--store",
        &s(&out),
        "report",
        stored["run_id"].as_str().unwrap(),
        "-o",
        &s(&html_path),
    ]);
    assert_eq!(code, 0, "report: {err}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let at = html
        .find("id=\"shards\"")
        .expect("the report's shards section");
    assert!(
        html[at..].contains(&format!(
            "Merged from 3 shards of plan <code>{digest}</code>: every one merged and verified"
        )),
        "{}",
        &html[at..]
    );
    for k in 0..3 {
        assert!(
            html[at..].contains(&format!("<td>shard-{k}.redb</td>")),
            "shard {k}"
        );
    }

    // The independent Python verifier checks the list against the exported IDs.
    let ids = env.path().join("merged.txt");
    let (code, _, err) = util::run(&[
        "--store",
        &s(&out),
        "export",
        stored["run_id"].as_str().unwrap(),
        "--output",
        &s(&ids),
    ]);
    assert_eq!(code, 0, "{err}");
    let file = env.write("merged.json", &stored.to_string());
    let (code, py, err) = crate::evidence::python_verifier(&[&file, &s(&ids), "--json"]);
    assert_eq!(code, 0, "{py}{err}");
    let py: Value = serde_json::from_str(&py).unwrap();
    for (k, e) in list.iter().enumerate() {
        assert_eq!(
            py["shards"][k]["merkle_root"], e["merkle_root"],
            "shard {k}"
        );
    }
    let mut edited = stored.clone();
    edited["shards"][2]["unique_ids_observed"] = json!(7);
    let file = env.write("edited.json", &edited.to_string());
    let (code, py, err) = crate::evidence::python_verifier(&[&file, &s(&ids)]);
    assert_eq!(code, 4, "{py}{err}");
    assert!(py.contains("DIFF shard 2"), "{py}");
}
