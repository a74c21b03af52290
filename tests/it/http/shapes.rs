//! API shapes: GraphQL (relay) and POST search endpoints, page numbers, drifting offsets,
//! and configs refused before any request is sent.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use serde_json::{json, Value};

use super::server::{Reply, Server};
use super::{expect, routes, scan, TestResult};

#[test]
fn http_graphql_last_page_with_an_end_cursor_and_no_next_page_is_verified() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gql = |ids: &[&str], end: &str, more: bool| {
        Reply::json(&json!({"data": {"repository": {"issues": {
            "nodes": ids.iter().map(|i| json!({"id": i, "title": "t"})).collect::<Vec<_>>(),
            "pageInfo": {"endCursor": end, "hasNextPage": more}}}}}))
    };
    let server = Server::start(routes(
        "after",
        vec![
            (None, vec![gql(&["I_1", "I_2"], "Y3Vyc29yOjI=", true)]),
            (
                Some("Y3Vyc29yOjI="),
                vec![gql(&["I_3"], "Y3Vyc29yOjM=", false)],
            ),
        ],
    ));
    let query = "query($owner: String!, $first: Int!, $after: String) { repository(owner: $owner, name: \"hello\") { issues(first: $first, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } } }";
    let cfg =
        json!({"preset": "relay", "root": "/data/repository/issues", "body": {"query": query}});
    let contract = json!({"id_codec": "string", "query": {"owner": "octo"}});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(r["terminal_cursor_observed"], json!(true));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for (req, after) in reqs.iter().zip([Value::Null, json!("Y3Vyc29yOjI=")]) {
        let body = req.json();
        assert_eq!(req.method, "POST");
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(body["query"], json!(query));
        assert_eq!(body["variables"]["first"], json!(2));
        assert_eq!(body["variables"]["owner"], json!("octo"));
        assert_eq!(
            body["variables"]
                .get("after")
                .cloned()
                .unwrap_or(Value::Null),
            after
        );
    }
    Ok(())
}

#[test]
fn http_post_search_endpoint_sends_the_query_in_the_body() -> TestResult {
    let dir = tempfile::tempdir()?;
    let notion = |ids: &[&str], next: Option<&str>| {
        Reply::json(
            &json!({"object": "list", "results": ids.iter().map(|i| json!({"object": "page", "id": i})).collect::<Vec<_>>(),
            "next_cursor": next, "has_more": next.is_some(), "type": "page_or_database", "page_or_database": {}}),
        )
    };
    let server = Server::start(routes(
        "start_cursor",
        vec![
            (
                None,
                vec![notion(
                    &[
                        "59833787-2cf9-4fdf-8782-e53db20768a5",
                        "b55c9c91-384d-452b-81db-d1ef79372b75",
                    ],
                    Some("e6c6f8ff-c70e-4970-91ba-98f03e0d7fc6"),
                )],
            ),
            (
                Some("e6c6f8ff-c70e-4970-91ba-98f03e0d7fc6"),
                vec![notion(&["0a1b2c3d-0000-4000-8000-000000000001"], None)],
            ),
        ],
    ));
    let cfg = json!({"preset": "notion", "method": "POST", "headers": {"Notion-Version": "2022-06-28"},
        "body": {"sorts": [{"timestamp": "created_time", "direction": "ascending"}]}});
    let filter = json!({"property": "Status", "select": {"equals": "Done"}});
    let contract = json!({"id_codec": "string", "query": {"filter": filter}});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(r["unique_ids_observed"], json!(3));
    let reqs = server.requests();
    for (req, cursor) in reqs
        .iter()
        .zip([Value::Null, json!("e6c6f8ff-c70e-4970-91ba-98f03e0d7fc6")])
    {
        let body = req.json();
        assert_eq!(req.method, "POST");
        assert_eq!(req.header("notion-version"), Some("2022-06-28"));
        assert_eq!(body["filter"], filter);
        assert_eq!(body["sorts"][0]["timestamp"], "created_time");
        assert_eq!(body["page_size"], json!(2));
        assert_eq!(
            body.get("start_cursor").cloned().unwrap_or(Value::Null),
            cursor
        );
        assert!(
            req.query.is_empty(),
            "parameters leaked into the URL: {:?}",
            req.query
        );
    }
    Ok(())
}

