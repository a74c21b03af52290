//! The `mcp:` source against the Python SDK's paginated server over stdio, through the binary.

use std::path::Path;

use serde_json::{json, Value};

use super::{bin, kinds, peer_config, python_mcp, scan, with};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The mapping of the shared rule table: the replay format's own field names.
fn replay_mapping() -> Value {
    json!({"cursor_arg": "cursor", "items": "/items", "next": "/next", "complete": "/complete",
           "snapshot": "/snapshot", "query": "/query", "truncated": "/truncated",
           "expired_marker": "cursor expired"})
}

/// One request's replies: a replay line without its cursor (`{"items": [{"id": N}], "next":
/// ...}`) or `{"error": "server_error" | "expired_cursor"}`.
type Routes = Vec<(Option<&'static str>, Vec<Value>)>;

fn ids(ns: &[u64]) -> Value {
    Value::Array(ns.iter().map(|n| json!({"id": n})).collect())
}

fn pg(ns: &[u64], next: Option<&str>) -> Value {
    json!({"items": ids(ns), "next": next})
}

/// The same routes as a Python MCP peer scenario and as a replay file.
fn both(dir: &Path, name: &str, routes: &Routes) -> (String, String) {
    let mut mcp_routes = serde_json::Map::new();
    let mut lines = String::new();
    for (cursor, replies) in routes {
        let mut mcp_replies = Vec::new();
        for r in replies {
            let mcp = match r.get("error").and_then(Value::as_str) {
                Some("server_error") => json!({"is_error": "upstream failed"}),
                Some("expired_cursor") => json!({"is_error": "cursor expired at the upstream"}),
                Some(other) => panic!("no MCP twin for error {other}"),
                None => json!({"structured": r}),
            };
            mcp_replies.push(mcp);
            let line = with(json!({"cursor": cursor}), r.clone());
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        mcp_routes.insert(
            cursor.unwrap_or("null").to_owned(),
            Value::Array(mcp_replies),
        );
    }
    let replay = format!(
        "replay:{}",
        util::write(dir, &format!("{name}.jsonl"), &lines)
    );
    let mcp = peer_config(dir, name, &json!({"routes": mcp_routes}), replay_mapping());
    (mcp, replay)
}

/// The receipt fields that must be equal over MCP and over replay.
fn essence(r: &Value) -> Value {
    let violations: Vec<Value> = r["violations"]
        .as_array()
        .map(|a| a.iter().map(|v| json!([v["kind"], v["page"]])).collect())
        .unwrap_or_default();
    json!({
        "coverage_status": r["coverage_status"], "conclusion_scope": r["conclusion_scope"],
        "violations": violations, "limits_hit": r["limits_hit"], "rejected": r["rejected"],
        "pages_observed": r["pages_observed"], "records_observed": r["records_observed"],
        "unique_ids_observed": r["unique_ids_observed"], "merkle_root": r["merkle_root"],
        "cursor_chain_digest": r["cursor_chain_digest"], "snapshot_id": r["snapshot_id"],
    })
}

#[test]
fn every_rule_over_mcp_gives_the_violation_it_gives_over_replay() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let snap = |ns: &[u64], next: Option<&str>, s: &str| with(pg(ns, next), json!({"snapshot": s}));
    let q = |ns: &[u64], next: Option<&str>, q: Value| with(pg(ns, next), json!({"query": q}));
    let open = json!({"status": "open"});
    let cases: Vec<Case> = vec![
        (
            "r01_verified_with_a_short_last_page",
            json!({}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![pg(&[3, 4], Some("c3"))]),
                (Some("c3"), vec![pg(&[5], None)]),
            ],
            0,
            "verified",
            vec![],
        ),
        (
            "r02_empty_collection",
            json!({}),
            vec![(None, vec![pg(&[], None)])],
            0,
            "verified",
            vec![],
        ),
        (
            "r03_cursor_repeats_at_page_three",
            json!({}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![pg(&[3, 4], Some("c3"))]),
                (Some("c3"), vec![pg(&[5, 6], Some("c2"))]),
            ],
            4,
            "failed",
            vec!["repeated_cursor"],
        ),
        (
            "r04_duplicate_ids",
            json!({}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![pg(&[2, 3], None)]),
            ],
            4,
            "failed",
            vec!["duplicate_id"],
        ),
        (
            "r05_snapshot_changes",
            json!({}),
            vec![
                (None, vec![snap(&[1, 2], Some("c2"), "s1")]),
                (Some("c2"), vec![snap(&[3], None, "s2")]),
            ],
            4,
            "failed",
            vec!["snapshot_changed"],
        ),
        (
            "r06_filter_dropped_on_page_three",
            json!({"query": open.clone()}),
            vec![
                (None, vec![q(&[1, 2], Some("c2"), open.clone())]),
                (Some("c2"), vec![q(&[3, 4], Some("c3"), open.clone())]),
                (Some("c3"), vec![q(&[5], None, json!({}))]),
            ],
            4,
            "failed",
            vec!["query_changed"],
        ),
        (
            "r07_complete_with_a_cursor",
            json!({}),
            vec![(
                None,
                vec![with(pg(&[1], Some("c2")), json!({"complete": true}))],
            )],
            4,
            "failed",
            vec!["contradictory_completion"],
        ),
        (
            "r08_no_completion_evidence",
            json!({"end_signal": "complete_flag"}),
            vec![(None, vec![pg(&[1, 2], None)])],
            3,
            "unknown",
            vec!["missing_completion_evidence"],
        ),
        (
            "r09_truncated_page",
            json!({}),
            vec![
                (
                    None,
                    vec![with(pg(&[1, 2], Some("c2")), json!({"truncated": true}))],
                ),
                (Some("c2"), vec![pg(&[3], None)]),
            ],
            3,
            "unknown",
            vec!["truncated_page"],
        ),
        (
            "r10_count_mismatch",
            json!({"expected_count": 5}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![pg(&[3], None)]),
            ],
            4,
            "failed",
            vec!["count_mismatch"],
        ),
        (
            "r11_partition_mismatch",
            json!({"expected_partitions": {"0": 4}}),
            vec![(None, vec![pg(&[1, 2, 3], None)])],
            4,
            "failed",
            vec!["partition_mismatch"],
        ),
        (
            "r12_page_limit",
            json!({"limits": {"max_pages": 2, "retries": 1}}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![pg(&[3, 4], Some("c3"))]),
                (Some("c3"), vec![pg(&[5], None)]),
            ],
            3,
            "unknown",
            vec!["limit_reached"],
        ),
        (
            "r13_is_error_on_page_two",
            json!({}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![json!({"error": "server_error"})]),
            ],
            3,
            "unknown",
            vec!["page_failed"],
        ),
        (
            "r13_is_error_once_then_the_page",
            json!({}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (
                    Some("c2"),
                    vec![json!({"error": "server_error"}), pg(&[3], None)],
                ),
            ],
            0,
            "verified",
            vec![],
        ),
        (
            "r15_expired_cursor_blocks",
            json!({"on_expired_cursor": "block"}),
            vec![
                (None, vec![pg(&[1, 2], Some("c2"))]),
                (Some("c2"), vec![json!({"error": "expired_cursor"})]),
            ],
            3,
            "unknown",
            vec!["expired_cursor"],
        ),
        (
            "r16_an_id_that_does_not_fit_the_codec",
            json!({"id_codec": "int"}),
            vec![(
                None,
                vec![json!({"items": [{"id": 1}, {"id": "x-2"}], "next": null})],
            )],
            4,
            "failed",
            vec!["invalid_page"],
        ),
    ];
    // Four cases at a time: most of a case is the Python peer starting.
    for chunk in cases.chunks(4) {
        std::thread::scope(|s| {
            for case in chunk {
                let dir = dir.path();
                s.spawn(move || check_case(dir, case));
            }
        });
    }
    Ok(())
}

