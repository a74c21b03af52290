//! The completeness proxy: an MCP server in front of one upstream MCP server, meant as a
//! drop-in for it.
//!
//! Each client session gets its own upstream session, opened at the client's `initialize`
//! with the client's capabilities (so the upstream asks for sampling, elicitation or roots
//! exactly when the client can answer), and closed with it. Through it passes the whole MCP
//! surface: the upstream's capabilities and instructions are the proxy's; every request the
//! proxy does not improve is forwarded with its `_meta` and its answer (or JSON-RPC error)
//! returned as it is (`resources/read`, `resources/subscribe`/`unsubscribe`, `prompts/get`,
//! `completion/complete`, `logging/setLevel`, `ping`, tools, custom methods); the upstream's
//! notifications, requests and cancellations reach the client (`relay`). What it improves:
//! - every list (`tools`, `resources`, `resources/templates`, `prompts`) is answered whole in
//!   one page, followed upstream page by page (`lists`: bounds, a loop guard, a cursor that
//!   does not advance), refreshed when the upstream says `list_changed`;
//! - each tool the config declares paginated is replaced by an all-or-fail version (`paged`).
//!
//! At start the proxy opens one session to check the config against the upstream (it must
//! start, list its tools whole, and have every declared tool), then closes it.
//!
//! Absences: the upstream's raw cursors never reach our client (lists are whole, a paginated
//! tool's answer carries IDs and hashes, and its pagination arguments are refused from the
//! caller) nor our logs; no request of one client session ever reaches another's upstream.
//! Not passed through: the 2026 drafts' tasks and skills extensions and the `subscriptions/
//! listen` lifecycle (not mirrored in the capabilities: rmcp answers `-32601`), and protocol
//! versions without `initialize` (the proxy negotiates one with it).

// The proxy passes on the methods the 2026 drafts deprecate (logging, resource subscriptions)
// for the clients and servers of 2025-11-25 and before, which use them.
#![allow(deprecated)]

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig,
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, GetPromptRequest, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, PingRequest, ProtocolVersion,
    ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, ServerResult, SetLevelRequest, SetLevelRequestParams, SubscribeRequest,
    SubscribeRequestParams, Tool, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler};

use super::outcome::error_answer;
use crate::error::SourceError;
use crate::source::mcp::{client_config, connect, connect_with, ConnectError, Connection};

mod config;
mod lists;
mod paged;
mod relay;

use config::ProxyConfig;
use lists::Kind;
use relay::{forward, service_error, Relay, SessionState};

/// Client sessions served at once, each with its own upstream session.
pub const SESSIONS_MAX: usize = 64;

/// The proxy (cheap to clone); [`Proxy::session`] makes the handler of one client session.
#[derive(Debug, Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

/// What every session shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ProxyConfig,
    /// The upstream as the check at start met it: capabilities, instructions, identity.
    upstream: InitializeResult,
    /// Held by a paginated call while it writes the store.
    pub(crate) writer_lock: tokio::sync::Mutex<()>,
    sessions: Arc<tokio::sync::Semaphore>,
}

impl Proxy {
    /// Reads the config, starts (or reaches) the upstream, reads its whole tool list, checks
    /// the declared paginated tools against it, and closes that session.
    ///
    /// # Errors
    /// `SourceError` naming the config and what failed: a key, the upstream that cannot be
    /// started or reached, a tool list that loops, a declared tool the upstream lacks.
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
        let tools = lists::tools(&peer, deadline).await;
        let upstream = upstream_info(&session);
        session.close().await;
        let tools = tools
            .map_err(|e| bad(e.into_error(Kind::Tools).message.into_owned()))?
            .items;
        for (name, _) in &config.paginated {
            if !tools.iter().any(|t| t.name == name.as_str()) {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
                return Err(bad(format!(
                    "paginated.{name}: the upstream has no such tool; its tools: {}",
                    names.join(", ")
                )));
            }
        }
        Ok(Proxy {
            shared: Arc::new(Shared {
                config,
                upstream,
                writer_lock: tokio::sync::Mutex::new(()),
                sessions: Arc::new(tokio::sync::Semaphore::new(SESSIONS_MAX)),
            }),
        })
    }

    /// The handler of one client session (its upstream session opens at `initialize`).
    #[must_use]
    pub fn session(&self) -> ProxySession {
        ProxySession {
            shared: Arc::clone(&self.shared),
            upstream: Arc::new(OnceLock::new()),
        }
    }
}

