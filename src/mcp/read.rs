//! The read-only tools: `get_receipt`, `verify_receipt`, `diff_runs`, `missing_ids`,
//! `page_run`, `list_runs`. Each opens the store for reading, reads through one snapshot,
//! and answers by outcome: figures of a run that is not verified only under
//! `observed_so_far` (`is_lower_bound: true`).

use serde_json::{json, Map, Value};

use super::handler::Args;
use super::outcome::{outcome_of, resumable, resume_call};
use super::scan::chain;
use super::Server;
use crate::collect::now_ms;
use crate::contract::ITEMS_PER_PAGE_MAX;
use crate::evidence::{
    diff_runs as diff_of, page_of_run, verify_receipt as verify, RangeList, Renderer,
};
use crate::idset::IdSet;
use crate::receipt::{Receipt, RunId};
use crate::reconcile::Status;
use crate::store::{OpenError, RunHeader, RunState, Snapshot, Store};
use crate::token::TOKEN_TTL_SECONDS_DEFAULT;

/// Ranges an answer shows; the totals say how many there are.
const RANGES_SHOWN_MAX: usize = 100;
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

fn no_store(run: RunId) -> String {
    format!("{run} is not in the store (it has no runs yet)")
}

/// `get_receipt {"run_id"}`.
pub(crate) async fn get_receipt(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id"])?;
    let run = args.run("run_id")?;
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(run))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let receipt = snap.receipt(run).map_err(|e| chain(&e))?;
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
    let receipt_json = serde_json::to_value(&receipt).map_err(|e| e.to_string())?;
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
    out.insert("reasons".into(), reasons(&receipt));
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
    let run: RunId = receipt.run_id.parse()?;
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(run))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let mismatches = verify(&snap, &receipt).map_err(|e| chain(&e))?;
    if !mismatches.is_empty() {
        return Ok(json!({
            "outcome": "failed_read",
            "verified": false,
            "run_id": receipt.run_id,
            "first_mismatch": mismatches[0],
            "mismatches": mismatches,
        }));
    }
    Ok(json!({
        "outcome": outcome_of(receipt.coverage_status),
        "verified": true,
        "run_id": receipt.run_id,
        "coverage_status": receipt.coverage_status,
    }))
}

/// The worse status of two runs.
fn worse(a: Status, b: Status) -> Status {
    match (a, b) {
        (Status::Failed, _) | (_, Status::Failed) => Status::Failed,
        (Status::Unknown, _) | (_, Status::Unknown) => Status::Unknown,
        _ => Status::Verified,
    }
}

fn rendered(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    set: &IdSet,
) -> Result<(Vec<String>, u64), String> {
    let list = RangeList::of(set);
    let shown: Vec<(u64, u64)> = list.shown.iter().take(RANGES_SHOWN_MAX).copied().collect();
    let codec = Renderer::for_ids(snap, header, shown.iter().flat_map(|(a, b)| [*a, *b]))
        .map_err(|e| chain(&e))?;
    Ok((codec.ranges(&shown), list.ranges_total))
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

/// `diff_runs {"a", "b"}`.
pub(crate) async fn diff_runs(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["a", "b"])?;
    let (a, b) = (args.run("a")?, args.run("b")?);
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(a))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let rd = diff_of(&snap, a, b).map_err(|e| chain(&e))?;
    let (added, added_total) = rendered(&snap, &rd.new, &rd.diff.added)?;
    let (removed, removed_total) = rendered(&snap, &rd.old, &rd.diff.removed)?;
    let status = worse(rd.old.coverage_status, rd.new.coverage_status);
    let figures = json!({
        "added_count": rd.diff.added_count(), "removed_count": rd.diff.removed_count(),
        "added_ranges": added, "added_ranges_total": added_total,
        "removed_ranges": removed, "removed_ranges_total": removed_total,
        "partitions_differing": rd.diff.partitions_differing.len(),
    });
    Ok(by_status(
        status,
        json!({"a": a.to_string(), "b": b.to_string()}),
        figures,
        partial_note(&rd.old, &rd.new),
    ))
}

