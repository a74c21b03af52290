//! The completeness proxy: an MCP server in front of one upstream MCP server.
//!
//! It re-exports the upstream's whole tool catalogue (following every `tools/list` page
//! itself, under a page bound, a loop guard and the init deadline, so a client that drops
//! catalogue pages still sees every tool), forwards ordinary tools unchanged, and replaces each
//! tool the config declares paginated by an all-or-fail version: the call's arguments become
//! the contract's query, the proxy follows every page through the collector (every budget,
//! timeout, retry and rule applies), records the run in its store when it has one, and answers
//! an `inventory` (IDs, items when kept, the receipt) or an `incomplete_read` / `failed_read`
//! with no total-looking field.
//!
//! Absences: the upstream's raw cursors never reach our client (a paginated tool's answer
//! carries IDs and hashes, and its pagination arguments are refused from the caller) nor our
//! logs; one upstream session serves every call.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::outcome::{error_answer, resumable, scan_answer, ShownIds};
use super::scan::{chain, report, Reporting};
use crate::collect::{now_ms, scan_with, MemoryLog, ScanResult};
use crate::contract::{IdCodecKind, ITEMS_PER_PAGE_MAX};
use crate::error::SourceError;
use crate::evidence::page_of_run;
use crate::reconcile::{Reconciler, Status};
use crate::source::mcp::{connect, ConnectError, Connection, McpSource};
use crate::store::{Store, StoreOptions};
use crate::token::TOKEN_TTL_SECONDS_DEFAULT;

mod config;

use config::{Paged, ProxyConfig};

/// Pages of the upstream's `tools/list` the proxy follows.
const TOOL_PAGES_MAX: u32 = 1000;
/// Tools the proxy re-exports.
const TOOLS_MAX: usize = 10_000;
/// IDs an inventory answer carries (the store's `page_run`, or the CLI's `page`, serve more).
const IDS_SHOWN_MAX: u32 = ITEMS_PER_PAGE_MAX;

/// The proxy server (cheap to clone: one upstream session behind an `Arc`).
#[derive(Debug, Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: ProxyConfig,
    /// Keeps the upstream session (and its child) alive.
    _session: Connection,
    peer: rmcp::Peer<RoleClient>,
    server: String,
    tools: Vec<Tool>,
    store_lock: tokio::sync::Mutex<()>,
}

impl Proxy {
    /// Reads the config, starts (or reaches) the upstream, and reads its whole catalogue.
    ///
    /// # Errors
    /// `SourceError` naming the config and what failed: a key, the upstream that cannot be
    /// started or reached, a catalogue that loops or has no tool the config declares.
    pub async fn start(path: &Path) -> Result<Proxy, SourceError> {
        let config = ProxyConfig::read(path)?;
        let bad = |problem: String| SourceError::Config {
            path: path.to_owned(),
            problem,
        };
        let session = match connect(&config.upstream, path).await {
            Ok(c) => c,
            Err(ConnectError::Fatal(e)) => return Err(e),
            Err(ConnectError::Forbidden) => {
                return Err(bad("the upstream refused the credentials (auth_env)".into()))
            }
            Err(ConnectError::Transient(why)) => return Err(bad(format!("upstream: {why}"))),
        };
        let peer = session.service.peer().clone();
        let deadline = Duration::from_millis(config.upstream.init_timeout_ms);
        let upstream_tools = tokio::time::timeout(deadline, all_tools(&peer))
            .await
            .map_err(|_| {
                bad(format!(
                    "the upstream's tools/list did not end within {} ms",
                    deadline.as_millis()
                ))
            })?
            .map_err(bad)?;
        for (name, _) in &config.paginated {
            if !upstream_tools.iter().any(|t| t.name == name.as_str()) {
                let names: Vec<&str> = upstream_tools.iter().map(|t| t.name.as_ref()).collect();
                return Err(bad(format!(
                    "paginated.{name}: the upstream has no such tool; its tools: {}",
                    names.join(", ")
                )));
            }
        }
        let tools = upstream_tools
            .into_iter()
            .map(
                |t| match config.paginated.iter().find(|(n, _)| t.name == n.as_str()) {
                    Some((_, paged)) => all_pages_version(t, paged),
                    None => t,
                },
            )
            .collect();
        Ok(Proxy {
            shared: Arc::new(Shared {
                server: session.server.clone(),
                peer,
                _session: session,
                tools,
                config,
                store_lock: tokio::sync::Mutex::new(()),
            }),
        })
    }
}

