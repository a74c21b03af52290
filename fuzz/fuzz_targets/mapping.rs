//! `Mapping::map_body` and `Mapping::call` on arbitrary bytes, under every preset and both
//! positional pagings: an `Err` naming a pointer, or a page within the bounds; never a panic
//! and never an allocation past the body's own size. `map_body` (which builds only what the
//! pointers reach) must agree with `map_value` over the full strict parse, error for error.
//!
//! Input: the first byte picks the mapping and the position, the rest is the response body
//! (and, read as text, a stored cursor to resume from).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use scanledger::ITEMS_PER_PAGE_MAX;
use scanledger::mapping::PageError::Json as MapJson;
use scanledger::mapping::{chain_text, Mapping, Position};
use scanledger::{PageRequest, Request};
use serde_json::json;

fn mappings() -> &'static [Mapping] {
    static M: OnceLock<Vec<Mapping>> = OnceLock::new();
    M.get_or_init(|| {
        [
            json!({}),
            json!({"preset": "relay", "root": "/data/c", "snapshot": "/s", "query": "/q"}),
            json!({"preset": "notion", "labels": {"a": {"pointer": "/archived", "truthy": true}}}),
            json!({"preset": "github_rest", "labels": {"o": {"pointer": "/state", "in": ["open", 1]}}}),
            json!({"preset": "jira", "content": ["/key", "/fields", "/n"]}),
            json!({"preset": "mcp_list", "items": "/tools", "id": "/name"}),
            json!({"offset_param": "o", "total": "/total", "has_more": "/more", "complete": "/done",
                   "truncated": "/cut", "labels": {"v": {"pointer": "/v", "ne": 3}}}),
            json!({"items": "", "id": "", "page_param": "p", "page_start": 0}),
        ]
        .iter()
        .map(|c| Mapping::from_config(c.as_object().expect("object")).expect("valid mapping"))
        .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let ms = mappings();
    let m = &ms[usize::from(pick) % ms.len()];
    let cursor = String::from_utf8_lossy(&body[..body.len().min(64)]).into_owned();
    for request in [Request::First, Request::Cursor(cursor), Request::After("7".into())] {
        let req = PageRequest {
            request,
            page_size: 10,
            snapshot: Some("s".into()),
            query: json!({"q": 1}),
        };
        match m.call(&req) {
            Ok(call) => drop(call),
            Err(e) => drop(e.to_string()),
        }
    }
    // Any position, the mapping's own kind or not: a mismatched one must not panic either.
    let at = match pick / 64 {
        0 => Position::First,
        1 => Position::Cursor("c".into()),
        2 => Position::Page(u64::MAX),
        _ => Position::Offset(u64::MAX - 1),
    };
    let got = m.map_body(body, 1 << 20, &at);
    // `map_body` parses only what the pointers reach; it must agree with the full strict parse.
    let want = scanledger::json::parse_slice(body, scanledger::json::Numbers::Any)
        .map_err(|e| e.message)
        .map(|v| m.map_value(&v, body.len() as u64, &at));
    match (&got, want) {
        (Ok(page), Ok(Ok(full))) => {
            assert_eq!(page, &full, "the reduced parse maps differently");
            assert!(page.items.len() <= ITEMS_PER_PAGE_MAX as usize + 1);
            assert_eq!(page.size_bytes, body.len() as u64);
            assert!(page.next.as_deref() != Some(""), "an empty cursor is never a next");
        }
        (Err(e), Ok(Err(full))) => assert_eq!(e, &full),
        (Err(MapJson(e)), Err(message)) => assert_eq!(e.message, message),
        (got, want) => panic!("map_body {got:?} but the full parse gives {want:?}"),
    }
    if let Err(e) = got {
        drop(chain_text(&e));
    }
});
