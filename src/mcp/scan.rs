//! `scan_collection` and `resume_scan`: a run driven by the collector, recorded in the store,
//! reported as MCP progress, stopped by cancellation.
//!
//! The run's log wraps the store's writer: after every checkpoint it publishes the run's
//! progress on a `watch` channel, which a second future beside the scan turns into progress
//! notifications (a slow client never slows the scan: only the latest value is kept); before
//! every request it reports whether the call was cancelled, so a cancelled scan stops at a
//! page boundary as `limit_reached (interrupted)`, committed and resumable.

use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::handler::Args;
use super::outcome::{resumable, scan_answer, ShownIds};
use super::{blocking, Server};
use crate::collect::{now_ms, resume_with, scan_with, RunLog, ScanResult};
use crate::contract::{Contract, ITEMS_PER_PAGE_MAX, PAGES_PER_RUN_MAX};
use crate::error::Error;
use crate::evidence::page_of_run;
use crate::receipt::RunId;
use crate::reconcile::{Delta, Reconciler, Status};
use crate::source::AnySource;
use crate::store::{Raise, Store};
use crate::token::TOKEN_TTL_SECONDS_DEFAULT;

/// IDs an answer carries unless the caller asks otherwise.
const IDS_SHOWN_DEFAULT: u64 = 1000;

/// A run's log (the store's writer, or memory) reporting progress and watching for
/// cancellation.
pub(crate) struct Reporting<L> {
    pub(crate) inner: L,
    pub(crate) progress: watch::Sender<(u32, u64)>,
    pub(crate) cancelled: tokio_util::sync::CancellationToken,
}

impl<L: RunLog> RunLog for Reporting<L> {
    fn run(&self) -> RunId {
        self.inner.run()
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        blocking(|| self.inner.checkpoint(rec, delta))?;
        self.progress
            .send_replace((rec.progress().pages_observed, rec.ids().len()));
        Ok(())
    }
    fn set_server_count(&mut self, n: u64) {
        self.inner.set_server_count(n);
    }
    fn finish(self, rec: &Reconciler, at: u64) -> Result<(), Error> {
        blocking(|| self.inner.finish(rec, at))
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        let inner = self.inner;
        Ok(Reporting {
            inner: blocking(|| inner.restart(rec, contract, at))?,
            progress: self.progress,
            cancelled: self.cancelled,
        })
    }
    fn stopped(
        self,
        rec: &Reconciler,
        cause: &crate::store::StopCause,
        at: u64,
    ) -> Result<(), Error> {
        let inner = self.inner;
        blocking(|| inner.stopped(rec, cause, at))
    }
    fn should_stop(&self) -> bool {
        self.cancelled.is_cancelled()
    }
}

/// Sends the latest progress as notifications until the scan drops its sender.
pub(crate) async fn report(
    mut rx: watch::Receiver<(u32, u64)>,
    context: &RequestContext<RoleServer>,
    expected: Option<u64>,
) {
    let Some(token) = context.meta.get_progress_token() else {
        return;
    };
    // Bounded by the scan: `changed` fails once the sender is gone.
    while rx.changed().await.is_ok() {
        let (pages, ids) = *rx.borrow_and_update();
        #[allow(clippy::cast_precision_loss)] // Progress is approximate by nature.
        let mut p = ProgressNotificationParam::new(token.clone(), ids as f64)
            .with_message(format!("{pages} pages, {ids} unique IDs so far"));
        if let Some(n) = expected {
            #[allow(clippy::cast_precision_loss)]
            {
                p = p.with_total(n as f64);
            }
        }
        let _ = context.peer.notify_progress(p).await;
    }
}