type Case = (
    &'static str,
    Value,
    Routes,
    i32,
    &'static str,
    Vec<&'static str>,
);

fn check_case(dir: &Path, case: &Case) {
    let (name, contract_extra, routes, exit, status, want) = case;
    let (name, exit, status) = (*name, *exit, *status);
    let contract_extra = contract_extra.clone();
    {
        let (mcp, replay) = both(dir, name, routes);
        let contract = with(
            json!({"source": "items", "page_size": 2, "limits": {"retries": 1}}),
            contract_extra,
        );
        let dir = &dir.join(name);
        std::fs::create_dir_all(dir).unwrap();
        let over_mcp = scan(dir, name, &contract, &format!("mcp:../{}", &mcp[4..]), &[]);
        let over_replay = scan(dir, name, &contract, &replay, &[]);
        let (m, r) = (over_mcp.receipt(), over_replay.receipt());
        let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            (over_mcp.exit, m["coverage_status"].as_str(), kinds(&m)),
            (exit, Some(status), want),
            "{name} over MCP: {m:#}\n{}",
            over_mcp.stderr
        );
        assert_eq!(over_replay.exit, exit, "{name} over replay: {r:#}");
        assert_eq!(essence(&m), essence(&r), "{name}: MCP and replay differ");
    }
}

