//! The read-only tools: `get_receipt`, `verify_receipt`, `diff_runs`, `missing_ids`,
//! `page_run`, `list_runs`. Each opens the store for reading, reads through one snapshot, asks
//! the library for the same report the command line prints (`evidence`), and answers it by
//! outcome (`outcome::report_answer`): the report at the top for an inventory, under
//! `observed_so_far` (`is_lower_bound: true`) for a partial read. A run argument is `run-N`,
//! `N` or `latest`, as on the command line.

use serde_json::{json, Map, Value};

use super::handler::Args;
use super::outcome::{outcome_of, report_answer, resumable, resume_call};
use super::scan::chain;
use super::Server;
use crate::collect::now_ms;
use crate::contract::ITEMS_PER_PAGE_MAX;
use crate::evidence::{
    compare, diff_report, missing_report, page_report, receipt_report, runs_report, verify_report,
    RunAt, RunRef, RunsQuery,
};
use crate::receipt::{Receipt, RunId};
use crate::reconcile::Status;
use crate::store::{OpenError, RunHeader, RunState, Snapshot, Store};
use crate::token::TOKEN_TTL_SECONDS_DEFAULT;

/// Runs `list_runs` shows.
const RUNS_SHOWN_MAX: usize = 1000;
/// IDs `page_run` serves unless asked.
const PAGE_SIZE_DEFAULT: u32 = 100;
/// Bytes of a receipt given to `verify_receipt`.
const RECEIPT_TEXT_MAX: usize = 16 * 1024 * 1024;

/// The store opened for reading, or `None` when it does not exist yet.
async fn open(server: &Server) -> Result<(tokio::sync::MutexGuard<'_, ()>, Option<Store>), String> {
    let held = server.shared.store_lock.lock().await;
    match Store::open_read(&server.shared.options.store) {
        Ok(s) => Ok((held, Some(s))),
        Err(OpenError::NotFound { .. }) => Ok((held, None)),
        Err(e) => Err(chain(&e)),
    }
}

fn no_store(run: &str) -> String {
    format!("{run} is not in the store (it has no runs yet)")
}

/// A run argument's text (required).
fn run_text<'a>(args: &'a Args, key: &str) -> Result<&'a str, String> {
    args.string(key)?
        .ok_or_else(|| format!("argument {key:?} is required (a run: run-N, N or latest)"))
}

/// The run a run argument names in the store `snap` reads: `run-N`, `N`, or `latest`.
fn resolve(snap: &Snapshot<'_>, text: &str) -> Result<RunId, String> {
    let run: RunRef = text
        .parse()
        .map_err(|e: crate::evidence::RunTextError| e.to_string())?;
    run.resolve(snap).map_err(|e| chain(&e))
}

/// `get_receipt {"run_id"}`.
pub(crate) async fn get_receipt(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id"])?;
    let text = run_text(args, "run_id")?;
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(text))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let run = resolve(&snap, text)?;
    let report = receipt_report(&snap, run).map_err(|e| chain(&e))?;
    let receipt = &report.receipt;
    let mut out = Map::new();
    out.insert(
        "outcome".into(),
        Value::from(outcome_of(receipt.coverage_status)),
    );
    out.insert("run_id".into(), Value::from(receipt.run_id.as_str()));
    out.insert(
        "coverage_status".into(),
        Value::from(receipt.coverage_status.as_str()),
    );
    let receipt_json = serde_json::to_value(receipt).map_err(|e| e.to_string())?;
    if receipt.coverage_status == Status::Verified {
        out.insert("receipt".into(), receipt_json);
        return Ok(Value::Object(out));
    }
    out.insert(
        "observed_so_far".into(),
        json!({
        "pages": receipt.pages_observed, "records": receipt.records_observed,
        "unique_ids": receipt.unique_ids_observed, "is_lower_bound": true}),
    );
    out.insert("reasons".into(), reasons(receipt));
    out.insert("state".into(), Value::from(report.state.as_str()));
    // The error that stopped an interrupted run, as `runs` and `list_runs` give it.
    out.insert(
        "stopped_by".into(),
        serde_json::to_value(&report.stopped_by).map_err(|e| e.to_string())?,
    );
    let loaded = snap.load(run).map_err(|e| chain(&e))?;
    let can = loaded.state != RunState::Superseded
        && resumable(receipt.coverage_status, loaded.reconciler.progress());
    out.insert(
        "resume_scan".into(),
        if can {
            resume_call(&receipt.run_id, &loaded.contract, &receipt.limits_hit)
        } else {
            Value::Null
        },
    );
    // The receipt itself, as evidence of a partial read: its counts are what was observed.
    out.insert("evidence".into(), json!({"receipt": receipt_json,
        "note": "a partial run's receipt: every count in it is what was observed so far, never a total"}));
    Ok(Value::Object(out))
}

fn reasons(r: &Receipt) -> Value {
    Value::Array(
        r.violations
            .iter()
            .map(|v| json!({"kind": v.kind.as_str(), "page": v.page, "detail": v.detail}))
            .collect(),
    )
}

