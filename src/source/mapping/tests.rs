//! Mapping tests: every preset against a recorded, real-shaped response, the `has_more`
//! rules, positional pagination, labels, content and the errors, through one `check` helper.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use serde_json::{json, Value};

use super::*;
use crate::content::{self, ContentValue};
use crate::contract::{Contract, Page, RawId, ITEMS_PER_PAGE_MAX};
use crate::reconcile::Request;
use crate::source::PageRequest;

fn mapping(cfg: Value) -> Mapping {
    Mapping::from_config(cfg.as_object().unwrap()).unwrap()
}

fn config_err(cfg: Value) -> ConfigError {
    Mapping::from_config(cfg.as_object().unwrap()).unwrap_err()
}

/// What a mapped page should say: IDs as JSON, next, complete, total, truncated, snapshot.
#[derive(Debug, PartialEq)]
struct Want {
    ids: Value,
    next: Option<&'static str>,
    complete: Option<bool>,
    total: Option<u64>,
    truncated: bool,
}

fn ids_json(page: &Page) -> Value {
    Value::Array(
        page.items
            .iter()
            .map(|i| match &i.id {
                RawId::Int(n) => json!(n),
                RawId::Neg(n) => json!(n),
                RawId::Str(s) => json!(s),
                RawId::Other(o) => json!({ "other": o }),
            })
            .collect(),
    )
}

#[track_caller]
fn check(m: &Mapping, body: &str, at: &Position, want: Want) -> Page {
    let page = m
        .map_body(body.as_bytes(), 1 << 20, at)
        .unwrap_or_else(|e| panic!("{}", chain_text(&e)));
    let got = Want {
        ids: ids_json(&page),
        next: page.next.clone().map(|s| &*s.leak()),
        complete: page.complete,
        total: page.total,
        truncated: page.truncated,
    };
    assert_eq!(got, want);
    assert_eq!(page.size_bytes, body.len() as u64);
    page
}

#[track_caller]
fn check_err(m: &Mapping, body: &str, at: &Position, want: &str) {
    match m.map_body(body.as_bytes(), 1 << 20, at) {
        Ok(p) => panic!("mapped: {p:?}"),
        Err(e) => {
            let text = chain_text(&e);
            assert!(text.contains(want), "{text}");
        }
    }
}

fn req(request: Request, query: Value) -> PageRequest {
    PageRequest {
        request,
        page_size: 50,
        snapshot: None,
        query,
    }
}

const GITHUB_SEARCH: &str = r#"{
  "total_count": 2,
  "incomplete_results": false,
  "items": [
    {"url": "https://api.github.com/repos/octo/hello/issues/1347", "id": 1, "node_id": "MDU6SXNzdWUx",
     "number": 1347, "title": "Found a bug", "state": "open", "labels": [{"name": "bug"}],
     "score": 1.0},
    {"url": "https://api.github.com/repos/octo/hello/issues/1348", "id": 2, "node_id": "MDU6SXNzdWUy",
     "number": 1348, "title": "Another", "state": "closed", "labels": [], "score": 0.5}
  ]
}"#;

#[test]
fn github_rest_pages_by_number_and_echoes_total_and_truncation() {
    let m = mapping(json!({"preset": "github_rest",
        "labels": {"open": {"pointer": "/state", "eq": "open"}}}));
    assert!(m.is_positional());
    let call = m
        .call(&req(
            Request::First,
            json!({"q": "repo:octo/hello is:issue"}),
        ))
        .unwrap();
    assert_eq!(
        call.params,
        vec![
            ("q".into(), json!("repo:octo/hello is:issue")),
            ("per_page".into(), json!(50)),
            ("page".into(), json!(1)),
        ]
    );
    let page = check(
        &m,
        GITHUB_SEARCH,
        &call.position,
        Want {
            ids: json!([1, 2]),
            next: Some("p:2"),
            complete: None,
            total: Some(2),
            truncated: false,
        },
    );
    assert_eq!(page.items[0].labels, vec!["open".to_owned()]);
    assert!(page.items[1].labels.is_empty());
    // The synthetic cursor resumes at the next page number.
    let call = m
        .call(&req(Request::Cursor("p:2".into()), Value::Null))
        .unwrap();
    assert_eq!(call.position, Position::Page(2));
    // GitHub's search timed out and says so: a truncation warning (R9).
    let incomplete = GITHUB_SEARCH.replace(
        "\"incomplete_results\": false",
        "\"incomplete_results\": true",
    );
    check(
        &m,
        &incomplete,
        &Position::Page(1),
        Want {
            ids: json!([1, 2]),
            next: Some("p:2"),
            complete: None,
            total: Some(2),
            truncated: true,
        },
    );
    // An empty page has no next: the end under `empty_page`, R8 under `total`.
    check(
        &m,
        r#"{"total_count": 2, "incomplete_results": false, "items": []}"#,
        &Position::Page(3),
        Want {
            ids: json!([]),
            next: None,
            complete: None,
            total: Some(2),
            truncated: false,
        },
    );
}