#[test]
fn mcp_sends_the_same_arguments_on_every_page_and_records_the_server() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let scenario = json!({"routes": {
        "null": [{"structured": pg(&[1, 2], Some("c2"))}],
        "c2": [{"structured": pg(&[3, 4], Some("c3"))}],
        "c3": [{"structured": pg(&[5], None)}]}});
    let src = peer_config(dir.path(), "args", &scenario, replay_mapping());
    let log = dir.path().join("calls.jsonl");
    let contract = json!({"source": "items", "page_size": 2, "query": {"status": "open"}});
    let run = scan(
        dir.path(),
        "args",
        &contract,
        &src,
        &[("PEER_CALL_LOG", log.to_str().unwrap())],
    );
    assert_eq!(run.exit, 0, "{}\n{}", run.stdout, run.stderr);
    let calls: Vec<Value> = std::fs::read_to_string(&log)?
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        calls,
        vec![
            json!({"page_size": 2, "status": "open"}),
            json!({"cursor": "c2", "page_size": 2, "status": "open"}),
            json!({"cursor": "c3", "page_size": 2, "status": "open"}),
        ]
    );
    // The server's serverInfo is the run's provenance, kept with its recorded source.
    let store = scanledger::Store::open_read(&dir.path().join("s.redb"))?;
    let header = store.read()?.header(scanledger::RunId(1))?;
    let spec = header.source_spec.unwrap_or_default();
    assert!(
        spec.ends_with("args.mcp.json#server=paged-test-server 9.9.1"),
        "{spec}"
    );
    // And `receipt` and `runs` show it.
    let shown = bin(dir.path(), &["receipt", "run-1"], &[]);
    assert!(
        shown.stdout.contains("mcp server: paged-test-server 9.9.1"),
        "{}",
        shown.stdout
    );
    let listed = bin(dir.path(), &["runs"], &[]);
    assert!(
        listed.stdout.contains("MCP SERVER") && listed.stdout.contains("paged-test-server 9.9.1"),
        "{}",
        listed.stdout
    );
    // A run stopped at a budget resumes from the recorded spec (the provenance is not part
    // of the path) and continues from its stored cursor with a fresh server.
    std::fs::remove_file(&log)?;
    let limited = with(contract, json!({"limits": {"max_pages": 1}}));
    let run = scan(
        dir.path(),
        "args2",
        &limited,
        &src,
        &[("PEER_CALL_LOG", log.to_str().unwrap())],
    );
    assert_eq!(run.exit, 3, "{}", run.stderr);
    let again = bin(
        dir.path(),
        &["--json", "resume", "run-2", "--max-pages", "10"],
        &[("PEER_CALL_LOG", log.to_str().unwrap())],
    );
    assert_eq!(
        (again.exit, again.receipt()["unique_ids_observed"].as_u64()),
        (0, Some(5)),
        "{}",
        again.stderr
    );
    let cursors: Vec<Value> = std::fs::read_to_string(&log)?
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["cursor"].clone())
        .collect();
    assert_eq!(cursors, vec![Value::Null, json!("c2"), json!("c3")]);
    Ok(())
}