/// `scan_collection {"source": NAME, "contract": {...}, "ids_max": N}`.
pub(crate) async fn scan_collection(
    server: &Server,
    args: &Args,
    context: &RequestContext<RoleServer>,
) -> Result<Value, String> {
    args.only(&["source", "contract", "ids_max"])?;
    let catalog = &server.shared.options.catalog;
    let name = args
        .string("source")?
        .ok_or("argument \"source\" is required: one of the operator's declared sources")?;
    let Some(spec) = catalog.spec(name) else {
        let names: Vec<&str> = catalog.names().collect();
        return Err(format!(
            "{:?} is not a declared source; the operator declared: {}",
            crate::receipt::terminal_safe(name),
            if names.is_empty() {
                "none (start the server with --sources FILE)".into()
            } else {
                names.join(", ")
            }
        ));
    };
    let mut contract_obj = match args.get("contract") {
        None => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => {
            return Err("argument \"contract\" must be an object (a scanledger contract)".into())
        }
    };
    // The declared name is the scope: a contract naming another source would record this
    // source's IDs as another collection's inventory.
    match contract_obj.get("source") {
        None | Some(Value::Null) => {
            contract_obj.insert("source".into(), Value::from(name));
        }
        Some(Value::String(s)) if s == name => {}
        Some(other) => {
            let shown = other.as_str().map_or_else(
                || crate::source::mapping::pointer::type_name(other).to_owned(),
                |s| format!("{:?}", crate::receipt::terminal_safe(s)),
            );
            return Err(format!(
                "contract.source is {shown}, but the source scanned is {:?}: the declared name is the run's scope; leave contract.source out (or give {:?})",
                crate::receipt::terminal_safe(name),
                crate::receipt::terminal_safe(name)
            ));
        }
    }
    let contract = Contract::from_json(&Value::Object(contract_obj).to_string())
        .map_err(|e| format!("contract: {e}"))?;
    let ids_max = args
        .u64_in("ids_max", u64::from(ITEMS_PER_PAGE_MAX))?
        .unwrap_or(IDS_SHOWN_DEFAULT);
    let mut source = AnySource::open_for(spec, &contract).map_err(|e| chain(&e))?;
    source.prepare().await.map_err(|e| chain(&e))?;
    let _held = server.shared.writer_lock.lock().await;
    let mut store = open_store(server)?;
    store.record_source(&source.recorded_spec(spec));
    let started = now_ms();
    let mut rec = Reconciler::new(&contract);
    let (writer, interner) = blocking(|| store.begin(&contract, started)).map_err(|e| chain(&e))?;
    if let Some(interner) = interner {
        rec.set_interner(interner);
    }
    let (tx, rx) = watch::channel((0, 0));
    let log = Reporting {
        inner: writer,
        progress: tx,
        cancelled: context.ct.clone(),
    };
    let (done, ()) = tokio::join!(
        scan_with(&contract, rec, log, started, &mut source),
        report(rx, context, contract.expected_count)
    );
    let provenance = source.provenance().map(str::to_owned);
    source.close().await;
    answer(&store, done.map_err(|e| chain(&e))?, ids_max, provenance)
}

/// `resume_scan {"run_id", "max_pages", "max_records", "max_bytes", "deadline_seconds"}`.
pub(crate) async fn resume_scan(
    server: &Server,
    args: &Args,
    context: &RequestContext<RoleServer>,
) -> Result<Value, String> {
    args.only(&[
        "run_id",
        "max_pages",
        "max_records",
        "max_bytes",
        "deadline_seconds",
        "ids_max",
    ])?;
    let run_text = args
        .string("run_id")?
        .ok_or("argument \"run_id\" is required (a run: run-N, N or latest)")?;
    let raise = Raise {
        max_pages: args
            .u64_in("max_pages", u64::from(PAGES_PER_RUN_MAX))?
            .map(|n| u32::try_from(n).unwrap_or(PAGES_PER_RUN_MAX)),
        max_records: args.u64_in("max_records", u64::MAX)?,
        max_bytes: args.u64_in("max_bytes", u64::MAX)?,
        deadline_seconds: args.u64_in("deadline_seconds", crate::contract::DEADLINE_SECONDS_MAX)?,
    };
    let ids_max = args
        .u64_in("ids_max", u64::from(ITEMS_PER_PAGE_MAX))?
        .unwrap_or(IDS_SHOWN_DEFAULT);
    let _held = server.shared.writer_lock.lock().await;
    let mut store = open_store(server)?;
    let (run, header) = blocking(|| -> Result<_, String> {
        let snap = store.read().map_err(|e| chain(&e))?;
        let run = if run_text == "latest" {
            snap.latest()
                .map_err(|e| chain(&e))?
                .ok_or("`latest` names the newest run, and the store has no run yet")?
        } else {
            run_text
                .parse::<RunId>()
                .map_err(|_| format!("{run_text:?} is not a run (run-N, N or latest)"))?
        };
        Ok((run, snap.header(run).map_err(|e| chain(&e))?))
    })?;
    // Only a run of a declared source: the recorded spec must be one the operator named.
    let spec = header.source_spec.clone().unwrap_or_default();
    if server.shared.options.catalog.name_of(&spec).is_none() {
        return Err(format!(
            "{run} was not scanned from a source this server declares, so it cannot be resumed here; the operator can resume it with `scanledger resume {run}`"
        ));
    }
    let mut source = AnySource::open_for(&spec, &header.contract).map_err(|e| chain(&e))?;
    source.prepare().await.map_err(|e| chain(&e))?;
    store.record_source(&source.recorded_spec(&spec));
    let (writer, loaded) = blocking(|| store.resume(run, &raise)).map_err(|e| chain(&e))?;
    let (tx, rx) = watch::channel((0, 0));
    let expected = loaded.contract.expected_count;
    let log = Reporting {
        inner: writer,
        progress: tx,
        cancelled: context.ct.clone(),
    };
    let (done, ()) = tokio::join!(
        resume_with(loaded, log, raise.deadline_seconds, &mut source),
        report(rx, context, expected)
    );
    let provenance = source.provenance().map(str::to_owned);
    source.close().await;
    answer(&store, done.map_err(|e| chain(&e))?, ids_max, provenance)
}