const GRAPHQL_LAST: &str = r#"{"data": {"repository": {"issues": {
  "totalCount": 3,
  "pageInfo": {"endCursor": "Y3Vyc29yOnYyOpHOAAAAAw==", "hasNextPage": false},
  "nodes": [{"id": "I_kwDOAAAAAc", "number": 3, "title": "last"}]
}}}}"#;

#[test]
fn relay_last_page_with_an_end_cursor_is_the_end_not_a_contradiction() {
    let m = mapping(json!({"preset": "relay", "root": "/data/repository/issues"}));
    check(
        &m,
        GRAPHQL_LAST,
        &Position::Cursor("Y3Vyc29yOnYyOpHOAAAAAg==".into()),
        Want {
            ids: json!(["I_kwDOAAAAAc"]),
            next: None,
            complete: Some(true),
            total: Some(3),
            truncated: false,
        },
    );
    let middle = GRAPHQL_LAST.replace("\"hasNextPage\": false", "\"hasNextPage\": true");
    check(
        &m,
        &middle,
        &Position::First,
        Want {
            ids: json!(["I_kwDOAAAAAc"]),
            next: Some("Y3Vyc29yOnYyOpHOAAAAAw=="),
            complete: None,
            total: Some(3),
            truncated: false,
        },
    );
    // More promised with no cursor: complete false, so the reconciler reports R7.
    let broken = middle.replace("\"Y3Vyc29yOnYyOpHOAAAAAw==\"", "null");
    check(
        &m,
        &broken,
        &Position::First,
        Want {
            ids: json!(["I_kwDOAAAAAc"]),
            next: None,
            complete: Some(false),
            total: Some(3),
            truncated: false,
        },
    );
    // A missing flag is never taken for the end.
    let no_flag = GRAPHQL_LAST.replace("\"hasNextPage\": false", "\"other\": 1");
    check_err(
        &m,
        &no_flag,
        &Position::First,
        "has_more pointer \"/pageInfo/hasNextPage\" names nothing",
    );
    // A GraphQL error answer has no connection at the root.
    check_err(
        &m,
        r#"{"data": null, "errors": [{"message": "rate limited"}]}"#,
        &Position::First,
        "root pointer \"/data/repository/issues\" names nothing",
    );
    let call = m
        .call(&req(Request::Cursor("abc".into()), Value::Null))
        .unwrap();
    assert_eq!(
        call.params,
        vec![("first".into(), json!(50)), ("after".into(), json!("abc"))]
    );
}

const NOTION_LAST: &str = r#"{
  "object": "list",
  "results": [
    {"object": "page", "id": "59833787-2cf9-4fdf-8782-e53db20768a5", "archived": false,
     "properties": {"Status": {"select": {"name": "Done"}}}},
    {"object": "page", "id": "b55c9c91-384d-452b-81db-d1ef79372b75", "archived": true,
     "properties": {"Status": {"select": null}}}
  ],
  "next_cursor": null,
  "has_more": false,
  "type": "page_or_database",
  "page_or_database": {}
}"#;

