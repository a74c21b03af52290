//! The PostgreSQL source against the real server (127.0.0.1:5432, trust auth, database
//! `test`), through the real binary: verified scans, labels, `count`, text and uuid keys,
//! content digests, a snapshot that stays pinned while another connection writes, and the
//! errors that name the table and the key. Resume after SIGKILL, the DSN canary, access
//! denied and TLS are in `postgres_resume`.
//!
//! Every table is named `sl_pg_<test>_<pid>` and dropped by a guard, so the suite can run
//! beside itself and beside other suites on the same server. Without a server the tests say
//! "SKIPPED" loudly, and fail when CI is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::util;

/// Where the tests connect (the source configs use the same).
pub(crate) const DSN: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";

/// A test's own connection, for setting up tables and writing beside a scan.
pub(crate) struct Pg {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Pg {
    /// Connects, or says why the test cannot run: SKIPPED on a laptop, a failure in CI.
    pub(crate) fn server() -> Option<Pg> {
        match Pg::connect(DSN) {
            Ok(pg) => Some(pg),
            Err(e) if std::env::var_os("CI").is_some() => {
                panic!("no PostgreSQL at 127.0.0.1:5432, and CI is set: {e}")
            }
            Err(e) => {
                eprintln!("SKIPPED: no PostgreSQL at 127.0.0.1:5432 ({e})");
                None
            }
        }
    }

    pub(crate) fn connect(dsn: &str) -> Result<Pg, tokio_postgres::Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (client, connection) = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(5),
                tokio_postgres::connect(dsn, tokio_postgres::NoTls),
            )
            .await
            .expect("connecting took more than 5 s")
        })?;
        // Test-only: the connection task lives as long as this runtime.
        rt.spawn(connection);
        Ok(Pg { rt, client })
    }

    pub(crate) fn exec(&self, sql: &str) {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    /// The first column of every row, as text.
    pub(crate) fn column(&self, sql: &str) -> Vec<String> {
        let rows = self
            .rt
            .block_on(self.client.simple_query(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        rows.iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    /// A table for one test, dropped when the guard goes.
    pub(crate) fn table<'a>(&'a self, what: &str, columns_and_rows: &str) -> Table<'a> {
        let name = format!("sl_pg_{what}_{}", std::process::id());
        self.exec(&format!(
            "DROP TABLE IF EXISTS {name}; {}",
            columns_and_rows.replace("$T", &name)
        ));
        Table { pg: self, name }
    }
}

/// A test's table; dropped on the way out, also when the test fails.
pub(crate) struct Table<'a> {
    pg: &'a Pg,
    pub(crate) name: String,
}

impl Drop for Table<'_> {
    fn drop(&mut self) {
        let _ = self.pg.rt.block_on(
            self.pg
                .client
                .batch_execute(&format!("DROP TABLE IF EXISTS {}", self.name)),
        );
    }
}

/// A store and a folder for one test.
pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: String,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        Env { dir, store }
    }

    /// Writes a source config for `table` (with `extra` keys) and returns `postgres:PATH`.
    pub(crate) fn source(&self, name: &str, table: &str, key: &str, extra: Value) -> String {
        let mut cfg = json!({"dsn": DSN, "table": table, "key": key});
        for (k, v) in extra.as_object().unwrap() {
            cfg[k] = v.clone();
        }
        format!(
            "postgres:{}",
            util::write(self.dir.path(), &format!("src-{name}"), &cfg.to_string())
        )
    }

    pub(crate) fn contract(&self, name: &str, contract: &Value) -> String {
        util::write(self.dir.path(), name, &contract.to_string())
    }

    /// Runs the binary with --json on the store; (exit code, stdout JSON or Null, stderr).
    pub(crate) fn json(&self, args: &[&str]) -> (i32, Value, String) {
        let mut all = vec!["--store", self.store.as_str(), "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = util::run(&all);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }

    pub(crate) fn scan(&self, contract: &str, source: &str) -> (i32, Value, String) {
        self.json(&["scan", "--contract", contract, "--source", source])
    }

    /// The run's IDs in original form (`export`).
    /// The run's IDs in their original form (`export --format jsonl`: one JSON value a line,
    /// so text IDs with quotes, tabs or backslashes come back exactly).
    pub(crate) fn export(&self, run: &str) -> BTreeSet<String> {
        let (code, out, err) =
            util::run(&["--store", &self.store, "export", run, "--format", "jsonl"]);
        assert_eq!(code, 0, "export: {err}");
        out.lines()
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(e) => panic!("export line {l:?}: {e}"),
            })
            .collect()
    }

    /// Starts a scan that prints `ack run-N page P` per checkpoint; the lines come through
    /// the receiver.
    pub(crate) fn spawn_scan(
        &self,
        contract: &str,
        source: &str,
    ) -> (Child, mpsc::Receiver<String>) {
        let mut child = Command::new(util::bin())
            .args([
                "--store",
                &self.store,
                "scan",
                "--contract",
                contract,
                "--source",
                source,
                "--ack-pages",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }
}

/// Waits for the line `ack run-1 page N` (or later), at most 60 s.
pub(crate) fn wait_for_page(rx: &mpsc::Receiver<String>, page: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no ack of page {page} within 60 s"));
        if let Some(n) = line.strip_prefix("ack run-1 page ") {
            if n.trim().parse::<u32>().unwrap() >= page {
                return;
            }
        }
    }
}

