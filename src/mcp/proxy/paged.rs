//! The declared paginated tools: listed without their pagination arguments, and called
//! all-or-fail — the call's arguments become the contract's query, the proxy follows every
//! page through the collector (every budget, timeout, retry and rule applies) over the
//! session's upstream, records the run in its store when it has one, and answers an
//! `inventory` (IDs, items when kept, the receipt) or an `incomplete_read` / `failed_read`
//! with no total-looking field.

use std::sync::Arc;

use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::config::Paged;
use super::Shared;
use crate::collect::{now_ms, scan_with, MemoryLog, ScanResult};
use crate::contract::{IdCodecKind, ITEMS_PER_PAGE_MAX};
use crate::evidence::page_of_run;
use crate::mcp::blocking;
use crate::mcp::outcome::{resumable, scan_answer, ShownIds};
use crate::mcp::scan::{chain, report, Reporting};
use crate::reconcile::{Reconciler, Status};
use crate::source::mcp::McpSource;
use crate::store::{Store, StoreOptions};
use crate::token::TOKEN_TTL_SECONDS_DEFAULT;

/// IDs an inventory answer carries (the store's `page_run`, or the CLI's `page`, serve more).
const IDS_SHOWN_MAX: u32 = ITEMS_PER_PAGE_MAX;

/// The all-or-fail version of a paginated tool: the same name and arguments less the ones
/// the proxy sends itself, no output schema (the answer is the proxy's).
pub(crate) fn all_pages_version(mut t: Tool, paged: &Paged) -> Tool {
    let mut schema = (*t.input_schema).clone();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for a in &paged.own_args {
            props.remove(a);
        }
    }
    if let Some(Value::Array(req)) = schema.get_mut("required") {
        req.retain(|r| {
            !r.as_str()
                .is_some_and(|r| paged.own_args.iter().any(|a| a == r))
        });
    }
    t.input_schema = Arc::new(schema);
    t.output_schema = None;
    let upstream = t.description.as_deref().unwrap_or("").to_owned();
    t.description = Some(
        format!(
            "{upstream}\n\n[scanledger proxy] Follows every page itself and answers the whole result: outcome \"inventory\" (every ID, verified) \
             or \"incomplete_read\"/\"failed_read\" (what was seen so far, a lower bound, and why). Do not pass {}.",
            paged.own_args.join(", ")
        )
        .trim_start()
        .to_owned()
        .into(),
    );
    t
}

/// Where a paginated call runs: the proxy's shared parts and the session's upstream.
pub(crate) struct Call<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) peer: rmcp::Peer<rmcp::RoleClient>,
    /// The upstream's `name version`, the run's provenance.
    pub(crate) server: &'a str,
}

/// One call of a paginated tool, followed to the end.
pub(crate) async fn all_pages(
    call: &Call<'_>,
    name: &str,
    paged: &Paged,
    args: Map<String, Value>,
    context: &RequestContext<RoleServer>,
) -> Result<Value, String> {
    let s = call.shared;
    if let Some(a) = args.keys().find(|k| paged.own_args.contains(k)) {
        return Err(format!(
            "{name}: the proxy pages this tool itself; {a:?} is not an argument here (give only the query)"
        ));
    }
    let mut contract = paged.contract.clone();
    contract.scope.query = if args.is_empty() {
        Value::Null
    } else {
        Value::Object(args.clone())
    };
    let mut source = McpSource::over_session(
        &s.config.path,
        paged.config.clone(),
        &contract,
        call.peer.clone(),
        Some(call.server.to_owned()),
    )
    .map_err(|e| chain(&e))?;
    if paged.keep_items {
        source.keep_items();
    }
    let (tx, rx) = watch::channel((0, 0));
    let started = now_ms();
    let mut rec = Reconciler::new(&contract);
    let (done, store) = match &s.config.store {
        Some(path) => {
            let held = s.writer_lock.lock().await;
            let mut store =
                blocking(|| Store::open(path, StoreOptions::new())).map_err(|e| chain(&e))?;
            store.record_source(&format!(
                "mcp-proxy:{}#tool={name}{}{}",
                s.config.path.display(),
                crate::source::PROVENANCE_MARK,
                call.server
            ));
            let (writer, interner) =
                blocking(|| store.begin(&contract, started)).map_err(|e| chain(&e))?;
            if let Some(i) = interner {
                rec.set_interner(i);
            }
            let log = Reporting {
                inner: writer,
                progress: tx,
                cancelled: context.ct.clone(),
            };
            let (done, ()) = tokio::join!(
                scan_with(&contract, rec, log, started, &mut source),
                report(rx, context, contract.expected_count)
            );
            (done, Some((store, held)))
        }
        None => {
            let log = Reporting {
                inner: MemoryLog::default(),
                progress: tx,
                cancelled: context.ct.clone(),
            };
            let (done, ()) = tokio::join!(
                scan_with(&contract, rec, log, started, &mut source),
                report(rx, context, contract.expected_count)
            );
            (done, None)
        }
    };
    let done = done.map_err(|e| chain(&e))?;
    let ids = shown_ids(&done, store.as_ref().map(|(s, _)| s))?;
    let mut answer = answer_of(call, paged, &done, ids, &mut source);
    retry_and_rest(s, name, args, &done, &mut answer);
    Ok(answer)
}

