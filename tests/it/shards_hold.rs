//! The snapshot `plan --hold-snapshot` holds, against the real PostgreSQL (127.0.0.1:5432,
//! database `test`): only a verified merge, `plan --release`, Ctrl-C/SIGTERM or the timeout
//! release it. A merge after a shard that never ran leaves it held (SIGHUP too), the shard then
//! scans in it and the merge is the single scan's; and a 2 s
//! `idle_in_transaction_session_timeout` on the coordinator's role does not end it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::postgres::{Env, Pg};
use crate::util;

/// A coordinator of a held snapshot and its plan.
struct Coordinator {
    child: Child,
    dir: PathBuf,
    plan: String,
    snapshot: String,
}

impl Coordinator {
    /// Starts `plan --hold-snapshot` and waits for its plan file.
    fn start(env: &Env, contract: &str, source: &str, shards: u32, name: &str) -> Coordinator {
        let dir = env.dir.path().join(name);
        let (child, plan) = hold(contract, source, shards, &dir, Stdio::null());
        Coordinator {
            child,
            plan: dir.join("plan.json").to_string_lossy().into_owned(),
            dir,
            snapshot: plan["snapshot_id"].as_str().unwrap().to_owned(),
        }
    }

    fn store(&self, k: u32) -> String {
        self.dir
            .join(format!("shard-{k}.redb"))
            .to_string_lossy()
            .into_owned()
    }

    /// Scans shard `k` into its store: the exit code and the receipt.
    fn scan(&self, k: u32) -> (i32, Value, String) {
        let (code, out, err) = util::run(&[
            "--json",
            "--store",
            &self.store(k),
            "scan",
            "--plan",
            &self.plan,
            "--shard",
            &k.to_string(),
        ]);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }

    /// Merges the shard stores `ks` into `merged.redb`: the exit code and the JSON.
    fn merge(&self, ks: &[u32]) -> (i32, Value, String) {
        let merged = self.dir.join("merged.redb").to_string_lossy().into_owned();
        let stores: Vec<String> = ks.iter().map(|k| self.store(*k)).collect();
        let mut args = vec!["--json", "merge", "--plan", &self.plan, "--out", &merged];
        args.extend(stores.iter().map(String::as_str));
        let (code, out, err) = util::run(&args);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits (at most 30 s) for the coordinator to end: its exit code and stderr.
    fn end(mut self) -> (Option<i32>, String) {
        let start = Instant::now();
        let code = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code();
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (code, err)
    }
}

/// Starts `plan --hold-snapshot` of `shards` shards into `dir` (its stdout to `stdout`) and
/// waits, at most 60 s, for its plan file: the coordinator and the plan.
pub(crate) fn hold(
    contract: &str,
    source: &str,
    shards: u32,
    dir: &Path,
    stdout: Stdio,
) -> (Child, Value) {
    let mut child = Command::new(util::bin())
        .args([
            "--json",
            "plan",
            "--contract",
            contract,
            "--source",
            source,
            "--shards",
            &shards.to_string(),
            "--out",
            &dir.to_string_lossy(),
            "--hold-snapshot",
            "--hold-timeout-seconds",
            "300",
        ])
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let plan_path = dir.join("plan.json");
    let start = Instant::now();
    while !plan_path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no plan after 60 s"
        );
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("plan exited {status}: {err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let plan = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    (child, plan)
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Regression: `merge` wrote `DIR/release` whatever its outcome, so a merge after a shard that
/// had not run (Slurm's `afterany`, a CI matrix's `if: always()`) released the snapshot and
/// that shard's retry could never join it. Now that merge is `unknown`, names the shard to
/// scan again and leaves the snapshot held (SIGHUP does not end it either); the shard then
/// scans in the held snapshot, and the second merge is verified with the root of one scan of
/// that snapshot, and releases it.
#[test]
fn a_merge_that_is_not_verified_keeps_the_snapshot_for_the_shards_retry() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "hold_retry",
        "CREATE TABLE $T (id bigint PRIMARY KEY); \
         INSERT INTO $T SELECT g FROM generate_series(1, 200000) g;",
    );
    let env = Env::new();
    let source = env.source("t", &t.name, "id", json!({}));
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 5000}));
    let mut c = Coordinator::start(&env, &contract, &source, 3, "plan");
    // Writes the snapshot must not see.
    pg.exec(&format!(
        "INSERT INTO {0} SELECT g FROM generate_series(200001, 210000) g; \
         DELETE FROM {0} WHERE id % 100 = 0;",
        t.name
    ));
    for k in [0, 2] {
        let (code, _, err) = c.scan(k);
        assert_eq!(code, 0, "shard {k}: {err}");
    }
    // Shard 1 never ran: the merge is not verified, and says what to retry.
    let (code, m, err) = c.merge(&[0, 2]);
    assert_eq!(code, 3, "{err}{m}");
    assert_eq!(m["receipt"]["coverage_status"], "unknown");
    assert_eq!(m["snapshot"]["released"], false, "{m}");
    assert_eq!(m["snapshot"]["retry_shards"], json!([1]), "{m}");
    assert!(!c.dir.join("release").exists());
    // The same in words.
    let merged = c.dir.join("merged.redb").to_string_lossy().into_owned();
    let (code, _, err) = util::run(&[
        "merge",
        "--plan",
        &c.plan,
        "--out",
        &merged,
        &c.store(0),
        &c.store(2),
    ]);
    assert_eq!(code, 3);
    assert!(
        err.contains("stays held") && err.contains("shard 1 has no run"),
        "{err}"
    );
    assert!(err.contains("plan --release"), "{err}");
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        c.running(),
        "the coordinator ended after a merge that is not verified"
    );
    c.signal("HUP");
    std::thread::sleep(Duration::from_millis(600));
    assert!(c.running(), "SIGHUP ended the coordinator");

    // The retry scans in the held snapshot, and the merge is the single scan's.
    let (code, r, err) = c.scan(1);
    assert_eq!(code, 0, "shard 1: {err}");
    assert_eq!(r["snapshot_id"], c.snapshot.as_str());
    // One scan of the held snapshot, while it is held.
    let pinned = env.contract(
        "pinned.json",
        &json!({"source": t.name, "page_size": 5000, "snapshot_id": c.snapshot}),
    );
    let (code, single, err) = env.scan(&pinned, &source);
    assert_eq!(code, 0, "{err}");
    assert_eq!(single["unique_ids_observed"], 200_000);
    let (code, m, err) = c.merge(&[0, 1, 2]);
    assert_eq!(code, 0, "{err}{m}");
    assert_eq!(m["snapshot"]["released"], true, "{m}");
    for key in [
        "merkle_root",
        "unique_ids_observed",
        "snapshot_id",
        "query_digest",
    ] {
        assert_eq!(m["receipt"][key], single[key], "{key}");
    }
    assert_eq!(m["receipt"]["conclusion_scope"], "all_records_in_snapshot");
    let (code, err) = c.end();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("SIGHUP ignored"), "{err}");
    assert!(
        err.contains("released snapshot") && err.contains("a verified merge"),
        "{err}"
    );
}

