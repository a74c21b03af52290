//! SQLite against PostgreSQL with the one-command `migration verify`: an inline
//! `sqlite:PATH?table=...` side and an inline `postgres://...?table=...` side, no config file,
//! the content columns given once on the command line (`--content`, with a column the
//! migration renamed). Without PostgreSQL the test says SKIPPED loudly, and fails when CI is
//! set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::postgres::{Pg, Table};
use crate::util;

const ROWS: u64 = 2_000;

/// The SQLite side: `DECIMAL(10,2)` amounts (stored as REAL or TEXT, as SQLite keeps them),
/// zone-less `DATETIME` text, an `email` column; row 42's amount is the text `1.50`.
fn sqlite_db(dir: &std::path::Path) -> String {
    let path = dir.join("orders.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(&format!(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount DECIMAL(10,2), email TEXT, ts DATETIME);
         WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {ROWS})
         INSERT INTO orders SELECT n, (n % 1000) / 100.0, 'u' || n || '@example.com',
           datetime('2026-01-01 00:00:00', '+' || n || ' seconds') FROM s;
         UPDATE orders SET amount = '1.50' WHERE id = 42;"
    ))
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// The PostgreSQL side: `NUMERIC`, `TIMESTAMPTZ`, and `email` renamed `mail`; `missing` rows
/// left out.
fn pg_table<'a>(pg: &'a Pg, tag: &str, missing: &[u64]) -> Table<'a> {
    let skip = if missing.is_empty() {
        String::new()
    } else {
        format!(
            " WHERE s NOT IN ({})",
            missing
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    pg.table(
        &format!("sqlite_{tag}"),
        &format!(
            "CREATE TABLE $T (id BIGINT PRIMARY KEY, amount NUMERIC, mail TEXT, ts TIMESTAMPTZ); \
             INSERT INTO $T SELECT s, (s % 1000)::numeric / 100, 'u' || s || '@example.com', \
             TIMESTAMPTZ '2026-01-01 00:00:00+00' + s * INTERVAL '1 second' \
             FROM generate_series(1, {ROWS}) s{skip}; \
             UPDATE $T SET amount = 1.5000 WHERE id = 42"
        ),
    )
}

/// `scanledger --store DIR/STORE --json migration verify --from SQLITE --to PG ARGS`.
fn verify(
    dir: &std::path::Path,
    store: &str,
    from: &str,
    to: &str,
    args: &[&str],
) -> (i32, Value, String) {
    let store = dir.join(store).to_string_lossy().into_owned();
    let mut all = vec![
        "--store",
        &store,
        "--json",
        "migration",
        "verify",
        "--from",
        from,
        "--to",
        to,
    ];
    all.extend_from_slice(args);
    let (code, out, err) = util::run(&all);
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

fn sides(db: &str, table: &Table<'_>) -> (String, String) {
    (
        format!("sqlite:{db}?table=orders&key=id"),
        format!(
            "postgres://postgres@127.0.0.1:5432/test?table={}&key=id",
            table.name
        ),
    )
}

/// One row missing in PostgreSQL: exit 4, naming that key; the content of the other rows
/// agrees across the rename, the decimal representations and the time zones.
#[test]
fn sqlite_to_postgres_names_the_one_missing_row() {
    let Some(pg) = Pg::server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let t = pg_table(&pg, "miss", &[777]);
    let (from, to) = sides(&db, &t);
    let (code, v, err) = verify(
        dir.path(),
        "m.redb",
        &from,
        &to,
        &["--content", "amount,email=mail,ts"],
    );
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["verdict"], "failed", "{v}");
    assert_eq!(v["missing_count"], 1, "{v}");
    assert_eq!(v["missing_ranges"], json!(["777..777"]), "{v}");
    assert_eq!(v["extra_count"], 0, "{v}");
    assert_eq!(v["from"]["unique_ids_observed"], ROWS);
    assert_eq!(
        v["from"]["source"], "sqlite:orders",
        "the default contract's name"
    );
    assert_eq!(v["to"]["unique_ids_observed"], ROWS - 1);
}

/// Equal tables: exit 0 with content compared; each run records the columns it hashed in its
/// spec; sides whose columns cannot be compared are refused before a scan, naming both lists;
/// and a password in a spec is refused without being shown.
#[test]
fn sqlite_and_postgres_with_equal_rows_verify() {
    let Some(pg) = Pg::server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let t = pg_table(&pg, "eq", &[]);
    let (from, to) = sides(&db, &t);
    let (code, v, err) = verify(
        dir.path(),
        "e.redb",
        &from,
        &to,
        &["--content", "amount,email=mail,ts"],
    );
    assert_eq!(code, 0, "{err} {v}");
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["changed_count"], 0, "{v}");
    assert!(v["from"]["content_root"].is_string(), "{v}");
    assert_eq!(v["from"]["content_root"], v["to"]["content_root"]);
    // The runs recorded their specs with the columns they hashed.
    let stored = std::fs::read(dir.path().join("e.to.redb")).unwrap();
    let needle = format!("table={}&key=id&content=amount,mail,ts", t.name);
    assert!(
        stored.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "the target's run records its content columns"
    );
    // The same columns in another order on each side: refused, naming both lists.
    let from_c = format!("{from}&content=amount,email");
    let to_c = format!("{to}&content=email,amount");
    let (code, _, err) = verify(dir.path(), "o.redb", &from_c, &to_c, &["--content"]);
    assert_eq!(code, 2, "{err}");
    let e: Value = serde_json::from_str(&err).unwrap();
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"hashes ["amount", "email"]"#)
            && message.contains(r#"hashes ["email", "amount"]"#),
        "{message}"
    );
    assert!(!dir.path().join("o.redb").exists(), "nothing is scanned");
    // A password in a spec never reaches the output.
    let secret = to.replace("postgres@", "postgres:hunter2canary@");
    let (code, _, err) = verify(dir.path(), "p.redb", &from, &secret, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("PGPASSWORD") && !err.contains("hunter2canary"),
        "{err}"
    );
    let (code, out, err) = util::run(&[
        "--store",
        &dir.path().join("s.redb").to_string_lossy(),
        "scan",
        "--source",
        &secret,
    ]);
    assert_ne!(code, 0);
    assert!(!format!("{out}{err}").contains("hunter2canary"), "{err}");
}

