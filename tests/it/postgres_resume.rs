//! The PostgreSQL source when things go wrong, against the real server: a SIGKILL in the
//! middle of a scan followed by `resume` under each expired-cursor policy, a snapshot held
//! by another session (and released), the DSN password canary, a table without SELECT
//! privilege, and `sslmode=require` through rustls.
//!
//! The failure the kill tests guard against: an exported snapshot dies with its
//! transaction, so a resumed scan cannot be in the old snapshot. If the source quietly
//! continued in a new one, the receipt would present a spliced scan (rows seen at two
//! different instants) as a scan of one snapshot. Each policy must tell the truth instead:
//! `high_water` continues and claims only `all_records_live`, `restart` begins a linked new
//! run pinned to its own snapshot, `block` stops `unknown` with `expired_cursor`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::process::Command;

use serde_json::{json, Value};

use crate::postgres::{strings, wait_for_page, Env, Pg, DSN};
use crate::util;

/// Scans `table` slowly, kills the binary with SIGKILL after page 5, then runs `writes`.
fn killed_scan(pg: &Pg, env: &Env, table: &str, key: &str, contract: &Value, writes: &str) {
    let source = env.source("pg.json", table, key, json!({"page_delay_ms": 25}));
    let contract = env.contract("c.json", contract);
    let (mut child, rx) = env.spawn_scan(&contract, &source);
    wait_for_page(&rx, 5);
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "the scan finished before the kill");
    let (code, r, _) = env.json(&["receipt", "run-1"]);
    assert_eq!(code, 3, "a killed run is unfinished: {r}");
    assert!(r["pages_observed"].as_u64().unwrap() >= 5);
    pg.exec(&writes.replace("$T", table));
}

#[test]
fn after_sigkill_high_water_continues_live_with_every_row_once() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "kill_hw",
        "CREATE TABLE $T (id bigint PRIMARY KEY);
         INSERT INTO $T SELECT generate_series(1, 400);",
    );
    let env = Env::new();
    let contract = json!({"source": t.name, "page_size": 10, "on_expired_cursor": "high_water"});
    killed_scan(
        &pg,
        &env,
        &t.name,
        "id",
        &contract,
        "DELETE FROM $T WHERE id = 390; INSERT INTO $T SELECT generate_series(1000, 1004);",
    );
    let (code, r, err) = env.json(&["resume", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["run_id"], "run-1");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(
        r["conclusion_scope"], "all_records_live",
        "a scan spliced across two snapshots must not claim one"
    );
    assert_eq!(r["duplicate_ids"], 0);
    assert_eq!(r["records_observed"], 404, "every row exactly once");
    assert_eq!(r["unique_ids_observed"], 404);
    let now = pg.column(&format!("SELECT id FROM {}", t.name));
    assert_eq!(env.export("run-1"), now.into_iter().collect());
}

#[test]
fn after_sigkill_high_water_continues_after_a_text_key() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "kill_hw_text",
        "CREATE TABLE $T (code text PRIMARY KEY);
         INSERT INTO $T SELECT 'c-' || lpad(g::text, 4, '0') || ' ü' FROM generate_series(1, 300) g;",
    );
    let env = Env::new();
    let contract = json!({"source": t.name, "page_size": 10, "id_codec": "string",
                          "on_expired_cursor": "high_water"});
    killed_scan(&pg, &env, &t.name, "code", &contract, "SELECT 1");
    let (code, r, err) = env.json(&["resume", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["conclusion_scope"], "all_records_live");
    assert_eq!(r["records_observed"], 300);
    assert_eq!(r["unique_ids_observed"], 300);
    let all = pg.column(&format!("SELECT code FROM {}", t.name));
    assert_eq!(env.export("run-1"), all.into_iter().collect());
}

#[test]
fn after_sigkill_restart_begins_a_linked_run_in_its_own_snapshot() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "kill_restart",
        "CREATE TABLE $T (id int PRIMARY KEY);
         INSERT INTO $T SELECT generate_series(1, 400);",
    );
    let env = Env::new();
    let contract = json!({"source": t.name, "page_size": 10, "on_expired_cursor": "restart"});
    killed_scan(
        &pg,
        &env,
        &t.name,
        "id",
        &contract,
        "DELETE FROM $T WHERE id <= 20;",
    );
    let (_, old, _) = env.json(&["receipt", "run-1"]);
    let (code, r, err) = env.json(&["resume", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["run_id"], "run-2");
    assert_eq!(r["restarted_from"], "run-1");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_ne!(r["snapshot_id"], old["snapshot_id"]);
    assert_eq!(
        r["unique_ids_observed"], 380,
        "the new snapshot, not the old rows"
    );
    assert_eq!(env.export("run-2"), strings(21..=400));
    let (code, old, _) = env.json(&["receipt", "run-1"]);
    assert_eq!(code, 3);
    assert_eq!(old["superseded_by"], "run-2");
    assert_eq!(old["violations"][0]["kind"], "expired_cursor");
}