pub(crate) fn strings(v: impl IntoIterator<Item = impl ToString>) -> BTreeSet<String> {
    v.into_iter().map(|x| x.to_string()).collect()
}

#[test]
fn a_table_is_scanned_verified_in_its_snapshot_with_labels() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "verified",
        "CREATE TABLE $T (id bigint PRIMARY KEY, schema_version int, email text);
         INSERT INTO $T SELECT g, CASE WHEN g % 25 = 0 THEN 2 ELSE 3 END, 'u' || g || '@x'
           FROM generate_series(1, 2500) g;",
    );
    let env = Env::new();
    let source = env.source(
        "pg.json",
        &t.name,
        "id",
        json!({"labels": {"needs_v3": "schema_version <> 3", "never": "email IS NULL"}}),
    );
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 300}));
    let (code, r, err) = env.scan(&contract, &source);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(r["unique_ids_observed"], 2500);
    assert_eq!(r["records_observed"], 2500);
    assert_eq!(r["pages_observed"], 9, "2,500 rows in pages of 300");
    assert_eq!(r["terminal_cursor_observed"], true);
    // The snapshot is the exported one: ID@server-start.
    let snap = r["snapshot_id"].as_str().unwrap();
    let (id, start) = snap.split_once('@').unwrap();
    assert!(
        id.split('-').count() == 3 && start.parse::<i64>().is_ok(),
        "{snap}"
    );
    // One run says: every row was checked, and these 100 still need migration.
    assert_eq!(r["labels"]["needs_v3"]["count"], 100);
    assert_eq!(r["labels"]["needs_v3"]["ranges"][0], "25..25");
    assert!(r["labels"].get("never").is_none() || r["labels"]["never"]["count"] == 0);
    assert_eq!(env.export("run-1"), strings(1..=2500));
    let (code, _, err) = env.json(&["verify", &{
        let p = env.dir.path().join("r.json");
        std::fs::write(&p, r.to_string()).unwrap();
        p.to_string_lossy().into_owned()
    }]);
    assert_eq!(code, 0, "verify: {err}");

    // `where` narrows the scope; an exact page boundary still ends on a page without a row
    // past it, not on a guess.
    let narrowed = env.source("w.json", &t.name, "id", json!({"where": "id <= 600"}));
    let (code, r, err) = env.scan(&contract, &narrowed);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 600);
    assert_eq!(r["pages_observed"], 2);
}

#[test]
fn the_snapshot_stays_pinned_while_another_connection_writes() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "pinned",
        "CREATE TABLE $T (id integer PRIMARY KEY, v int NOT NULL);
         INSERT INTO $T SELECT g, g % 3 FROM generate_series(1, 300) g;",
    );
    let before = pg.column(&format!("SELECT id FROM {} ORDER BY id", t.name));
    let env = Env::new();
    let source = env.source(
        "pg.json",
        &t.name,
        "id",
        json!({"labels": {"v0": "v = 0"}, "page_delay_ms": 40}),
    );
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 10}));
    let (mut child, rx) = env.spawn_scan(&contract, &source);
    wait_for_page(&rx, 2);
    // Rows after the scan's position are deleted, inserted and updated; a row before it too.
    pg.exec(&format!(
        "DELETE FROM {t} WHERE id BETWEEN 250 AND 259;
         INSERT INTO {t} SELECT g, 0 FROM generate_series(301, 350) g;
         UPDATE {t} SET v = 0 WHERE id BETWEEN 200 AND 220;
         UPDATE {t} SET id = 1000 WHERE id = 3;",
        t = t.name
    ));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the scan ended before the writes: the test proves nothing"
    );
    assert!(child.wait().unwrap().success());
    let (code, r, err) = env.json(&["receipt", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(r["unique_ids_observed"], 300);
    // The result is the table as of the snapshot, labels included.
    assert_eq!(env.export("run-1"), before.into_iter().collect());
    assert_eq!(r["labels"]["v0"]["count"], 100);
    // The receipt names the snapshot; a new scan sees the new table in a new one.
    let (code, now, _) = env.scan(&contract, &source);
    assert_eq!(code, 0);
    assert_ne!(now["snapshot_id"], r["snapshot_id"]);
    assert_eq!(now["unique_ids_observed"], 340);
    assert_eq!(now["labels"]["v0"]["count"], 100 - 3 + 50 + 14);
}

#[test]
fn count_mode_counts_in_one_snapshot() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "count",
        "CREATE TABLE $T (id bigint PRIMARY KEY, active bool);
         INSERT INTO $T SELECT g, g % 4 = 0 FROM generate_series(1, 1234) g;",
    );
    let env = Env::new();
    let contract = env.contract("c.json", &json!({"source": t.name, "mode": "count"}));
    let (code, r, err) = env.scan(&contract, &env.source("a.json", &t.name, "id", json!({})));
    assert_eq!(code, 3, "a server count is unknown coverage: {err}");
    assert_eq!(r["count_total"], 1234);
    assert_eq!(r["pages_observed"], 0);
    let only = env.source("b.json", &t.name, "id", json!({"where": "active"}));
    let (code, r, _) = env.scan(&contract, &only);
    assert_eq!(code, 3);
    assert_eq!(r["count_total"], 308);
}