/// `missing_ids {"run_id", "against"}`.
pub(crate) async fn missing_ids(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id", "against"])?;
    let (run, against) = (args.run("run_id")?, args.run("against")?);
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(run))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let rd = diff_of(&snap, run, against).map_err(|e| chain(&e))?;
    let (ranges, total) = rendered(&snap, &rd.new, &rd.diff.added)?;
    let status = worse(rd.old.coverage_status, rd.new.coverage_status);
    let figures = json!({"missing_count": rd.diff.added_count(), "missing_ranges": ranges, "missing_ranges_total": total});
    Ok(by_status(
        status,
        json!({"run_id": run.to_string(), "against": against.to_string()}),
        figures,
        partial_note(&rd.old, &rd.new),
    ))
}

/// An answer about two runs: the figures at the top for two inventories, else under
/// `observed_so_far`.
fn by_status(status: Status, head: Value, figures: Value, reasons: Value) -> Value {
    let mut out = Map::new();
    out.insert("outcome".into(), Value::from(outcome_of(status)));
    if let Value::Object(h) = head {
        out.extend(h);
    }
    match (status, figures) {
        (Status::Verified, Value::Object(f)) => out.extend(f),
        (_, Value::Object(mut f)) => {
            f.insert("is_lower_bound".into(), Value::from(true));
            out.insert("observed_so_far".into(), Value::Object(f));
            out.insert("reasons".into(), reasons);
        }
        _ => {}
    }
    Value::Object(out)
}

/// `page_run {"run_id", "token", "size"}`.
pub(crate) async fn page_run(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&["run_id", "token", "size"])?;
    let run = args.run("run_id")?;
    let token = args.string("token")?;
    let size = args
        .u64_in("size", u64::from(ITEMS_PER_PAGE_MAX))?
        .map_or(PAGE_SIZE_DEFAULT, |n| {
            u32::try_from(n).unwrap_or(ITEMS_PER_PAGE_MAX)
        });
    let (_held, store) = open(server).await?;
    let store = store.ok_or_else(|| no_store(run))?;
    let snap = store.read().map_err(|e| chain(&e))?;
    let page = page_of_run(&snap, run, token, size, TOKEN_TTL_SECONDS_DEFAULT, now_ms())
        .map_err(|e| chain(&e))?;
    let next = page.next_token.clone();
    if page.coverage_status == Status::Verified {
        return Ok(
            json!({"outcome": "inventory", "run_id": run.to_string(), "ids": page.ids, "next_token": next}),
        );
    }
    Ok(json!({
        "outcome": outcome_of(page.coverage_status), "run_id": run.to_string(),
        "coverage_status": page.coverage_status,
        "observed_so_far": {"ids": page.ids, "is_lower_bound": true},
        "next_token": next,
    }))
}

/// `list_runs {}`.
pub(crate) async fn list_runs(server: &Server, args: &Args) -> Result<Value, String> {
    args.only(&[])?;
    let (_held, store) = open(server).await?;
    let Some(store) = store else {
        return Ok(json!({"outcome": "inventory", "runs": []}));
    };
    let snap = store.read().map_err(|e| chain(&e))?;
    let runs = snap.runs().map_err(|e| chain(&e))?;
    let all = runs.len();
    let rows: Vec<Value> = runs
        .iter()
        .take(RUNS_SHOWN_MAX)
        .map(|r| {
            json!({
                "run_id": r.run_id.to_string(), "source": r.source, "tenant": r.tenant,
                "state": r.state.as_str(), "coverage_status": r.coverage_status,
                "pages_observed": r.pages_observed, "unique_ids_observed": r.unique_ids_observed,
                "started_at": r.started_at, "finished_at": r.finished_at,
            })
        })
        .collect();
    if all > RUNS_SHOWN_MAX {
        return Ok(json!({"outcome": "incomplete_read",
            "observed_so_far": {"runs": rows, "is_lower_bound": true},
            "reasons": [{"kind": "limit_reached", "detail": format!("the newest {RUNS_SHOWN_MAX} runs are shown")}]}));
    }
    Ok(json!({"outcome": "inventory", "runs": rows}))
}
