//! `scanledger mcp proxy` as a drop-in for its upstream, driven by the Python SDK's
//! client (`tests/peers/drive.py`) over stdio, in front of real servers: the Python SDK's
//! `MCPServer` (`paged_server.py`), the conformance fixtures (`conformance_server.py`) and the
//! npm package `@modelcontextprotocol/server-everything`.
//!
//! Before this round the proxy answered only tools: a client behind it got `-32601` for
//! `resources/list`, no prompts, no templates, no reads, no sampling; and a client that asks
//! for a list once (many do) got the first page only when talking to the upstream directly.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use super::server::{drive, drive_with_stderr};
use super::{peers, python_mcp};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The pinned reference server (its 2025.11.25 release pages its 100 resources by 10).
pub(crate) const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2025.11.25";

/// Whether npx can run `package`: SKIPPED without it, a failure under CI.
pub(crate) fn npx_has(package: &str) -> bool {
    let ok = Command::new("npx")
        .args([
            "-y",
            &format!("--package={package}"),
            "--",
            "node",
            "-e",
            "0",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("npx cannot run {package}, and CI is set (.ci/run installs it)");
    }
    eprintln!("SKIPPED: npx cannot run {package} (Node with npx and the npm registry are needed)");
    false
}

fn names(line: &Value) -> Vec<&str> {
    line["names"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The proxy over stdio with `config` (a file in `dir`), as drive.py's target.
fn proxy_target(config: &str) -> Vec<String> {
    [
        "stdio",
        "--",
        util::bin().to_string_lossy().as_ref(),
        "mcp",
        "proxy",
        "--config",
        config,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The Python SDK upstream: tools in pages of 2 (5 tools, 3 pages), 5 resources in pages of
/// 2 whose last page names its own cursor again, a `-> str` tool returning tickets as JSON
/// text, and a tool that adds a tool and says so.
fn paged_upstream(dir: &Path) -> Vec<String> {
    let sc = util::write(
        dir,
        "upstream.json",
        &json!({"tools_list_page": 2, "resources": 5, "resources_page": 2, "resources_stuck": true,
            "routes": {},
            "tickets": {
                "null": {"tickets": [{"key": "T-1", "title": "a"}, {"key": "T-2", "title": "b"}], "next": "t2"},
                "t2": {"tickets": [{"key": "T-3", "title": "c"}], "next": null}}})
        .to_string(),
    );
    vec![
        "python3".into(),
        peers()
            .join("paged_server.py")
            .to_string_lossy()
            .into_owned(),
        sc,
    ]
}

#[test]
fn every_list_arrives_whole_in_one_page_and_the_surface_passes_through() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let upstream = paged_upstream(dir.path());
    let once = json!([{"list": "tools"}, {"list": "resources"}]);
    // Directly, a client that asks once sees the first page of each list only.
    let mut direct = vec!["stdio".to_owned(), "--".to_owned()];
    direct.extend(upstream.iter().cloned());
    let lines = drive(dir.path(), &once, &strs(&direct));
    assert_eq!(
        (names(&lines[1]).len(), names(&lines[2]).len()),
        (2, 2),
        "{lines:?}"
    );
    assert!(lines[1]["next_cursor"].is_string() && lines[2]["next_cursor"].is_string());
    // Through the proxy: whole lists, a JSON-text tool mapped to an inventory, a list change.
    let cfg = util::write(
        dir.path(),
        "proxy.json",
        &json!({"upstream": {"command": upstream, "init_timeout_ms": 120_000},
            "paginated": {"json_tickets": {"cursor_arg": "cursor", "items": "/tickets", "id": "/key",
                "next": "/next", "keep_items": true}}})
        .to_string(),
    );
    let (lines, stderr) = drive_with_stderr(
        dir.path(),
        &json!([
            {"list": "tools"},
            {"list": "resources"},
            {"tool": "json_tickets", "arguments": {}},
            {"tool": "add_tool", "arguments": {"name": "late_tool"}},
            {"wait": "notifications/tools/list_changed", "seconds": 60},
            {"list": "tools"},
        ]),
        &strs(&proxy_target(&cfg)),
    );
    assert_eq!(lines[0]["server"]["name"], "scanledger-proxy");
    // The upstream's capabilities are the proxy's.
    assert!(
        lines[0]["capabilities"]["resources"].is_object(),
        "{}",
        lines[0]
    );
    let mut tools = names(&lines[1]);
    tools.sort_unstable();
    assert_eq!(
        (tools, &lines[1]["next_cursor"]),
        (
            vec!["add_tool", "echo", "json_tickets", "search_items", "whoami"],
            &Value::Null
        )
    );
    // A cursor that does not advance ends the list, whole, with a warning.
    assert_eq!(
        (names(&lines[2]), &lines[2]["next_cursor"]),
        (
            vec![
                "test://r/1",
                "test://r/2",
                "test://r/3",
                "test://r/4",
                "test://r/5"
            ],
            &Value::Null
        )
    );
    assert!(
        stderr
            .contains("resources/list gave a cursor it had given before, and the same page again"),
        "{stderr}"
    );
    // MCPServer's `-> str` tool: structuredContent {"result": JSON text}; string IDs.
    let inv = &lines[3]["structured"];
    assert_eq!(
        (inv["outcome"].as_str(), &inv["ids"]),
        (Some("inventory"), &json!(["T-1", "T-2", "T-3"])),
        "{inv}"
    );
    assert_eq!(inv["items"][2]["title"], "c");
    assert_eq!(lines[4]["text"], "added late_tool", "{}", lines[4]);
    assert_eq!(lines[5]["seen"], true, "{}", lines[5]);
    assert!(names(&lines[6]).contains(&"late_tool"), "{}", lines[6]);
    Ok(())
}

#[test]
fn a_sampling_request_of_the_upstream_is_answered_by_the_client_through_the_proxy() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let upstream = [
        "python3".to_owned(),
        peers()
            .join("conformance_server.py")
            .to_string_lossy()
            .into_owned(),
        "stdio".to_owned(),
    ];
    let cfg = util::write(
        dir.path(),
        "proxy.json",
        &json!({"upstream": {"command": upstream, "init_timeout_ms": 120_000}}).to_string(),
    );
    let lines = drive(
        dir.path(),
        &json!([
            {"tool": "test_sampling", "arguments": {"prompt": "a prompt from the upstream"}},
            {"tool": "test_tool_with_progress", "arguments": {}, "progress": true},
            {"prompt": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
            {"read": "test://template/42/data"},
        ]),
        &strs(&proxy_target(&cfg)),
    );
    assert_eq!(
        (&lines[1]["text"], &lines[1]["sampled"]),
        (
            &json!("LLM response: canned answer from the test client"),
            &json!(["a prompt from the upstream"])
        ),
        "{}",
        lines[1]
    );
    // The upstream's progress reaches the client under the client's own token.
    let progress: Vec<f64> = lines[2]["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p[0].as_f64())
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0], "{}", lines[2]);
    assert_eq!(lines[3]["messages"], 1);
    assert!(
        lines[4]["texts"][0].as_str().unwrap().contains("\"42\""),
        "{}",
        lines[4]
    );
    Ok(())
}

#[test]
fn server_everything_behind_the_proxy_lists_its_100_resources_in_one_page() -> TestResult {
    if !python_mcp() || !npx_has(EVERYTHING) {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let upstream = ["npx", "-y", EVERYTHING, "stdio"];
    let script = json!([
        {"list": "resources"},
        {"list": "templates"},
        {"list": "prompts"},
        {"read": "test://static/resource/1"},
        {"prompt": "simple_prompt"},
        {"tool": "echo", "arguments": {"message": "through the proxy"}},
    ]);
    // Directly, one request of resources/list brings 10 of the 100.
    let mut direct = vec!["stdio", "--"];
    direct.extend(upstream);
    let lines = drive(dir.path(), &script, &direct);
    assert_eq!(names(&lines[1]).len(), 10, "{}", lines[1]);
    assert!(lines[1]["next_cursor"].is_string());
    let cfg = util::write(
        dir.path(),
        "proxy.json",
        &json!({"upstream": {"command": upstream, "init_timeout_ms": 120_000}}).to_string(),
    );
    let lines = drive(dir.path(), &script, &strs(&proxy_target(&cfg)));
    let resources = names(&lines[1]);
    assert_eq!(
        (resources.len(), &lines[1]["next_cursor"]),
        (100, &Value::Null),
        "{}",
        lines[1]
    );
    assert_eq!(resources[99], "test://static/resource/100");
    assert_eq!(names(&lines[2]), ["test://static/resource/{id}"]);
    assert_eq!(
        names(&lines[3]),
        ["simple_prompt", "complex_prompt", "resource_prompt"]
    );
    assert!(
        lines[4]["texts"][0]
            .as_str()
            .unwrap()
            .contains("Resource 1"),
        "{}",
        lines[4]
    );
    assert_eq!(lines[5]["messages"], 1);
    assert_eq!(lines[6]["text"], "Echo: through the proxy", "{}", lines[6]);
    Ok(())
}