#[test]
fn notion_pages_by_start_cursor_and_ends_on_has_more_false() {
    let m = mapping(json!({"preset": "notion", "labels": {
        "archived": {"pointer": "/archived", "truthy": true},
        "no_status": {"pointer": "/properties/Status/select", "exists": false}}}));
    let page = check(
        &m,
        NOTION_LAST,
        &Position::Cursor("fe2cc560-036c-44cd-90e8-294d5a74cebc".into()),
        Want {
            ids: json!([
                "59833787-2cf9-4fdf-8782-e53db20768a5",
                "b55c9c91-384d-452b-81db-d1ef79372b75"
            ]),
            next: None,
            complete: Some(true),
            total: None,
            truncated: false,
        },
    );
    assert!(page.items[0].labels.is_empty());
    assert_eq!(
        page.items[1].labels,
        vec!["archived".to_owned(), "no_status".to_owned()]
    );
    let middle = NOTION_LAST
        .replace(
            "\"next_cursor\": null",
            "\"next_cursor\": \"e6c6f8ff-c70e-4970-91ba-98f03e0d7fc6\"",
        )
        .replace("\"has_more\": false", "\"has_more\": true");
    check(
        &m,
        &middle,
        &Position::First,
        Want {
            ids: json!([
                "59833787-2cf9-4fdf-8782-e53db20768a5",
                "b55c9c91-384d-452b-81db-d1ef79372b75"
            ]),
            next: Some("e6c6f8ff-c70e-4970-91ba-98f03e0d7fc6"),
            complete: None,
            total: None,
            truncated: false,
        },
    );
    let call = m
        .call(&req(
            Request::Cursor("c".into()),
            json!({"filter": {"property": "Status"}}),
        ))
        .unwrap();
    assert_eq!(
        call.params,
        vec![
            ("filter".into(), json!({"property": "Status"})),
            ("page_size".into(), json!(50)),
            ("start_cursor".into(), json!("c")),
        ]
    );
}

const JIRA: &str = r#"{
  "issues": [
    {"expand": "operations", "id": "10068", "self": "https://example.atlassian.net/rest/api/3/issue/10068", "key": "PROJ-8",
     "fields": {"summary": "Upgrade", "status": {"name": "To Do"}}},
    {"expand": "operations", "id": "10069", "self": "https://example.atlassian.net/rest/api/3/issue/10069", "key": "PROJ-9",
     "fields": {"summary": "Migrate", "status": {"name": "Done"}}}
  ],
  "nextPageToken": "Ch0jU3RyaW5nJlVISlBTa289JUludCZNVEF3T0E9PRAyGOe57Jm+MiJCcHJvamVjdD1QUk9K",
  "isLast": false,
  "total": -1
}"#;

#[test]
fn jira_total_minus_one_is_unknown_and_the_token_is_next() {
    let m = mapping(json!({"preset": "jira", "labels": {
        "todo": {"pointer": "/fields/status/name", "in": ["To Do", "Backlog"]}}}));
    let page = check(
        &m,
        JIRA,
        &Position::First,
        Want {
            ids: json!(["10068", "10069"]),
            next: Some("Ch0jU3RyaW5nJlVISlBTa289JUludCZNVEF3T0E9PRAyGOe57Jm+MiJCcHJvamVjdD1QUk9K"),
            complete: Some(false),
            total: None,
            truncated: false,
        },
    );
    assert_eq!(page.items[0].labels, vec!["todo".to_owned()]);
    let last = r#"{"issues": [{"id": "10070"}], "isLast": true}"#;
    check(
        &m,
        last,
        &Position::Cursor("t".into()),
        Want {
            ids: json!(["10070"]),
            next: None,
            complete: Some(true),
            total: None,
            truncated: false,
        },
    );
    // The classic endpoint pages by `startAt`: offset pagination, the preset's cursor dropped.
    let classic = mapping(json!({"preset": "jira", "offset_param": "startAt"}));
    let body =
        r#"{"startAt": 0, "maxResults": 2, "total": 3, "issues": [{"id": "1"}, {"id": "2"}]}"#;
    check(
        &classic,
        body,
        &Position::Offset(0),
        Want {
            ids: json!(["1", "2"]),
            next: Some("o:2"),
            complete: None,
            total: Some(3),
            truncated: false,
        },
    );
    let call = classic
        .call(&req(Request::Cursor("o:2".into()), Value::Null))
        .unwrap();
    assert_eq!(
        call.params,
        vec![
            ("maxResults".into(), json!(50)),
            ("startAt".into(), json!(2))
        ]
    );
}

const MCP_TOOLS: &str = r#"{
  "tools": [
    {"name": "get_weather", "title": "Weather", "description": "Get current weather",
     "inputSchema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}},
    {"name": "get_time", "description": "Get the time", "inputSchema": {"type": "object"}}
  ],
  "nextCursor": "eyJwYWdlIjogM30="
}"#;