#[test]
fn mcp_reads_the_json_of_the_first_text_block_without_structured_content() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let scenario = json!({"routes": {
        "null": [{"text": pg(&[1, 2], Some("c2")).to_string()}],
        "c2": [{"text": pg(&[3], None).to_string()}]}});
    let src = peer_config(dir.path(), "text", &scenario, replay_mapping());
    let r = scan(dir.path(), "text", &json!({"source": "items"}), &src, &[]);
    assert_eq!(
        (r.exit, r.receipt()["unique_ids_observed"].as_u64()),
        (0, Some(3)),
        "{}",
        r.stderr
    );
    // A text block that is not strict JSON (a duplicate key) is an invalid page.
    let scenario =
        json!({"routes": {"null": [{"text": r#"{"items": [], "items": [{"id": 1}]}"#}]}});
    let src = peer_config(dir.path(), "dup", &scenario, replay_mapping());
    let r = scan(dir.path(), "dup", &json!({"source": "items"}), &src, &[]);
    assert_eq!(
        (r.exit, kinds(&r.receipt())),
        (4, vec!["invalid_page".to_owned()]),
        "{}",
        r.stdout
    );
    Ok(())
}

#[test]
fn mcp_page_numbers_end_on_an_empty_page_as_accepted() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let p = |ns: &[u64]| json!({"structured": {"items": ids(ns)}});
    let scenario =
        json!({"key": "page", "routes": {"1": [p(&[1, 2])], "2": [p(&[3])], "3": [p(&[])]}});
    let src = peer_config(dir.path(), "pages", &scenario, json!({"page_arg": "page"}));
    let r = scan(
        dir.path(),
        "pages",
        &json!({"source": "items", "end_signal": "empty_page"}),
        &src,
        &[],
    );
    let receipt = r.receipt();
    assert_eq!(
        (r.exit, receipt["pages_observed"].as_u64()),
        (0, Some(3)),
        "{receipt:#}"
    );
    // `cursor_absent` cannot end a page-number traversal: refused before any call.
    let r = scan(dir.path(), "pages2", &json!({"source": "items"}), &src, &[]);
    assert_eq!(r.exit, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("page_param") || r.stderr.contains("end_signal"),
        "{}",
        r.stderr
    );
    Ok(())
}

#[test]
fn mcp_tools_list_is_followed_over_its_two_pages() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let scenario = json!({"routes": {}, "tools_list_page": 2});
    let sc = util::write(dir.path(), "tl.scenario.json", &scenario.to_string());
    let cfg = json!({"command": ["python3", super::peers().join("paged_server.py").to_string_lossy(), sc], "list": "tools"});
    util::write(dir.path(), "tl.json", &cfg.to_string());
    let r = scan(
        dir.path(),
        "tl",
        &json!({"source": "tools", "id_codec": "string"}),
        "mcp:tl.json",
        &[],
    );
    let receipt = r.receipt();
    assert_eq!(
        (
            r.exit,
            receipt["pages_observed"].as_u64(),
            receipt["unique_ids_observed"].as_u64()
        ),
        (0, Some(3), Some(5)),
        "{receipt:#}"
    );
    let ids = bin(dir.path(), &["export", "run-1"], &[]);
    let mut names: Vec<&str> = ids.stdout.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["add_tool", "echo", "json_tickets", "search_items", "whoami"]
    );
    // A list the server does not have fails at once, saying so (it was a server error,
    // retried, then an incomplete read).
    let scenario = json!({"routes": {}, "no_prompts": true});
    let sc = util::write(dir.path(), "np.scenario.json", &scenario.to_string());
    let cfg = json!({"command": ["python3", super::peers().join("paged_server.py").to_string_lossy(), sc], "list": "prompts"});
    util::write(dir.path(), "np.json", &cfg.to_string());
    let r = scan(
        dir.path(),
        "np",
        &json!({"source": "prompts", "id_codec": "string", "limits": {"retries": 3}}),
        "mcp:np.json",
        &[],
    );
    assert_eq!(r.exit, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the MCP server has no prompts/list"),
        "{}",
        r.stderr
    );
    // The list's IDs are names: another codec is refused before the server is started.
    let r = scan(
        dir.path(),
        "tl2",
        &json!({"source": "tools"}),
        "mcp:tl.json",
        &[],
    );
    assert_eq!(r.exit, 2);
    assert!(
        r.stderr.contains("id_codec must be \\\"string\\\"") || r.stderr.contains("\"string\""),
        "{}",
        r.stderr
    );
    Ok(())
}

#[test]
fn a_server_that_dies_on_a_page_is_a_failed_page_never_an_inventory() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("calls.jsonl");
    let scenario =
        json!({"routes": {"null": [{"structured": pg(&[1, 2], Some("c2"))}], "c2": [{"exit": 3}]}});
    let src = peer_config(dir.path(), "dies", &scenario, replay_mapping());
    let r = scan(
        dir.path(),
        "dies",
        &json!({"source": "items", "limits": {"retries": 1}}),
        &src,
        &[("PEER_CALL_LOG", log.to_str().unwrap())],
    );
    let receipt = r.receipt();
    assert_eq!(
        (r.exit, kinds(&receipt)),
        (3, vec!["page_failed".to_owned()]),
        "{receipt:#}\n{}",
        r.stderr
    );
    assert_eq!(receipt["conclusion_scope"], "none");
    // The server was started again for the retry: page 2 was asked of two processes.
    let calls = std::fs::read_to_string(&log)?;
    assert_eq!(calls.matches("\"c2\"").count(), 2, "{calls}");
    Ok(())
}

