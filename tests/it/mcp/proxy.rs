//! `scanledger mcp proxy` in front of the Python SDK's paginated server, driven by the Python
//! SDK's client over stdio and streamable HTTP.

use std::path::Path;

use serde_json::{json, Value};

use super::server::{drive, HttpServer};
use super::{peers, python_mcp};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn pg(ids: &[u64], next: Option<&str>, status: &str) -> Value {
    json!({"structured": {"items": ids.iter().map(|i| json!({"id": i, "title": format!("ticket {i}")})).collect::<Vec<_>>(),
        "next": next, "query": {"status": status}}})
}

/// The upstream: routes on `status|cursor`; `open` is clean over three pages, `dropped` loses
/// its filter on page 3, `loop` repeats a cursor, `flaky` fails page 2, and tools/list comes
/// in pages of two.
fn upstream_scenario() -> Value {
    json!({"key": "status|cursor", "tools_list_page": 2, "print_env": "UPSTREAM_TOKEN", "routes": {
        "open|null": [pg(&[1, 2], Some("c2"), "open")],
        "open|c2": [pg(&[3, 4], Some("c3"), "open")],
        "open|c3": [pg(&[5], None, "open")],
        "dropped|null": [pg(&[1, 2], Some("c2"), "dropped")],
        "dropped|c2": [pg(&[3, 4], Some("c3"), "dropped")],
        "dropped|c3": [{"structured": {"items": [{"id": 9}], "next": null, "query": {}}}],
        "loop|null": [pg(&[1, 2], Some("c2"), "loop")],
        "loop|c2": [pg(&[3, 4], Some("c3"), "loop")],
        "loop|c3": [pg(&[5, 6], Some("c2"), "loop")],
        "flaky|null": [pg(&[1, 2], Some("c2"), "flaky")],
        "flaky|c2": [{"is_error": "upstream overloaded, try later"}],
    }})
}

fn proxy_config(dir: &Path, store: bool) -> String {
    let sc = util::write(dir, "upstream.json", &upstream_scenario().to_string());
    let mut cfg = json!({
        "upstream": {"command": ["python3", peers().join("paged_server.py").to_string_lossy(), sc]},
        "paginated": {"search_items": {
            "cursor_arg": "cursor", "page_size_arg": "page_size", "items": "/items", "next": "/next",
            "query": "/query", "keep_items": true,
            "contract": {"page_size": 2, "id_codec": "int", "limits": {"retries": 1, "page_timeout_ms": 10000}}}},
    });
    if store {
        cfg["store"] = json!("proxy.redb");
    }
    util::write(dir, "proxy.json", &cfg.to_string())
}

fn script() -> Value {
    json!([
        {"list_tools": true},
        {"tool": "search_items", "arguments": {"status": "open"}},
        {"tool": "echo", "arguments": {"text": "forwarded as is"}},
        {"tool": "search_items", "arguments": {"status": "dropped"}},
        {"tool": "search_items", "arguments": {"status": "loop"}},
        {"tool": "search_items", "arguments": {"status": "flaky"}},
        {"tool": "search_items", "arguments": {"status": "open", "cursor": "c2"}},
    ])
}

