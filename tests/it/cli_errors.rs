//! Every class of error the binary prints, compared whole against committed snapshots
//! (`tests/it/snapshots/`, insta): contract, replay, store, usage errors and their `--json`
//! objects.
//!
//! The defects these pin: a cause printed twice (`nope.json: No such file or
//! directory (os error 2): No such file or directory (os error 2)`, `unknown key "page_sise":
//! unknown key "page_sise"`); replay errors with two different line numbers; contract errors
//! without a line or a did-you-mean; a missing directory or a directory reported as a corrupt
//! store; `--json` ignored by errors; `missing` without a reference not mentioning `--range`.
//! A `contains` check would pass with any of those; a snapshot of the whole output does not.
//! Paths are replaced by `[TMP]` so the snapshots do not depend on the temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::Path;

use crate::util;

/// A temporary directory with a store path and helpers to run the binary in it.
pub(crate) struct Env {
    pub dir: tempfile::TempDir,
    pub store: String,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        Env { dir, store }
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> String {
        util::write(self.dir.path(), name, text)
    }

    /// Runs `scanledger --store STORE ARGS`.
    pub(crate) fn sl(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["--store", &self.store];
        all.extend_from_slice(args);
        util::run(&all)
    }

    /// Runs the binary and renders exit code, stdout and stderr as one text, paths scrubbed.
    pub(crate) fn transcript(&self, args: &[&str]) -> String {
        let (code, out, err) = self.sl(args);
        self.scrub(&format!("exit {code}\n--- stdout\n{out}--- stderr\n{err}"))
    }

    pub(crate) fn scrub(&self, text: &str) -> String {
        let dir = self.dir.path().to_string_lossy().into_owned();
        let canonical = std::fs::canonicalize(self.dir.path())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| dir.clone());
        text.replace(&canonical, "[TMP]").replace(&dir, "[TMP]")
    }

    /// A verified run of `records` integer IDs over the sim source; returns nothing, checks 0.
    pub(crate) fn sim_run(&self, records: u64) {
        let c = self.write("sim.json", r#"{"source": "sim", "tenant": "t"}"#);
        let (code, out, err) = self.sl(&[
            "scan",
            "--contract",
            &c,
            "--source",
            &format!("sim:records={records}"),
        ]);
        assert_eq!(code, 0, "{out}{err}");
    }
}

const PAGES: &str = r#"{"cursor": null, "items": [1, 2], "next": null, "snapshot": "s1"}"#;

fn scan_transcript(env: &Env, contract: &str, pages: &str, json: bool) -> String {
    let c = env.write("contract.json", contract);
    let p = env.write("pages.jsonl", pages);
    let source = format!("replay:{p}");
    let mut args = vec!["scan", "--contract", &c, "--source", &source];
    if json {
        args.insert(0, "--json");
    }
    env.transcript(&args)
}

#[test]
fn contract_file_missing_says_the_cause_once() {
    let env = Env::new();
    let missing = env.path("nope.json");
    insta::assert_snapshot!(env.transcript(&["scan", "--contract", &missing, "--source", "sim:"]));
}

#[test]
fn contract_malformed_json_is_placed_at_line_and_column() {
    let env = Env::new();
    let contract = "{\n  \"source\": \"customers\",\n  \"page_size\": 10,,\n}\n";
    insta::assert_snapshot!(scan_transcript(&env, contract, PAGES, false));
}

#[test]
fn contract_unknown_key_is_placed_and_the_key_meant_suggested() {
    let env = Env::new();
    let contract = "{\n  \"source\": \"customers\",\n  \"page_sise\": 10\n}\n";
    insta::assert_snapshot!(scan_transcript(&env, contract, PAGES, false));
}

#[test]
fn contract_unknown_key_as_a_json_error_object() {
    let env = Env::new();
    let contract = "{\n  \"source\": \"customers\",\n  \"page_sise\": 10\n}\n";
    insta::assert_snapshot!(scan_transcript(&env, contract, PAGES, true));
}

#[test]
fn contract_nested_unknown_key_and_bad_value_are_placed() {
    let env = Env::new();
    let nested = "{\"source\": \"s\",\n \"limits\": {\"max_page\": 3}}";
    let zero = "{\"source\": \"s\",\n\n   \"page_size\": 0}";
    let no_source = "{\"tenant\": \"acme\"}";
    let text = [nested, zero, no_source]
        .map(|c| scan_transcript(&env, c, PAGES, false))
        .join("\n");
    insta::assert_snapshot!(text);
}

