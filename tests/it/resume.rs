//! Resume, expiry and restart policies, through the real binary and a durable store (docs/REFERENCE.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::Value;

use crate::util;

struct Env {
    dir: tempfile::TempDir,
    store: String,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        Env { dir, store }
    }
    fn file(&self, name: &str, text: &str) -> String {
        util::write(self.dir.path(), name, text)
    }
    /// Runs a command against the store with --json; returns (exit, parsed stdout or Null, stderr).
    fn json(&self, args: &[&str]) -> (i32, Value, String) {
        let mut all = vec!["--store", self.store.as_str(), "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = util::run(&all);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }
}

const SIM: &str = "sim:records=1000";

fn reference_root() -> Value {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "page_size": 100}"#);
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", SIM]);
    assert_eq!(code, 0, "{err}");
    r["merkle_root"].clone()
}

#[test]
fn a_budget_stopped_run_resumes_into_the_same_full_run() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "sim", "page_size": 100, "limits": {"max_pages": 3}}"#,
    );
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", SIM]);
    assert_eq!(code, 3);
    assert_eq!(r["limits_hit"], serde_json::json!(["max_pages"]));
    assert_eq!(r["conclusion_scope"], "none");
    assert_eq!(r["unique_ids_observed"], 300);
    // Without a raised budget the resumed session stops again at once.
    // No --source: the run recorded the one it was started with.
    let (code, r, _) = env.json(&["resume", "run-1", "--max-pages", "100"]);
    assert_eq!(code, 0);
    assert_eq!(r["run_id"], "run-1");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["unique_ids_observed"], 1000);
    assert_eq!(r["pages_observed"], 10);
    assert_eq!(r["violations"], serde_json::json!([]));
    assert_eq!(r["merkle_root"], reference_root());
    // A verified run has nothing left to request.
    let (code, _, err) = env.json(&["resume", "run-1", "--source", SIM]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be resumed"), "{err}");
}

#[test]
fn a_sample_resumes_into_a_full_scan() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "sim", "page_size": 100, "mode": {"sample": 250}}"#,
    );
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", SIM]);
    assert_eq!(code, 3);
    assert_eq!(r["limits_hit"], serde_json::json!(["sample"]));
    assert_eq!(r["conclusion_scope"], "none");
    assert_eq!(r["terminal_cursor_observed"], false);
    assert_eq!(
        r["records_observed"], 300,
        "a sample stops at the page that reaches N"
    );
    let (code, r, _) = env.json(&["resume", "1", "--source", SIM]);
    assert_eq!(code, 0);
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["merkle_root"], reference_root());
}

#[test]
fn a_failed_page_resumes_when_the_source_recovers() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "sim", "page_size": 100, "limits": {"retries": 1}}"#,
    );
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=1000,fail_at=4",
    ]);
    assert_eq!(code, 3);
    assert_eq!(r["violations"][0]["kind"], "page_failed");
    assert_eq!(r["violations"][0]["page"], 4);
    assert_eq!(r["unique_ids_observed"], 300);
    let (code, r, _) = env.json(&["resume", "1", "--source", SIM]);
    assert_eq!(code, 0);
    assert_eq!(r["merkle_root"], reference_root());
}

#[test]
fn a_run_with_a_failure_cannot_be_resumed() {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "page_size": 100}"#);
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=1000,dup_at=3",
    ]);
    assert_eq!(code, 4);
    assert_eq!(r["violations"][0]["kind"], "duplicate_id");
    let (code, _, err) = env.json(&["resume", "1", "--source", SIM]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be resumed"), "{err}");
}

#[test]
fn without_kept_cursors_resume_is_refused_with_the_reason() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "sim", "page_size": 100, "limits": {"max_pages": 2}}"#,
    );
    let (code, _, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        SIM,
        "--no-keep-cursors",
    ]);
    assert_eq!(code, 3);
    let (code, _, err) = env.json(&["resume", "1", "--source", SIM, "--max-pages", "50"]);
    assert_eq!(code, 2);
    assert!(err.contains("cursor was not kept"), "{err}");
}

#[test]
fn group_commit_gives_the_same_run() {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "page_size": 100}"#);
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        SIM,
        "--checkpoint-every",
        "4",
    ]);
    assert_eq!(code, 0);
    assert_eq!(r["merkle_root"], reference_root());
}

