//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.12 from npm,
//! the last version that runs on Node 20) against `scanledger mcp --http`.
//!
//! Scenarios that apply to a server whose only capability is tools it defines itself run and
//! must pass; the others are excluded below, each with its reason. Without npx (or without
//! the package, which npx fetches from the registry) the test says SKIPPED, and fails under CI.

use std::collections::BTreeMap;
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

/// Each server scenario's result against `url`: the suite's default run (its summary lines,
/// `✓ NAME: N passed, M failed`), then each scenario of `listed` it left out, alone.
fn results(url: &str, listed: &[String]) -> BTreeMap<String, bool> {
    let mut got = BTreeMap::new();
    let run = |extra: &[&str]| {
        let out = Command::new("npx")
            .args(["-y", SUITE, "server", "--url", url])
            .args(extra)
            .output()
            .expect("npx");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    for line in run(&[]).lines() {
        let l = line.trim();
        let Some(rest) = l.strip_prefix("✓ ").or_else(|| l.strip_prefix("✗ ")) else {
            continue;
        };
        if let Some((name, counts)) = rest.split_once(": ") {
            got.insert(name.to_owned(), counts.contains(" 0 failed"));
        }
    }
    let left: Vec<&String> = listed.iter().filter(|s| !got.contains_key(*s)).collect();
    for s in left {
        let text = run(&["--scenario", s]);
        let passed = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Passed: "))
            .is_some_and(|counts| counts.contains(" 0 failed"));
        got.insert(s.clone(), passed);
    }
    got
}

/// A server started in its own process group (npx starts node under it), which is ended
/// whole on drop.
struct Upstream {
    child: std::process::Child,
    url: String,
}

impl Upstream {
    fn start(mut cmd: Command, port: u16) -> Upstream {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn the upstream");
        let up = Upstream {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        // Bounded: 240 tries, 0.5 s apart.
        for _ in 0..240 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return up;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        panic!("the upstream did not listen on port {port} within 120 s");
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The scenarios about the HTTP transport the client talks to, which is the proxy's own:
/// they may pass through the proxy where the upstream's transport fails them, never the
/// other way round.
const TRANSPORT: &[&str] = &[
    "dns-rebinding-protection",
    "server-sse-polling",
    "server-sse-multiple-streams",
];

/// The proxy is a drop-in, as the official suite measures it. Every server scenario
/// is run against an upstream directly and through `scanledger mcp proxy --http` in front of
/// it; a scenario that passes directly must pass through the proxy, and one that passes only
/// through the proxy must be about the proxy's own transport. The pass sets are printed
/// (`--nocapture`) for the note.
#[test]
fn the_proxy_passes_every_conformance_scenario_its_upstream_passes(
) -> Result<(), Box<dyn std::error::Error>> {
    if !npx_suite() || !super::python_mcp() || !super::surface::npx_has(super::surface::EVERYTHING)
    {
        return Ok(());
    }
    let listed: Vec<String> = String::from_utf8_lossy(
        &Command::new("npx")
            .args(["-y", SUITE, "list", "--server"])
            .output()?
            .stdout,
    )
    .lines()
    .filter_map(|l| l.trim().strip_prefix("- ").map(str::to_owned))
    .collect();
    let dir = tempfile::tempdir()?;
    let mut report = Vec::new();
    for which in [
        "conformance_server.py (Python SDK)",
        super::surface::EVERYTHING,
    ] {
        let port = free_port();
        let upstream = if which.starts_with("conformance") {
            let mut c = Command::new("python3");
            c.arg(super::peers().join("conformance_server.py"))
                .args(["http", &port.to_string()]);
            Upstream::start(c, port)
        } else {
            let mut c = Command::new("npx");
            c.args(["-y", super::surface::EVERYTHING, "streamableHttp"])
                .env("PORT", port.to_string());
            Upstream::start(c, port)
        };
        let cfg = util::write(
            dir.path(),
            &format!("proxy-{port}.json"),
            &json!({"upstream": {"url": upstream.url}}).to_string(),
        );
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
        let proxy = HttpServer::start(&args);
        let direct = results(&upstream.url, &listed);
        let proxied = results(&proxy.url, &listed);
        let pass = |m: &BTreeMap<String, bool>| -> Vec<String> {
            m.iter()
                .filter(|(_, ok)| **ok)
                .map(|(s, _)| s.clone())
                .collect()
        };
        eprintln!(
            "conformance {which}: directly {} passed: {:?}\nthrough the proxy {} passed: {:?}",
            pass(&direct).len(),
            pass(&direct),
            pass(&proxied).len(),
            pass(&proxied)
        );
        for s in &listed {
            let (d, p) = (direct.get(s) == Some(&true), proxied.get(s) == Some(&true));
            if d && !p {
                report.push(format!(
                    "{which}: {s} passes directly, fails through the proxy"
                ));
            }
            if p && !d && !TRANSPORT.contains(&s.as_str()) {
                report.push(format!("{which}: {s} passes only through the proxy"));
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    Ok(())
}