#[test]
fn mcp_list_pages_by_cursor_and_sends_no_page_size() {
    let m = mapping(
        json!({"preset": "mcp_list", "items": "/tools", "id": "/name",
        "content": ["/description", "/inputSchema"]}),
    );
    let page = check(
        &m,
        MCP_TOOLS,
        &Position::First,
        Want {
            ids: json!(["get_weather", "get_time"]),
            next: Some("eyJwYWdlIjogM30="),
            complete: None,
            total: None,
            truncated: false,
        },
    );
    let expected = content::record_hash(&[
        ContentValue::Text("Get current weather"),
        ContentValue::Text(r#"{"properties":{"location":{"type":"string"}},"required":["location"],"type":"object"}"#),
    ])
    .unwrap();
    assert_eq!(page.items[0].content, Some(expected));
    let call = m
        .call(&req(
            Request::Cursor("eyJwYWdlIjogM30=".into()),
            Value::Null,
        ))
        .unwrap();
    assert_eq!(
        call.params,
        vec![("cursor".into(), json!("eyJwYWdlIjogM30="))]
    );
    check(
        &m,
        r#"{"tools": []}"#,
        &Position::Cursor("x".into()),
        Want {
            ids: json!([]),
            next: None,
            complete: None,
            total: None,
            truncated: false,
        },
    );
}

#[test]
fn defaults_are_the_documented_ones() {
    let m = mapping(json!({}));
    let body = r#"{"items": [{"id": 1}, {"id": "a"}, {"id": -3}], "next_page_token": "", "complete": true}"#;
    // AIP-158's last page has an empty token: no cursor. `complete` needs its pointer.
    check(
        &m,
        body,
        &Position::First,
        Want {
            // A negative integer reaches the codec as one (`signed` takes it).
            ids: json!([1, "a", -3]),
            next: None,
            complete: None,
            total: None,
            truncated: false,
        },
    );
    let call = m.call(&PageRequest {
        request: Request::Cursor("tok".into()),
        page_size: 7,
        snapshot: Some("s1".into()),
        query: Value::Null,
    });
    assert_eq!(
        call.unwrap().params,
        vec![
            ("page_size".into(), json!(7)),
            ("page_token".into(), json!("tok"))
        ]
    );
    let with_snapshot = mapping(json!({"snapshot_param": "read_time", "snapshot": "/read_time"}));
    let call = with_snapshot
        .call(&PageRequest {
            request: Request::First,
            page_size: 7,
            snapshot: Some("s1".into()),
            query: Value::Null,
        })
        .unwrap();
    assert_eq!(
        call.params,
        vec![
            ("page_size".into(), json!(7)),
            ("read_time".into(), json!("s1"))
        ]
    );
    let page = with_snapshot
        .map_body(
            br#"{"items": [], "read_time": "s1"}"#,
            100,
            &Position::First,
        )
        .unwrap();
    assert_eq!(page.snapshot.as_deref(), Some("s1"));
}

#[test]
fn explicit_keys_win_over_presets_and_null_switches_a_pointer_off() {
    let m = mapping(
        json!({"preset": "github_rest", "items": "", "truncated": null, "page_size_param": "size"}),
    );
    let body = r#"[{"id": 5}]"#;
    check(
        &m,
        body,
        &Position::Page(1),
        Want {
            ids: json!([5]),
            next: Some("p:2"),
            complete: None,
            total: None,
            truncated: false,
        },
    );
    let call = m.call(&req(Request::First, Value::Null)).unwrap();
    assert_eq!(
        call.params,
        vec![("size".into(), json!(50)), ("page".into(), json!(1))]
    );
}

#[test]
fn offset_pagination_advances_by_the_items_received() {
    let m = mapping(json!({"offset_param": "offset", "total": "/total", "has_more": null}));
    check(
        &m,
        r#"{"items": [{"id": 1}, {"id": 2}, {"id": 3}], "total": 5}"#,
        &Position::Offset(0),
        Want {
            ids: json!([1, 2, 3]),
            next: Some("o:3"),
            complete: None,
            total: Some(5),
            truncated: false,
        },
    );
    // A short page still continues: only the end signal ends.
    check(
        &m,
        r#"{"items": [{"id": 4}], "total": 5}"#,
        &Position::Offset(3),
        Want {
            ids: json!([4]),
            next: Some("o:4"),
            complete: None,
            total: Some(5),
            truncated: false,
        },
    );
    // A flag from the API ends it; so does an empty page (no next).
    let flagged = mapping(json!({"offset_param": "offset", "has_more": "/more"}));
    check(
        &flagged,
        r#"{"items": [{"id": 4}], "more": false}"#,
        &Position::Offset(3),
        Want {
            ids: json!([4]),
            next: None,
            complete: Some(true),
            total: None,
            truncated: false,
        },
    );
    check(
        &m,
        r#"{"items": [], "total": 5}"#,
        &Position::Offset(4),
        Want {
            ids: json!([]),
            next: None,
            complete: None,
            total: Some(5),
            truncated: false,
        },
    );
}

#[test]
fn stored_cursors_of_another_mapping_are_refused_without_showing_them() {
    let m = mapping(json!({"page_param": "page"}));
    for bad in ["o:3", "p:", "p:01", "p:-1", "p:1x", "secret-token"] {
        let e = m
            .call(&req(Request::Cursor(bad.into()), Value::Null))
            .unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, RequestError::ForeignCursor { .. }),
            "{bad}: {e:?}"
        );
        assert!(!text.contains(bad), "{text}");
    }
    let e = m
        .call(&req(Request::After("9".into()), Value::Null))
        .unwrap_err();
    assert_eq!(e, RequestError::NoAfterParam);
    let hw = mapping(json!({"after_param": "after_id"}));
    let call = hw
        .call(&req(Request::After("9".into()), Value::Null))
        .unwrap();
    assert_eq!(
        call.params,
        vec![
            ("page_size".into(), json!(50)),
            ("after_id".into(), json!("9"))
        ]
    );
}

