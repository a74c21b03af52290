//! Bad input through the real binary: exit 2, a message that names the file and the place,
//! never a cursor.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs a scan of `contract` over `pages` (texts) in a fresh directory.
fn scan_texts(contract: &str, pages: &str) -> (i32, String, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let c = util::write(tmp.path(), "contract.json", contract);
    let p = util::write(tmp.path(), "pages.jsonl", pages);
    let store = tmp.path().join("s.redb");
    let (code, out, err) = util::run(&[
        "--store",
        store.to_str().unwrap(),
        "--json",
        "scan",
        "--contract",
        &c,
        "--source",
        &format!("replay:{p}"),
    ]);
    (code, out, err, tmp)
}

/// The `{"error": {...}}` object `--json` prints on stderr: (file name, line, column, message).
fn json_error(err: &str) -> (String, Option<u64>, Option<u64>, String) {
    let v: serde_json::Value = serde_json::from_str(err).expect("a JSON error object on stderr");
    let e = &v["error"];
    let file = e["file"].as_str().unwrap_or("");
    let name = std::path::Path::new(file)
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    (
        name,
        e["line"].as_u64(),
        e["column"].as_u64(),
        e["message"].as_str().unwrap_or("").to_owned(),
    )
}

const GOOD_CONTRACT: &str = r#"{"source": "customers", "snapshot_id": "s1"}"#;
const GOOD_PAGES: &str = r#"{"cursor": null, "items": [1, 2], "next": null, "snapshot": "s1"}"#;

#[test]
fn good_input_of_the_bad_input_tests_is_verified() -> TestResult {
    // The bad-input tests below each break one thing of this pair.
    let (code, out, err, _tmp) = scan_texts(GOOD_CONTRACT, GOOD_PAGES);
    assert_eq!(code, 0, "{out}{err}");
    Ok(())
}

#[test]
fn malformed_contract_json_names_file_line_and_column() -> TestResult {
    let contract = "{\n  \"source\": \"customers\",\n  \"page_size\": 10,,\n}\n";
    let (code, out, err, _tmp) = scan_texts(contract, GOOD_PAGES);
    assert_eq!(code, 2, "{out}{err}");
    let (file, line, column, _) = json_error(&err);
    assert_eq!(
        (file.as_str(), line, column),
        ("contract.json", Some(3), Some(19)),
        "{err}"
    );
    assert!(out.is_empty(), "no receipt for bad input: {out}");
    Ok(())
}

#[test]
fn unknown_contract_key_is_named() -> TestResult {
    let (code, _, err, _tmp) = scan_texts(r#"{"source": "customers", "pagesize": 3}"#, GOOD_PAGES);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pagesize"), "{err}");
    assert!(err.contains("contract.json"), "{err}");
    Ok(())
}

#[test]
fn unknown_nested_limit_key_is_named_with_its_parent() -> TestResult {
    let contract = r#"{"source": "customers", "limits": {"max_page": 3}}"#;
    let (code, _, err, _tmp) = scan_texts(contract, GOOD_PAGES);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("limits.max_page"), "{err}");
    Ok(())
}

