//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.12 from npm,
//! the last version that runs on Node 20) against `scanledger mcp --http`.
//!
//! Scenarios that apply to a server whose only capability is tools it defines itself run and
//! must pass; the others are excluded below, each with its reason. Without npx (or without
//! the package, which npx fetches from the registry) the test says SKIPPED, and fails under CI.

use std::process::Command;

use serde_json::json;

use super::server::HttpServer;
use crate::util;

/// The pinned suite.
const SUITE: &str = "@modelcontextprotocol/conformance@0.1.12";

/// Every server scenario that applies to scanledger's server.
const RUN: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "server-sse-polling",
];

/// The server scenarios not run, and why (0.1.12's `list --server`).
const EXCLUDED: &[(&str, &str)] = &[
    ("logging-set-level", "needs the logging capability; scanledger logs to its own stderr, never to the client"),
    ("completion-complete", "needs the completions capability (prompts or resource templates); the server has neither"),
    ("tools-call-simple-text", "calls the reference server's test tool test_simple_text, which scanledger does not define"),
    ("tools-call-image", "calls the reference test tool test_image_content"),
    ("tools-call-audio", "calls the reference test tool test_audio_content"),
    ("tools-call-embedded-resource", "calls the reference test tool test_embedded_resource"),
    ("tools-call-mixed-content", "calls the reference test tool test_multiple_content_types"),
    ("tools-call-with-logging", "calls the reference test tool test_tool_with_logging (and needs logging)"),
    ("tools-call-error", "calls the reference test tool test_error_handling; scanledger's own error results are tested in mcp::server"),
    ("tools-call-with-progress", "calls the reference test tool test_tool_with_progress; scanledger's progress is tested in mcp::server"),
    ("tools-call-sampling", "needs a tool that asks the client for sampling; scanledger never does"),
    ("tools-call-elicitation", "needs a tool that elicits input from the user; scanledger never does"),
    ("json-schema-2020-12", "calls the reference test tool json_schema_2020_12_tool"),
    ("elicitation-sep1034-defaults", "needs elicitation"),
    ("elicitation-sep1330-enums", "needs elicitation"),
    ("resources-list", "needs the resources capability; the server has tools only"),
    ("resources-read-text", "needs resources"),
    ("resources-read-binary", "needs resources"),
    ("resources-templates-read", "needs resource templates"),
    ("resources-subscribe", "needs resource subscriptions"),
    ("resources-unsubscribe", "needs resource subscriptions"),
    ("prompts-list", "needs the prompts capability"),
    ("prompts-get-simple", "needs prompts"),
    ("prompts-get-with-args", "needs prompts"),
    ("prompts-get-embedded-resource", "needs prompts"),
    ("prompts-get-with-image", "needs prompts"),
];

fn npx_suite() -> bool {
    let ok = Command::new("npx")
        .args(["-y", SUITE, "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("npx cannot run {SUITE}, and CI is set (Node 20 with npx, and the npm registry, are needed)");
    }
    eprintln!("SKIPPED: npx cannot run {SUITE} (Node with npx and the npm registry are needed)");
    false
}

#[test]
fn the_official_conformance_suite_passes_its_tools_server_scenarios(
) -> Result<(), Box<dyn std::error::Error>> {
    // Every scenario of the suite is either run or excluded with a reason.
    let listed = Command::new("npx")
        .args(["-y", SUITE, "list", "--server"])
        .output();
    if !npx_suite() {
        return Ok(());
    }
    let listed = String::from_utf8_lossy(&listed?.stdout).into_owned();
    for line in listed.lines().filter_map(|l| l.trim().strip_prefix("- ")) {
        assert!(
            RUN.contains(&line) || EXCLUDED.iter().any(|(s, _)| *s == line),
            "scenario {line} is neither run nor excluded with a reason"
        );
    }
    let dir = tempfile::tempdir()?;
    util::write(
        dir.path(),
        "pages.jsonl",
        "{\"cursor\": null, \"items\": [1], \"next\": null}\n",
    );
    let sources = util::write(
        dir.path(),
        "sources.json",
        &json!({"one": "replay:pages.jsonl"}).to_string(),
    );
    let args: Vec<String> = [
        util::bin().to_string_lossy().as_ref(),
        "--store",
        dir.path().join("s.redb").to_string_lossy().as_ref(),
        "mcp",
        "--sources",
        &sources,
        "--http",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let server = HttpServer::start(&args);
    let mut failures = Vec::new();
    for scenario in RUN {
        let out = Command::new("npx")
            .args([
                "-y",
                SUITE,
                "server",
                "--url",
                &server.url,
                "--scenario",
                scenario,
            ])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !text.contains(" 0 failed") {
            failures.push(format!("{scenario}:\n{text}"));
        }
    }
    assert!(
        failures.is_empty(),
        "conformance failures:\n{}",
        failures.join("\n")
    );
    Ok(())
}