#[test]
fn request_errors_name_the_problem() {
    let m = mapping(json!({}));
    assert_eq!(
        m.call(&req(Request::First, json!({"page_token": "x"})))
            .unwrap_err(),
        RequestError::ParamCollision {
            name: "page_token".into()
        }
    );
    assert_eq!(
        m.call(&req(Request::First, json!([1]))).unwrap_err(),
        RequestError::QueryNotObject { found: "an array" }
    );
}

#[test]
fn end_signals_the_mapping_cannot_show_are_refused() {
    let positional = mapping(json!({"page_param": "page", "total": "/total"}));
    assert_eq!(
        positional
            .check_end_signal(EndSignal::CursorAbsent)
            .unwrap_err()
            .field(),
        "page_param"
    );
    assert!(positional.check_end_signal(EndSignal::Total).is_ok());
    assert!(positional.check_end_signal(EndSignal::EmptyPage).is_ok());
    assert_eq!(
        positional
            .check_end_signal(EndSignal::CompleteFlag)
            .unwrap_err()
            .field(),
        "complete"
    );
    let flagged = mapping(json!({"page_param": "page", "has_more": "/more"}));
    assert!(flagged.check_end_signal(EndSignal::CursorAbsent).is_ok());
    let cursor = mapping(json!({}));
    assert!(cursor.check_end_signal(EndSignal::CursorAbsent).is_ok());
    assert_eq!(
        cursor
            .check_end_signal(EndSignal::Total)
            .unwrap_err()
            .field(),
        "total"
    );
    assert!(cursor
        .check_end_signal(Contract::new("s").end_signal)
        .is_ok());
}

#[test]
fn bad_configs_name_the_key() {
    for (cfg, key, words) in [
        (
            json!({"itemz": "/x"}),
            "itemz",
            "unknown key \"itemz\"; did you mean \"items\"?",
        ),
        (
            json!({"items": "x"}),
            "items",
            "must be \"\" or start with \"/\"",
        ),
        (
            json!({"preset": "stripe"}),
            "preset",
            "must be one of \"relay\", \"notion\", \"github_rest\", \"jira\" or \"mcp_list\"",
        ),
        (
            json!({"next": "/n", "page_param": "page"}),
            "next",
            "exclude each other",
        ),
        (
            json!({"page_param": "page", "offset_param": "o"}),
            "page_param",
            "exclude each other",
        ),
        (json!({"page_start": 0}), "page_start", "page_param"),
        (
            json!({"cursor_param": "p", "page_size_param": "p"}),
            "page_size_param",
            "used twice",
        ),
        (
            json!({"labels": {"x": {"pointer": "/a"}}}),
            "labels.x",
            "needs one test",
        ),
        (
            json!({"labels": {"x": {"pointer": "/a", "eq": 1, "ne": 2}}}),
            "labels.x",
            "exactly one test",
        ),
        (
            json!({"labels": {"x": {"pointer": "/a", "gt": 1}}}),
            "labels.x.gt",
            "unknown key \"labels.x.gt\"",
        ),
        (
            json!({"labels": {"x": {"pointer": "/a", "in": 1}}}),
            "labels.x.in",
            "must be an array, not an integer",
        ),
        (
            json!({"labels": {"": {"pointer": "/a", "eq": 1}}}),
            "labels",
            "1 to 128 bytes",
        ),
        (
            json!({"cursor_param": ""}),
            "cursor_param",
            "1 to 256 bytes",
        ),
        (json!({"next": null}), "next", "needs a \"next\" pointer"),
    ] {
        let e = config_err(cfg.clone());
        assert_eq!(e.field(), key, "{cfg}: {e}");
        assert!(e.message().contains(words), "{cfg}: {e}");
    }
    let many: serde_json::Map<String, Value> = (0..17)
        .map(|i| (format!("l{i}"), json!({"pointer": "/a", "exists": true})))
        .collect();
    assert_eq!(config_err(json!({"labels": many})).field(), "labels");
}

