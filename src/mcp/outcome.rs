//! The shape of every answer the server and the proxy give: an `outcome` first, and for a
//! partial read no field that reads as a total.
//!
//! - `inventory`: the run is verified; figures are the collection's (`unique_ids`, the IDs).
//! - `incomplete_read`: the run stopped early or lost its footing (`unknown`): what was seen
//!   goes under `observed_so_far` with `is_lower_bound: true`, beside the `reasons` and the
//!   exact `resume_scan` call that continues it (or why none can).
//! - `failed_read`: the enumeration is shown defective (`failed`): `observed_so_far` and the
//!   `reasons`; no resume, since resuming cannot change a finding.
//!
//! Pure: no IO. Nothing here holds a raw cursor: receipts and violations carry only hashes
//! and fingerprints.

use serde_json::{json, Map, Value};

use crate::contract::{Contract, Limits, PAGES_PER_RUN_MAX};
use crate::receipt::Receipt;
use crate::reconcile::{Progress, Status};

/// The outcome of a status.
#[must_use]
pub fn outcome_of(status: Status) -> &'static str {
    match status {
        Status::Verified => "inventory",
        Status::Unknown => "incomplete_read",
        Status::Failed => "failed_read",
    }
}

/// Whether a run in this state can go on: not failed, something left to request, no
/// terminal page seen.
#[must_use]
pub(crate) fn resumable(status: Status, progress: &Progress) -> bool {
    status == Status::Unknown && progress.next.is_some() && !progress.terminal_observed
}

/// The `resume_scan` call that continues `run`: the budgets that stopped it doubled (within
/// their bounds), a deadline given again for the new session.
#[must_use]
pub(crate) fn resume_call(run: &str, contract: &Contract, limits_hit: &[String]) -> Value {
    let mut args = Map::new();
    args.insert("run_id".into(), Value::from(run));
    let l: &Limits = &contract.limits;
    for hit in limits_hit {
        match hit.as_str() {
            "max_pages" => {
                let now = l.max_pages.unwrap_or(PAGES_PER_RUN_MAX);
                args.insert(
                    "max_pages".into(),
                    Value::from(now.saturating_mul(2).min(PAGES_PER_RUN_MAX)),
                );
            }
            "max_records" => {
                if let Some(n) = l.max_records {
                    args.insert("max_records".into(), Value::from(n.saturating_mul(2)));
                }
            }
            "max_bytes" => {
                if let Some(n) = l.max_bytes {
                    args.insert("max_bytes".into(), Value::from(n.saturating_mul(2)));
                }
            }
            "deadline" => {
                if let Some(s) = l.deadline_seconds {
                    args.insert("deadline_seconds".into(), Value::from(s));
                }
            }
            _ => {}
        }
    }
    json!({"tool": "resume_scan", "arguments": Value::Object(args)})
}

/// The reasons of a receipt: `{kind, page, detail}` each.
fn reasons(r: &Receipt) -> Value {
    Value::Array(
        r.violations
            .iter()
            .map(|v| json!({"kind": v.kind.as_str(), "page": v.page, "detail": v.detail}))
            .collect(),
    )
}

/// What a partial run saw: figures that are lower bounds, never totals.
fn observed_so_far(r: &Receipt) -> Value {
    json!({
        "pages": r.pages_observed,
        "records": r.records_observed,
        "unique_ids": r.unique_ids_observed,
        "is_lower_bound": true,
    })
}

/// The IDs an answer carries, and how to fetch the rest.
#[derive(Debug, Clone, Default)]
pub struct ShownIds {
    /// The first IDs, in their original form.
    pub ids: Vec<Value>,
    /// The `page_run` token of the rest, if there is more.
    pub next_token: Option<String>,
}

