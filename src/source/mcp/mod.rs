//! `mcp:CONFIG.json`: pages from an MCP server (docs/guide-mcp.md), with the official SDK
//! `rmcp`: a paginated tool called once per page, or one of the protocol's own `*/list`s.
//!
//! This module owns the protocol: the session (`connect`), the call of each page, and the
//! classification of what comes back. What the result means is `mapping`'s
//! (`Mapping::map_tool_result`); whether the scan is complete is the reconciler's; timeouts,
//! retries, budgets and the loop over pages are the collector's. No `list_all_*` helper of the
//! SDK is used: those loop without a bound, a loop guard or a deadline.
//!
//! Invariants and absences:
//! - The same arguments on every page: the contract's query keys and the page size with
//!   every call, unchanged; only the cursor (or position) changes.
//! - An `isError: true` result, a JSON-RPC error and a dead server are failed pages
//!   (retried by the collector, then `page_failed`), unless the error holds the configured
//!   `expired_marker` (or, for a protocol list, is `-32602` on a cursor): an expired cursor,
//!   for the contract's policy. A dead server is started again on the next attempt.
//! - Every result is measured against `max_result_bytes` (the transport refuses a little
//!   more before decoding); a larger one is an invalid page (R16).
//! - No error, log line or `Debug` output holds a cursor, an argument value, a result's
//!   text or a secret; a server's own words are shown only from `initialize` failures,
//!   shortened and terminal-safe.

use std::path::{Path, PathBuf};

use rmcp::model::{CallToolRequestParams, ErrorCode, PaginatedRequestParams};
use rmcp::ServiceError;
use serde_json::Value;

use super::mapping::{chain_text, Position};
use super::{FetchError, PageRequest, PageSource};
use crate::contract::{Contract, IdCodecKind, Page};
use crate::error::SourceError;
use crate::reconcile::Request;

mod config;
mod connect;

use config::Target;
pub use config::{ListKind, McpConfig};
pub(crate) use connect::{client_config, connect, connect_with, ConnectError, Connection};

/// A source reading pages from an MCP server.
#[derive(Debug)]
pub struct McpSource {
    path: PathBuf,
    config: McpConfig,
    conn: Option<Connection>,
    /// A session someone else owns (the proxy's upstream): used as it is, never restarted.
    shared: Option<rmcp::Peer<rmcp::RoleClient>>,
    server: Option<String>,
    /// The items of every page, as sent, when the caller keeps them (the proxy's
    /// `keep_items`), bounded by `KEPT_BYTES_MAX`.
    kept: Option<Kept>,
}

/// Bytes of items a source keeps for its caller; past them it keeps no more and says so.
pub(crate) const KEPT_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Items kept for the caller.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// The items, page after page.
    pub(crate) items: Vec<Value>,
    /// Their size as JSON.
    pub(crate) bytes: u64,
    /// Some items were not kept (over the bound).
    pub(crate) overflowed: bool,
}

impl McpSource {
    /// Reads the config at `path` (and the secret it names) and checks it against the
    /// contract: the end signal the mapping can show, the `string` codec and an empty query
    /// for a protocol list.
    ///
    /// # Errors
    /// `SourceError::Io`, `SourceError::File` or `SourceError::Config` naming the key.
    pub fn open(path: &Path, contract: &Contract) -> Result<McpSource, SourceError> {
        McpSource::new(path, McpConfig::read(path)?, contract)
    }

    /// A source over an already parsed config; `path` names it in errors.
    ///
    /// # Errors
    /// As [`McpSource::open`].
    pub fn new(
        path: &Path,
        config: McpConfig,
        contract: &Contract,
    ) -> Result<McpSource, SourceError> {
        let bad = |problem: String| SourceError::Config {
            path: path.to_owned(),
            problem,
        };
        if let Some(kind) = config.list() {
            if contract.id_codec != IdCodecKind::String {
                return Err(bad(format!(
                    "key \"list\": the IDs of {}/list are names or URIs; the contract's id_codec must be \"string\"",
                    kind.name()
                )));
            }
            if !contract.scope.query.is_null()
                && contract
                    .scope
                    .query
                    .as_object()
                    .is_none_or(|q| !q.is_empty())
            {
                return Err(bad(format!(
                    "key \"list\": {}/list takes no arguments; the contract's query must be absent",
                    kind.name()
                )));
            }
        } else {
            config
                .mapping
                .check_end_signal(contract.end_signal)
                .map_err(|e| bad(e.to_string()))?;
        }
        let mut config = config;
        config
            .mapping
            .bind_key_range(contract.scope.key_range)
            .map_err(|e| bad(e.to_string()))?;
        Ok(McpSource {
            path: path.to_owned(),
            config,
            conn: None,
            shared: None,
            server: None,
            kept: None,
        })
    }