/// The answer of a finished scan: an inventory's first IDs read back from the store.
fn answer(
    store: &Store,
    done: ScanResult,
    ids_max: u64,
    provenance: Option<String>,
) -> Result<Value, String> {
    let receipt = done.receipt();
    let status = receipt.coverage_status;
    let ids = if status == Status::Verified {
        let size = u32::try_from(ids_max).unwrap_or(ITEMS_PER_PAGE_MAX);
        let page = blocking(|| {
            let snap = store.read().map_err(|e| chain(&e))?;
            page_of_run(
                &snap,
                done.meta.run_id,
                None,
                size,
                TOKEN_TTL_SECONDS_DEFAULT,
                now_ms(),
            )
            .map_err(|e| chain(&e))
        })?;
        Some(ShownIds {
            ids: page.ids,
            next_token: page.next_token,
        })
    } else {
        None
    };
    let mut extra = Map::new();
    if let Some(p) = provenance {
        extra.insert("server".into(), Value::from(p));
    }
    let mut answer = scan_answer(
        &receipt,
        &done.contract,
        resumable(status, done.reconciler.progress()),
        ids,
        extra,
    );
    if let Value::Object(a) = &mut answer {
        if a.get("resume_scan").is_some_and(Value::is_object) {
            a.insert(
                "resume_to_end".into(),
                resume_to_end(&receipt.run_id, &receipt.limits_hit),
            );
        }
    }
    Ok(answer)
}

/// The `resume_scan` call that can reach the end in one go: every budget that stopped the run
/// lifted to the most this server accepts (`resume_scan`, beside it, doubles them instead).
fn resume_to_end(run: &str, limits_hit: &[String]) -> Value {
    // The largest integer every JSON client reads exactly: unbounded in practice.
    const EXACT_MAX: u64 = (1 << 53) - 1;
    let mut args = Map::new();
    args.insert("run_id".into(), Value::from(run));
    for hit in limits_hit {
        let (key, most) = match hit.as_str() {
            "max_pages" => ("max_pages", u64::from(PAGES_PER_RUN_MAX)),
            "max_records" => ("max_records", EXACT_MAX),
            "max_bytes" => ("max_bytes", EXACT_MAX),
            "deadline" => ("deadline_seconds", crate::contract::DEADLINE_SECONDS_MAX),
            _ => continue,
        };
        args.insert(key.into(), Value::from(most));
    }
    serde_json::json!({"tool": "resume_scan", "arguments": Value::Object(args)})
}

pub(crate) fn open_store(server: &Server) -> Result<Store, String> {
    let o = &server.shared.options;
    blocking(|| Store::open(&o.store, o.store_options)).map_err(|e| chain(&e))
}

/// An error and its causes, `: `-separated.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    crate::source::mapping::chain_text(e)
}