/// Two rows changed in PostgreSQL: `--reread` reads their partition again from both sides
/// (the SQLite side by key ranges too) and names exactly those rows.
#[test]
fn a_reread_of_both_sides_names_the_changed_rows() {
    let Some(pg) = Pg::server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let t = pg_table(&pg, "chg", &[]);
    pg.exec(&format!(
        "UPDATE {} SET amount = amount + 1 WHERE id IN (12, 1500)",
        t.name
    ));
    let (from, to) = sides(&db, &t);
    let (code, v, err) = verify(
        dir.path(),
        "c.redb",
        &from,
        &to,
        &["--content", "amount,email=mail,ts", "--reread"],
    );
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["missing_count"], 0, "{v}");
    assert_eq!(v["changed_count"], 2, "{v}");
    assert_eq!(v["changed_ids"], json!([12, 1500]), "{v}");
}

/// A SIGKILL in the middle of the one-command form from SQLite, then the same command again:
/// both sides continue (the SQLite read transaction died with the process, so its run restarts
/// from the first key, linked to the killed one) and the verdict, keys and roots are those of
/// the uninterrupted command.
#[test]
fn a_sigkill_then_the_same_command_from_sqlite_gives_the_uninterrupted_verdict() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let Some(pg) = Pg::server() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_db(dir.path());
    let t = pg_table(&pg, "kill", &[777]);
    pg.exec(&format!("UPDATE {} SET mail = 'x' WHERE id = 1999", t.name));
    let (from, to) = sides(&db, &t);
    let content = ["--content", "amount,email=mail,ts", "--all"];
    let (code, whole, err) = verify(dir.path(), "w.redb", &from, &to, &content);
    assert_eq!(code, 4, "{err} {whole}");
    assert_eq!(whole["changed_ids"], json!([1999]), "{whole}");
    // Slow pages, so the kill lands in the middle of both scans.
    let slow = |s: &str| format!("{s}&page_delay_ms=100");
    let (from, to) = (slow(&from), slow(&to));
    let store = dir.path().join("k.redb").to_string_lossy().into_owned();
    let contract = util::write(
        dir.path(),
        "c.json",
        r#"{"source": "orders", "page_size": 100, "on_expired_cursor": "restart"}"#,
    );
    let mut args = vec![
        "--store",
        &store,
        "--json",
        "migration",
        "verify",
        "--from",
        &from,
        "--to",
        &to,
        "--contract",
        &contract,
    ];
    args.extend_from_slice(&content);
    let mut child = Command::new(util::bin())
        .args(&args)
        .arg("--ack-pages")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let acked = stderr
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.starts_with("ack run-1 page "))
        .take(3)
        .count();
    assert_eq!(acked, 3, "the scans acknowledged pages");
    child.kill().unwrap(); // SIGKILL
    assert!(
        !child.wait().unwrap().success(),
        "the command ended before the kill"
    );
    for s in ["k.redb", "k.to.redb"] {
        let (_, runs, _) = util::run(&[
            "--store",
            &dir.path().join(s).to_string_lossy(),
            "--json",
            "runs",
        ]);
        let runs: Value = serde_json::from_str(&runs).unwrap();
        assert_eq!(runs["runs"][0]["state"], "interrupted", "{s}: {runs}");
    }
    let (code, again, err) = util::run(&args);
    let again: Value = serde_json::from_str(&again).unwrap_or(Value::Null);
    assert_eq!(code, 4, "{err} {again}");
    let essence = |v: &Value| {
        json!([
            v["verdict"],
            v["missing_ranges"],
            v["extra_count"],
            v["changed_ids"],
            v["from"]["unique_ids_observed"],
            v["from"]["merkle_root"],
            v["from"]["content_root"],
            v["to"]["unique_ids_observed"],
            v["to"]["merkle_root"],
            v["to"]["content_root"],
        ])
    };
    assert_eq!(essence(&again), essence(&whole));
    assert_eq!(again["missing_ranges"], json!(["777..777"]), "{again}");
    // The SQLite side's killed run was continued as a restart, not left behind.
    let (_, runs, _) = util::run(&["--store", &store, "--json", "runs"]);
    let runs: Value = serde_json::from_str(&runs).unwrap();
    let states: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["finished", "superseded"], "{runs}");
}
