//! Migration verification across two databases, against the real servers: the same
//! 100,000-row table in MariaDB (127.0.0.1:3306) and PostgreSQL (127.0.0.1:5432), each scanned
//! into its own store file through the real binary, then compared with `migration verify`,
//! `diff --across` and `missing --across` (docs/guide-migration.md).
//!
//! Each test makes its own pair of tables (`sl_my_mig<tag>_<pid>`, `sl_pg_mig<tag>_<pid>`) and
//! drops them when done. Without a server a test says SKIPPED loudly, and fails when CI is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::mysql::{db, Db, ROOT_DSN};
use crate::postgres::{Pg, Table, DSN};
use crate::util;

pub(crate) const ROWS: u64 = 100_000;
const CONTENT: &[&str] = &["amount", "ts", "email"];

/// Two tables holding the same rows: MariaDB `DECIMAL(10,2)` and `DATETIME(6)` (zone-less,
/// read as UTC), PostgreSQL unconstrained `NUMERIC` and `TIMESTAMPTZ`. Row 42 differs only in
/// representation: `1.50` against `1.5000`, and `12:00` UTC against `14:00+02`.
pub(crate) struct Pair<'a> {
    pub(crate) my: String,
    pub(crate) pg: Table<'a>,
    dir: tempfile::TempDir,
}