#[test]
fn http_page_numbers_end_at_the_echoed_total() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gh = |ids: &[u64]| {
        Reply::json(&json!({"total_count": 5, "incomplete_results": false,
            "items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>()}))
    };
    let server = Server::start(routes(
        "page",
        vec![
            (Some("1"), vec![gh(&[1, 2])]),
            (Some("2"), vec![gh(&[3, 4])]),
            (Some("3"), vec![gh(&[5])]),
        ],
    ));
    let cfg = json!({"preset": "github_rest"});
    let contract = json!({"end_signal": "total", "query": {"q": "repo:octo/hello"}});
    let r = expect(
        &scan(dir.path(), &server, cfg, contract, &[]),
        0,
        "verified",
        &[],
    );
    assert_eq!(r["pages_observed"], json!(3));
    let pages: Vec<(String, String, String)> = server
        .requests()
        .iter()
        .map(|q| {
            (
                q.param("page").unwrap_or("-").into(),
                q.param("per_page").unwrap_or("-").into(),
                q.param("q").unwrap_or("-").into(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = ["1", "2", "3"]
        .iter()
        .map(|p| ((*p).into(), "2".into(), "repo:octo/hello".into()))
        .collect();
    assert_eq!(pages, want);
    Ok(())
}

#[test]
fn http_drifting_offsets_show_as_duplicates_and_a_count_mismatch() -> TestResult {
    // A record inserted at the front between page 1 and page 2 shifts every offset by one:
    // the item at the boundary is served twice and the echoed total moves on.
    let dir = tempfile::tempdir()?;
    let tot = |ids: &[u64], total: u64| {
        Reply::json(
            &json!({"items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(), "total": total}),
        )
    };
    let server = Server::start(routes(
        "offset",
        vec![
            (Some("0"), vec![tot(&[10, 20], 4)]),
            (Some("2"), vec![tot(&[20, 30], 5)]),
            (Some("4"), vec![tot(&[40], 5)]),
        ],
    ));
    let cfg = json!({"offset_param": "offset", "total": "/total"});
    let r = expect(
        &scan(
            dir.path(),
            &server,
            cfg,
            json!({"end_signal": "total"}),
            &[],
        ),
        4,
        "failed",
        &["duplicate_id", "count_mismatch"],
    );
    assert_eq!(r["unique_ids_observed"], json!(4));
    Ok(())
}

#[test]
fn http_positional_pagination_refuses_the_cursor_absent_end_signal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes("page", vec![]));
    let run = scan(
        dir.path(),
        &server,
        json!({"page_param": "page"}),
        json!({}),
        &[],
    );
    assert_eq!(run.exit, 2, "{}", run.stderr);
    // With --json the error is an object on stderr: its message is the sentence people read.
    let message = serde_json::from_str::<Value>(&run.stderr)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| run.stderr.clone());
    assert!(
        message.contains(
            "key \"page_param\": page-number and offset pagination have no cursor to end on: the contract's end_signal must be \"total\" or \"empty_page\""
        ),
        "{}",
        run.stderr
    );
    assert!(server.requests().is_empty());
    Ok(())
}

#[test]
fn http_missing_auth_variable_is_named_and_nothing_is_sent() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = Server::start(routes("page_token", vec![]));
    let run = scan(
        dir.path(),
        &server,
        json!({"auth_env": "SCANLEDGER_TEST_UNSET_TOKEN"}),
        json!({}),
        &[],
    );
    assert_eq!(run.exit, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("SCANLEDGER_TEST_UNSET_TOKEN"),
        "{}",
        run.stderr
    );
    assert!(server.requests().is_empty());
    Ok(())
}
