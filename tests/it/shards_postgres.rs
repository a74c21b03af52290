//! A plan of 8 shards against the real PostgreSQL (127.0.0.1:5432, database `test`), scanned
//! by 8 concurrent processes of the binary in one snapshot that `plan --hold-snapshot` holds,
//! while another connection inserts and deletes rows: the merged root is the root of a single
//! scan of that snapshot, and not the root of the live table after the writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::postgres::{Env, Pg};
use crate::util;

#[test]
fn eight_shard_processes_in_one_held_snapshot_merge_to_the_snapshots_root() {
    let Some(pg) = Pg::server() else { return };
    // 400 k rows, ids 1..=400000 (7 partitions), and a label.
    let t = pg.table(
        "shards8",
        "CREATE TABLE $T (id bigint PRIMARY KEY, v int NOT NULL); \
         INSERT INTO $T SELECT g, g % 7 FROM generate_series(1, 400000) g;",
    );
    let env = Env::new();
    let source = env.source("t", &t.name, "id", json!({"labels": {"seven": "v = 0"}}));
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 5000}));
    let dir = env.dir.path().join("plan");
    let (mut coordinator, plan) =
        crate::shards_hold::hold(&contract, &source, 8, &dir, Stdio::piped());
    let plan_path = dir.join("plan.json");
    let snapshot = plan["snapshot_id"].as_str().unwrap().to_owned();
    assert_eq!(plan["snapshot_held"], true);
    // Equal widths, or the key's histogram once autovacuum has analyzed the table.
    assert!(
        ["min_max", "histogram"].contains(&plan["split"]["by"].as_str().unwrap()),
        "{}",
        plan["split"]
    );

    // The writes the snapshot must not see: new rows in several shards, deleted rows.
    pg.exec(&format!(
        "INSERT INTO {0} SELECT g, 0 FROM generate_series(400001, 420000) g; \
         DELETE FROM {0} WHERE id % 1000 = 0; \
         UPDATE {0} SET v = 0 WHERE id % 5 = 0;",
        t.name
    ));

    // 8 shard processes at once.
    let children: Vec<_> = (0..8)
        .map(|k| {
            let store = dir.join(format!("shard-{k}.redb"));
            Command::new(util::bin())
                .args([
                    "--json",
                    "--store",
                    &store.to_string_lossy(),
                    "scan",
                    "--plan",
                    &plan_path.to_string_lossy(),
                    "--shard",
                    &k.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (k, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "shard {k}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["snapshot_id"], snapshot.as_str(), "shard {k}");
    }

    // A single scan of the held snapshot, beside it.
    let pinned = env.contract(
        "pinned.json",
        &json!({"source": t.name, "page_size": 5000, "snapshot_id": snapshot}),
    );
    let single_store = env.dir.path().join("single.redb");
    let (code, out, err) = util::run(&[
        "--json",
        "--store",
        &single_store.to_string_lossy(),
        "scan",
        "--contract",
        &pinned,
        "--source",
        &source,
    ]);
    assert_eq!(code, 0, "{err}");
    let single: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(single["unique_ids_observed"], 400_000);

    let stores: Vec<String> = (0..8)
        .map(|k| {
            dir.join(format!("shard-{k}.redb"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let merged_store = dir.join("merged.redb");
    let mut args = vec![
        "--json".to_owned(),
        "merge".to_owned(),
        "--plan".to_owned(),
        plan_path.to_string_lossy().into_owned(),
        "--out".to_owned(),
        merged_store.to_string_lossy().into_owned(),
    ];
    args.extend(stores);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = util::run(&args);
    assert_eq!(code, 0, "merge: {err}\n{out}");
    let m: Value = serde_json::from_str(&out).unwrap();
    let merged = &m["receipt"];
    for key in [
        "merkle_root",
        "partitions",
        "unique_ids_observed",
        "records_observed",
        "labels",
        "snapshot_id",
        "query_digest",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
    assert_eq!(merged["conclusion_scope"], "all_records_in_snapshot");
    // The stored receipt lists the plan's 8 shards, each merged from its own store, and the
    // shards' counts add up to the merged run's.
    let (code, out, err) = util::run(&[
        "--json",
        "--store",
        &merged_store.to_string_lossy(),
        "receipt",
        merged["run_id"].as_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let stored: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(&stored, merged);
    assert_eq!(stored["plan_digest"], plan["plan_digest"]);
    let list = stored["shards"].as_array().unwrap();
    assert_eq!(list.len(), 8);
    let mut sum = 0;
    for (k, e) in list.iter().enumerate() {
        assert_eq!(e["key_range"], plan["shards"][k]["key_range"], "shard {k}");
        assert_eq!(e["finding"], "merged", "shard {k}");
        assert_eq!(e["coverage_status"], "verified", "shard {k}");
        assert_eq!(e["store"], format!("shard-{k}.redb"));
        sum += e["unique_ids_observed"].as_u64().unwrap();
    }
    assert_eq!(sum, stored["unique_ids_observed"].as_u64().unwrap());
    let receipt_file = util::write(env.dir.path(), "merged.receipt.json", &stored.to_string());
    let (code, _, err) = util::run(&[
        "--store",
        &merged_store.to_string_lossy(),
        "verify",
        &receipt_file,
    ]);
    assert_eq!(code, 0, "verify: {err}");

    // The verified merge released the coordinator, which says so and exits 0.
    let status = wait_for(&mut coordinator, Duration::from_secs(30));
    let mut err = String::new();
    coordinator
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status, Some(0), "{err}");
    assert!(err.contains("holding snapshot"), "{err}");
    assert!(
        err.contains("released snapshot") && err.contains("a verified merge"),
        "{err}"
    );

    // The live table after the writes is another collection.
    let live_store = env.dir.path().join("live.redb");
    let (code, out, err) = util::run(&[
        "--json",
        "--store",
        &live_store.to_string_lossy(),
        "scan",
        "--contract",
        &contract,
        "--source",
        &source,
    ]);
    assert_eq!(code, 0, "{err}");
    let live: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(live["merkle_root"], merged["merkle_root"]);
    assert_eq!(live["unique_ids_observed"], 420_000 - 420);
    let _ = Path::new(&merged_store);
}

fn wait_for(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if start.elapsed() > within {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