pub(crate) fn pair<'a>(db: &Db, pg: &'a Pg, tag: &str) -> Pair<'a> {
    let my = db.table(&format!("mig{tag}"));
    db.exec(&format!(
        "CREATE TABLE {my} (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(10,2), \
         ts DATETIME(6), email VARCHAR(64)) ENGINE=InnoDB;\n\
         INSERT INTO {my} SELECT seq, (seq % 1000) / 100, \
         TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq SECOND, \
         CONCAT('u', seq, '@example.com') FROM seq_1_to_{ROWS};\n\
         UPDATE {my} SET amount = 1.50, ts = '2026-03-01 12:00:00' WHERE id = 42"
    ));
    let pg_table = pg.table(
        &format!("mig{tag}"),
        &format!(
            "CREATE TABLE $T (id BIGINT PRIMARY KEY, amount NUMERIC, ts TIMESTAMPTZ, email TEXT); \
             INSERT INTO $T SELECT s, (s % 1000)::numeric / 100, \
             TIMESTAMPTZ '2026-01-01 00:00:00+00' + s * INTERVAL '1 second', \
             'u' || s || '@example.com' FROM generate_series(1, {ROWS}) s; \
             UPDATE $T SET amount = 1.5000, ts = '2026-03-01 14:00:00+02' WHERE id = 42"
        ),
    );
    Pair {
        my,
        pg: pg_table,
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Pair<'_> {
    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn write(&self, name: &str, text: &str) -> String {
        util::write(self.dir.path(), name, text)
    }

    /// Scans both tables, MariaDB into `my.redb` and PostgreSQL into `pg.redb` (holding
    /// `pg_rows` rows).
    pub(crate) fn scan_both(&self, pg_rows: u64) {
        let (my_src, pg_src) = self.configs(0);
        for (store, name, spec, rows) in [
            ("my.redb", "orders-mysql", format!("mysql:{my_src}"), ROWS),
            (
                "pg.redb",
                "orders-pg",
                format!("postgres:{pg_src}"),
                pg_rows,
            ),
        ] {
            let c = self.write(
                &format!("{name}.json"),
                &json!({"source": name, "page_size": 5000}).to_string(),
            );
            let (code, r, err) = self.sl(store, &["scan", "--contract", &c, "--source", &spec]);
            assert_eq!(code, 0, "{name}: {err} {r}");
            assert_eq!(r["unique_ids_observed"], json!(rows), "{name}");
            assert!(r["content_root"].is_string(), "{name}: {r}");
            // The text receipt shows the content root the JSON carries.
            let path = self.path(store);
            let (code, text, err) = util::run(&["--store", &path, "receipt", "1"]);
            assert_eq!(code, 0, "{name}: {err}");
            let root = r["content_root"].as_str().unwrap_or("?");
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with("content root") && l.ends_with(root)),
                "{name}: no content root line in:\n{text}"
            );
        }
    }

    /// The two source configs, `my.json` and `pg.json`, naming the same content columns;
    /// each pauses `delay_ms` before every page.
    fn configs(&self, delay_ms: u64) -> (String, String) {
        let content = json!(CONTENT);
        let my_src = self.write(
            "my.json",
            &json!({"dsn": ROOT_DSN, "table": self.my, "key": "id", "content": content,
                    "page_delay_ms": delay_ms})
            .to_string(),
        );
        let pg_src = self.write(
            "pg.json",
            &json!({"dsn": DSN, "table": self.pg.name, "key": "id", "content": content,
                    "page_delay_ms": delay_ms})
            .to_string(),
        );
        (my_src, pg_src)
    }

    /// `scanledger --store STORE --json ARGS`: (exit, JSON stdout or Null, stderr).
    pub(crate) fn sl(&self, store: &str, args: &[&str]) -> (i32, Value, String) {
        let store = self.path(store);
        let mut all = vec!["--store", store.as_str(), "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = util::run(&all);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }

    /// The text of `migration verify --from run-1 --to run-1 --other-store pg.redb EXTRA...`:
    /// (exit, stdout, stderr).
    pub(crate) fn verify_text(&self, extra: &[&str]) -> (i32, String, String) {
        let (my, pg) = (self.path("my.redb"), self.path("pg.redb"));
        let mut args = vec![
            "--store",
            &my,
            "migration",
            "verify",
            "--from",
            "run-1",
            "--to",
            "run-1",
            "--other-store",
            &pg,
        ];
        args.extend_from_slice(extra);
        util::run(&args)
    }

    /// `migration verify --from run-1 --to run-1 --other-store pg.redb EXTRA...`.
    pub(crate) fn verify(&self, extra: &[&str]) -> (i32, Value, String) {
        let pg = self.path("pg.redb");
        let mut args = vec![
            "migration",
            "verify",
            "--from",
            "run-1",
            "--to",
            "run-1",
            "--other-store",
            pg.as_str(),
        ];
        args.extend_from_slice(extra);
        self.sl("my.redb", &args)
    }
}

pub(crate) fn servers() -> Option<(Db, Pg)> {
    let db = db()?;
    let pg = Pg::server()?;
    Some((db, pg))
}

#[test]
fn equal_tables_verify_with_content_and_representations_hash_alike() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "eq");
    p.scan_both(ROWS);
    let (code, v, err) = p.verify(&["--content"]);
    assert_eq!(code, 0, "{err} {v}");
    assert_eq!(v["verdict"], "verified");
    assert_eq!(v["missing_count"], 0);
    assert_eq!(v["extra_count"], 0);
    assert_eq!(v["changed_count"], 0);
    assert_eq!(v["from"]["source"], "orders-mysql");
    assert_eq!(v["to"]["source"], "orders-pg");
    assert!(v["from"]["snapshot_id"].is_string() && v["to"]["snapshot_id"].is_string());
    assert_eq!(
        v["from"]["content_root"], v["to"]["content_root"],
        "row 42 differs only in representation"
    );
    // The text names both scopes and snapshots; without --across the scopes are refused.
    let pg_store = p.path("pg.redb");
    let (code, out, _) = util::run(&[
        "--store",
        &p.path("my.redb"),
        "diff",
        "run-1",
        "run-1",
        "--other-store",
        &pg_store,
        "--across",
        "--content",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("orders-mysql / -, snapshot ") && out.contains("orders-pg / -, snapshot "),
        "{out}"
    );
    assert!(out.contains("hold the same 100000 IDs"), "{out}");
    let (code, _, err) = p.sl(
        "my.redb",
        &["diff", "run-1", "run-1", "--other-store", &pg_store],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--across"), "{err}");
    // Content columns that cannot be compared, as the recorded configs now say them: another
    // number, or the same columns in another order, is an error naming both lists, never
    // "content differs".
    for cols in [json!(["amount", "ts"]), json!(["email", "ts", "amount"])] {
        p.write(
            "pg.json",
            &json!({"dsn": DSN, "table": p.pg.name, "key": "id", "content": cols}).to_string(),
        );
        let (code, out, err) = p.verify_text(&["--content"]);
        assert_eq!(code, 2, "{out} {err}");
        let listed = cols
            .as_array()
            .unwrap()
            .iter()
            .map(|c| format!("{c}"))
            .collect::<Vec<_>>();
        assert!(
            err.contains(r#"hashes ["amount", "ts", "email"]"#)
                && err.contains(&format!("hashes [{}]", listed.join(", "))),
            "{err}"
        );
        assert!(!out.contains("content differs") && !err.contains("content differs"));
    }
}

#[test]
fn rows_deleted_in_the_target_are_listed_as_missing_exactly() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "del");
    // 100 rows: every 997th ID.
    pg.exec(&format!("DELETE FROM {} WHERE id % 997 = 0", p.pg.name));
    let deleted: Vec<u64> = (1..=ROWS).filter(|i| i % 997 == 0).collect();
    assert_eq!(deleted.len(), 100);
    p.scan_both(ROWS - 100);
    let (code, v, err) = p.verify(&["--all"]);
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["verdict"], "failed");
    assert_eq!(v["missing_count"], 100);
    assert_eq!(v["extra_count"], 0);
    let want: Vec<String> = deleted.iter().map(|i| format!("{i}..{i}")).collect();
    assert_eq!(v["missing_ranges"], json!(want));
    assert!(
        v["next"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("missing run-1 --against run-1 --across")),
        "{v}"
    );
    // The same list from `missing`, reading the target's store first.
    let my_store = p.path("my.redb");
    let (code, m, err) = p.sl(
        "pg.redb",
        &[
            "missing",
            "run-1",
            "--against",
            "run-1",
            "--across",
            "--other-store",
            &my_store,
            "--all",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(m["missing_count"], 100);
    assert_eq!(m["missing_ranges"], json!(want));
    // Declared exclusions: exactly these differences verify; one too many fails.
    let mut listed: String = deleted.iter().map(|i| format!("{i}\n")).collect();
    let ex = p.write("excluded.txt", &format!("# not migrated\n{listed}"));
    // The text counts the rows, and says how many partitions' content could not be compared.
    let (code, text, _) = p.verify_text(&["--content"]);
    assert_eq!(code, 4);
    assert!(
        text.contains("rows     100 missing, 0 extra, changed unknown; the content of 2 partitions was not compared: their IDs differ"),
        "{text}"
    );
    let (code, v, err) = p.verify(&["--exclude", &ex]);
    assert_eq!(code, 0, "{err} {v}");
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["excluded_count"], 100);
    // With content, a partition holding an excluded row cannot be checked by its digest
    // alone (the row's content is missing from one side): unknown, until a re-read.
    let (code, v, _) = p.verify(&["--exclude", &ex, "--content"]);
    assert_eq!((code, v["verdict"].as_str()), (3, Some("unknown")), "{v}");
    let (code, v, err) = p.verify(&["--exclude", &ex, "--content", "--reread"]);
    assert_eq!(code, 0, "{err} {v}");
    assert_eq!(v["changed_count"], 0, "{v}");
    listed.push_str("5\n");
    let ex = p.write("excluded2.txt", &listed);
    let (code, v, _) = p.verify(&["--exclude", &ex]);
    assert_eq!(code, 4);
    assert_eq!(v["exclusions_unmatched"], json!(["5"]));
}

