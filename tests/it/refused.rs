//! A scan the source refuses before its first page (a column that does not exist, a key
//! without a unique index of its own, a first replay line that does not parse) leaves no run
//! behind that `resume` would only fail on again, and its hint says what to fix; a resume whose
//! source is refused leaves its run unchanged and says how to continue once it is fixed. Through
//! the binary, against the real PostgreSQL and MariaDB.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::json;

use crate::util;

/// Runs the binary on `store` in text mode: (exit code, stdout, stderr).
fn sl(store: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--store", store];
    all.extend_from_slice(args);
    util::run(&all)
}

/// The refusal of `source` (a config the server refuses): exit 2, the error naming `needle`, a
/// hint to correct it and scan again, never one to resume; and no run left in the store.
fn assert_refused(store: &str, contract: &str, source: &str, needle: &str) {
    let (runs_before, before, _) = sl(store, &["--json", "runs"]);
    let (code, out, err) = sl(store, &["scan", "--contract", contract, "--source", source]);
    assert_eq!(code, 2, "{source}: {out}{err}");
    assert!(err.contains(needle), "{source}: {err}");
    assert!(
        err.contains("hint: the source was refused before its first page, so nothing was recorded: correct what the error names and run the same scan again"),
        "{source}: {err}"
    );
    assert!(
        !err.contains("resume"),
        "a refused scan is not resumable: {err}"
    );
    // The runs are what they were (a store that did not exist still does not).
    let (runs_after, after, _) = sl(store, &["--json", "runs"]);
    assert_eq!((runs_before, before), (runs_after, after), "{source}");
}

/// A good scan, then refused ones, then a resumable run whose config breaks and is fixed.
fn refusals_leave_nothing(
    scheme: &str,
    good: serde_json::Value,
    bad: &[(&str, serde_json::Value, &str)],
) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let contract = util::write(
        dir.path(),
        "c.json",
        r#"{"source": "customers", "page_size": 10}"#,
    );
    let config = |name: &str, extra: &serde_json::Value| {
        let mut cfg = good.clone();
        for (k, v) in extra.as_object().unwrap() {
            cfg[k] = v.clone();
        }
        format!(
            "{scheme}:{}",
            util::write(dir.path(), name, &cfg.to_string())
        )
    };
    // Before any run, a refused scan does not even create the store.
    let (name, extra, needle) = &bad[0];
    assert_refused(&store, &contract, &config(name, extra), needle);
    assert!(!dir.path().join("s.redb").exists(), "the store was created");

    let ok = config("ok.json", &json!({}));
    let (code, out, err) = sl(&store, &["scan", "--contract", &contract, "--source", &ok]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("run-1  VERIFIED"), "{out}");
    for (name, extra, needle) in bad {
        assert_refused(&store, &contract, &config(name, extra), needle);
    }

    // A run stopped by its budget, then its recorded config broken: the resume is refused, the
    // run stays as it was, and the hint's command works once the config is fixed.
    let budget = util::write(
        dir.path(),
        "budget.json",
        r#"{"source": "customers", "page_size": 10, "limits": {"max_pages": 1}, "on_expired_cursor": "high_water"}"#,
    );
    let (code, out, err) = sl(&store, &["scan", "--contract", &budget, "--source", &ok]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.starts_with("run-2  UNKNOWN"), "{out}");
    let ok_path = ok.split_once(':').unwrap().1;
    let fine = std::fs::read_to_string(ok_path).unwrap();
    let (_, extra, needle) = &bad[0];
    let mut broken: serde_json::Value = serde_json::from_str(&fine).unwrap();
    for (k, v) in extra.as_object().unwrap() {
        broken[k] = v.clone();
    }
    std::fs::write(ok_path, broken.to_string()).unwrap();
    let (code, out, err) = sl(&store, &["resume", "run-2", "--max-pages", "100"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(needle), "{err}");
    let hint = format!(
        "hint: run-2 is unchanged: correct the source, then continue it with `scanledger --store {store} resume run-2`"
    );
    assert!(err.contains(&hint), "{err}");
    let (_, receipt, _) = sl(&store, &["--json", "receipt", "run-2"]);
    let receipt: serde_json::Value = serde_json::from_str(&receipt).unwrap();
    assert_eq!(receipt["pages_observed"], 1, "{receipt}");
    std::fs::write(ok_path, fine).unwrap();
    let (code, out, err) = sl(&store, &["resume", "run-2", "--max-pages", "100"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("run-2  VERIFIED"), "{out}");
    let (_, runs, _) = sl(&store, &["--json", "runs"]);
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let ids: Vec<&str> = runs["runs"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["run_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["run-2", "run-1"], "{runs}");
}

#[test]
fn a_postgres_config_the_server_refuses_records_nothing_and_says_what_to_fix() {
    let Some(pg) = crate::postgres::Pg::server() else {
        return;
    };
    let t = pg.table(
        "refused",
        "CREATE TABLE $T (id bigint PRIMARY KEY, email text NOT NULL);
         INSERT INTO $T SELECT g, 'c' || g || '@example.com' FROM generate_series(1, 25) g;",
    );
    let good = json!({"dsn": crate::postgres::DSN, "table": t.name, "key": "id"});
    refusals_leave_nothing(
        "postgres",
        good,
        &[
            (
                "typo.json",
                json!({"content": ["emial"]}),
                "content: column \"emial\" does not exist",
            ),
            (
                "nokey.json",
                json!({"key": "email"}),
                "key: column \"email\" has no unique index of its own",
            ),
            (
                "label.json",
                json!({"labels": {"old": "schema_versoin < 3"}}),
                "labels.old",
            ),
        ],
    );
}

#[cfg(feature = "mysql")]
#[test]
fn a_mariadb_config_the_server_refuses_records_nothing_and_says_what_to_fix() {
    let Some(db) = crate::mysql::db() else { return };
    let t = db.table("refused");
    db.numbered(&t, 25);
    let good = json!({"dsn": crate::mysql::ROOT_DSN, "table": t, "key": "id"});
    refusals_leave_nothing(
        "mysql",
        good,
        &[
            ("typo.json", json!({"content": ["emial"]}), "unknown column"),
            (
                "nokey.json",
                json!({"key": "grp"}),
                "key: column `grp` has no unique index of its own",
            ),
        ],
    );
}

#[test]
fn a_replay_refused_at_its_first_line_keeps_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.redb").to_string_lossy().into_owned();
    let contract = util::write(dir.path(), "c.json", r#"{"source": "s"}"#);
    let pages = util::write(
        dir.path(),
        "pages.jsonl",
        "{\"cursor\": null, \"items\": [1], \"nxt\": null}\n",
    );
    let source = format!("replay:{pages}");
    let (code, _, err) = sl(
        &store,
        &["scan", "--contract", &contract, "--source", &source],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean \"next\"?"), "{err}");
    assert!(
        err.contains("so nothing was kept (run-1, begun for it, was removed): correct what the error names and run the same scan again"),
        "{err}"
    );
    let (code, out, err) = sl(&store, &["runs"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no run"), "{out}");
    let (code, _, err) = sl(&store, &["resume", "run-1"]);
    assert_ne!(code, 0, "{err}");
}