/// An inventory's first IDs: from the store when the run is recorded, else from memory.
fn shown_ids(done: &ScanResult, store: Option<&Store>) -> Result<Option<ShownIds>, String> {
    if done.receipt().coverage_status != Status::Verified {
        return Ok(None);
    }
    let Some(store) = store else {
        return Ok(Some(memory_ids(done)));
    };
    let page = blocking(|| {
        let snap = store.read().map_err(|e| chain(&e))?;
        page_of_run(
            &snap,
            done.meta.run_id,
            None,
            IDS_SHOWN_MAX,
            TOKEN_TTL_SECONDS_DEFAULT,
            now_ms(),
        )
        .map_err(|e| chain(&e))
    })?;
    Ok(Some(ShownIds {
        ids: page.ids,
        next_token: page.next_token,
    }))
}

/// The answer by outcome, with the items when kept.
fn answer_of(
    call: &Call<'_>,
    paged: &Paged,
    done: &ScanResult,
    ids: Option<ShownIds>,
    source: &mut McpSource,
) -> Value {
    let receipt = done.receipt();
    let verified = receipt.coverage_status == Status::Verified;
    let mut extra = Map::new();
    extra.insert("server".into(), Value::from(call.server));
    if verified && paged.keep_items {
        let kept = source.take_kept().unwrap_or_default();
        if done.meta.restarts > 0 || kept.overflowed {
            extra.insert("items".into(), Value::Null);
            extra.insert("items_complete".into(), Value::from(false));
            extra.insert("items_note".into(), Value::from(if kept.overflowed {
                "the items are over the proxy's bound; the IDs are complete"
            } else {
                "the run restarted under a new snapshot; the items of the superseded run cannot be told apart, so none are given"
            }));
        } else {
            extra.insert("items".into(), Value::Array(kept.items));
            extra.insert("items_complete".into(), Value::from(true));
        }
    }
    scan_answer(
        &receipt,
        &done.contract,
        resumable(receipt.coverage_status, done.reconciler.progress()),
        ids,
        extra,
    )
}

/// The proxy has no resume or page tool: a partial read is continued by calling the tool
/// again (or, with a store, by the operator's `scanledger resume`), and the rest of a large
/// inventory is the store's (`scanledger page`).
fn retry_and_rest(
    s: &Shared,
    name: &str,
    args: Map<String, Value>,
    done: &ScanResult,
    answer: &mut Value,
) {
    let Value::Object(a) = answer else {
        return;
    };
    if a.remove("resume_scan").is_some() {
        a.remove("why_no_resume");
        a.insert(
            "retry".into(),
            json!({"tool": name, "arguments": Value::Object(args)}),
        );
    }
    a.remove("get_receipt");
    if a.remove("rest").is_some() {
        let how = match &s.config.store {
            Some(path) => format!(
                "the first {IDS_SHOWN_MAX} IDs are shown; the rest: `scanledger --store {} page {} --size 100000`",
                path.display(),
                done.meta.run_id
            ),
            None => format!(
                "the first {IDS_SHOWN_MAX} IDs are shown; give the proxy a \"store\" to page the rest"
            ),
        };
        a.insert("ids_note".into(), Value::from(how));
    }
}

/// An inventory's IDs from memory (no store): the first `IDS_SHOWN_MAX`, in codec order.
fn memory_ids(done: &ScanResult) -> ShownIds {
    let codec = done.reconciler.codec();
    let ids: Vec<Value> = done
        .reconciler
        .ids()
        .iter()
        .take(IDS_SHOWN_MAX as usize)
        .map(|id| match codec.kind() {
            IdCodecKind::Int => Value::from(id),
            _ => Value::from(codec.render(id)),
        })
        .collect();
    let more = done.reconciler.ids().len() > u64::from(IDS_SHOWN_MAX);
    // The token only marks that there is more (no store serves it); the proxy says how.
    ShownIds {
        ids,
        next_token: more.then(String::new),
    }
}