/// The answer of a scan (`scan_collection`, `resume_scan`, a proxied tool): by outcome, with
/// the IDs only for an inventory.
#[must_use]
pub fn scan_answer(
    receipt: &Receipt,
    contract: &Contract,
    resumable_now: bool,
    ids: Option<ShownIds>,
    extra: Map<String, Value>,
) -> Value {
    let mut out = Map::new();
    out.insert(
        "outcome".into(),
        Value::from(outcome_of(receipt.coverage_status)),
    );
    out.insert("run_id".into(), Value::from(receipt.run_id.as_str()));
    out.insert("source".into(), Value::from(receipt.source.as_str()));
    out.insert(
        "coverage_status".into(),
        Value::from(receipt.coverage_status.as_str()),
    );
    out.extend(extra);
    match receipt.coverage_status {
        Status::Verified => {
            out.insert(
                "unique_ids".into(),
                Value::from(receipt.unique_ids_observed),
            );
            if let Some(shown) = ids {
                let complete = shown.next_token.is_none();
                out.insert("ids".into(), Value::Array(shown.ids));
                out.insert("ids_complete".into(), Value::from(complete));
                if let Some(t) = shown.next_token {
                    out.insert(
                        "rest".into(),
                        json!({"tool": "page_run", "arguments": {"run_id": receipt.run_id, "token": t}}),
                    );
                }
            }
            out.insert(
                "receipt".into(),
                // A receipt is plain data (string-keyed maps only): it always serializes.
                serde_json::to_value(receipt).unwrap_or(Value::Null),
            );
        }
        Status::Unknown => {
            out.insert("observed_so_far".into(), observed_so_far(receipt));
            out.insert("reasons".into(), reasons(receipt));
            if resumable_now {
                out.insert(
                    "resume_scan".into(),
                    resume_call(&receipt.run_id, contract, &receipt.limits_hit),
                );
            } else {
                out.insert("resume_scan".into(), Value::Null);
                out.insert(
                    "why_no_resume".into(),
                    Value::from("the run has nothing left to request (a finding resuming cannot change, or the end was reached without the evidence the contract requires): scan again"),
                );
            }
            out.insert(
                "get_receipt".into(),
                json!({"tool": "get_receipt", "arguments": {"run_id": receipt.run_id}}),
            );
        }
        Status::Failed => {
            out.insert("observed_so_far".into(), observed_so_far(receipt));
            out.insert("reasons".into(), reasons(receipt));
            out.insert(
                "next_step".into(),
                Value::from("the enumeration is defective (see reasons): fix the source or its query and scan again; nothing collected is an inventory"),
            );
            out.insert(
                "get_receipt".into(),
                json!({"tool": "get_receipt", "arguments": {"run_id": receipt.run_id}}),
            );
        }
    }
    Value::Object(out)
}

/// The answer of a read tool: `outcome`, then the library's report (the very object the
/// command line prints with `--json`) at the top for an inventory; for a partial read the
/// report under `observed_so_far` with `is_lower_bound: true`, beside `reasons`, so no
/// top-level key reads as a total. This wrapping is the whole difference between the two
/// faces' answers (docs/REFERENCE.md §10).
///
/// # Errors
/// When the report does not serialize as a JSON object (a bug).
pub(crate) fn report_answer(
    status: Status,
    report: &impl serde::Serialize,
    reasons: Value,
) -> Result<Value, String> {
    let Value::Object(fields) = serde_json::to_value(report).map_err(|e| e.to_string())? else {
        return Err("a report is a JSON object".to_owned());
    };
    let mut out = Map::new();
    out.insert("outcome".into(), Value::from(outcome_of(status)));
    if status == Status::Verified {
        out.extend(fields);
    } else {
        let mut partial = fields;
        partial.insert("is_lower_bound".into(), Value::from(true));
        out.insert("observed_so_far".into(), Value::Object(partial));
        out.insert("reasons".into(), reasons);
    }
    Ok(Value::Object(out))
}

/// An error answer: `failed_read` with what could not be done.
#[must_use]
pub fn error_answer(message: &str) -> Value {
    json!({"outcome": "failed_read", "error": message})
}

/// The keys a partial answer may never have at its top level: they read as totals.
pub const TOTAL_LIKE_KEYS: &[&str] = &[
    "ids",
    "unique_ids",
    "count",
    "total",
    "total_count",
    "records",
    "receipt",
    "unique_ids_observed",
    "records_observed",
    "added_count",
    "removed_count",
    "missing_count",
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn the_resume_call_raises_the_budget_that_fired() {
        let mut c = Contract::new("s");
        c.limits.max_pages = Some(3);
        c.limits.deadline_seconds = Some(60);
        let call = resume_call("run-4", &c, &["max_pages".into(), "deadline".into()]);
        assert_eq!(
            call,
            json!({"tool": "resume_scan", "arguments": {"run_id": "run-4", "max_pages": 6, "deadline_seconds": 60}})
        );
        let call = resume_call("run-4", &c, &[]);
        assert_eq!(
            call,
            json!({"tool": "resume_scan", "arguments": {"run_id": "run-4"}})
        );
    }
}