#[test]
fn after_sigkill_block_stops_unknown_with_expired_cursor() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "kill_block",
        "CREATE TABLE $T (id int PRIMARY KEY);
         INSERT INTO $T SELECT generate_series(1, 400);",
    );
    let env = Env::new();
    let contract = json!({"source": t.name, "page_size": 10, "on_expired_cursor": "block"});
    killed_scan(&pg, &env, &t.name, "id", &contract, "SELECT 1");
    let (code, r, err) = env.json(&["resume", "run-1"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["coverage_status"], "unknown");
    assert_eq!(r["conclusion_scope"], "none");
    let kinds: Vec<&Value> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["kind"])
        .collect();
    assert_eq!(kinds, [&json!("expired_cursor")]);
}

#[test]
fn a_snapshot_held_by_another_session_pins_the_scan_until_released() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "held",
        "CREATE TABLE $T (id bigint PRIMARY KEY);
         INSERT INTO $T SELECT generate_series(1, 100);",
    );
    let holder = Pg::connect(DSN).unwrap();
    holder.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    let exported = holder.column("SELECT pg_export_snapshot()").remove(0);
    pg.exec(&format!(
        "DELETE FROM {t} WHERE id <= 10; INSERT INTO {t} SELECT generate_series(101, 150);",
        t = t.name
    ));
    let env = Env::new();
    let source = env.source("pg.json", &t.name, "id", json!({}));
    let contract = env.contract(
        "c.json",
        &json!({"source": t.name, "page_size": 30, "snapshot_id": exported}),
    );
    let (code, r, err) = env.scan(&contract, &source);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["snapshot_id"], json!(exported));
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(
        env.export("run-1"),
        strings(1..=100),
        "the table as it was at export"
    );
    holder.exec("COMMIT");
    let (code, r, _) = env.scan(&contract, &source);
    assert_eq!(code, 3, "a released snapshot cannot be read: {r}");
    assert_eq!(r["violations"][0]["kind"], "expired_cursor");
}

#[test]
fn the_dsn_password_never_reaches_output_or_the_store() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "canary",
        "CREATE TABLE $T (id bigint PRIMARY KEY); INSERT INTO $T SELECT generate_series(1, 50);",
    );
    let canary = format!("canary-{}-Zq9xW", std::process::id());
    let env = Env::new();
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 20}));
    let cfg = |name: &str| {
        util::write(
            env.dir.path(),
            name,
            &json!({"dsn_env": "SL_PG_DSN", "table": t.name, "key": "id"}).to_string(),
        )
    };
    let run = |dsn: &str, args: &[&str]| -> (i32, String) {
        let out = Command::new(util::bin())
            .env("SL_PG_DSN", dsn)
            .args(["--store", &env.store])
            .args(args)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains(&canary), "the password leaked: {all}");
        (out.status.code().unwrap(), all)
    };
    // Trust authentication ignores the password, so the scan succeeds with it in the DSN.
    let good = format!("{DSN} password={canary}");
    let source = format!("postgres:{}", cfg("ok.json"));
    let (code, out) = run(
        &good,
        &[
            "--json",
            "scan",
            "--contract",
            &contract,
            "--source",
            &source,
            "--progress",
        ],
    );
    assert_eq!(code, 0, "{out}");
    run(&good, &["--json", "runs"]);
    run(&good, &["receipt", "run-1"]);
    // A server that is not there: the connection error does not quote the DSN.
    let closed = format!("host=127.0.0.1 port=1 user=postgres dbname=test password={canary}");
    let (code, out) = run(
        &closed,
        &["scan", "--contract", &contract, "--source", &source],
    );
    assert_eq!(code, 3, "{out}");
    // A malformed DSN: the parse error does not quote it either.
    let (code, out) = run(
        &format!("{good} port="),
        &["scan", "--contract", &contract, "--source", &source],
    );
    assert_eq!(code, 2, "{out}");
    let (code, out) = run(
        &format!("postgresql://u:{canary}@127.0.0.1:5432/test?bogus=1"),
        &["scan", "--contract", &contract, "--source", &source],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unknown option `bogus`"), "{out}");
    // Nor does the store file.
    let bytes = std::fs::read(&env.store).unwrap();
    assert!(
        !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
        "the password is in the store"
    );
}

