//! Every rule (docs/REFERENCE.md §6) that can occur over HTTP, through the real binary.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use serde_json::{json, Value};

use super::server::{Reply, Server};
use super::{bin, expect, page, routes, scan, TestResult};

#[test]
fn http_cursor_pages_are_verified_with_the_same_parameters_on_every_page() -> TestResult {
    let dir = tempfile::tempdir()?;
    let odd = |ids: &[u64], next: Option<&str>| {
        Reply::json(&json!({
            "items": ids.iter().map(|i| json!({"id": i, "odd": i % 2 == 1})).collect::<Vec<_>>(),
            "next_page_token": next,
        }))
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![odd(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![odd(&[3, 4], Some("c3"))]),
            // A short last page, and the AIP-158 empty token: the end.
            (Some("c3"), vec![odd(&[5], Some(""))]),
        ],
    ));
    let cfg = json!({"labels": {"odd": {"pointer": "/odd", "eq": true}}});
    let contract = json!({"query": {"status": "active", "tags": ["a", "b"]}});
    let run = scan(dir.path(), &server, cfg, contract, &[]);
    let r = expect(&run, 0, "verified", &[]);
    assert_eq!(
        (
            r["unique_ids_observed"].as_u64(),
            r["pages_observed"].as_u64()
        ),
        (Some(5), Some(3))
    );
    assert_eq!(r["labels"]["odd"]["count"], json!(3));
    assert_eq!(r["conclusion_scope"], "all_records_live");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for (req, token) in reqs.iter().zip([None, Some("c2"), Some("c3")]) {
        assert_eq!(req.method, "GET");
        assert_eq!(req.path, "/items");
        assert_eq!(req.param("status"), Some("active"));
        assert_eq!(req.param("tags"), Some(r#"["a","b"]"#));
        assert_eq!(req.param("page_size"), Some("2"));
        assert_eq!(req.param("page_token"), token);
        assert!(req
            .header("user-agent")
            .is_some_and(|u| u.starts_with("scanledger/")));
    }
    Ok(())
}

#[test]
fn http_empty_collection_is_verified_empty() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes("page_token", vec![(None, vec![page(&[], None)])]));
    let r = expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(r["unique_ids_observed"], json!(0));
    Ok(())
}

#[test]
fn http_empty_pages_with_a_cursor_mid_stream_are_not_the_end() -> TestResult {
    // An API may answer a page with no items and a next token (a filtered-out page, a
    // shard with nothing): only the end signal ends the scan, so it goes on to the end.
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![page(&[], Some("c3"))]),
            (Some("c3"), vec![page(&[], Some("c4"))]),
            (Some("c4"), vec![page(&[3], None)]),
        ],
    ));
    let r = expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(
        (
            r["unique_ids_observed"].as_u64(),
            r["pages_observed"].as_u64(),
            r["terminal_cursor_observed"].as_bool()
        ),
        (Some(3), Some(4), Some(true))
    );
    let tokens: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.param("page_token").map(str::to_owned))
        .collect();
    assert_eq!(
        tokens,
        [
            None,
            Some("c2".into()),
            Some("c3".into()),
            Some("c4".into())
        ]
    );
    Ok(())
}

#[test]
fn http_repeated_cursor_fails() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![page(&[3, 4], Some("c3"))]),
            (Some("c3"), vec![page(&[5, 6], Some("c2"))]),
        ],
    ));
    let r = expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        4,
        "failed",
        &["repeated_cursor"],
    );
    assert_eq!(r["violations"][0]["page"], json!(3));
    assert!(
        !run_text_contains(&r, "c2"),
        "a raw cursor in the receipt: {r}"
    );
    Ok(())
}

fn run_text_contains(r: &Value, needle: &str) -> bool {
    r["violations"]
        .to_string()
        .contains(&format!("\"{needle}\""))
}

#[test]
fn http_duplicate_id_fails() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![page(&[2, 3], None)]),
        ],
    ));
    expect(
        &scan(dir.path(), &server, json!({}), json!({}), &[]),
        4,
        "failed",
        &["duplicate_id"],
    );
    Ok(())
}

#[test]
fn http_snapshot_change_blocks_and_the_pinned_snapshot_is_sent() -> TestResult {
    let dir = tempfile::tempdir()?;
    let snap = |ids: &[u64], next: Option<&str>, s: &str| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
            "next_page_token": next, "snapshot": s}),
        )
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![snap(&[1, 2], Some("c2"), "s1")]),
            (Some("c2"), vec![snap(&[3], Some("c3"), "s1")]),
            (Some("c3"), vec![snap(&[4], None, "s2")]),
        ],
    ));
    let cfg = json!({"snapshot": "/snapshot", "snapshot_param": "read_at"});
    let r = expect(
        &scan(dir.path(), &server, cfg, json!({}), &[]),
        4,
        "failed",
        &["snapshot_changed"],
    );
    assert_eq!(r["snapshot_id"], "s1");
    let sent: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|q| q.param("read_at").map(str::to_owned))
        .collect();
    assert_eq!(sent, vec![None, Some("s1".into()), Some("s1".into())]);
    Ok(())
}