#[test]
fn text_and_uuid_keys_go_through_the_string_codec() {
    let Some(pg) = Pg::server() else { return };
    let keys = [
        "a",
        "B",
        "b",
        "10",
        "9",
        "with space",
        "ünïcode",
        "emoji 🦀",
        "\"quoted\"",
        "k1:looks",
        "back\\slash",
        "tab\there",
        "z",
        "Z",
        "0",
        "-1",
        "'single'",
        "a.b",
        "a b",
        "ab",
    ];
    let values: Vec<String> = keys
        .iter()
        .map(|k| format!("('{}')", k.replace('\'', "''")))
        .collect();
    let t = pg.table(
        "textkey",
        &format!(
            "CREATE TABLE $T (code varchar(40) PRIMARY KEY);
             INSERT INTO $T VALUES {};",
            values.join(", ")
        ),
    );
    let env = Env::new();
    let contract = env.contract(
        "c.json",
        &json!({"source": t.name, "page_size": 3, "id_codec": "string"}),
    );
    let (code, r, err) = env.scan(&contract, &env.source("t.json", &t.name, "code", json!({})));
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], keys.len());
    assert_eq!(r["duplicate_ids"], 0);
    assert_eq!(env.export("run-1"), strings(keys));

    let u = pg.table(
        "uuidkey",
        "CREATE TABLE $T (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), n int);
         INSERT INTO $T (n) SELECT g FROM generate_series(1, 100) g;",
    );
    let want: BTreeSet<String> = pg
        .column(&format!("SELECT id::text FROM {}", u.name))
        .into_iter()
        .collect();
    let contract = env.contract(
        "u.json",
        &json!({"source": u.name, "page_size": 7, "id_codec": "string"}),
    );
    let (code, r, err) = env.scan(&contract, &env.source("u.json", &u.name, "id", json!({})));
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 100);
    assert_eq!(r["pages_observed"], 15);
    assert_eq!(env.export("run-2"), want);
}

#[test]
fn content_digests_are_equal_for_equal_values_and_differ_for_a_changed_one() {
    let Some(pg) = Pg::server() else { return };
    // Two tables hold the same values in other types and representations.
    let a = pg.table(
        "content_a",
        "CREATE TABLE $T (id bigint PRIMARY KEY, amount numeric(10,2), name text,
           at timestamptz, day date, ok bool, ratio real, tags jsonb);
         INSERT INTO $T SELECT g, g + 0.5, 'n' || g, timestamptz '2024-03-01 12:00:00+02' + g * interval '1 hour',
           date '2024-01-01' + g, g % 2 = 0, 0.1, '{\"a\": 1}' FROM generate_series(1, 50) g;
         INSERT INTO $T VALUES (51, NULL, NULL, NULL, NULL, NULL, NULL, NULL);",
    );
    let b = pg.table(
        "content_b",
        "CREATE TABLE $T (id integer PRIMARY KEY, amount numeric, name varchar(20),
           at timestamp, day date, ok boolean, ratio real, tags jsonb);
         INSERT INTO $T SELECT g, (g + 0.5)::numeric(12,4), 'n' || g, timestamp '2024-03-01 10:00:00' + g * interval '1 hour',
           date '2024-01-01' + g, g % 2 = 0, 0.1, '{\"a\":1}' FROM generate_series(1, 50) g;
         INSERT INTO $T VALUES (51, NULL, NULL, NULL, NULL, NULL, NULL, NULL);",
    );
    let env = Env::new();
    let cols = json!({"content": ["amount", "name", "at", "day", "ok", "ratio", "tags"]});
    let digests = |table: &str, name: &str| -> BTreeMap<String, [u8; 32]> {
        read_content(&env.source(name, table, "id", cols.clone()))
    };
    let da = digests(&a.name, "a.json");
    let db = digests(&b.name, "b.json");
    assert_eq!(da.len(), 51);
    assert_eq!(da, db, "equal values must hash equal across types");
    assert_ne!(da["1"], da["2"]);
    pg.exec(&format!("UPDATE {} SET amount = 7.51 WHERE id = 7", b.name));
    let changed = digests(&b.name, "b2.json");
    let differing: Vec<&String> = da.keys().filter(|k| da[*k] != changed[*k]).collect();
    assert_eq!(differing, ["7"]);
}