#[test]
fn changed_values_are_named_by_content_and_a_targeted_reread() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "chg");
    // 50 rows in two partitions (IDs below and above 65,536).
    let changed: Vec<u64> = (0..50u64).map(|k| k * 1_500 + 7).collect();
    let list: Vec<String> = changed.iter().map(u64::to_string).collect();
    pg.exec(&format!(
        "UPDATE {} SET email = 'changed@example.com' WHERE id IN ({})",
        p.pg.name,
        list.join(", ")
    ));
    p.scan_both(ROWS);
    // Without content the ID sets are equal.
    let (code, v, _) = p.verify(&[]);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("verified")));
    // With content: failed, the partitions named, the count not yet known.
    let (code, v, err) = p.verify(&["--content"]);
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["changed_partitions"], json!([0, 1]));
    assert_eq!(v["changed_count"], Value::Null);
    let (_, text, _) = p.verify_text(&["--content"]);
    assert!(
        text.contains(
            "rows     0 missing, 0 extra, changed in 2 partitions (--reread names the rows)\n"
        ),
        "{text}"
    );
    let (_, text, _) = p.verify_text(&["--content", "--reread"]);
    assert!(
        text.contains("rows     0 missing, 0 extra, 50 changed\n"),
        "{text}"
    );
    assert!(
        v["next"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("--content --reread")),
        "{v}"
    );
    // The re-read names exactly the changed rows.
    let (code, v, err) = p.verify(&["--content", "--reread", "--all"]);
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["changed_count"], 50, "{v}");
    assert_eq!(v["changed_ids"], json!(changed));
    assert_eq!(v["content"]["reread"]["exact"], true);
    // And `diff --content --reread` says the same.
    let pg_store = p.path("pg.redb");
    let (code, d, err) = p.sl(
        "my.redb",
        &[
            "diff",
            "run-1",
            "run-1",
            "--other-store",
            &pg_store,
            "--across",
            "--reread",
            "--all",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(d["equal"], true);
    assert_eq!(d["content"]["partitions_differing"], json!([0, 1]));
    assert_eq!(d["content"]["reread"]["changed_ids"], json!(changed));
    // A target changed after its scan no longer reproduces its digest: the verdict is
    // unknown for that partition, never a list of changes the scans did not see.
    pg.exec(&format!(
        "UPDATE {} SET email = 'later@example.com' WHERE id = 8",
        p.pg.name
    ));
    let (code, v, err) = p.verify(&["--content", "--reread"]);
    assert_eq!(code, 4, "{err} {v}");
    let unrep = &v["content"]["reread"]["unreproduced"];
    assert_eq!(unrep, &json!([{"run": "new", "partition": 0}]), "{v}");
    assert_eq!(v["changed_count"], Value::Null);
    let ids = v["changed_ids"].as_array().unwrap();
    assert!(
        ids.iter().all(|i| i.as_u64().unwrap() >= 65_536),
        "only partition 1's changes are listed: {v}"
    );
}

/// String IDs are compared by their bytes: two scopes (and two store files) number the same
/// strings differently, and the diff still names exactly the strings one side lacks.
#[test]
fn string_ids_compare_by_their_bytes_across_scopes_and_store_files() {
    let dir = tempfile::tempdir().unwrap();
    let page = |name: &str, items: Value| {
        let line = json!({"cursor": null, "items": items, "next": null, "complete": true});
        format!(
            "replay:{}",
            util::write(dir.path(), name, &format!("{line}\n"))
        )
    };
    let a_src = page("a.jsonl", json!(["zed", "amy", "bob", "cat"]));
    let b_src = page("b.jsonl", json!(["dan", "cat", "bob", "amy"]));
    let a_store = dir.path().join("a.redb").to_string_lossy().into_owned();
    let b_store = dir.path().join("b.redb").to_string_lossy().into_owned();
    for (store, name, src) in [(&a_store, "crm", &a_src), (&b_store, "warehouse", &b_src)] {
        let c = util::write(
            dir.path(),
            &format!("{name}.json"),
            &json!({"source": name, "id_codec": "string"}).to_string(),
        );
        let (code, _, err) =
            util::run(&["--store", store, "scan", "--contract", &c, "--source", src]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = util::run(&[
        "--store",
        &a_store,
        "--json",
        "diff",
        "run-1",
        "run-1",
        "--across",
        "--other-store",
        &b_store,
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["removed_ranges"], json!(["zed..zed"]), "{d}");
    assert_eq!(d["added_ranges"], json!(["dan..dan"]), "{d}");
    assert_eq!(d["old"]["source"], "crm");
    assert_eq!(d["new"]["source"], "warehouse");
    let (code, out, _) = util::run(&[
        "--store",
        &a_store,
        "--json",
        "migration",
        "verify",
        "--from",
        "run-1",
        "--to",
        "run-1",
        "--other-store",
        &b_store,
    ]);
    assert_eq!(code, 4);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["missing_count"].as_u64(), v["extra_count"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(v["missing_ranges"], json!(["zed..zed"]));
    // Excluding both by their strings verifies.
    let ex = util::write(dir.path(), "ex.txt", "zed\ndan\n");
    let (code, out, _) = util::run(&[
        "--store",
        &a_store,
        "--json",
        "migration",
        "verify",
        "--from",
        "run-1",
        "--to",
        "run-1",
        "--other-store",
        &b_store,
        "--exclude",
        &ex,
    ]);
    assert_eq!(code, 0, "{out}");
}

/// A target scan that stopped early is no evidence that rows are missing: the verdict is
/// `unknown` (exit 3) with the resume command, never `failed`, though the IDs it lacks so far
/// are listed.
#[test]
fn a_target_scan_stopped_early_gives_unknown_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let full = util::write(dir.path(), "a.json", r#"{"source": "a", "page_size": 100}"#);
    let part = util::write(
        dir.path(),
        "b.json",
        r#"{"source": "b", "page_size": 100, "limits": {"max_pages": 2}}"#,
    );
    for (c, code) in [(&full, 0), (&part, 3)] {
        let (got, _, err) = util::run(&[
            "--store",
            &store,
            "scan",
            "--contract",
            c,
            "--source",
            "sim:records=5000",
        ]);
        assert_eq!(got, code, "{err}");
    }
    let (code, out, _) = util::run(&[
        "--store",
        &store,
        "--json",
        "migration",
        "verify",
        "--from",
        "run-1",
        "--to",
        "run-2",
    ]);
    assert_eq!(code, 3, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "unknown");
    assert_eq!(v["missing_count"], 4800);
    assert!(
        v["next"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("resume run-2")),
        "{v}"
    );
}

/// The differences of the one-command tests: 100 target rows deleted (every 997th ID), 3
/// extra (after the last source ID) and 50 changed (in two partitions). Returns the deleted,
/// extra and changed IDs.
fn break_target(pg: &Pg, p: &Pair<'_>) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let deleted: Vec<u64> = (1..=ROWS).filter(|i| i % 997 == 0).collect();
    let extra: Vec<u64> = (1..=3).map(|k| ROWS + k).collect();
    let changed: Vec<u64> = (0..50u64).map(|k| k * 1_500 + 7).collect();
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    pg.exec(&format!(
        "DELETE FROM {t} WHERE id % 997 = 0; \
         INSERT INTO {t} SELECT s, 1, TIMESTAMPTZ '2026-01-01 00:00:00+00', 'x' \
         FROM generate_series({lo}, {hi}) s; \
         UPDATE {t} SET email = 'changed@example.com' WHERE id IN ({c})",
        t = p.pg.name,
        lo = ROWS + 1,
        hi = ROWS + 3,
        c = list(&changed)
    ));
    (deleted, extra, changed)
}

/// `migration verify --from mysql:my.json --to postgres:pg.json EXTRA...` with `--store
/// DIR/STORE` (the target's run in its default `DIR/STORE.to.redb`).
pub(crate) fn one_command(p: &Pair<'_>, store: &str, extra: &[&str]) -> (i32, Value, String) {
    let (my, pg) = (p.path("my.json"), p.path("pg.json"));
    let (from, to) = (format!("mysql:{my}"), format!("postgres:{pg}"));
    let mut args = vec!["migration", "verify", "--from", &from, "--to", &to];
    args.extend_from_slice(extra);
    p.sl(store, &args)
}

/// What must not depend on how the verdict was reached: the verdict, the counts, the keys and
/// both sides' roots.
fn essence(v: &Value) -> Value {
    json!({
        "verdict": v["verdict"], "missing_count": v["missing_count"],
        "extra_count": v["extra_count"], "changed_count": v["changed_count"],
        "missing_ranges": v["missing_ranges"], "extra_ranges": v["extra_ranges"],
        "changed_ids": v["changed_ids"],
        "from": [v["from"]["unique_ids_observed"], v["from"]["merkle_root"], v["from"]["content_root"]],
        "to": [v["to"]["unique_ids_observed"], v["to"]["merkle_root"], v["to"]["content_root"]],
    })
}

/// One command scans both tables at once, each into its own store, and gives the verdict and
/// keys of the two-run form with `--reread`: 100 missing, 3 extra and 50 changed rows, exit 4,
/// the changed rows named by comparing both sides' rows as they were scanned, without a
/// re-read.
#[test]
fn one_command_gives_the_verdict_and_keys_of_the_two_run_form() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "one");
    let (deleted, extra, changed) = break_target(&pg, &p);
    p.scan_both(ROWS - 100 + 3);
    let (code, two, err) = p.verify(&["--content", "--reread", "--all"]);
    assert_eq!(code, 4, "{err} {two}");
    let (code, one, err) = one_command(&p, "one.redb", &["--content", "--all"]);
    assert_eq!(code, 4, "{err} {one}");
    assert_eq!(essence(&one), essence(&two));
    assert_eq!(one["content"]["reread"], Value::Null, "no re-read: {one}");
    assert_eq!(one["stream"]["compared"], true, "{one}");
    assert_eq!(
        (
            one["stream"]["from_rows"].as_u64(),
            one["stream"]["to_rows"].as_u64(),
            one["stream"]["changed_count"].as_u64()
        ),
        (Some(ROWS), Some(ROWS - 100 + 3), Some(50))
    );
    let ranges = |v: &[u64]| json!(v.iter().map(|i| format!("{i}..{i}")).collect::<Vec<_>>());
    assert_eq!(one["missing_ranges"], ranges(&deleted));
    assert_eq!(
        one["extra_ranges"],
        json!([format!("{}..{}", ROWS + 1, ROWS + 3)])
    );
    assert_eq!(extra.len(), 3);
    assert_eq!(one["changed_ids"], json!(changed));
    assert_eq!(
        (one["missing_count"].as_u64(), one["extra_count"].as_u64()),
        (Some(100), Some(3))
    );
    // Each side is an ordinary run with its receipt, in its own store.
    assert_eq!(one["from"]["store"], json!(p.path("one.redb")));
    assert_eq!(one["to"]["store"], json!(p.path("one.to.redb")));
    assert_eq!(
        one["from"]["source"], "mysql:my.json",
        "the default contract's name"
    );
    let (code, r, err) = p.sl("one.to.redb", &["receipt", "latest"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["merkle_root"], one["to"]["merkle_root"]);
    // The text says how many rows are missing, extra and changed.
    let (my, pg_cfg) = (p.path("my.json"), p.path("pg.json"));
    let (from, to) = (format!("mysql:{my}"), format!("postgres:{pg_cfg}"));
    let store = p.path("one.redb");
    let (code, text, _) = util::run(&[
        "--store",
        &store,
        "migration",
        "verify",
        "--from",
        &from,
        "--to",
        &to,
        "--content",
    ]);
    assert_eq!(code, 4);
    // Deleted rows in both partitions: their digests alone cannot say which rows changed, but
    // the rows compared as they were scanned do.
    assert!(
        text.contains("rows     100 missing, 3 extra, 50 changed\n"),
        "{text}"
    );
    assert!(text.contains("50 records changed between"), "{text}");
    // With --reread too, the re-read and the stream agree.
    let (code, both, err) = one_command(&p, "both.redb", &["--content", "--reread", "--all"]);
    assert_eq!(code, 4, "{err} {both}");
    assert_eq!(essence(&both), essence(&two));
    assert_eq!(both["stream"]["compared"], true, "{both}");
}

/// Equal tables: one command, exit 0. Sides whose content columns differ in number are refused
/// before anything is scanned, the error naming both lists.
#[test]
fn one_command_on_equal_tables_verifies_and_refuses_columns_that_differ() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "oneq");
    p.configs(0);
    let (code, v, err) = one_command(&p, "eq.redb", &["--content", "--ack-pages"]);
    assert_eq!(code, 0, "{err} {v}");
    assert_eq!(v["verdict"], "verified");
    // Under the default contract a side commits durably every 16 pages, not every page: of
    // each side's 20 pages, page 15 and the last (a restart reads a killed side whole again).
    let acks: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("ack run-1 page "))
        .collect();
    assert!(
        !acks.is_empty() && acks.len() <= 4,
        "{} durable checkpoints: {acks:?}",
        acks.len()
    );
    assert_eq!(v["changed_count"], 0);
    assert_eq!(v["from"]["content_root"], v["to"]["content_root"]);
    // Row by row as scanned too: DECIMAL 1.50 and NUMERIC 1.5000, DATETIME and TIMESTAMPTZ at
    // the same instant (row 42) are the same row.
    assert_eq!(v["stream"]["compared"], true, "{v}");
    assert_eq!(v["stream"]["changed_count"], 0, "{v}");
    assert_eq!(v["stream"]["from_rows"], ROWS);
    p.write(
        "pg.json",
        &json!({"dsn": DSN, "table": p.pg.name, "key": "id", "content": ["amount", "ts"]})
            .to_string(),
    );
    let (code, _, err) = one_command(&p, "cols.redb", &["--content"]);
    assert_eq!(code, 2, "{err}");
    let e: Value = serde_json::from_str(&err).unwrap();
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"hashes ["amount", "ts", "email"]"#)
            && message.contains(r#"hashes ["amount", "ts"];"#),
        "{message}"
    );
    assert!(!message.contains("content differs"), "{message}");
    assert!(
        !std::path::Path::new(&p.path("cols.redb")).exists(),
        "nothing is scanned"
    );
}

/// A SIGKILL in the middle of the one-command form, then the same command again: both sides'
/// runs are continued (their snapshots died with the process, so each continues as a restart
/// linked to the killed run, never spliced with it) and the verdict, keys and roots are those
/// of an uninterrupted command.
#[test]
fn a_sigkill_then_the_same_command_gives_the_uninterrupted_verdict() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "kill");
    let (_, _, changed) = break_target(&pg, &p);
    p.configs(0);
    let (code, whole, err) = one_command(&p, "whole.redb", &["--content", "--all"]);
    assert_eq!(code, 4, "{err} {whole}");
    assert_eq!(whole["changed_ids"], json!(changed), "{whole}");
    // Slow pages, so the kill lands in the middle of both scans.
    p.configs(150);
    let (my, pg_cfg) = (p.path("my.json"), p.path("pg.json"));
    let (from, to) = (format!("mysql:{my}"), format!("postgres:{pg_cfg}"));
    let store = p.path("k.redb");
    let args = [
        "--store",
        &store,
        "--json",
        "migration",
        "verify",
        "--from",
        &from,
        "--to",
        &to,
        "--content",
        "--all",
        // A durable checkpoint a page (the default contract's sides commit every 16), so the
        // kill lands after the sixth committed page of a 20-page side.
        "--checkpoint-every",
        "1",
    ];
    let mut child = Command::new(util::bin())
        .args(args)
        .arg("--ack-pages")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut acked = 0;
    for line in stderr.lines().map_while(Result::ok) {
        if line.starts_with("ack run-1 page ") {
            acked += 1;
            if acked == 6 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    assert!(
        !child.wait().unwrap().success(),
        "the command ended before the kill"
    );
    for s in ["k.redb", "k.to.redb"] {
        let (_, runs, _) = p.sl(s, &["runs"]);
        assert_eq!(runs["runs"][0]["state"], "interrupted", "{s}: {runs}");
    }
    let (code, again, err) = p.sl("k.redb", &args[3..]);
    assert_eq!(code, 4, "{err} {again}");
    assert_eq!(essence(&again), essence(&whole));
    // Each side's restart read its table from the first key again: the rows were compared
    // whole, as they were scanned, with no re-read.
    assert_eq!(again["stream"]["compared"], true, "{again}");
    assert_eq!(again["content"]["reread"], Value::Null, "{again}");
    // The killed runs were continued, not left behind: each is superseded by its restart.
    for s in ["k.redb", "k.to.redb"] {
        let (_, runs, _) = p.sl(s, &["runs"]);
        let states: Vec<&str> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["finished", "superseded"], "{s}: {runs}");
    }
}