/// Every page of the upstream's `tools/list`: bounded in pages and tools, a repeated cursor
/// refused (a loop would never end).
async fn all_tools(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..TOOL_PAGES_MAX {
        let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| format!("the upstream's tools/list failed: {}", chain(&e)))?;
        tools.extend(page.tools);
        if tools.len() > TOOLS_MAX {
            return Err(format!("the upstream lists more than {TOOLS_MAX} tools"));
        }
        match page.next_cursor {
            None => return Ok(tools),
            Some(c) if c.is_empty() => return Ok(tools),
            Some(c) => {
                // Kept as a digest: the set never holds the upstream's cursor itself.
                if !seen.insert(crate::digest::cursor_hash(Some(&c))) {
                    return Err(
                        "the upstream's tools/list returned the same cursor twice (a loop)".into(),
                    );
                }
                cursor = Some(c);
            }
        }
    }
    Err(format!(
        "the upstream's tools/list has more than {TOOL_PAGES_MAX} pages"
    ))
}

/// The all-or-fail version of a paginated tool: the same name and arguments less the ones
/// the proxy sends itself, no output schema (the answer is the proxy's).
fn all_pages_version(mut t: Tool, paged: &Paged) -> Tool {
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

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("scanledger-proxy", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let s = &self.shared;
        let Some((name, paged)) = s
            .config
            .paginated
            .iter()
            .find(|(n, _)| request.name == n.as_str())
        else {
            // An ordinary tool: forwarded unchanged, its answer returned unchanged.
            return match s.peer.call_tool(request).await {
                Ok(r) => Ok(r.into()),
                Err(rmcp::ServiceError::McpError(e)) => Err(e),
                Err(_) => Err(ErrorData::internal_error(
                    "the upstream session failed",
                    None,
                )),
            };
        };
        let args = request.arguments.unwrap_or_default();
        let answer = match all_pages(self, name, paged, args, &context).await {
            Ok(v) => CallToolResult::structured(v),
            Err(message) => CallToolResult::structured_error(error_answer(&message)),
        };
        Ok(answer.into())
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        match super::frame::oversized_error(&request) {
            Some(e) => Err(e),
            None => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "method not found",
                None,
            )),
        }
    }
}

/// One call of a paginated tool, followed to the end.
async fn all_pages(
    proxy: &Proxy,
    name: &str,
    paged: &Paged,
    args: Map<String, Value>,
    context: &RequestContext<RoleServer>,
) -> Result<Value, String> {
    let s = &proxy.shared;
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
        s.peer.clone(),
        Some(s.server.clone()),
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
            let held = s.store_lock.lock().await;
            let mut store = Store::open(path, StoreOptions::new()).map_err(|e| chain(&e))?;
            store.record_source(&format!(
                "mcp-proxy:{}#tool={name}{}{}",
                s.config.path.display(),
                crate::source::PROVENANCE_MARK,
                s.server
            ));
            let (writer, interner) = store.begin(&contract, started).map_err(|e| chain(&e))?;
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
    let receipt = done.receipt();
    let verified = receipt.coverage_status == Status::Verified;
    let ids = if verified {
        Some(match &store {
            Some((store, _)) => {
                let snap = store.read().map_err(|e| chain(&e))?;
                let page = page_of_run(
                    &snap,
                    done.meta.run_id,
                    None,
                    IDS_SHOWN_MAX,
                    TOKEN_TTL_SECONDS_DEFAULT,
                    now_ms(),
                )
                .map_err(|e| chain(&e))?;
                ShownIds {
                    ids: page.ids,
                    next_token: page.next_token,
                }
            }
            None => memory_ids(&done),
        })
    } else {
        None
    };
    let mut extra = Map::new();
    extra.insert("server".into(), Value::from(s.server.as_str()));
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
    let mut answer = scan_answer(
        &receipt,
        &done.contract,
        resumable(receipt.coverage_status, done.reconciler.progress()),
        ids,
        extra,
    );
    if let Value::Object(a) = &mut answer {
        // The proxy has no resume tool: a partial read is continued by calling the tool again
        // (or, with a store, by the operator's `scanledger resume`).
        if a.remove("resume_scan").is_some() {
            a.remove("why_no_resume");
            a.remove("get_receipt");
            a.insert(
                "retry".into(),
                json!({"tool": name, "arguments": Value::Object(args)}),
            );
        }
        a.remove("get_receipt");
        // Nor a page tool: the rest of a large inventory is the store's (`scanledger page`).
        if a.remove("rest").is_some() {
            let how = match &s.config.store {
                Some(path) => format!("the first {IDS_SHOWN_MAX} IDs are shown; the rest: `scanledger --store {} page {} --size 100000`", path.display(), receipt.run_id),
                None => format!("the first {IDS_SHOWN_MAX} IDs are shown; give the proxy a \"store\" to page the rest"),
            };
            a.insert("ids_note".into(), Value::from(how));
        }
    }
    Ok(answer)
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