/// `verify_receipt {"receipt": {...}}`.
pub(crate) async fn verify_receipt(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["receipt"])?;
    let Some(v @ Value::Object(_)) = args.get("receipt") else {
        return Err(
            "argument \"receipt\" must be a receipt object (as get_receipt answers it)".into(),
        );
    };
    let text = v.to_string();
    if text.len() > RECEIPT_TEXT_MAX {
        return Err(format!("the receipt is over {RECEIPT_TEXT_MAX} bytes"));
    }
    let receipt = Receipt::from_json(&text).map_err(|e| format!("not a receipt: {e}"))?;
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(&receipt.run_id))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let report =
        verify_report(&snap, &server.shared.options.store, &receipt).map_err(|e| chain(&e))?;
    // The answer is about the receipt itself, never a partial read: always at the top.
    let mut out = Map::new();
    out.insert("outcome".into(), Value::from(outcome_of(report.status())));
    if let Value::Object(r) = serde_json::to_value(&report).map_err(|e| e.to_string())? {
        out.extend(r);
    }
    Ok(Value::Object(out))
}

fn partial_note(old: &RunHeader, new: &RunHeader) -> Value {
    Value::Array(
        [old, new]
            .iter()
            .filter(|h| h.coverage_status != Status::Verified)
            .map(|h| {
                json!({"run_id": h.run_id.to_string(), "coverage_status": h.coverage_status,
               "detail": "this run did not verify: what it lacks may be what it did not reach"})
            })
            .collect(),
    )
}

/// The two runs of a comparison within the server's store, `a` (old) then `b` (new).
fn pair<'a, 's>(
    server: &'a Server,
    snap: &'a Snapshot<'s>,
    a: &str,
    b: &str,
) -> Result<(RunAt<'a, 's>, RunAt<'a, 's>), String> {
    let store = server.shared.options.store.as_path();
    let at = |run| RunAt { snap, run, store };
    Ok((at(resolve(snap, a)?), at(resolve(snap, b)?)))
}

/// `diff_runs {"a", "b"}`: the report of `scanledger diff A B`.
pub(crate) async fn diff_runs(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["a", "b"])?;
    let (a, b) = (run_text(args, "a")?, run_text(args, "b")?);
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(a))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let (old, new) = pair(server, &snap, a, b)?;
    let cmp = compare(old, new, false, false).map_err(|e| chain(&e))?;
    let report = diff_report(&cmp).map_err(|e| chain(&e))?;
    report_answer(report.status(), &report, partial_note(&cmp.old, &cmp.new))
}

/// `missing_ids {"run_id", "against"}`: the report of `scanledger missing RUN --against OTHER`.
pub(crate) async fn missing_ids(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id", "against"])?;
    let (run, against) = (run_text(args, "run_id")?, run_text(args, "against")?);
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(run))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let (old, new) = pair(server, &snap, run, against)?;
    let cmp = compare(old, new, false, false).map_err(|e| chain(&e))?;
    let report = missing_report(&cmp).map_err(|e| chain(&e))?;
    report_answer(report.status(), &report, partial_note(&cmp.old, &cmp.new))
}

/// `page_run {"run_id", "token", "size"}`.
pub(crate) async fn page_run(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id", "token", "size"])?;
    let text = run_text(args, "run_id")?;
    let token = args.string("token")?;
    let size = args
        .u64_in("size", u64::from(ITEMS_PER_PAGE_MAX))?
        .map_or(PAGE_SIZE_DEFAULT, |n| {
            u32::try_from(n).unwrap_or(ITEMS_PER_PAGE_MAX)
        });
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(text))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let run = resolve(&snap, text)?;
    let page = page_report(&snap, run, token, size, TOKEN_TTL_SECONDS_DEFAULT, now_ms())
        .map_err(|e| chain(&e))?;
    let reasons = json!([{"run_id": page.run_id, "coverage_status": page.coverage_status,
        "detail": "this run did not verify: its pages are not pages of a complete inventory"}]);
    report_answer(page.coverage_status, &page, reasons)
}

/// `list_runs {}`.
pub(crate) async fn list_runs(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&[])?;
    let (_held, store) = open(server).await?;
    let Some(store) = store else {
        return Ok(json!({"outcome": "inventory", "runs": []}));
    };
    let snap = store.read().map_err(|e| chain(&e))?;
    let query = RunsQuery {
        limit: Some(RUNS_SHOWN_MAX),
        ..RunsQuery::default()
    };
    let report = runs_report(&snap, &query).map_err(|e| chain(&e))?;
    let status = if report.store_total > RUNS_SHOWN_MAX {
        Status::Unknown
    } else {
        Status::Verified
    };
    let reasons = json!([{"kind": "limit_reached",
        "detail": format!("the newest {RUNS_SHOWN_MAX} runs are shown")}]);
    report_answer(status, &report, reasons)
}
