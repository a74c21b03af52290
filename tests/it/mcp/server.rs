//! `scanledger mcp` driven by the Python SDK's client (`tests/peers/drive.py`) over stdio and
//! over streamable HTTP, and by an `rmcp` client for cancellation.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::{bin, peers, python_mcp};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs drive.py with `script` against `target` (`["stdio", "--", PROGRAM, ARGS...]` or
/// `["http", URL]`); returns its JSON lines.
pub(crate) fn drive(dir: &Path, script: &Value, target: &[&str]) -> Vec<Value> {
    drive_with_stderr(dir, script, target).0
}

/// [`drive`], with what drive.py and the server it started wrote to stderr.
pub(crate) fn drive_with_stderr(
    dir: &Path,
    script: &Value,
    target: &[&str],
) -> (Vec<Value>, String) {
    let sc = util::write(dir, "script.json", &script.to_string());
    let mut args = vec![
        peers().join("drive.py").to_string_lossy().into_owned(),
        target[0].to_owned(),
        sc,
    ];
    args.extend(target[1..].iter().map(|s| (*s).to_owned()));
    let out = Command::new("python3")
        .args(&args)
        .current_dir(dir)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "drive.py failed:\n{stdout}\n{stderr}");
    // The server's (and an upstream's) stderr reaches the client's: no secret in it.
    assert!(
        !stderr.contains("canary"),
        "a secret on the server's stderr:\n{stderr}"
    );
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (lines, stderr.into_owned())
}

/// A store directory with two declared sources: `customers` (5 IDs in 2 pages) and `slow`
/// (3 pages of 100 ms).
fn fixture(dir: &Path) -> String {
    util::write(dir, "pages.jsonl", "{\"cursor\": null, \"items\": [1,2,3], \"next\": \"rawcur_2\"}\n{\"cursor\": \"rawcur_2\", \"items\": [4,5], \"next\": null}\n");
    let mut slow = String::new();
    for i in 0..3 {
        let cursor = if i == 0 {
            Value::Null
        } else {
            json!(format!("rawcur_{i}"))
        };
        let next = if i == 2 {
            Value::Null
        } else {
            json!(format!("rawcur_{}", i + 1))
        };
        slow.push_str(&json!({"cursor": cursor, "items": [i * 10 + 1, i * 10 + 2], "next": next, "delay_ms": 100}).to_string());
        slow.push('\n');
    }
    util::write(dir, "slow.jsonl", &slow);
    util::write(
        dir,
        "sources.json",
        &json!({"customers": "replay:pages.jsonl", "slow": "replay:slow.jsonl"}).to_string(),
    )
}

fn server_argv(dir: &Path, sources: &str) -> Vec<String> {
    vec![
        util::bin().to_string_lossy().into_owned(),
        "--store".into(),
        dir.join("s.redb").to_string_lossy().into_owned(),
        "mcp".into(),
        "--sources".into(),
        sources.into(),
    ]
}

/// Every key at the top of a partial answer that reads as a total.
fn totals_in(answer: &Value) -> Vec<String> {
    scanledger::mcp::TOTAL_LIKE_KEYS
        .iter()
        .filter(|k| answer.get(**k).is_some())
        .map(|k| (*k).to_owned())
        .collect()
}

fn script() -> Value {
    json!([
        {"list_tools": true},
        {"tool": "scan_collection", "arguments": {"source": "customers", "contract": {"page_size": 3}}},
        {"tool": "scan_collection", "arguments": {"source": "customers", "contract": {"limits": {"max_pages": 1}}}},
        {"tool": "resume_scan", "arguments": {"run_id": "latest", "max_pages": 2}},
        {"tool": "scan_collection", "arguments": {"source": "slow"}, "progress": true},
        {"tool": "scan_collection", "arguments": {"source": "../../etc/passwd"}},
        {"tool": "scan_collection", "arguments": {"source": "customers", "path": "/etc/passwd"}},
        {"tool": "get_receipt", "arguments": {"run_id": "run-1"}},
        {"tool": "page_run", "arguments": {"run_id": "run-1", "size": 2}},
        {"tool": "diff_runs", "arguments": {"a": "run-1", "b": "run-2"}},
        {"tool": "missing_ids", "arguments": {"run_id": "run-2", "against": "run-1"}},
        {"tool": "list_runs", "arguments": {}},
    ])
}