#[test]
fn expired_cursor_with_restart_supersedes_the_old_run_and_never_splices() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "sim", "page_size": 100, "on_expired_cursor": "restart"}"#,
    );
    let (code, r, err) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=1000,expire_at=5",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["run_id"], "run-2");
    assert_eq!(r["restarts"], 1);
    assert_eq!(r["restarted_from"], "run-1");
    assert_eq!(r["unique_ids_observed"], 1000);
    assert_eq!(
        r["duplicate_ids"], 0,
        "the new run must not inherit the old run's IDs"
    );
    let (_, runs, _) = env.json(&["runs"]);
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs[0]["run_id"], "run-2", "newest first");
    assert_eq!(runs[1]["state"], "superseded");
    let (code, old, _) = env.json(&["receipt", "run-1"]);
    assert_eq!(code, 3);
    assert_eq!(old["superseded_by"], "run-2");
    assert_eq!(old["violations"][0]["kind"], "expired_cursor");
    let (code, _, err) = env.json(&["resume", "run-1", "--source", SIM]);
    assert_eq!(code, 2);
    assert!(err.contains("superseded"), "{err}");
}

#[test]
fn expired_cursor_with_block_is_unknown_and_resumable() {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "page_size": 100}"#);
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=1000,expire_at=5",
    ]);
    assert_eq!(code, 3);
    assert_eq!(r["violations"][0]["kind"], "expired_cursor");
    // The source honours the cursor again (a fresh process of the sim source).
    let (code, r, _) = env.json(&["resume", "1", "--source", "sim:records=1000"]);
    assert_eq!(code, 0);
    assert_eq!(r["merkle_root"], reference_root());
}

#[test]
fn high_water_continues_after_the_last_key_and_keeps_the_snapshot_claim_only_if_echoed() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "t", "snapshot_id": "S1", "on_expired_cursor": "high_water"}"#,
    );
    // The continuation echoes the pinned snapshot: the claim stays all_records_in_snapshot.
    let p = env.file(
        "p.jsonl",
        concat!(
            r#"{"cursor": null, "items": [1, 2], "next": "c2", "snapshot": "S1"}"#,
            "\n",
            r#"{"cursor": "c2", "error": "expired_cursor"}"#,
            "\n",
            r#"{"after": 2, "items": [3, 4], "next": null, "snapshot": "S1"}"#,
            "\n",
        ),
    );
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 4);
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    // Without the echo the claim drops to the live collection.
    let p = env.file(
        "q.jsonl",
        concat!(
            r#"{"cursor": null, "items": [1, 2], "next": "c2", "snapshot": "S1"}"#,
            "\n",
            r#"{"cursor": "c2", "error": "expired_cursor"}"#,
            "\n",
            r#"{"after": 2, "items": [3, 4], "next": null}"#,
            "\n",
        ),
    );
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
    assert_eq!(code, 0);
    assert_eq!(r["conclusion_scope"], "all_records_live");
}

#[test]
fn string_ids_share_one_interner_per_collection_across_runs_and_resumes() {
    let env = Env::new();
    let c = env.file(
        "c.json",
        r#"{"source": "tickets", "tenant": "acme", "id_codec": "string", "limits": {"max_pages": 1}}"#,
    );
    let p = env.file(
        "p.jsonl",
        concat!(
            r#"{"cursor": null, "items": ["t-a", "t-b"], "next": "c2"}"#,
            "\n",
            r#"{"cursor": "c2", "items": ["t-c"], "next": null}"#,
            "\n",
        ),
    );
    let src = format!("replay:{p}");
    let (code, _, _) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 3);
    let (code, first, _) = env.json(&["resume", "1", "--source", &src, "--max-pages", "10"]);
    assert_eq!(code, 0);
    // A second run of the same collection, in another order, has the same ID set and root.
    let p2 = env.file(
        "p2.jsonl",
        r#"{"cursor": null, "items": ["t-c", "t-a", "t-b"], "next": null}"#,
    );
    let c2 = env.file(
        "c2.json",
        r#"{"source": "tickets", "tenant": "acme", "id_codec": "string"}"#,
    );
    let (code, second, _) = env.json(&[
        "scan",
        "--contract",
        &c2,
        "--source",
        &format!("replay:{p2}"),
    ]);
    assert_eq!(code, 0);
    assert_eq!(first["merkle_root"], second["merkle_root"]);
    assert_eq!(second["unique_ids_observed"], 3);
}

#[test]
fn count_mode_asks_the_server_count_and_otherwise_traverses_fully() {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "mode": "count"}"#);
    // A source with an authorized server-side count: asked, no traversal, no coverage claim.
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", "sim:records=5000"]);
    assert_eq!(
        code, 3,
        "a server's count is no traversal: unknown, its total in count_total"
    );
    assert_eq!(r["count_total"], 5000);
    assert_eq!(r["pages_observed"], 0);
    assert_eq!(r["conclusion_scope"], "none");
    // Without one: a full traversal, whose total counts only because it is verified.
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=5000,count=false",
    ]);
    assert_eq!(code, 0);
    assert_eq!(r["count_total"], 5000);
    assert_eq!(r["pages_observed"], 50);
    // A partial traversal never yields a total.
    let (code, r, _) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=5000,count=false,fail_at=3",
    ]);
    assert_eq!(code, 3);
    assert_eq!(r["count_total"], Value::Null);
}
