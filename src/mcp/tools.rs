//! The server's tool catalogue: names, descriptions, input schemas and annotations.
//!
//! Read-only tools carry `readOnlyHint: true`; the two that scan write the store and reach a
//! source (`openWorldHint`), and are never destructive. No schema has an argument that is a
//! path, a URL or a command: a source is named from the operator's catalogue.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{json, Map, Value};

/// `scan_collection`.
pub(crate) const SCAN: &str = "scan_collection";
/// `resume_scan`.
pub(crate) const RESUME: &str = "resume_scan";
/// `get_receipt`.
pub(crate) const RECEIPT: &str = "get_receipt";
/// `verify_receipt`.
pub(crate) const VERIFY: &str = "verify_receipt";
/// `diff_runs`.
pub(crate) const DIFF: &str = "diff_runs";
/// `missing_ids`.
pub(crate) const MISSING: &str = "missing_ids";
/// `page_run`.
pub(crate) const PAGE: &str = "page_run";
/// `list_runs`.
pub(crate) const LIST: &str = "list_runs";

fn object(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// A run argument: `run-N`, `N` or `latest`, as the command line takes it.
fn read_run_id() -> Value {
    json!({"type": "string", "pattern": "^((run-)?[0-9]+|latest)$", "description": "A run of the store: run-N, N, or latest (the newest run)"})
}

fn tool(name: &'static str, description: &'static str, schema: Value, read_only: bool) -> Tool {
    let annotations = if read_only {
        ToolAnnotations::new().read_only(true).open_world(false)
    } else {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true)
    };
    Tool::new(name, description, object(schema)).with_annotations(annotations)
}

/// Every tool, with the names of the operator's sources in `scan_collection`'s schema.
pub(crate) fn catalogue<'a>(sources: impl Iterator<Item = &'a str>) -> Vec<Tool> {
    let names: Vec<&str> = sources.collect();
    let limits = json!({"type": "integer", "minimum": 1});
    vec![
        tool(SCAN, "Scan a collection of one of the operator's declared sources to the end under a contract, and record it. \
            Answers outcome \"inventory\" (every ID, verified), \"incomplete_read\" (what was seen so far, a lower bound, \
            the reasons and the resume_scan call that continues it) or \"failed_read\" (the enumeration is defective). \
            A first page never passes for the whole collection.",
            json!({"type": "object", "additionalProperties": false, "required": ["source"],
                "properties": {
                    "source": {"type": "string", "enum": names, "description": "A source the operator declared (by name only)."},
                    "contract": {"type": "object", "description": "A scanledger contract: query, tenant, snapshot_id, expected_count, page_size, limits, end_signal, id_codec, mode, policies. The declared name is the run's scope: \"source\" may be left out, and any other name is refused."},
                    "ids_max": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "At most this many IDs in the answer (default 1000); page_run serves the rest."}
                }}), false),
        tool(RESUME, "Continue a run that stopped early (a budget, an interruption, a failed page) from its stored cursor, \
            with budgets raised; run_id may be latest. A partial answer offers two calls: resume_scan (the budget that fired doubled) \
            and resume_to_end (the budgets that fired lifted to the most this server accepts). Only runs of the operator's declared sources can be resumed.",
            json!({"type": "object", "additionalProperties": false, "required": ["run_id"],
                "properties": {"run_id": read_run_id(), "max_pages": limits, "max_records": limits, "max_bytes": limits,
                    "deadline_seconds": limits,
                    "ids_max": {"type": "integer", "minimum": 1, "maximum": 100000}}}), false),
        tool(RECEIPT, "The completeness receipt of a recorded run, with its outcome.",
            json!({"type": "object", "additionalProperties": false, "required": ["run_id"], "properties": {"run_id": read_run_id()}}), true),
        tool(VERIFY, "Recompute every field of a receipt from the store; a receipt that does not match is named with its first mismatch.",
            json!({"type": "object", "additionalProperties": false, "required": ["receipt"], "properties": {"receipt": {"type": "object"}}}), true),
        tool(DIFF, "Compare the IDs of two runs of one (source, tenant): added and removed counts and ranges.",
            json!({"type": "object", "additionalProperties": false, "required": ["a", "b"], "properties": {"a": read_run_id(), "b": read_run_id()}}), true),
        tool(MISSING, "The IDs a reference run has that a run lacks, as ranges.",
            json!({"type": "object", "additionalProperties": false, "required": ["run_id", "against"], "properties": {"run_id": read_run_id(), "against": read_run_id()}}), true),
        tool(PAGE, "A recorded run's IDs in order, a page at a time, with bound page tokens.",
            json!({"type": "object", "additionalProperties": false, "required": ["run_id"],
                "properties": {"run_id": read_run_id(), "token": {"type": "string", "description": "The next_token of the previous page."},
                    "size": {"type": "integer", "minimum": 1, "maximum": 100000}}}), true),
        tool(LIST, "The runs of the store, newest first.",
            json!({"type": "object", "additionalProperties": false, "properties": {}}), true),
    ]
}