#[track_caller]
fn check_answers(lines: &[Value]) {
    assert_eq!(lines[0]["server"]["name"], "scanledger");
    let tools = lines[1]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "scan_collection",
            "resume_scan",
            "get_receipt",
            "verify_receipt",
            "diff_runs",
            "missing_ids",
            "page_run",
            "list_runs"
        ]
    );
    for t in tools {
        let read_only = !matches!(t["name"].as_str(), Some("scan_collection" | "resume_scan"));
        assert_eq!(t["annotations"]["readOnlyHint"], json!(read_only), "{t}");
    }
    // The scan's source is an enum of the declared names: nothing else can be named.
    assert_eq!(
        tools[0]["input_schema"]["properties"]["source"]["enum"],
        json!(["customers", "slow"])
    );
    let inventory = &lines[2]["structured"];
    assert_eq!(
        (inventory["outcome"].as_str(), &inventory["ids"]),
        (Some("inventory"), &json!([1, 2, 3, 4, 5])),
        "{inventory}"
    );
    assert_eq!(inventory["receipt"]["coverage_status"], "verified");
    // A budget stop: no total-looking field, a lower bound, and the exact call that continues.
    let partial = &lines[3]["structured"];
    assert_eq!(partial["outcome"], "incomplete_read", "{partial}");
    assert_eq!(totals_in(partial), Vec::<String>::new(), "{partial}");
    assert_eq!(
        partial["observed_so_far"],
        json!({"pages": 1, "records": 3, "unique_ids": 3, "is_lower_bound": true})
    );
    assert_eq!(partial["reasons"][0]["kind"], "limit_reached");
    assert_eq!(
        partial["resume_scan"],
        json!({"tool": "resume_scan", "arguments": {"run_id": "run-2", "max_pages": 2}})
    );
    // Or, to reach the end in one go, the budget that fired lifted to the server's bound.
    assert_eq!(
        partial["resume_to_end"],
        json!({"tool": "resume_scan", "arguments": {"run_id": "run-2", "max_pages": scanledger::PAGES_PER_RUN_MAX}})
    );
    // The call the answer gave, made (naming the run `latest`): the same run, now whole.
    let resumed = &lines[4]["structured"];
    assert_eq!(
        (
            resumed["outcome"].as_str(),
            resumed["run_id"].as_str(),
            resumed["unique_ids"].as_u64()
        ),
        (Some("inventory"), Some("run-2"), Some(5)),
        "{resumed}"
    );
    // A slow scan reports progress and ends verified.
    let slow = &lines[5];
    assert_eq!(slow["structured"]["outcome"], "inventory");
    assert!(!slow["progress"].as_array().unwrap().is_empty(), "{slow}");
    // No argument can name a path: an undeclared name and an unknown argument are refused.
    for (i, words) in [
        (6, "is not a declared source"),
        (7, "unknown argument \"path\""),
    ] {
        assert_eq!(lines[i]["is_error"], true, "{}", lines[i]);
        assert_eq!(lines[i]["structured"]["outcome"], "failed_read");
        assert!(
            lines[i]["structured"]["error"]
                .as_str()
                .unwrap()
                .contains(words),
            "{}",
            lines[i]
        );
    }
    assert_eq!(lines[8]["structured"]["receipt"]["unique_ids_observed"], 5);
    assert_eq!(lines[9]["structured"]["ids"], json!([1, 2]));
    assert!(lines[9]["structured"]["next_token"]
        .as_str()
        .unwrap()
        .starts_with("slpt"));
    assert_eq!(lines[10]["structured"]["outcome"], "inventory");
    assert_eq!(lines[10]["structured"]["added_count"], 0);
    assert_eq!(lines[11]["structured"]["missing_count"], 0);
    let runs = lines[12]["structured"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for l in lines {
        assert!(
            !l.to_string().contains("rawcur_"),
            "a raw cursor in an answer: {l}"
        );
    }
}

#[test]
fn the_server_over_stdio_answers_inventories_and_partial_reads_apart() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let sources = fixture(dir.path());
    let argv = server_argv(dir.path(), &sources);
    let mut target = vec!["stdio", "--"];
    target.extend(argv.iter().map(String::as_str));
    check_answers(&drive(dir.path(), &script(), &target));
    Ok(())
}

/// `scanledger mcp --http 127.0.0.1:0` (or the proxy), its URL read from its stderr; killed
/// on drop.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) url: String,
}