#[track_caller]
fn check(lines: &[Value]) {
    assert_eq!(lines[0]["server"]["name"], "scanledger-proxy");
    // Every upstream tool, though the upstream lists them two per page.
    let tools = lines[1]["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        (names, lines[1]["pages"].as_u64()),
        (vec!["echo", "search_items", "whoami"], Some(1))
    );
    let search = tools.iter().find(|t| t["name"] == "search_items").unwrap();
    let props = search["input_schema"]["properties"].as_object().unwrap();
    assert!(
        props.contains_key("status")
            && !props.contains_key("cursor")
            && !props.contains_key("page_size"),
        "{search}"
    );
    // The whole inventory, its items kept, its receipt.
    let inv = &lines[2]["structured"];
    assert_eq!(
        (inv["outcome"].as_str(), &inv["ids"]),
        (Some("inventory"), &json!([1, 2, 3, 4, 5])),
        "{inv}"
    );
    assert_eq!(inv["items"].as_array().map(Vec::len), Some(5));
    assert_eq!(inv["items"][4]["title"], "ticket 5");
    assert_eq!(inv["receipt"]["pages_observed"], 3);
    assert_eq!(inv["server"], "paged-test-server 9.9.1");
    // An ordinary tool: the upstream's answer, unchanged.
    assert_eq!(
        (lines[3]["text"].as_str(), lines[3]["is_error"].as_bool()),
        (Some("forwarded as is"), Some(false))
    );
    // A filter dropped on page 3: failed, rejected; a loop: failed; a failed page: unknown.
    for (i, outcome, kind) in [
        (4, "failed_read", "query_changed"),
        (5, "failed_read", "repeated_cursor"),
        (6, "incomplete_read", "page_failed"),
    ] {
        let a = &lines[i]["structured"];
        assert_eq!(
            (a["outcome"].as_str(), a["reasons"][0]["kind"].as_str()),
            (Some(outcome), Some(kind)),
            "{a}"
        );
        let totals: Vec<&&str> = scanledger::mcp::TOTAL_LIKE_KEYS
            .iter()
            .filter(|k| a.get(**k).is_some())
            .collect();
        assert!(totals.is_empty(), "a partial answer with {totals:?}: {a}");
        assert_eq!(a["observed_so_far"]["is_lower_bound"], true);
    }
    assert_eq!(
        lines[6]["structured"]["retry"],
        json!({"tool": "search_items", "arguments": {"status": "flaky"}})
    );
    // The proxy pages itself: a caller's cursor is refused.
    assert_eq!(lines[7]["is_error"], true);
    assert!(
        lines[7]["structured"]["error"]
            .as_str()
            .unwrap()
            .contains("pages this tool itself"),
        "{}",
        lines[7]
    );
    // The upstream's raw cursors and its environment reach no answer.
    for l in lines {
        let text = l.to_string();
        for raw in ["\"c2\"", "\"c3\"", "tl-2", "canary-upstream"] {
            if l.get("tools").is_none() && !(raw == "\"c2\"" && std::ptr::eq(l, &lines[7])) {
                assert!(!text.contains(raw), "{raw} in an answer: {text}");
            }
        }
    }
}

#[test]
fn the_proxy_over_stdio_turns_a_paginated_tool_into_an_all_or_fail_one() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let cfg = proxy_config(dir.path(), true);
    let bin = util::bin().to_string_lossy().into_owned();
    let lines = drive_with_env(
        dir.path(),
        &script(),
        &["stdio", "--", &bin, "mcp", "proxy", "--config", &cfg],
    );
    check(&lines);
    // The runs are in the proxy's store, with the upstream as provenance.
    let store = scanledger::Store::open_read(&dir.path().join("proxy.redb"))?;
    let snap = store.read()?;
    assert_eq!(snap.runs()?.len(), 4);
    let spec = snap
        .header(scanledger::RunId(1))?
        .source_spec
        .unwrap_or_default();
    assert!(spec.ends_with("#server=paged-test-server 9.9.1"), "{spec}");
    Ok(())
}

/// drive.py with a canary in the environment the upstream inherits.
fn drive_with_env(dir: &Path, script: &Value, target: &[&str]) -> Vec<Value> {
    std::env::set_var("UPSTREAM_TOKEN", "canary-upstream-91c");
    drive(dir, script, target)
}

#[test]
fn the_proxy_over_streamable_http_answers_the_same_without_a_store() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let cfg = proxy_config(dir.path(), false);
    std::env::set_var("UPSTREAM_TOKEN", "canary-upstream-91c");
    let args: Vec<String> = [
        util::bin().to_string_lossy().as_ref(),
        "mcp",
        "proxy",
        "--config",
        &cfg,
        "--http",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let server = HttpServer::start(&args);
    check(&drive(dir.path(), &script(), &["http", &server.url]));
    Ok(())
}

#[test]
fn proxy_configs_are_refused_with_the_key() -> TestResult {
    let dir = tempfile::tempdir()?;
    for (cfg, words) in [
        (json!({}), "missing key \\\"upstream\\\""),
        (
            json!({"upstream": {"command": ["x"]}, "pagniated": {}}),
            "did you mean \\\"paginated\\\"",
        ),
        (
            json!({"upstream": {"comand": ["x"]}}),
            "did you mean \\\"command\\\"",
        ),
        (
            json!({"upstream": {"command": ["x"]}, "paginated": {"t": {"contract": {"query": {}}}}}),
            "each call's arguments are the query",
        ),
        (
            json!({"upstream": {"command": ["x"]}, "paginated": {"t": {"url": "http://h/mcp"}}}),
            "belongs to \\\"upstream\\\"",
        ),
        (
            json!({"upstream": {"command": ["/nonexistent/upstream"]}}),
            "cannot start the MCP server",
        ),
    ] {
        util::write(dir.path(), "p.json", &cfg.to_string());
        let r = super::bin(
            dir.path(),
            &["--json", "mcp", "proxy", "--config", "p.json"],
            &[],
        );
        assert_eq!(r.exit, 2, "{cfg}: {}", r.stderr);
        assert!(r.stderr.contains(words), "{cfg}: {}", r.stderr);
    }
    Ok(())
}