    /// A source paging through a session the caller owns (the proxy's one upstream
    /// session), which it never restarts; `server` is that session's provenance.
    pub(crate) fn over_session(
        path: &Path,
        config: McpConfig,
        contract: &Contract,
        peer: rmcp::Peer<rmcp::RoleClient>,
        server: Option<String>,
    ) -> Result<McpSource, SourceError> {
        let mut s = McpSource::new(path, config, contract)?;
        s.shared = Some(peer);
        s.server = server;
        Ok(s)
    }

    /// Keeps the items of every page from now on ([`McpSource::take_kept`] hands them over).
    pub(crate) fn keep_items(&mut self) {
        self.kept = Some(Kept::default());
    }

    /// The items kept so far.
    pub(crate) fn take_kept(&mut self) -> Option<Kept> {
        self.kept.take()
    }

    fn keep(&mut self, result: &Value) {
        let Some(kept) = self.kept.as_mut() else {
            return;
        };
        if kept.overflowed {
            return;
        }
        let page = self
            .config
            .mapping
            .result_page(result, self.config.result_from);
        let items = page
            .as_deref()
            .and_then(|p| self.config.mapping.items_of(p));
        for item in items.unwrap_or_default() {
            let n = serde_json::to_vec(item).map_or(u64::MAX, |b| b.len() as u64);
            if kept.bytes.saturating_add(n) > KEPT_BYTES_MAX {
                kept.overflowed = true;
                return;
            }
            kept.bytes += n;
            kept.items.push(item.clone());
        }
    }

    /// The peer to ask: the shared session's, or our own (started if need be).
    async fn peer(&mut self) -> Result<rmcp::Peer<rmcp::RoleClient>, FetchError> {
        if let Some(p) = &self.shared {
            return Ok(p.clone());
        }
        Ok(self.ensure().await?.service.peer().clone())
    }

    /// Connects now (a scan would connect at its first page): a server that cannot be
    /// started or reached is an error before any run is recorded, and [`McpSource::server`]
    /// is known.
    ///
    /// # Errors
    /// `SourceError::Other` (cannot start, cannot reach, refused) or `SourceError::Config`.
    pub async fn prepare(&mut self) -> Result<(), SourceError> {
        if self.shared.is_some() {
            return Ok(());
        }
        match self.ensure().await {
            Ok(_) => Ok(()),
            Err(FetchError::Fatal(e)) => Err(e),
            Err(FetchError::Forbidden) => Err(SourceError::Config {
                path: self.path.clone(),
                problem: "the MCP server refused the credentials (auth_env)".into(),
            }),
            Err(_) => Err(SourceError::Config {
                path: self.path.clone(),
                problem: "the MCP server could not be reached or did not initialize (-v logs why)"
                    .into(),
            }),
        }
    }

    /// The server as it introduced itself, `name version` (terminal-safe, bounded), once a
    /// session has been made: the run's provenance.
    #[must_use]
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// Closes the session: the child is asked to exit (and killed if it does not).
    pub async fn close(&mut self) {
        if let Some(c) = self.conn.take() {
            c.close().await;
        }
    }

    /// The session, started (again) if there is none or the server went away.
    async fn ensure(&mut self) -> Result<&Connection, FetchError> {
        if self.conn.as_ref().is_some_and(|c| c.service.is_closed()) {
            if let Some(c) = self.conn.take() {
                tracing::info!(
                    "the MCP server closed the session (stderr: {} bytes); starting it again",
                    c.stderr_bytes()
                );
            }
        }
        if self.conn.is_none() {
            let c = match connect::connect(&self.config, &self.path).await {
                Ok(c) => c,
                Err(ConnectError::Fatal(e)) => return Err(FetchError::Fatal(e)),
                Err(ConnectError::Forbidden) => return Err(FetchError::Forbidden),
                Err(ConnectError::Transient(why)) => {
                    tracing::info!("{}: {why}", self.path.display());
                    return Err(FetchError::ServerError);
                }
            };
            if self.server.as_ref().is_some_and(|s| *s != c.server) {
                tracing::warn!(
                    "the MCP server now introduces itself as {:?} (was {:?})",
                    c.server,
                    self.server
                );
            }
            self.server = Some(c.server.clone());
            self.conn = Some(c);
        }
        self.conn.as_ref().ok_or(FetchError::ServerError)
    }

    fn fatal(&self, problem: String) -> FetchError {
        FetchError::Fatal(SourceError::Config {
            path: self.path.clone(),
            problem,
        })
    }

    /// Whether a server's words hold the configured expired marker.
    fn says_expired(&self, text: &str) -> bool {
        self.config
            .expired_marker
            .as_ref()
            .is_some_and(|m| text.contains(m.as_str()))
    }