impl HttpServer {
    pub(crate) fn start(args: &[String]) -> HttpServer {
        let mut child = Command::new(&args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("the server ended before serving")
                .expect("stderr");
            if let Some(at) = line.find("http://") {
                break line[at..].to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_server_over_streamable_http_answers_the_same() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let sources = fixture(dir.path());
    let mut argv = server_argv(dir.path(), &sources);
    argv.extend(["--http".into(), "127.0.0.1:0".into()]);
    let server = HttpServer::start(&argv);
    check_answers(&drive(dir.path(), &script(), &["http", &server.url]));
    Ok(())
}

#[test]
fn http_refuses_a_remote_address_unless_allowed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let r = bin(dir.path(), &["mcp", "--http", "0.0.0.0:0"], &[]);
    assert_eq!(r.exit, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("not a loopback address") && r.stderr.contains("--allow-remote"),
        "{}",
        r.stderr
    );
    Ok(())
}

#[test]
fn a_run_of_an_undeclared_source_cannot_be_resumed_through_the_server() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let sources = fixture(dir.path());
    // The operator scans another file with the CLI; the server's agent may not resume it.
    util::write(dir.path(), "other.jsonl", "{\"cursor\": null, \"items\": [1], \"next\": \"rawcur_2\"}\n{\"cursor\": \"rawcur_2\", \"items\": [2], \"next\": null}\n");
    util::write(
        dir.path(),
        "c.json",
        &json!({"source": "other", "limits": {"max_pages": 1}}).to_string(),
    );
    let r = bin(
        dir.path(),
        &[
            "scan",
            "--contract",
            "c.json",
            "--source",
            "replay:other.jsonl",
        ],
        &[],
    );
    assert_eq!(r.exit, 3, "{}", r.stderr);
    let argv = server_argv(dir.path(), &sources);
    let mut target = vec!["stdio", "--"];
    target.extend(argv.iter().map(String::as_str));
    let lines = drive(
        dir.path(),
        &json!([{"tool": "resume_scan", "arguments": {"run_id": "run-1", "max_pages": 5}}]),
        &target,
    );
    assert_eq!(lines[1]["is_error"], true);
    assert!(
        lines[1]["structured"]["error"]
            .as_str()
            .unwrap()
            .contains("not scanned from a source this server declares"),
        "{}",
        lines[1]
    );
    Ok(())
}

#[test]
fn a_cancelled_scan_stops_at_a_page_boundary_and_stays_resumable() -> TestResult {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir()?;
    let mut lines = String::new();
    for i in 0..40u64 {
        let cursor = if i == 0 {
            Value::Null
        } else {
            json!(format!("rawcur_{i}"))
        };
        lines.push_str(&json!({"cursor": cursor, "items": [i + 1], "next": format!("rawcur_{}", i + 1), "delay_ms": 100}).to_string());
        lines.push('\n');
    }
    util::write(dir.path(), "long.jsonl", &lines);
    let sources = util::write(
        dir.path(),
        "sources.json",
        &json!({"long": "replay:long.jsonl"}).to_string(),
    );
    let argv = server_argv(dir.path(), &sources);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        let client = ().serve(TokioChildProcess::new(cmd)?).await?;
        let mut params = CallToolRequestParams::new("scan_collection");
        params.arguments = json!({"source": "long"}).as_object().cloned();
        let req = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // The request times out after 700 ms: the client sends notifications/cancelled.
        let handle = client
            .peer()
            .send_cancellable_request(
                req,
                PeerRequestOptions::with_timeout(Duration::from_millis(700)),
            )
            .await?;
        assert!(handle.await_response().await.is_err());
        // A read does not wait for the scan (it reads the store's last fold beside it): the
        // stop is recorded at the next page boundary, which a read shortly sees.
        let mut v = Value::Null;
        for _ in 0..120 {
            let mut params = CallToolRequestParams::new("get_receipt");
            params.arguments = json!({"run_id": "run-1"}).as_object().cloned();
            let answer = client.peer().call_tool(params).await?;
            v = answer.structured_content.unwrap_or_default();
            if v["evidence"]["receipt"]["finished_at"].is_string() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert_eq!(v["outcome"], "incomplete_read", "{v}");
        assert_eq!(
            v["evidence"]["receipt"]["limits_hit"],
            json!(["interrupted"]),
            "{v}"
        );
        let pages = v["observed_so_far"]["pages"].as_u64().unwrap_or(0);
        // Cancelled well before the 40 pages (4 s) the scan would take.
        assert!((1..40).contains(&pages), "stopped after {pages} pages: {v}");
        assert_eq!(
            v["resume_scan"],
            json!({"tool": "resume_scan", "arguments": {"run_id": "run-1"}})
        );
        client.cancel().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}

/// An agent's `contract.source` rewrote the run's scope. Scanning the
/// declared source `scratch` (2 IDs) with `{"contract": {"source": "customers"}}` recorded a
/// verified inventory of `customers` holding scratch's IDs, so a later reader of `customers`
/// saw a collection of 2 where the declared one has 5. The agent simulated here sends exactly
/// that call; the declared name must be the scope, and a different `source` refused.
#[test]
fn an_agents_contract_source_never_rewrites_the_scope() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    fixture(dir.path());
    util::write(
        dir.path(),
        "scratch.jsonl",
        "{\"cursor\": null, \"items\": [1, 2], \"next\": null}\n",
    );
    let sources = util::write(
        dir.path(),
        "sources.json",
        &json!({"customers": "replay:pages.jsonl", "scratch": "replay:scratch.jsonl"}).to_string(),
    );
    let argv = server_argv(dir.path(), &sources);
    let mut target = vec!["stdio", "--"];
    target.extend(argv.iter().map(String::as_str));
    let lines = drive(
        dir.path(),
        &json!([
            {"tool": "scan_collection", "arguments": {"source": "scratch", "contract": {"source": "customers"}}},
            {"tool": "scan_collection", "arguments": {"source": "scratch", "contract": {"source": 7}}},
            {"tool": "list_runs", "arguments": {}},
            {"tool": "scan_collection", "arguments": {"source": "scratch", "contract": {"source": "scratch"}}},
        ]),
        &target,
    );
    for (i, words) in [
        (
            1,
            "contract.source is \"customers\", but the source scanned is \"scratch\"",
        ),
        (2, "contract.source is a number"),
    ] {
        assert_eq!(lines[i]["is_error"], true, "{}", lines[i]);
        let error = lines[i]["structured"]["error"].as_str().unwrap();
        assert!(
            error.contains(words) && error.contains("the declared name is the run's scope"),
            "{error}"
        );
    }
    // Nothing was recorded under either name.
    assert_eq!(lines[3]["structured"]["runs"], json!([]), "{}", lines[3]);
    // The declared name given again is accepted: the run's scope is scratch.
    let inv = &lines[4]["structured"];
    assert_eq!(inv["outcome"], "inventory", "{inv}");
    assert_eq!(inv["receipt"]["source"], "scratch", "{inv}");
    Ok(())
}

/// The server ran every call on one thread, and a scan held the store for
/// its whole length, so a `get_receipt` from another caller waited until the scan ended (and
/// every checkpoint's fsync stalled every other request). Simulated here: a client starts a
/// 30-page scan that commits after every page, and asks for the receipt of an earlier run
/// meanwhile: the receipt must come back while the scan is still running.
#[test]
fn a_read_is_answered_while_a_slow_scan_commits() -> TestResult {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir()?;
    fixture(dir.path());
    let mut long = String::new();
    for i in 0..30u64 {
        let cursor = if i == 0 {
            Value::Null
        } else {
            json!(format!("rawcur_{i}"))
        };
        let next = if i == 29 {
            Value::Null
        } else {
            json!(format!("rawcur_{}", i + 1))
        };
        long.push_str(
            &json!({"cursor": cursor, "items": [i + 1], "next": next, "delay_ms": 100}).to_string(),
        );
        long.push('\n');
    }
    util::write(dir.path(), "long.jsonl", &long);
    let sources = util::write(
        dir.path(),
        "sources.json",
        &json!({"customers": "replay:pages.jsonl", "long": "replay:long.jsonl"}).to_string(),
    );
    let argv = server_argv(dir.path(), &sources);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        let client = ().serve(TokioChildProcess::new(cmd)?).await?;
        let call = |name: &str, args: Value| {
            let mut p = CallToolRequestParams::new(name.to_owned());
            p.arguments = args.as_object().cloned();
            ClientRequest::CallToolRequest(CallToolRequest::new(p))
        };
        let first = client
            .peer()
            .call_tool({
                let mut p = CallToolRequestParams::new("scan_collection");
                p.arguments = json!({"source": "customers"}).as_object().cloned();
                p
            })
            .await?;
        assert_eq!(
            first.structured_content.unwrap_or_default()["outcome"],
            "inventory"
        );
        let scan = client
            .peer()
            .send_cancellable_request(
                call("scan_collection", json!({"source": "long"})),
                PeerRequestOptions::no_options(),
            )
            .await?;
        let mut scan = Box::pin(scan.await_response());
        // The scan is under way once its first page is due (100 ms a page, 3 s in all).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let read = client
            .peer()
            .call_tool({
                let mut p = CallToolRequestParams::new("get_receipt");
                p.arguments = json!({"run_id": "run-1"}).as_object().cloned();
                p
            })
            .await?;
        let v = read.structured_content.unwrap_or_default();
        assert_eq!(v["receipt"]["unique_ids_observed"], 5, "{v}");
        // The read came back and the scan has not: it is still committing its pages.
        let still_running = futures_util::FutureExt::now_or_never(scan.as_mut()).is_none();
        assert!(
            still_running,
            "the read was answered only after the scan ended"
        );
        let done = scan.await?;
        let rmcp::model::ServerResult::CallToolResult(done) = done else {
            panic!("not a tool result: {done:?}")
        };
        assert_eq!(
            done.structured_content.unwrap_or_default()["unique_ids"],
            30
        );
        client.cancel().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