/// `plan --release DIR` releases the snapshot without a merge, and SIGTERM does as Ctrl-C;
/// a shard that begins after either cannot import the snapshot. `plan --release` of a plan
/// that holds nothing is refused.
#[test]
fn plan_release_and_sigterm_release_the_snapshot() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "hold_release",
        "CREATE TABLE $T (id bigint PRIMARY KEY); \
         INSERT INTO $T SELECT g FROM generate_series(1, 1000) g;",
    );
    let env = Env::new();
    let source = env.source("t", &t.name, "id", json!({}));
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 500}));

    let c = Coordinator::start(&env, &contract, &source, 2, "released");
    let (code, out, err) = env.json(&["plan", "--release", &c.dir.to_string_lossy()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["snapshot_id"], c.snapshot.as_str());
    let plan = c.plan.clone();
    let store = c.store(0);
    let (code, err) = c.end();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("an explicit release"), "{err}");
    let (code, out, err) = util::run(&[
        "--json", "--store", &store, "scan", "--plan", &plan, "--shard", "0",
    ]);
    assert_ne!(code, 0, "a shard imported a released snapshot: {out}{err}");

    let c = Coordinator::start(&env, &contract, &source, 2, "terminated");
    c.signal("TERM");
    let (code, err) = c.end();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("released snapshot") && err.contains("SIGTERM"),
        "{err}"
    );

    // A plan that holds no snapshot has nothing to release.
    let dir = env.dir.path().join("unheld");
    let (code, _, err) = env.json(&[
        "plan",
        "--contract",
        &contract,
        "--source",
        &source,
        "--shards",
        "2",
        "--out",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = env.json(&["plan", "--release", &dir.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no snapshot"), "{err}");
}

/// A role (made for the test, dropped after it) whose sessions end after 2 s idle in a
/// transaction.
struct IdleRole<'a> {
    pg: &'a Pg,
    name: String,
}

impl Drop for IdleRole<'_> {
    fn drop(&mut self) {
        let n = &self.name;
        self.pg.exec(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{n}'; \
             DROP OWNED BY {n}; DROP ROLE IF EXISTS {n};"
        ));
    }
}

/// Regression: the coordinator ran a statement in its transaction every 15 s, so a server
/// with `idle_in_transaction_session_timeout` below that (here 2 s, on the role) ended the
/// held transaction and every shard that began later failed. It reads the timeout and pings
/// at a third of it: after 8 s idle the shards still import the snapshot and merge verified.
#[test]
fn a_short_idle_in_transaction_timeout_does_not_end_the_held_snapshot() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "hold_idle",
        "CREATE TABLE $T (id bigint PRIMARY KEY); \
         INSERT INTO $T SELECT g FROM generate_series(1, 5000) g;",
    );
    let role = IdleRole {
        pg: &pg,
        name: format!("sl_idle_{}", std::process::id()),
    };
    pg.exec(&format!(
        "DROP ROLE IF EXISTS {0}; CREATE ROLE {0} LOGIN; \
         ALTER ROLE {0} SET idle_in_transaction_session_timeout = '2s'; \
         GRANT SELECT ON {1} TO {0};",
        role.name, t.name
    ));
    let env = Env::new();
    let cfg = json!({
        "dsn": format!("host=127.0.0.1 port=5432 user={} dbname=test", role.name),
        "table": t.name,
        "key": "id",
    });
    let source = format!(
        "postgres:{}",
        util::write(env.dir.path(), "idle.json", &cfg.to_string())
    );
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 1000}));
    let mut c = Coordinator::start(&env, &contract, &source, 2, "idle");
    std::thread::sleep(Duration::from_secs(8));
    assert!(c.running(), "the coordinator lost its snapshot");
    for k in [0, 1] {
        let (code, r, err) = c.scan(k);
        assert_eq!(code, 0, "shard {k}: {err}");
        assert_eq!(r["snapshot_id"], c.snapshot.as_str());
    }
    let (code, m, err) = c.merge(&[0, 1]);
    assert_eq!(code, 0, "{err}{m}");
    assert_eq!(m["receipt"]["unique_ids_observed"], 5000);
    let (code, err) = c.end();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("idle_in_transaction_session_timeout is 2000 ms"),
        "{err}"
    );
    drop(role);
}
