//! The same question asked of both faces gives the same answer: `scanledger --json COMMAND`
//! and the matching tool of `scanledger mcp` (driven over stdio as an MCP client would, one
//! JSON-RPC message per line) return the same object, less the MCP envelope (docs/REFERENCE.md
//! §10: `outcome` first; a partial read's report under `observed_so_far` with
//! `is_lower_bound`, beside `reasons`).
//!
//! The drift this pins: `diff`'s `partitions_differing` was a list on the command line and a
//! count over MCP, the MCP lists showed 100 ranges and the command line 32, `missing_ids` had
//! no run status, and `verify_receipt` answered other keys than `verify --json`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::util::{self, Env};

/// Calls each `(tool, arguments)` on `scanledger --store STORE mcp`; returns each call's
/// structured answer.
pub(crate) fn mcp_calls(store: &str, calls: &[(&str, Value)]) -> Vec<Value> {
    let mut child = Command::new(util::bin())
        .args(["--store", store, "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn scanledger mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write a request");
        stdin.flush().expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "cli-mcp-test", "version": "0"}}}),
    );
    let mut next = || -> Value {
        let line = lines.next().expect("an answer").expect("read stdout");
        serde_json::from_str(&line).expect("a JSON-RPC line")
    };
    assert_eq!(next()["id"], 0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut answers = Vec::new();
    for (i, (tool, args)) in calls.iter().enumerate() {
        send(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
        );
        let answer = next();
        assert_eq!(answer["id"], i + 1, "{answer}");
        answers.push(answer["result"]["structuredContent"].clone());
    }
    drop(stdin);
    let _ = child.wait();
    answers
}

/// The report inside an MCP answer: the answer less `outcome`, or for a partial read what is
/// under `observed_so_far` less `is_lower_bound`.
fn unwrapped(answer: &Value) -> Value {
    let mut a = answer.as_object().expect("an object").clone();
    a.remove("outcome");
    if let Some(Value::Object(mut partial)) = a.remove("observed_so_far") {
        partial.remove("is_lower_bound");
        return Value::Object(partial);
    }
    Value::Object(a)
}

fn cli_json(env: &Env, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (_, out, err) = env.sl(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}{err}"))
}

#[test]
fn the_cli_and_mcp_answer_every_read_question_with_one_object() {
    let env = Env::new();
    // Two verified runs far apart (more ranges than either face shows), and a partial one.
    let a: Vec<u64> = (1..=20_000).collect();
    let b: Vec<u64> = (1..=20_000)
        .filter(|i| i % 2 == 0)
        .chain([70_000])
        .collect();
    env.scan_ints("a", "s", "t", &a);
    env.scan_ints("b", "s", "t", &b);
    let (code, _) = env.scan(
        "partial",
        &json!({"source": "s", "tenant": "t", "page_size": 100, "limits": {"max_pages": 2}}),
        &env.replay(
            "p.jsonl",
            &(1..=1000).map(|i| json!(i)).collect::<Vec<_>>(),
            100,
            "s1",
        ),
    );
    assert_eq!(code, 3);
    let receipt = cli_json(&env, &["receipt", "run-1"]);
    let partial_receipt = cli_json(&env, &["receipt", "run-3"]);
    let file = env.write("r.json", &receipt.to_string());
    let partial_file = env.write("p.json", &partial_receipt.to_string());
    let questions: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "diff_runs",
            json!({"a": "run-1", "b": "run-2"}),
            vec!["diff", "run-1", "run-2"],
        ),
        (
            "diff_runs",
            json!({"a": "1", "b": "latest"}),
            vec!["diff", "1", "latest"],
        ),
        (
            "missing_ids",
            json!({"run_id": "run-2", "against": "run-1"}),
            vec!["missing", "run-2", "--against", "run-1"],
        ),
        (
            "missing_ids",
            json!({"run_id": "latest", "against": "run-1"}),
            vec!["missing", "latest", "--against", "run-1"],
        ),
        (
            "page_run",
            json!({"run_id": "run-2", "size": 20000}),
            vec!["page", "run-2", "--size", "20000"],
        ),
        (
            "page_run",
            json!({"run_id": "latest", "size": 1000}),
            vec!["page", "latest", "--size", "1000"],
        ),
        ("list_runs", json!({}), vec!["runs"]),
        (
            "verify_receipt",
            json!({"receipt": receipt}),
            vec!["verify", &file],
        ),
        (
            "verify_receipt",
            json!({"receipt": partial_receipt}),
            vec!["verify", &partial_file],
        ),
    ];
    let calls: Vec<(&str, Value)> = questions.iter().map(|(t, a, _)| (*t, a.clone())).collect();
    let mut calls = calls;
    calls.push(("get_receipt", json!({"run_id": "run-1"})));
    calls.push(("get_receipt", json!({"run_id": "latest"})));
    let answers = mcp_calls(&env.store, &calls);
    for ((tool, args, cli), answer) in questions.iter().zip(&answers) {
        let want = cli_json(&env, cli);
        assert_eq!(unwrapped(answer), want, "{tool} {args} against {cli:?}");
    }
    // The diff's lists are capped alike, and its partitions are a list on both faces.
    let diff = &answers[0];
    assert_eq!(diff["outcome"], "inventory");
    assert!(diff["partitions_differing"].is_array(), "{diff}");
    assert_eq!(diff["removed_ranges"].as_array().map(Vec::len), Some(32));
    // A partial run's answers are partial reads: no total at the top.
    for answer in [&answers[1], &answers[5]] {
        assert_eq!(answer["outcome"], "incomplete_read", "{answer}");
        assert_eq!(answer["observed_so_far"]["is_lower_bound"], true);
        assert!(answer.get("added_count").is_none() && answer.get("ids").is_none());
    }
    // The receipt is the same object, whole or as a partial run's evidence.
    assert_eq!(answers[9]["receipt"], receipt);
    assert_eq!(answers[10]["evidence"]["receipt"], partial_receipt);
    // A matching receipt of a partial run is no inventory: the answer says so on both faces.
    assert_eq!(answers[8]["outcome"], "incomplete_read");
    assert_eq!(answers[8]["matches"], true);
    assert_eq!(answers[8]["verified"], false);
}