/// Reads every page of a source through the library; returns each ID's content digest.
fn read_content(spec: &str) -> BTreeMap<String, [u8; 32]> {
    use scanledger::{PageRequest, PageSource, RawId, Request};
    let path = spec.strip_prefix("postgres:").unwrap();
    let mut source = scanledger::PostgresSource::open(Path::new(path)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut out = BTreeMap::new();
    let mut request = Request::First;
    let mut snapshot = None;
    for _ in 0..100 {
        let page = rt
            .block_on(source.fetch(&PageRequest {
                request: request.clone(),
                page_size: 20,
                snapshot: snapshot.clone(),
                query: Value::Null,
            }))
            .unwrap_or_else(|e| panic!("{e:?}"));
        snapshot = page.snapshot.clone();
        for item in &page.items {
            let RawId::Int(id) = item.id else {
                panic!("{:?}", item.id)
            };
            out.insert(id.to_string(), item.content.unwrap());
        }
        match page.next {
            Some(c) => request = Request::Cursor(c),
            None => return out,
        }
    }
    panic!("more than 100 pages");
}

#[test]
fn errors_name_the_table_and_the_key() {
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "errors",
        "CREATE TABLE $T (id bigint PRIMARY KEY, dup int, amount numeric UNIQUE, n int UNIQUE);
         INSERT INTO $T VALUES (1, 1, 1, 1), (2, 1, 2, NULL), (-5, 1, 3, 3);",
    );
    let env = Env::new();
    let contract = env.contract("c.json", &json!({"source": t.name}));
    let input_error = |name: &str, table: &str, key: &str, extra: Value, want: &[&str]| {
        let (code, _, err) = env.scan(&contract, &env.source(name, table, key, extra));
        assert_eq!(code, 2, "{name}: {err}");
        // With --json the error is a JSON object on stderr: its message is what people read.
        let err = serde_json::from_str::<Value>(&err)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(err);
        for w in want {
            assert!(err.contains(w), "{name}: {err:?} lacks {w:?}");
        }
    };
    input_error(
        "a.json",
        "sl_pg_no_such_table",
        "id",
        json!({}),
        &["sl_pg_no_such_table", "does not exist"],
    );
    input_error(
        "b.json",
        &t.name,
        "nope",
        json!({}),
        &[&t.name, "no column \"nope\""],
    );
    input_error(
        "c.json",
        &t.name,
        "dup",
        json!({}),
        &["\"dup\"", "no unique index"],
    );
    input_error(
        "d.json",
        &t.name,
        "amount",
        json!({}),
        &["\"amount\"", "numeric", "smallint"],
    );
    input_error(
        "e.json",
        &t.name,
        "id",
        json!({"labels": {"bad": "no_such_col > 1"}}),
        &["labels.bad", "no_such_col"],
    );
    input_error(
        "f.json",
        &t.name,
        "id",
        json!({"where": "id +"}),
        &["where", "syntax error"],
    );
    input_error(
        "g.json",
        &t.name,
        "id",
        json!({"content": ["ghost"]}),
        &["content", "ghost"],
    );
    // A negative key cannot be an `int` ID: the page is invalid (R16), naming the value.
    let (code, r, _) = env.scan(&contract, &env.source("h.json", &t.name, "id", json!({})));
    assert_eq!(code, 4);
    assert_eq!(r["violations"][0]["kind"], "invalid_page");
    assert!(
        r["violations"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("-5"),
        "{r}"
    );
    // A nullable unique key with a NULL row: that row is unreachable by key, so no verdict.
    let (code, r, _) = env.scan(&contract, &env.source("i.json", &t.name, "n", json!({})));
    assert_eq!(code, 4);
    assert_eq!(r["violations"][0]["kind"], "invalid_page");
    assert!(
        r["violations"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("NULL"),
        "{r}"
    );
}