#[test]
fn the_servers_stderr_and_environment_never_reach_our_output() -> TestResult {
    if !python_mcp() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let canary = "canary-mcp-env-5d1f";
    let canary_cfg = "canary-mcp-cfg-77ab";
    let scenario = json!({"print_env": "PEER_SECRET", "routes": {
        "null": [{"structured": pg(&[1], Some("c2"))}], "c2": [{"is_error": format!("failed with {canary}")}]}});
    let src = peer_config(
        dir.path(),
        "env",
        &scenario,
        with(
            replay_mapping(),
            json!({"env": {"PEER_SECRET2": canary_cfg}, "stderr_log": "peer.stderr"}),
        ),
    );
    for verbosity in ["-q", "-vvv"] {
        util::write(
            dir.path(),
            "env.contract.json",
            &json!({"source": "items"}).to_string(),
        );
        for args in [
            vec![
                verbosity,
                "--json",
                "scan",
                "--contract",
                "env.contract.json",
                "--source",
                &src,
            ],
            vec![
                verbosity,
                "scan",
                "--contract",
                "env.contract.json",
                "--source",
                &src,
            ],
        ] {
            let r = bin(dir.path(), &args, &[("PEER_SECRET", canary)]);
            assert_eq!(r.exit, 3, "{}", r.stderr);
            for text in [&r.stdout, &r.stderr] {
                assert!(
                    !text.contains(canary) && !text.contains(canary_cfg),
                    "a secret leaked:\n{text}"
                );
                assert!(
                    !text.contains("\"c2\"") && !text.contains(" c2"),
                    "a raw cursor leaked:\n{text}"
                );
            }
        }
    }
    for cmd in [
        vec!["--json", "runs"],
        vec!["--json", "receipt", "latest"],
        vec!["report", "latest", "-o", "r.html"],
    ] {
        let r = bin(dir.path(), &cmd, &[]);
        assert!(
            !r.stdout.contains(canary) && !r.stderr.contains(canary),
            "{cmd:?}: {}",
            r.stdout
        );
    }
    // The stderr the operator asked to keep is there, and only there.
    let kept = std::fs::read_to_string(dir.path().join("peer.stderr"))?;
    assert!(kept.contains(canary), "{kept}");
    Ok(())
}

#[test]
fn mcp_configs_are_refused_with_the_key_and_what_to_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    util::write(
        dir.path(),
        "c.json",
        &json!({"source": "items"}).to_string(),
    );
    for (cfg, words) in [
        (json!({"tool": "t"}), "missing the server"),
        (
            json!({"command": ["x"], "url": "http://127.0.0.1:1/mcp", "tool": "t"}),
            "exclude each other",
        ),
        (json!({"command": ["x"]}), "missing what to page"),
        (
            json!({"command": ["x"], "tool": "t", "cursor_param": "c"}),
            "the key is \\\"cursor_arg\\\"",
        ),
        (
            json!({"command": ["x"], "tool": "t", "cusor_arg": "c"}),
            "did you mean \\\"cursor_arg\\\"",
        ),
        (json!({"command": [], "tool": "t"}), "key \\\"command\\\""),
        (json!({"url": "ftp://h/mcp", "tool": "t"}), "http or https"),
        (
            json!({"url": "http://u:p@h/mcp", "tool": "t"}),
            "credentials",
        ),
        (
            json!({"url": "http://h/mcp", "tool": "t", "auth_env": "SL_MCP_UNSET_VAR"}),
            "is not set",
        ),
        (
            json!({"command": ["x"], "list": "tool"}),
            "key \\\"list\\\"",
        ),
        (
            json!({"command": ["x"], "list": "tools", "items": "/x"}),
            "fixed shape",
        ),
    ] {
        util::write(dir.path(), "m.json", &cfg.to_string());
        let r = bin(
            dir.path(),
            &[
                "--json",
                "scan",
                "--contract",
                "c.json",
                "--source",
                "mcp:m.json",
            ],
            &[],
        );
        assert_eq!(r.exit, 2, "{cfg}: {}", r.stderr);
        assert!(r.stderr.contains(words), "{cfg}: {}", r.stderr);
    }
    // A program that cannot be started: an error before any run is recorded.
    util::write(
        dir.path(),
        "m.json",
        &json!({"command": ["/nonexistent/mcp-server"], "tool": "t"}).to_string(),
    );
    let r = bin(
        dir.path(),
        &["scan", "--contract", "c.json", "--source", "mcp:m.json"],
        &[],
    );
    assert_eq!(r.exit, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot start the MCP server"),
        "{}",
        r.stderr
    );
    assert!(
        !dir.path().join("s.redb").exists()
            || bin(dir.path(), &["--json", "runs"], &[])
                .stdout
                .contains("\"runs\": []")
    );
    Ok(())
}
