//! Shards of a MySQL/MariaDB table in one synchronized snapshot (`plan --hold-snapshot` with a
//! `mysql:` source): the coordinator holds a global read lock while every shard begins its
//! consistent snapshot, then gives it up. A writer runs throughout; the merged root is that of
//! one scan of the same state, and without the option the merged run claims the live
//! collection only. A shard that begins after the lock is gone cannot join.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::Value;

use super::{db, Env, ROOT_DSN};
use crate::util;

/// A writer that inserts and deletes rows of `table`, one autocommit statement at a time,
/// until stopped; it reports how many statements it ran and the longest one (a statement
/// waits while the read lock is held).
struct Writer {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    handle: JoinHandle<(u64, Vec<Duration>)>,
}

impl Writer {
    fn start(table: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let done = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&done);
        let table = table.to_owned();
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let opts = mysql_async::Opts::from_url(ROOT_DSN).unwrap();
                let mut c = mysql_async::Conn::new(opts).await.unwrap();
                let (mut n, mut took) = (0u64, Vec::new());
                while !flag.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    // New IDs between the existing ones (multiples of 40), and old ones gone
                    // (two inserts to a delete, so the count changes too).
                    let sql = if n % 3 != 2 {
                        format!("INSERT INTO {table} VALUES ({})", n * 20 + 1)
                    } else {
                        format!("DELETE FROM {table} WHERE id = {}", (n + 1) * 40)
                    };
                    c.query_drop(sql).await.unwrap();
                    took.push(t.elapsed());
                    n += 1;
                    count.store(n, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let _ = c.disconnect().await;
                took.sort();
                took.reverse();
                (n, took)
            })
        });
        Writer { stop, done, handle }
    }

    /// The statements run and their durations, longest first.
    fn stop(self) -> (u64, Vec<Duration>) {
        // At least a few statements after the lock, whatever the machine's load.
        let start = Instant::now();
        while self.done.load(Ordering::Relaxed) < 20 && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// `plan` in the background; waits for its plan file.
fn coordinator(env: &Env, contract: &str, source: &str, shards: u32, extra: &[&str]) -> Child {
    let dir = env.dir.path().join("plan");
    let mut args = vec![
        "--json".to_owned(),
        "plan".to_owned(),
        "--contract".to_owned(),
        contract.to_owned(),
        "--source".to_owned(),
        source.to_owned(),
        "--shards".to_owned(),
        shards.to_string(),
        "--out".to_owned(),
        dir.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let mut child = Command::new(util::bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !dir.join("plan.json").exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no plan");
        if let Some(s) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("plan exited {s}: {err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The coordinator's exit code and stderr.
fn ended(mut child: Child) -> (i32, String) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code().unwrap_or(-1), err)
}

fn plan_path(env: &Env) -> String {
    env.dir
        .path()
        .join("plan/plan.json")
        .to_string_lossy()
        .into_owned()
}

fn store(env: &Env, k: u32) -> String {
    env.dir
        .path()
        .join(format!("plan/shard-{k}.redb"))
        .to_string_lossy()
        .into_owned()
}

/// Scans the shards side by side; their exit codes.
fn scan_shards(env: &Env, shards: u32) -> Vec<i32> {
    let plan = plan_path(env);
    let children: Vec<Child> = (0..shards)
        .map(|k| {
            Command::new(util::bin())
                .args([
                    "--quiet",
                    "--store",
                    &store(env, k),
                    "scan",
                    "--plan",
                    &plan,
                    "--shard",
                    &k.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|mut c| c.wait().unwrap().code().unwrap_or(-1))
        .collect()
}

fn merge(env: &Env, shards: u32) -> (i32, Value, String) {
    let merged = env.dir.path().join("plan/merged.redb");
    let plan = plan_path(env);
    let stores: Vec<String> = (0..shards).map(|k| store(env, k)).collect();
    let mut args = vec![
        "--json",
        "merge",
        "--plan",
        &plan,
        "--out",
        merged.to_str().unwrap(),
    ];
    args.extend(stores.iter().map(String::as_str));
    let (code, out, err) = util::run(&args);
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert!(!v.is_null(), "merge: {err}");
    (code, v, err)
}

fn table_of_40s(db: &super::Db, tag: &str) -> String {
    let t = db.table(tag);
    db.exec(&format!(
        "CREATE TABLE {t} (id BIGINT PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {t} SELECT seq * 40 FROM seq_1_to_20000"
    ));
    t
}

/// With a writer running: the shards of a synchronized plan and one scan that joined the same
/// snapshot have the same root, the merged run claims `all_records_in_snapshot`, and the
/// writer's statements waited only while the read lock was held (the coordinator says how
/// long).
#[test]
fn mysql_shards_in_a_synchronized_snapshot_merge_to_the_single_scan_of_that_state() {
    let Some(db) = db() else { return };
    let t = table_of_40s(&db, "sync");
    let env = Env::new();
    // 20 ms a page: the shards are still reading while the writer writes after the lock.
    let source = env.source("src.json", &t, "id", r#""page_delay_ms": 20"#);
    let contract = env.file(
        "c.json",
        &format!(r#"{{"source": "{t}", "page_size": 1000}}"#),
    );
    let writer = Writer::start(&t);
    std::thread::sleep(Duration::from_millis(100));
    let coord = coordinator(&env, &contract, &source, 3, &["--hold-snapshot"]);
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(plan_path(&env)).unwrap()).unwrap();
    let snapshot = plan["snapshot_id"].as_str().unwrap().to_owned();
    assert!(snapshot.starts_with("mysql-sync:"), "{snapshot}");
    assert_eq!(plan["snapshot_held"], true);

    // One scan that joins the same state while the lock is held (the coordinator waits for
    // the shards, which have not begun).
    let pinned = env.file(
        "pinned.json",
        &serde_json::json!({"source": t, "page_size": 1000, "snapshot_id": snapshot}).to_string(),
    );
    let quick = env.source("quick.json", &t, "id", "");
    let (code, single, err) = env.json(&["scan", "--contract", &pinned, "--source", &quick]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(single["snapshot_id"], snapshot.as_str());

    let codes = scan_shards(&env, 3);
    assert_eq!(codes, [0, 0, 0]);
    let (code, err) = ended(coord);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every shard began its snapshot"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    let (writes, took) = writer.stop();
    eprintln!("coordinator: {}", err.trim());
    eprintln!(
        "writer: {writes} statements, the longest {:?}",
        &took[..took.len().min(3)]
    );

    let (code, m, _) = merge(&env, 3);
    assert_eq!(code, 0, "{m}");
    let r = &m["receipt"];
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot", "{r}");
    for key in [
        "merkle_root",
        "unique_ids_observed",
        "snapshot_id",
        "query_digest",
    ] {
        assert_eq!(r[key], single[key], "{key}");
    }
    // The writer changed the table meanwhile: the state read is not today's.
    let now = db.column(&format!("SELECT COUNT(*) FROM {t}"));
    let now: u64 = now.iter().next().unwrap().parse().unwrap();
    assert_ne!(Value::from(now), single["unique_ids_observed"]);
    assert!(writes >= 20, "the writer ran {writes} statements");
}

/// Without `--hold-snapshot` each shard pins its own snapshot while the writer runs: the
/// merged run claims the live collection only.
#[test]
fn mysql_shards_without_a_synchronized_snapshot_claim_the_live_collection() {
    let Some(db) = db() else { return };
    let t = table_of_40s(&db, "unsync");
    let env = Env::new();
    let source = env.source("src.json", &t, "id", "");
    let contract = env.file(
        "c.json",
        &format!(r#"{{"source": "{t}", "page_size": 1000}}"#),
    );
    let writer = Writer::start(&t);
    let (code, _, err) = env.json(&[
        "plan",
        "--contract",
        &contract,
        "--source",
        &source,
        "--shards",
        "3",
        "--out",
        &env.dir.path().join("plan").to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(scan_shards(&env, 3), [0, 0, 0]);
    writer.stop();
    let (code, m, _) = merge(&env, 3);
    assert_eq!(code, 0, "{m}");
    assert_eq!(m["receipt"]["conclusion_scope"], "all_records_live", "{m}");
}

/// The lock is held at most `--lock-timeout-seconds`: a shard that begins after it cannot
/// join the snapshot (it never reads another state), and the coordinator names it.
#[test]
fn a_mysql_shard_that_begins_after_the_lock_cannot_join() {
    let Some(db) = db() else { return };
    let t = table_of_40s(&db, "late");
    let env = Env::new();
    let source = env.source("src.json", &t, "id", "");
    let contract = env.file(
        "c.json",
        &format!(r#"{{"source": "{t}", "page_size": 5000}}"#),
    );
    let coord = coordinator(
        &env,
        &contract,
        &source,
        2,
        &["--hold-snapshot", "--lock-timeout-seconds", "1"],
    );
    let (code, err) = ended(coord);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("shards 0, 1 had not begun"), "{err}");
    let codes = scan_shards(&env, 2);
    assert!(codes.iter().all(|c| *c != 0), "{codes:?}");
    assert!(!Path::new(&env.dir.path().join("plan/joined-0")).exists());
    let (code, m, err) = merge(&env, 2);
    assert_ne!(code, 0, "{m}");
    assert_ne!(m["receipt"]["coverage_status"], "verified");
    // Nothing is held to scan a shard again in: the merge names no shard to retry, and says
    // to make a new plan.
    assert_eq!(
        m["snapshot"]["retry_shards"],
        serde_json::json!([]),
        "{m}{err}"
    );
    let merged = env.dir.path().join("plan/merged.redb");
    let (_, _, err) = util::run(&[
        "merge",
        "--plan",
        &plan_path(&env),
        "--out",
        merged.to_str().unwrap(),
        &store(&env, 0),
        &store(&env, 1),
    ]);
    assert!(err.contains("make a new plan"), "{err}");
}

/// A shard's attempt resumed while the coordinator still holds the lock begins a new snapshot
/// under it, joins the plan's and writes its `joined-K` again, as a first attempt does: the
/// coordinator gives the lock up once every shard has joined, not at its timeout.
#[test]
fn a_resumed_mysql_shard_joins_while_the_lock_is_held() {
    let Some(db) = db() else { return };
    let t = table_of_40s(&db, "resumed");
    let env = Env::new();
    let source = env.source("src.json", &t, "id", "");
    let contract = env.file(
        "c.json",
        &format!(r#"{{"source": "{t}", "page_size": 1000, "limits": {{"max_pages": 1}}}}"#),
    );
    let started = Instant::now();
    let coord = coordinator(
        &env,
        &contract,
        &source,
        2,
        &["--hold-snapshot", "--lock-timeout-seconds", "60"],
    );
    let plan = plan_path(&env);
    let shard = |k: u32| {
        let (code, _, err) = util::run(&[
            "--store",
            &store(&env, k),
            "scan",
            "--plan",
            &plan,
            "--shard",
            &k.to_string(),
        ]);
        (code, err)
    };
    let joined = env.dir.path().join("plan/joined-0");
    // A first attempt that stops at its page budget: it joined.
    let (code, err) = shard(0);
    assert_eq!(code, 3, "{err}");
    assert!(joined.exists(), "{err}");
    // Its retry continues the attempt, and joins again (its file taken away to tell).
    std::fs::remove_file(&joined).unwrap();
    let (_, err) = shard(0);
    assert!(err.contains("continuing it"), "{err}");
    assert!(joined.exists(), "the resumed attempt did not join: {err}");
    let (code, err) = shard(1);
    assert_eq!(code, 3, "{err}");
    let (code, err) = ended(coord);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every shard began its snapshot"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(50), "{err}");
}
