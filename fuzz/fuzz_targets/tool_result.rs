//! `Mapping::map_tool_result` (an MCP tool result to a page) and `tool_result_page` /
//! `Mapping::items_of` (the items the proxy keeps) on arbitrary input: an `Err` naming the
//! part at fault, or a page within the bounds; never a panic. The text-block path, which
//! parses only what the pointers reach, must agree with `map_value` over the full strict parse
//! of the text, error for error, and with the structured path on the same JSON.
//!
//! Input: the first byte picks the mapping; the rest is read as a whole result (when it is
//! JSON) and, as text, as the first text block of a result without structured content.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use scanledger::mapping::PageError::Json as MapJson;
use scanledger::mapping::{chain_text, tool_result_page, Mapping, Position};
use scanledger::ITEMS_PER_PAGE_MAX;
use serde_json::{json, Value};

fn mappings() -> &'static [Mapping] {
    static M: OnceLock<Vec<Mapping>> = OnceLock::new();
    M.get_or_init(|| {
        [
            json!({}),
            json!({"items": "/issues", "id": "/number", "next": "/next", "query": "/q"}),
            json!({"preset": "notion", "labels": {"a": {"pointer": "/archived", "truthy": true}}}),
            json!({"preset": "mcp_list", "items": "/tools", "id": "/name"}),
            json!({"preset": "github_rest", "content": ["/title", "/n"]}),
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
    let at = Position::First;
    // The bytes as a whole result (when they are JSON at all).
    if let Ok(result) = serde_json::from_slice::<Value>(body) {
        match m.map_tool_result(&result, body.len() as u64, 1 << 20, &at) {
            Ok((page, _)) => assert!(page.items.len() <= ITEMS_PER_PAGE_MAX as usize + 1),
            Err(e) => drop(chain_text(&e)),
        }
        if let Some(page) = tool_result_page(&result) {
            let _ = m.items_of(&page).map(<[Value]>::len);
        }
    }
    // The bytes as the text of the first text block: the same page as the full strict parse.
    let text = String::from_utf8_lossy(body).into_owned();
    let result = json!({"content": [{"type": "image", "data": "", "mimeType": "image/png"}, {"type": "text", "text": text}]});
    let got = m.map_tool_result(&result, 7, 1 << 20, &at).map(|(p, _)| p);
    let want = scanledger::json::parse(&text, scanledger::json::Numbers::Any)
        .map_err(|e| e.message)
        .map(|v| (m.map_value(&v, 7, &at), v));
    match (&got, want) {
        (Ok(page), Ok((Ok(full), v))) => {
            assert_eq!(
                page, &full,
                "the text path maps differently from the full parse"
            );
            // And the same JSON as structured content gives the same page.
            let structured = m.map_tool_result(&json!({"structuredContent": v}), 7, 1 << 20, &at);
            if !v.is_null() {
                assert_eq!(structured.map(|(p, _)| p).as_ref(), Ok(page));
            }
        }
        (Err(e), Ok((Err(full), _))) => assert_eq!(e, &full),
        (Err(MapJson(e)), Err(message)) => assert_eq!(e.message, message),
        (got, want) => panic!("map_tool_result {got:?} but the full parse gives {want:?}"),
    }
});