/// A SIGKILL under a contract that continues a killed scan after its last key
/// (`on_expired_cursor: high_water`): the keys before the kill were never streamed, so the
/// rows are not compared as scanned; the partitions whose digests differ are re-read instead,
/// and the verdict and keys are those of an uninterrupted command.
#[test]
fn a_continued_scan_falls_back_to_a_reread_with_the_uninterrupted_keys() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "hw");
    let (_, _, changed) = break_target(&pg, &p);
    p.configs(0);
    let hw = p.write(
        "hw.json",
        &json!({"source": "orders", "page_size": 5000, "on_expired_cursor": "high_water"})
            .to_string(),
    );
    let (code, whole, err) =
        one_command(&p, "whole.redb", &["--contract", &hw, "--content", "--all"]);
    assert_eq!(code, 4, "{err} {whole}");
    assert_eq!(whole["stream"]["compared"], true, "{whole}");
    p.configs(150);
    let (my, pg_cfg) = (p.path("my.json"), p.path("pg.json"));
    let (from, to) = (format!("mysql:{my}"), format!("postgres:{pg_cfg}"));
    let store = p.path("k.redb");
    let args = [
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
        &hw,
        "--content",
        "--all",
    ];
    let mut child = Command::new(util::bin())
        .args(args)
        .arg("--ack-pages")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut acked = 0;
    for line in stderr.lines().map_while(Result::ok) {
        if line.starts_with("ack run-1 page ") {
            acked += 1;
            if acked == 6 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    assert!(
        !child.wait().unwrap().success(),
        "the command ended before the kill"
    );
    let (code, again, err) = p.sl("k.redb", &args[3..]);
    assert_eq!(code, 4, "{err} {again}");
    assert_eq!(again["stream"]["compared"], false, "{again}");
    assert_eq!(again["stream"]["fallback"], "reread", "{again}");
    assert_eq!(again["content"]["reread"]["exact"], true, "{again}");
    assert_eq!(again["changed_ids"], json!(changed), "{again}");
    assert_eq!(essence(&again), essence(&whole));
}