    /// What a failed request means; a closed transport drops the session.
    fn classify(&mut self, e: &ServiceError, on_cursor: bool) -> FetchError {
        match e {
            ServiceError::McpError(data)
                if data.code == ErrorCode::METHOD_NOT_FOUND && self.config.list().is_some() =>
            {
                // Asking again cannot help: the scan fails now, saying why.
                let kind = self.config.list().map_or("", ListKind::method);
                self.fatal(format!(
                    "key \"list\": the MCP server has no {kind} (it answered -32601, method not found); its capabilities do not include that list"
                ))
            }
            ServiceError::McpError(data) => {
                let list_cursor = self.config.list().is_some()
                    && on_cursor
                    && data.code == ErrorCode::INVALID_PARAMS;
                if list_cursor || self.says_expired(&data.message) {
                    FetchError::ExpiredCursor
                } else {
                    tracing::info!("the MCP server answered JSON-RPC error {}", data.code.0);
                    FetchError::ServerError
                }
            }
            ServiceError::Timeout { .. } => FetchError::Timeout,
            other => {
                if other.is_authorization_required() || other.auth_challenge().is_some() {
                    return FetchError::Forbidden;
                }
                tracing::info!("the MCP session failed; it is started again on the next attempt");
                if let Some(c) = self.conn.take() {
                    // Dropping the session ends its task and the child.
                    drop(c);
                }
                FetchError::ServerError
            }
        }
    }

    async fn fetch_tool(&mut self, tool: String, req: &PageRequest) -> Result<Page, FetchError> {
        let call = self
            .config
            .mapping
            .call(req)
            .map_err(|e| self.fatal(e.to_string()))?;
        let args: serde_json::Map<String, Value> = call.params.into_iter().collect();
        let params = CallToolRequestParams::new(tool).with_arguments(args);
        let peer = self.peer().await?;
        let answered = peer.call_tool(params).await;
        let result = match answered {
            Ok(r) => r,
            Err(e) => return Err(self.classify(&e, req.request != Request::First)),
        };
        if result.is_error == Some(true) {
            let expired = result
                .content
                .iter()
                .filter_map(|c| c.as_text())
                .any(|t| self.says_expired(&t.text));
            if expired {
                return Err(FetchError::ExpiredCursor);
            }
            tracing::info!(
                "{}: the tool answered isError: true",
                req.request.describe()
            );
            return Err(FetchError::ServerError);
        }
        let v = serde_json::to_value(&result)
            .map_err(|e| self.fatal(format!("cannot encode a tool result: {e}")))?;
        let size = self.measure(&v)?;
        let mapping = &self.config.mapping;
        let from = self.config.result_from;
        let page = mapping
            .map_tool_result_from(&v, size, self.config.max_result_bytes, &call.position, from)
            .map(|(page, _)| page)
            .map_err(|e| {
                let mut detail = chain_text(&e);
                if let Some(note) = mapping.keys_note(&v, from, &e) {
                    detail.push_str("; ");
                    detail.push_str(&note);
                }
                FetchError::InvalidPage { detail }
            })?;
        self.keep(&v);
        Ok(page)
    }

    async fn fetch_list(&mut self, kind: ListKind, req: &PageRequest) -> Result<Page, FetchError> {
        let (cursor, position) = match &req.request {
            Request::First => (None, Position::First),
            Request::Cursor(c) => (Some(c.clone()), Position::Cursor(c.clone())),
            Request::After(_) => {
                return Err(self.fatal(
                    "a protocol list has no ordering key: the high_water policy cannot apply"
                        .into(),
                ))
            }
        };
        let params = Some(PaginatedRequestParams::default().with_cursor(cursor));
        let peer = self.peer().await?;
        let answered = match kind {
            ListKind::Tools => peer.list_tools(params).await.map(serde_json::to_value),
            ListKind::Resources => peer.list_resources(params).await.map(serde_json::to_value),
            ListKind::Prompts => peer.list_prompts(params).await.map(serde_json::to_value),
            ListKind::ResourceTemplates => peer
                .list_resource_templates(params)
                .await
                .map(serde_json::to_value),
        };
        let v = match answered {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(self.fatal(format!("cannot encode a list result: {e}"))),
            Err(e) => return Err(self.classify(&e, req.request != Request::First)),
        };
        let size = self.measure(&v)?;
        self.config
            .mapping
            .map_value(&v, size, &position)
            .map_err(|e| FetchError::InvalidPage {
                detail: chain_text(&e),
            })
    }

    /// The result's size as JSON; over `max_result_bytes` it is an invalid page.
    fn measure(&self, v: &Value) -> Result<u64, FetchError> {
        let size = serde_json::to_vec(v).map_or(u64::MAX, |b| b.len() as u64);
        let max = self.config.max_result_bytes;
        if size > max {
            return Err(FetchError::InvalidPage {
                detail: format!("the result is over the bound of {max} bytes"),
            });
        }
        Ok(size)
    }
}

impl PageSource for McpSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        match self.config.target.clone() {
            Target::Tool(tool) => self.fetch_tool(tool, req).await,
            Target::List(kind) => self.fetch_list(kind, req).await,
        }
    }
}