#[test]
fn http_changed_query_echo_fails_and_rejects_the_receipt() -> TestResult {
    let dir = tempfile::tempdir()?;
    let echo = |ids: &[u64], next: Option<&str>, q: Value| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
            "next_page_token": next, "echo": q}),
        )
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (
                None,
                vec![echo(&[1, 2], Some("c2"), json!({"status": "active"}))],
            ),
            // A retry behind a gateway dropped the filter.
            (Some("c2"), vec![echo(&[3], None, json!({}))]),
        ],
    ));
    let cfg = json!({"query": "/echo"});
    let r = expect(
        &scan(
            dir.path(),
            &server,
            cfg,
            json!({"query": {"status": "active"}}),
            &[],
        ),
        4,
        "failed",
        &["query_changed"],
    );
    assert_eq!(r["rejected"], json!(true));
    Ok(())
}

#[test]
fn http_complete_true_with_a_next_cursor_is_contradictory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![(
            None,
            vec![Reply::json(
                &json!({"items": [{"id": 1}], "next_page_token": "c2", "done": true}),
            )],
        )],
    ));
    expect(
        &scan(
            dir.path(),
            &server,
            json!({"complete": "/done"}),
            json!({}),
            &[],
        ),
        4,
        "failed",
        &["contradictory_completion"],
    );
    Ok(())
}

#[test]
fn http_last_page_without_the_required_flag_is_unknown() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1], Some("c2"))]),
            (Some("c2"), vec![page(&[2], None)]),
        ],
    ));
    let contract = json!({"end_signal": "complete_flag"});
    expect(
        &scan(
            dir.path(),
            &server,
            json!({"complete": "/done"}),
            contract,
            &[],
        ),
        3,
        "unknown",
        &["missing_completion_evidence"],
    );
    Ok(())
}

#[test]
fn http_truncated_search_page_is_unknown_and_the_scan_goes_on() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gh = |ids: &[u64], incomplete: bool| {
        Reply::json(&json!({"total_count": 3, "incomplete_results": incomplete,
            "items": ids.iter().map(|i| json!({"id": i, "number": i + 1000})).collect::<Vec<_>>()}))
    };
    let server = Server::start(routes(
        "page",
        vec![
            (Some("1"), vec![gh(&[1, 2], true)]),
            (Some("2"), vec![gh(&[3], false)]),
        ],
    ));
    let cfg = json!({"preset": "github_rest"});
    let contract = json!({"end_signal": "total", "query": {"q": "repo:octo/hello is:issue"}});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        3,
        "unknown",
        &["truncated_page"],
    );
    assert_eq!(
        (
            r["pages_observed"].as_u64(),
            r["unique_ids_observed"].as_u64()
        ),
        (Some(2), Some(3))
    );
    Ok(())
}

#[test]
fn http_echoed_total_that_differs_from_the_ids_fails() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tot = |ids: &[u64], next: Option<&str>| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
            "next_page_token": next, "total": 4}),
        )
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![tot(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![tot(&[3], None)]),
        ],
    ));
    let r = expect(
        &scan(
            dir.path(),
            &server,
            json!({"total": "/total"}),
            json!({}),
            &[],
        ),
        4,
        "failed",
        &["count_mismatch"],
    );
    assert!(r["violations"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("total of 4"));
    Ok(())
}

#[test]
fn http_offset_pages_stop_at_the_limit_and_resume_through_the_stored_position() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "offset",
        vec![
            (Some("0"), vec![page(&[1, 2], None)]),
            (Some("2"), vec![page(&[3], None)]),
            (Some("3"), vec![page(&[], None)]),
        ],
    ));
    let cfg = json!({"offset_param": "offset", "page_size_param": "limit"});
    let contract = json!({"end_signal": "empty_page", "limits": {"max_pages": 1}});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        3,
        "unknown",
        &["limit_reached"],
    );
    assert_eq!(r["limits_hit"], json!(["max_pages"]));
    let run = bin(
        dir.path(),
        &["--json", "resume", "run-1", "--max-pages", "10"],
        &[],
    );
    let r = expect(&run, 0, "verified", &[]);
    assert_eq!(r["unique_ids_observed"], json!(3));
    // No pinned snapshot: offsets drift under writes, so the claim is about the live data.
    assert_eq!(r["conclusion_scope"], "all_records_live");
    let offsets: Vec<String> = server
        .requests()
        .iter()
        .map(|q| q.param("offset").unwrap_or("-").to_owned())
        .collect();
    assert_eq!(offsets, ["0", "2", "3"]);
    assert!(server
        .requests()
        .iter()
        .all(|q| q.param("limit") == Some("2")));
    Ok(())
}

#[test]
fn http_expected_counts_of_the_contract_are_reconciled() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![page(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![page(&[3], None)]),
        ],
    ));
    let contract = json!({"expected_count": 4, "expected_partitions": {"0": 4}});
    let r = expect(
        &scan(dir.path(), &server, json!({}), contract, &[]),
        4,
        "failed",
        &["count_mismatch", "partition_mismatch"],
    );
    assert_eq!(r["unique_ids_observed"], json!(3));
    Ok(())
}

#[test]
fn http_count_mode_traverses_since_an_echoed_total_is_no_authorized_count() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tot = |ids: &[u64], next: Option<&str>| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
            "next_page_token": next, "total": 3}),
        )
    };
    let server = Server::start(routes(
        "page_token",
        vec![
            (None, vec![tot(&[1, 2], Some("c2"))]),
            (Some("c2"), vec![tot(&[3], None)]),
        ],
    ));
    let cfg = json!({"total": "/total"});
    let r = expect(
        &scan(dir.path(), &server, cfg, json!({"mode": "count"}), &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(r["pages_observed"], json!(2));
    assert_eq!(server.requests().len(), 2, "the whole scope was traversed");
    Ok(())
}