#[test]
fn replay_malformed_line_is_placed_once() {
    let env = Env::new();
    let pages = "{\"cursor\": null, \"items\": [1], \"next\": \"c1\"}\n{\"cursor\": \"c1\", \"items\": [2,, \"next\": null}\n";
    insta::assert_snapshot!(scan_transcript(&env, r#"{"source": "s"}"#, pages, false));
}

#[test]
fn replay_unknown_key_suggests_the_key_meant() {
    let env = Env::new();
    let pages = "{\"cursor\": null, \"items\": [1], \"nxt\": null}\n";
    let text = [false, true].map(|json| scan_transcript(&env, r#"{"source": "s"}"#, pages, json));
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn replay_that_runs_out_leaves_the_run_interrupted_and_says_how_to_resume() {
    let env = Env::new();
    let pages = "{\"cursor\": null, \"items\": [1, 2], \"next\": \"SECRET-cursor-7\", \"snapshot\": \"s1\"}\n";
    let first = scan_transcript(
        &env,
        r#"{"source": "s", "snapshot_id": "s1"}"#,
        pages,
        false,
    );
    assert!(!first.contains("SECRET"), "a cursor leaked: {first}");
    let runs = env.transcript(&["runs"]);
    // The rest of the collection appears; the run continues from its committed page.
    env.write(
        "pages.jsonl",
        &format!("{pages}{{\"cursor\": \"SECRET-cursor-7\", \"items\": [3], \"next\": null, \"snapshot\": \"s1\"}}\n"),
    );
    let (code, out, err) = env.sl(&["resume", "run-1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("run-1  VERIFIED"), "{out}");
    let strip_time = |s: String| {
        s.lines()
            .map(|l| match l.rfind("  20") {
                Some(i) if l.starts_with("run-") => l[..i].trim_end().to_owned() + "  [TIME]",
                _ => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!(format!("{first}\n{}", strip_time(runs)));
}

#[test]
fn store_problems_are_named_as_what_they_are() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s"}"#);
    let mut text = String::new();
    let mut case = |title: &str, args: &[&str]| {
        let mut all = vec!["--store"];
        all.extend_from_slice(args);
        let (code, out, err) = util::run(&all);
        text.push_str(&format!(
            "== {title}\nexit {code}\n--- stdout\n{out}--- stderr\n{err}"
        ));
    };
    let missing = env.path("nope.redb");
    case("missing, read", &[&missing, "runs"]);
    let no_dir = env.path("no/such/dir/s.redb");
    case(
        "missing directory, write",
        &[&no_dir, "scan", "--contract", &c, "--source", "sim:"],
    );
    let dir = env.path("");
    case("a directory", &[&dir, "runs"]);
    let empty = env.write("empty.redb", "");
    case("empty file", &[&empty, "runs"]);
    let text_file = env.write("notes.redb", &"not a store\n".repeat(500));
    case("not a store", &[&text_file, "runs"]);
    insta::assert_snapshot!(env.scrub(&text));
}

/// Writes one key of a table into a redb file directly (how the format tests make files).
fn write_meta(path: &str, key: &str, value: &[u8]) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let def: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
        txn.open_table(def).unwrap().insert(key, value).unwrap();
    }
    txn.commit().unwrap();
}

#[test]
fn store_formats_and_damage_are_named() {
    let env = Env::new();
    env.sim_run(100);
    let pristine = std::fs::read(&env.store).unwrap();
    let mut text = String::new();
    for (title, version) in [("newer format", 99u32), ("older format", 1u32)] {
        std::fs::write(&env.store, &pristine).unwrap();
        write_meta(&env.store, "format_version", &version.to_le_bytes());
        text.push_str(&format!("== {title}\n{}", env.transcript(&["runs"])));
    }
    std::fs::write(&env.store, &pristine).unwrap();
    let db = redb::Database::open(&env.store).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let def: redb::TableDefinition<(u64, u64), &[u8]> = redb::TableDefinition::new("ids");
        txn.open_table(def)
            .unwrap()
            .insert((1, 0), [1u8, 2, 3].as_slice())
            .unwrap();
    }
    txn.commit().unwrap();
    drop(db);
    text.push_str(&format!(
        "== damaged value\n{}",
        env.transcript(&["receipt", "1"])
    ));
    text.push_str(&format!(
        "== damaged value, json\n{}",
        env.transcript(&["--json", "receipt", "1"])
    ));
    insta::assert_snapshot!(text);
}

#[test]
fn a_busy_store_exits_5_and_waits_with_wait() {
    let env = Env::new();
    env.sim_run(10);
    let c = env.write("c.json", r#"{"source": "s"}"#);
    // This process holds the store for writing, as a running scan would.
    let held =
        scanledger::Store::open(Path::new(&env.store), scanledger::StoreOptions::new()).unwrap();
    let scan = [
        "scan",
        "--contract",
        c.as_str(),
        "--source",
        "sim:records=5",
    ];
    let mut text = env.transcript(&scan);
    let mut json = vec!["--json"];
    json.extend_from_slice(&scan);
    text.push_str(&env.transcript(&json));
    let mut waiting = vec!["--wait", "1"];
    waiting.extend_from_slice(&scan);
    let started = std::time::Instant::now();
    let (code, _, _) = env.sl(&waiting);
    assert_eq!(code, 5, "still busy after the wait");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "--wait waited"
    );
    // Readers are not blocked by a writer.
    let (code, out, err) = env.sl(&["runs"]);
    assert_eq!(code, 0, "{out}{err}");
    drop(held);
    let (code, out, err) = env.sl(&waiting);
    assert_eq!(code, 0, "free once the writer is gone: {out}{err}");
    insta::assert_snapshot!(text);
}

#[test]
fn usage_errors_say_what_to_do_next() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s"}"#);
    let mut text = String::new();
    let mut case = |title: &str, args: &[&str]| {
        text.push_str(&format!("== {title}\n{}", env.transcript(args)));
    };
    drop(scanledger::Store::open(Path::new(&env.store), scanledger::StoreOptions::new()).unwrap());
    case("latest in an empty store", &["receipt", "latest"]);
    env.sim_run(300);
    case("unknown subcommand", &["scna"]);
    case("unknown subcommand, json", &["--json", "scna"]);
    case("two similar subcommands", &["recipt", "1"]);
    case("two similar subcommands, json", &["--json", "recipt", "1"]);
    case("no similar subcommand", &["zzzz"]);
    case(
        "checkpoint-every 0",
        &[
            "scan",
            "--contract",
            &c,
            "--source",
            "sim:",
            "--checkpoint-every",
            "0",
        ],
    );
    case("missing without a reference", &["missing", "run-1"]);
    case(
        "range out of order",
        &["missing", "run-1", "--range", "9..3"],
    );
    case("unknown run", &["receipt", "run-9"]);
    case("unknown run, json", &["--json", "receipt", "9"]);
    case("not a run", &["receipt", "nine"]);
    case("explain an unknown kind", &["explain", "duplicate"]);
    case("unknown label", &["export", "1", "--label", "nope"]);
    case(
        "unknown source kind",
        &["scan", "--contract", &c, "--source", "ftp:x"],
    );
    insta::assert_snapshot!(text);
}

#[test]
fn a_range_error_on_a_prefixed_run_names_the_prefix() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "id_codec": "prefixed"}"#);
    let p = env.write(
        "p.jsonl",
        r#"{"cursor": null, "items": {"range": [1, 9], "prefix": "customer-"}, "next": null}"#,
    );
    let (code, _, err) = env.sl(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!(env.transcript(&["missing", "1", "--range", "1..5"]));
}

/// With `--json` the did-you-mean of a mistyped command took clap's first candidate, the
/// least similar (`recipt` suggested `report`), while the text listed both. Both now name
/// the most similar command, the same one.
#[test]
fn a_mistyped_command_gets_the_same_suggestion_in_text_and_json() {
    let env = Env::new();
    for (typed, meant) in [
        ("recipt", "receipt"),
        ("repot", "report"),
        ("rns", "runs"),
        ("exprt", "export"),
        ("verfy", "verify"),
        ("mising", "missing"),
        ("resme", "resume"),
        ("scna", "scan"),
    ] {
        let hint = format!("did you mean `{meant}`?");
        let (code, out, err) = env.sl(&[typed, "1"]);
        assert_eq!(code, 2, "{out}{err}");
        let text_hints: Vec<&str> = err
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("hint: "))
            .collect();
        assert_eq!(text_hints, [hint.as_str()], "{typed}: {err}");
        let (code, _, err) = env.sl(&["--json", typed, "1"]);
        assert_eq!(code, 2);
        let v: serde_json::Value = serde_json::from_str(&err).unwrap();
        assert_eq!(v["error"]["hint"], hint.as_str(), "{typed}: {err}");
    }
}