/// What the upstream said at `initialize` (without a `serverInfo`, a placeholder name).
fn upstream_info<S: rmcp::service::Service<RoleClient>>(c: &Connection<S>) -> InitializeResult {
    let mut r = InitializeResult::new(ServerCapabilities::default());
    if let Some(info) = c.service.peer_info() {
        r.capabilities = info.capabilities.clone();
        r.instructions.clone_from(&info.instructions);
        r.protocol_version = info.protocol_version.clone();
        if let Some(i) = &info.server_info {
            r.server_info = i.clone();
        }
    }
    r
}

/// One client session of the proxy.
#[derive(Debug, Clone)]
pub struct ProxySession {
    shared: Arc<Shared>,
    upstream: Arc<OnceLock<Upstream>>,
}

/// A session's upstream.
struct Upstream {
    /// Keeps the session (and its child) alive; closed when the client session ends.
    _conn: Connection<Relay>,
    peer: Peer<RoleClient>,
    /// `name version`, the provenance of paginated runs.
    server: String,
    info: InitializeResult,
    state: Arc<SessionState>,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// The capabilities the proxy declares: the upstream's, less what it does not pass through,
/// with tools when it declares paginated ones.
fn mirrored(upstream: &ServerCapabilities, paginated: bool) -> ServerCapabilities {
    let mut c = upstream.clone();
    c.extensions = None;
    if paginated && c.tools.is_none() {
        c.tools = ServerCapabilities::builder().enable_tools().build().tools;
    }
    c
}

impl ProxySession {
    fn upstream(&self) -> Result<&Upstream, ErrorData> {
        self.upstream.get().ok_or_else(|| {
            ErrorData::invalid_request(
                "the session is not initialized (the proxy opens the upstream at initialize)",
                None,
            )
        })
    }

    /// Opens this session's upstream with the client's capabilities.
    async fn open(
        &self,
        client: &InitializeRequestParams,
        downstream: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let s = &self.shared;
        let slot = Arc::clone(&s.sessions).try_acquire_owned().map_err(|_| {
            ErrorData::internal_error(
                format!("the proxy serves at most {SESSIONS_MAX} sessions at once"),
                None,
            )
        })?;
        let mut info: ClientConfig = client_config();
        info.capabilities = client.capabilities.clone();
        info.capabilities.extensions = None;
        info.client_info = client.client_info.clone();
        if client.protocol_version.has_initialize() {
            info.protocol_version = client.protocol_version.clone();
        }
        let state = Arc::new(SessionState::default());
        let relay = Relay {
            downstream,
            info,
            state: Arc::clone(&state),
        };
        let conn = connect_with(&s.config.upstream, &s.config.path, relay)
            .await
            .map_err(|e| {
                let why = match e {
                    ConnectError::Fatal(e) => crate::source::mapping::chain_text(&e),
                    ConnectError::Forbidden => {
                        "the upstream refused the credentials (auth_env)".into()
                    }
                    ConnectError::Transient(why) => why,
                };
                ErrorData::internal_error(format!("the upstream could not be opened: {why}"), None)
            })?;
        let up = Upstream {
            peer: conn.service.peer().clone(),
            server: conn.server.clone(),
            info: upstream_info(&conn),
            _conn: conn,
            state,
            _slot: slot,
        };
        self.upstream
            .set(up)
            .map_err(|_| ErrorData::invalid_request("initialize was sent twice", None))
    }

    /// Forwards `request` and returns the upstream's answer.
    async fn pass(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let up = self.upstream()?;
        forward(&up.peer, &up.state, request, context).await
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.shared.config.upstream.init_timeout_ms)
    }

    /// The upstream's tools, whole, with the declared paginated ones replaced.
    async fn tools(&self) -> Result<Vec<Tool>, ErrorData> {
        let up = self.upstream()?;
        let all = up
            .state
            .lists
            .get(Kind::Tools, lists::tools(&up.peer, self.deadline()))
            .await?;
        let paginated = &self.shared.config.paginated;
        Ok(all
            .iter()
            .map(
                |t| match paginated.iter().find(|(n, _)| t.name == n.as_str()) {
                    Some((_, p)) => paged::all_pages_version(t.clone(), p),
                    None => t.clone(),
                },
            )
            .collect())
    }
}

fn unexpected(method: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("the upstream answered {method} with a result of another kind"),
        None,
    )
}

/// A client's cursor on a list the proxy answers whole is not one it gave.
fn no_cursor(request: Option<&PaginatedRequestParams>, kind: Kind) -> Result<(), ErrorData> {
    match request.and_then(|r| r.cursor.as_deref()) {
        Some(c) if !c.is_empty() => Err(ErrorData::invalid_params(
            format!(
                "the proxy answers {} whole in one page and gave no cursor",
                kind.method()
            ),
            None,
        )),
        _ => Ok(()),
    }
}