#[test]
fn contract_without_source_is_refused() -> TestResult {
    let (code, _, err, _tmp) = scan_texts(r#"{"tenant": "acme"}"#, GOOD_PAGES);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("source"), "{err}");
    Ok(())
}

#[test]
fn contract_with_unknown_enum_value_names_the_key() -> TestResult {
    for (key, value) in [
        ("end_signal", "\"never\""),
        ("id_codec", "\"uuid\""),
        ("on_expired_cursor", "\"retry\""),
        ("on_snapshot_change", "\"ignore\""),
        ("mode", "{\"sample\": 0}"),
        ("page_size", "0"),
        ("expected_count", "-1"),
    ] {
        let contract = format!(r#"{{"source": "customers", "{key}": {value}}}"#);
        let (code, _, err, _tmp) = scan_texts(&contract, GOOD_PAGES);
        assert_eq!(code, 2, "{key}: {err}");
        assert!(err.contains(key), "{key}: {err}");
    }
    Ok(())
}

#[test]
fn missing_contract_file_is_an_input_error() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let p = util::write(tmp.path(), "pages.jsonl", GOOD_PAGES);
    let store = tmp.path().join("s.redb");
    let missing = tmp.path().join("nope.json");
    let (code, _, err) = util::run(&[
        "--store",
        store.to_str().unwrap(),
        "scan",
        "--contract",
        missing.to_str().unwrap(),
        "--source",
        &format!("replay:{p}"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nope.json"), "{err}");
    Ok(())
}

#[test]
fn malformed_replay_line_names_file_and_line() -> TestResult {
    let pages = "{\"cursor\": null, \"items\": [1], \"next\": \"SECRET-CURSOR-bad-1\"}\n{\"cursor\": \"SECRET-CURSOR-bad-1\", \"items\": [2,, \"next\": null}\n";
    let (code, out, err, _tmp) = scan_texts(GOOD_CONTRACT, pages);
    assert_eq!(code, 2, "{out}{err}");
    let (file, line, column, message) = json_error(&err);
    assert_eq!(
        (file.as_str(), line, column),
        ("pages.jsonl", Some(2), Some(47)),
        "{err}"
    );
    // The position is said once, by the fields: not again inside the message.
    assert!(!message.contains("line"), "{message}");
    assert!(!err.contains("SECRET-CURSOR"), "a cursor leaked: {err}");
    Ok(())
}

#[test]
fn unknown_replay_key_names_file_line_and_key() -> TestResult {
    let pages = concat!(
        "{\"cursor\": null, \"items\": [1], \"next\": \"c1\"}\n",
        "\n",
        "{\"cursor\": \"c1\", \"items\": [2], \"nxt\": null}\n"
    );
    let (code, _, err, _tmp) = scan_texts(GOOD_CONTRACT, pages);
    assert_eq!(code, 2, "{err}");
    let (file, line, _, message) = json_error(&err);
    assert_eq!((file.as_str(), line), ("pages.jsonl", Some(3)), "{err}");
    assert!(message.contains("nxt"), "{err}");
    Ok(())
}

#[test]
fn replay_lines_with_bad_fields_are_input_errors() -> TestResult {
    for (line, needle) in [
        (r#"{"cursor": null, "error": "teapot"}"#, "error"),
        (r#"{"cursor": 5, "items": []}"#, "cursor"),
        (r#"{"items": []}"#, "cursor"),
        (
            r#"{"cursor": null, "items": [{"id": 1, "tags": []}]}"#,
            "tags",
        ),
        (
            r#"{"cursor": null, "items": [{"id": 1, "labels": [3]}]}"#,
            "labels",
        ),
        (r#"{"cursor": null, "items": {"range": [5, 1]}}"#, "range"),
        (
            r#"{"cursor": null, "items": [], "complete": "yes"}"#,
            "complete",
        ),
        (
            r#"{"cursor": null, "items": [], "delay_ms": -1}"#,
            "delay_ms",
        ),
        (r#"[1, 2]"#, "object"),
    ] {
        let (code, out, err, _tmp) = scan_texts(GOOD_CONTRACT, line);
        assert_eq!(code, 2, "{line}: {out}{err}");
        let (file, line_no, _, message) = json_error(&err);
        assert_eq!(
            (file.as_str(), line_no),
            ("pages.jsonl", Some(1)),
            "{line}: {err}"
        );
        assert!(message.contains(needle), "{line}: {err}");
    }
    Ok(())
}

#[test]
fn empty_replay_file_is_an_input_error() -> TestResult {
    let (code, _, err, _tmp) = scan_texts(GOOD_CONTRACT, "\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pages.jsonl"), "{err}");
    Ok(())
}

#[test]
fn request_without_replay_line_is_an_input_error_without_the_cursor() -> TestResult {
    let pages =
        r#"{"cursor": null, "items": [1], "next": "SECRET-CURSOR-unanswered-1", "snapshot": "s1"}"#;
    let (code, out, err, _tmp) = scan_texts(GOOD_CONTRACT, pages);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("pages.jsonl"), "{err}");
    assert!(err.contains("no line"), "{err}");
    assert!(!err.contains("SECRET-CURSOR"), "a cursor leaked: {err}");
    assert!(!out.contains("SECRET-CURSOR"), "a cursor leaked: {out}");
    Ok(())
}

#[test]
fn high_water_request_without_replay_line_is_an_input_error() -> TestResult {
    let contract = r#"{"source": "customers", "on_expired_cursor": "high_water"}"#;
    let pages = concat!(
        "{\"cursor\": null, \"items\": [1, 2], \"next\": \"SECRET-CURSOR-hw-1\"}\n",
        "{\"cursor\": \"SECRET-CURSOR-hw-1\", \"error\": \"expired_cursor\"}\n",
        "{\"after\": 3, \"items\": [4], \"next\": null}\n"
    );
    let (code, _, err, _tmp) = scan_texts(contract, pages);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no line"), "{err}");
    assert!(!err.contains("SECRET-CURSOR"), "a cursor leaked: {err}");
    Ok(())
}

#[test]
fn unknown_source_kind_is_an_input_error() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let c = util::write(tmp.path(), "contract.json", GOOD_CONTRACT);
    let store = tmp.path().join("s.redb");
    let (code, _, err) = util::run(&[
        "--store",
        store.to_str().unwrap(),
        "scan",
        "--contract",
        &c,
        "--source",
        "ftp:somewhere",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ftp:somewhere"), "{err}");
    Ok(())
}