#[test]
fn a_table_without_select_privilege_is_access_denied() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "noread",
        "CREATE TABLE $T (id bigint PRIMARY KEY); INSERT INTO $T VALUES (1);",
    );
    let role = format!("sl_pg_noread_{}", std::process::id());
    pg.exec(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
    ));
    struct DropRole<'a>(&'a Pg, String);
    impl Drop for DropRole<'_> {
        fn drop(&mut self) {
            self.0.exec(&format!("DROP ROLE IF EXISTS {}", self.1));
        }
    }
    let _role = DropRole(&pg, role.clone());
    let env = Env::new();
    let source = format!(
        "postgres:{}",
        util::write(
            env.dir.path(),
            "pg.json",
            &json!({"dsn": format!("host=127.0.0.1 port=5432 user={role} dbname=test"),
                    "table": t.name, "key": "id"})
            .to_string(),
        )
    );
    let contract = env.contract("c.json", &json!({"source": t.name}));
    let (code, r, err) = env.scan(&contract, &source);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["coverage_status"], "unknown");
    assert_eq!(r["violations"][0]["kind"], "access_denied");
    drop(t);
}

#[test]
fn sslmode_require_encrypts_through_rustls() {
    let Some(pg) = Pg::server() else { return };
    if pg.column("SHOW ssl") != ["on"] {
        assert!(
            std::env::var_os("CI").is_none(),
            "the CI server must have ssl = on for this test"
        );
        eprintln!("SKIPPED: the PostgreSQL at 127.0.0.1:5432 has ssl = off");
        return;
    }
    let t = pg.table(
        "ssl",
        "CREATE TABLE $T (id bigint PRIMARY KEY); INSERT INTO $T SELECT generate_series(1, 30);",
    );
    let env = Env::new();
    // The label asks the server whether this very session is encrypted.
    let ssl_label = json!({"on_tls": "(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())"});
    let source = |name: &str, dsn: &str, extra: Value| {
        let mut cfg = json!({"dsn": dsn, "table": t.name, "key": "id", "labels": ssl_label});
        for (k, v) in extra.as_object().unwrap() {
            cfg[k] = v.clone();
        }
        format!(
            "postgres:{}",
            util::write(env.dir.path(), &format!("src-{name}"), &cfg.to_string())
        )
    };
    let contract = env.contract("c.json", &json!({"source": t.name}));
    let (code, r, err) = env.scan(
        &contract,
        &source("a.json", &format!("{DSN} sslmode=require"), json!({})),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["labels"]["on_tls"]["count"], 30, "{r}");
    let (code, r, _) = env.scan(
        &contract,
        &source("b.json", &format!("{DSN} sslmode=disable"), json!({})),
    );
    assert_eq!(code, 0);
    assert!(r["labels"].get("on_tls").is_none(), "{r}");
    // With roots that did not sign the server's certificate, the handshake is refused.
    let bundle = "/etc/ssl/certs/ca-certificates.crt";
    if std::path::Path::new(bundle).exists() {
        let (code, _, err) = env.scan(
            &contract,
            &source(
                "c.json",
                &format!("{DSN} sslmode=require"),
                json!({"sslrootcert": bundle}),
            ),
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("TLS handshake"), "{err}");
    }
}

#[test]
fn a_connection_killed_mid_scan_loses_the_snapshot_and_the_policy_decides() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "terminated",
        "CREATE TABLE $T (id bigint PRIMARY KEY); INSERT INTO $T SELECT generate_series(1, 300);",
    );
    let app = format!("sl_pg_term_{}", std::process::id());
    let env = Env::new();
    let source = format!(
        "postgres:{}",
        util::write(
            env.dir.path(),
            "src-term.json",
            &json!({"dsn": format!("{DSN} application_name={app}"), "table": t.name,
                    "key": "id", "page_delay_ms": 40})
            .to_string(),
        )
    );
    let contract = env.contract(
        "c.json",
        &json!({"source": t.name, "page_size": 10, "on_expired_cursor": "high_water"}),
    );
    let (mut child, rx) = env.spawn_scan(&contract, &source);
    wait_for_page(&rx, 3);
    // The server ends the scan's session: its transaction, and the exported snapshot, die.
    let ended = pg.column(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{app}'"
    ));
    assert_eq!(ended, ["t"], "the scan's session was not found");
    assert!(child.wait().unwrap().success());
    let (code, r, err) = env.json(&["receipt", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["conclusion_scope"], "all_records_live", "{r}");
    assert_eq!(r["records_observed"], 300);
    assert_eq!(r["unique_ids_observed"], 300);
}

#[test]
fn a_statement_timeout_is_a_failed_page_not_a_verdict() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "stmt_timeout",
        "CREATE TABLE $T (id bigint PRIMARY KEY); INSERT INTO $T SELECT generate_series(1, 5);",
    );
    let env = Env::new();
    let source = format!(
        "postgres:{}",
        util::write(
            env.dir.path(),
            "src-slow.json",
            &json!({"dsn": format!("{DSN} options='-c statement_timeout=50'"), "table": t.name,
                    "key": "id", "labels": {"slow": "pg_sleep(0.2) IS NOT NULL"}})
            .to_string(),
        )
    );
    let contract = env.contract(
        "c.json",
        &json!({"source": t.name, "limits": {"retries": 1}}),
    );
    let (code, r, err) = env.scan(&contract, &source);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["violations"][0]["kind"], "page_failed", "{r}");
}