impl ServerHandler for ProxySession {
    fn get_info(&self) -> ServerConfig {
        let up = self
            .upstream
            .get()
            .map_or(&self.shared.upstream, |u| &u.info);
        let mut c = ServerConfig::new(mirrored(
            &up.capabilities,
            !self.shared.config.paginated.is_empty(),
        ))
        .with_server_info(Implementation::new(
            "scanledger-proxy",
            env!("CARGO_PKG_VERSION"),
        ));
        c.instructions.clone_from(&up.instructions);
        c
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(
            ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .filter(|v| v.has_initialize())
                .cloned()
                .collect(),
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.open(&request, context.peer.clone()).await?;
        self.negotiate_initialize(&request)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let ping = ClientRequest::PingRequest(PingRequest::default());
        self.pass(ping, &context).await.map(|_| ())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let req = ClientRequest::CompleteRequest(CompleteRequest::new(request));
        match self.pass(req, &context).await? {
            ServerResult::CompleteResult(r) => Ok(r),
            _ => Err(unexpected("completion/complete")),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let req = ClientRequest::SetLevelRequest(SetLevelRequest::new(request));
        self.pass(req, &context).await.map(|_| ())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let req = ClientRequest::GetPromptRequest(GetPromptRequest::new(request));
        match self.pass(req, &context).await? {
            ServerResult::GetPromptResult(r) => Ok(r.into()),
            _ => Err(unexpected("prompts/get")),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let req = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request));
        match self.pass(req, &context).await? {
            ServerResult::ReadResourceResult(r) => Ok(r.into()),
            _ => Err(unexpected("resources/read")),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let req = ClientRequest::SubscribeRequest(SubscribeRequest::new(request));
        self.pass(req, &context).await.map(|_| ())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let req = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(request));
        self.pass(req, &context).await.map(|_| ())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        no_cursor(request.as_ref(), Kind::Tools)?;
        Ok(ListToolsResult::with_all_items(self.tools().await?))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        no_cursor(request.as_ref(), Kind::Resources)?;
        let up = self.upstream()?;
        let all = up
            .state
            .lists
            .get(Kind::Resources, lists::resources(&up.peer, self.deadline()))
            .await?;
        Ok(ListResourcesResult::with_all_items((*all).clone()))
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        no_cursor(request.as_ref(), Kind::Templates)?;
        let up = self.upstream()?;
        let all = up
            .state
            .lists
            .get(Kind::Templates, lists::templates(&up.peer, self.deadline()))
            .await?;
        Ok(ListResourceTemplatesResult::with_all_items((*all).clone()))
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        no_cursor(request.as_ref(), Kind::Prompts)?;
        let up = self.upstream()?;
        let all = up
            .state
            .lists
            .get(Kind::Prompts, lists::prompts(&up.peer, self.deadline()))
            .await?;
        Ok(ListPromptsResult::with_all_items((*all).clone()))
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
            let req = ClientRequest::CallToolRequest(CallToolRequest::new(request));
            return match self.pass(req, &context).await? {
                ServerResult::CallToolResult(r) => Ok(r.into()),
                ServerResult::InputRequiredResult(r) => Ok(CallToolResponse::InputRequired(r)),
                _ => Err(unexpected("tools/call")),
            };
        };
        let up = self.upstream()?;
        let call = paged::Call {
            shared: s,
            peer: up.peer.clone(),
            server: &up.server,
        };
        let args = request.arguments.unwrap_or_default();
        let answer = match paged::all_pages(&call, name, paged, args, &context).await {
            Ok(v) => CallToolResult::structured(v),
            Err(message) => CallToolResult::structured_error(error_answer(&message)),
        };
        Ok(answer.into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if let Some(e) = super::frame::oversized_error(&request) {
            return Err(e);
        }
        match self
            .pass(ClientRequest::CustomRequest(request), &context)
            .await?
        {
            ServerResult::CustomResult(r) => Ok(r),
            other => serde_json::to_value(&other)
                .map(CustomResult::new)
                .map_err(|_| unexpected("a custom method")),
        }
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if let Ok(up) = self.upstream() {
            let n = rmcp::model::ClientNotification::RootsListChangedNotification(
                rmcp::model::RootsListChangedNotification::default(),
            );
            if let Err(e) = up.peer.send_notification(n).await {
                tracing::debug!(
                    "roots list_changed not passed on: {}",
                    service_error(e).message
                );
            }
        }
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Ok(up) = self.upstream() {
            let n = rmcp::model::ClientNotification::CustomNotification(notification);
            if let Err(e) = up.peer.send_notification(n).await {
                tracing::debug!("a notification not passed on: {}", service_error(e).message);
            }
        }
    }
}
