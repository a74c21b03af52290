//! A run a source error stopped says what the error was, in every face: `runs` (text and
//! `--json`), `receipt`, the HTML `report` and the MCP tools `list_runs` and `get_receipt`; a
//! resume that goes on clears it. The store keeps the message made safe (no raw cursor, no
//! control character), so no face has to.
//!
//! The drift this pins: `runs`, `receipt` and `report` said a run was interrupted and how to
//! resume it, but not the error, which only the command that stopped had printed once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::util::Env;

/// The raw cursor of the page the error came at: it must appear nowhere.
const CURSOR: &str = "rawcur_SECRET-continuation-2";

/// A replay of two pages and a third line, malformed by the field `bad` when given.
fn pages_text(bad: Option<&str>) -> String {
    let mut third = json!({"cursor": CURSOR, "items": [5], "next": null, "snapshot": "s1"});
    if let Some(field) = bad {
        third[field] = json!(1);
    }
    let lines = [
        json!({"cursor": null, "items": [1, 2], "next": "rawcur_1", "snapshot": "s1"}),
        json!({"cursor": "rawcur_1", "items": [3, 4], "next": CURSOR, "snapshot": "s1"}),
        third,
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A run the source stops after two pages: its third line has an unknown field.
fn stopped_run(env: &Env) {
    let pages = env.write("pages.jsonl", &pages_text(Some("bogus")));
    let c = env.write("c.json", r#"{"source": "s", "snapshot_id": "s1"}"#);
    let (code, out, err) = env.sl(&[
        "scan",
        "--contract",
        &c,
        "--source",
        &format!("replay:{pages}"),
    ]);
    assert_eq!(code, 2, "{out}{err}");
}

fn json_of(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (_, out, err) = env.sl(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}{err}"))
}

#[test]
fn every_face_says_the_error_that_stopped_a_run_and_a_resume_clears_it() {
    let env = Env::new();
    stopped_run(&env);
    let mut seen = String::new();

    // runs --json: the row carries the stop, with the pages it had.
    let runs = json_of(&env, &["runs"]);
    let row = &runs["runs"][0];
    assert_eq!(row["state"], "interrupted", "{runs}");
    let stop = &row["stopped_by"];
    let message = stop["message"].as_str().expect("a message").to_owned();
    assert!(message.contains("pages.jsonl:3:"), "{message}");
    assert!(message.contains("bogus"), "{message}");
    assert_eq!(stop["pages_observed"], 2, "{stop}");
    assert!(
        stop["at"].as_str().is_some_and(|t| t.starts_with("20")),
        "{stop}"
    );
    seen.push_str(&runs.to_string());

    // runs and receipt (text): the note says it.
    for args in [vec!["runs"], vec!["receipt", "run-1"]] {
        let (_, out, err) = env.sl(&args);
        assert!(
            err.contains("run-1 is interrupted (stopped on an error after 2 pages: ")
                && err.contains("pages.jsonl:3:"),
            "{args:?}: {err}"
        );
        seen.push_str(&out);
        seen.push_str(&err);
    }
    // receipt --json stays a receipt (verify reads it back).
    let receipt = json_of(&env, &["receipt", "run-1"]);
    assert!(receipt.get("stopped_by").is_none(), "{receipt}");

    // The report: in its verdict and beside the state.
    let html_path = env.path().join("r.html");
    let html_file = html_path.to_string_lossy().into_owned();
    let (code, out, err) = env.sl(&["report", "run-1", "-o", &html_file]);
    assert_eq!(code, 3, "{out}{err}");
    let html = std::fs::read_to_string(&html_path).expect("the report");
    assert!(
        html.contains("stopped on an error after 2 pages: ") && html.contains("pages.jsonl:3:"),
        "the report does not say the error"
    );
    assert!(html.contains("<dt>stopped by</dt>"), "no stopped-by field");
    seen.push_str(&html);

    // The MCP tools answer the same stop.
    #[cfg(feature = "mcp")]
    {
        let answers = crate::cli_mcp::mcp_calls(
            &env.store,
            &[
                ("list_runs", json!({})),
                ("get_receipt", json!({"run_id": "run-1"})),
            ],
        );
        assert_eq!(answers[0]["runs"][0]["stopped_by"], *stop, "{}", answers[0]);
        assert_eq!(answers[1]["stopped_by"], *stop, "{}", answers[1]);
        assert_eq!(answers[1]["state"], "interrupted", "{}", answers[1]);
        seen.push_str(&answers[1].to_string());
    }

    assert!(!seen.contains("SECRET"), "a raw cursor was shown");
    let file = std::fs::read(&env.store).expect("the store file");
    assert!(
        !file.windows(CURSOR.len()).any(|w| w == CURSOR.as_bytes()),
        "the raw cursor is in the store file"
    );

    // Fixed, the run resumes to its end, and the stop is gone from every answer.
    env.write("pages.jsonl", &pages_text(None));
    let (code, out, err) = env.sl(&["resume", "run-1"]);
    assert_eq!(code, 0, "{out}{err}");
    let runs = json_of(&env, &["runs"]);
    assert_eq!(runs["runs"][0]["stopped_by"], Value::Null, "{runs}");
    let (_, _, err) = env.sl(&["receipt", "run-1"]);
    assert!(!err.contains("stopped on an error"), "{err}");
}

#[test]
fn a_resume_that_stops_again_records_its_own_error_and_delete_drops_it() {
    let env = Env::new();
    stopped_run(&env);
    // Another error at the same page: the new one replaces the old.
    env.write("pages.jsonl", &pages_text(Some("other")));
    let (code, _, _) = env.sl(&["resume", "run-1"]);
    assert_eq!(code, 2);
    let runs = json_of(&env, &["runs"]);
    let message = runs["runs"][0]["stopped_by"]["message"]
        .as_str()
        .expect("a stop")
        .to_owned();
    assert!(
        message.contains("other") && !message.contains("bogus"),
        "{message}"
    );
    // A deleted run takes its stop with it.
    let (code, _, err) = env.sl(&["delete", "run-1"]);
    assert_eq!(code, 0, "{err}");
    let runs = json_of(&env, &["runs"]);
    assert_eq!(runs["runs"], json!([]), "{runs}");
}