#[test]
fn page_errors_name_the_pointer_and_the_type_never_the_value() {
    let m = mapping(json!({"complete": "/done", "total": "/total", "truncated": "/cut"}));
    for (body, words) in [
        (
            r#"{"items": {"id": 1}}"#,
            "items pointer \"/items\": expected an array, found an object",
        ),
        (r#"{"data": []}"#, "items pointer \"/items\" names nothing"),
        (
            r#"{"items": [{"id": 1}, {"name": "x"}]}"#,
            "item 1: id pointer \"/id\" names nothing",
        ),
        (r#"{"items": [{"id": null}]}"#, "item 0: id pointer"),
        (
            r#"{"items": [], "next_page_token": true}"#,
            "next pointer \"/next_page_token\": expected a string, found a boolean",
        ),
        (
            r#"{"items": [], "done": "yes"}"#,
            "complete pointer \"/done\": expected a boolean, found a string",
        ),
        (
            r#"{"items": [], "total": 2.5}"#,
            "total pointer \"/total\": expected an integer, found a number",
        ),
        (
            r#"{"items": [], "cut": 1}"#,
            "truncated pointer \"/cut\": expected a boolean",
        ),
        (r#"{"items": [], "items": []}"#, "duplicate key \"items\""),
        (r#"{"items": [}"#, "not strict JSON"),
        ("", "not strict JSON"),
    ] {
        check_err(&m, body, &Position::First, words);
    }
    let secret = r#"{"items": [], "next_page_token": {"token": "SECRET-CURSOR"}}"#;
    let e = chain_text(
        &m.map_body(secret.as_bytes(), 1000, &Position::First)
            .unwrap_err(),
    );
    assert!(!e.contains("SECRET-CURSOR"), "{e}");
    let big = format!(r#"{{"items": [], "pad": "{}"}}"#, "x".repeat(100));
    assert_eq!(
        m.map_body(big.as_bytes(), 50, &Position::First)
            .unwrap_err(),
        PageError::TooLarge { max_bytes: 50 }
    );
}

#[test]
fn content_values_hash_as_their_canonical_forms() {
    let m = mapping(json!({"content": ["/price", "/name", "/ok", "/gone"]}));
    let page = m
        .map_body(
            br#"{"items": [{"id": 1, "price": 1.50, "name": "a", "ok": true}]}"#,
            1000,
            &Position::First,
        )
        .unwrap();
    let want = content::record_hash(&[
        ContentValue::Decimal("1.5"),
        ContentValue::Text("a"),
        ContentValue::Bool(true),
        ContentValue::Null,
    ])
    .unwrap();
    assert_eq!(page.items[0].content, Some(want));
    // A SQL row with the same values hashes alike.
    let sql = content::record_hash(&[
        ContentValue::Decimal("1.500"),
        ContentValue::Text("a"),
        ContentValue::Int(1),
        ContentValue::Null,
    ])
    .unwrap();
    assert_eq!(page.items[0].content, Some(sql));
}

#[test]
fn oversized_pages_are_cut_one_past_the_bound() {
    let m = mapping(json!({"items": "", "id": ""}));
    let n = ITEMS_PER_PAGE_MAX as usize + 10;
    let body = format!("[{}]", vec!["1"; n].join(","));
    let page = m
        .map_body(body.as_bytes(), u64::MAX, &Position::First)
        .unwrap();
    assert_eq!(page.items.len(), ITEMS_PER_PAGE_MAX as usize + 1);
}
