//! Both directions of one proxied session: the client's requests forwarded to the upstream
//! (`Forwarded`, cancellable), and what the upstream asks and says relayed to the client
//! (`Relay`, the upstream session's client handler).
//!
//! rmcp gives each outgoing request its own ID and progress token, so the session keeps the
//! requests in flight (`InFlight`, at most `IN_FLIGHT_MAX`) to carry the rest across:
//! - a progress notification of the upstream goes to the client under the token the client
//!   gave (dropped when it gave none);
//! - a server-to-client request (sampling, elicitation, roots, ping) goes to the client tagged
//!   with the client request it serves, so that over streamable HTTP it rides that request's
//!   stream: the one the upstream request arrived on when the upstream's transport tells, else
//!   the newest request in flight;
//! - a cancellation either way cancels the matching request on the other side (rmcp cancels
//!   the handler's token; the forwarder then sends `notifications/cancelled` on).
//!
//! Every other notification (`list_changed`, `resources/updated`, `message`, custom ones) is
//! passed on as it is; a `list_changed` first drops the session's cached whole list.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientConfig, ClientResult, GetExtensions, GetMeta, ProgressToken, RequestId,
    ServerNotification, ServerRequest,
};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, OriginatingRequestId, PeerRequestOptions,
    RequestContext, RequestHandle, Service, ServiceRole,
};
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServiceError};
use tokio_util::sync::CancellationToken;

use super::lists::{Cache, Kind};

/// Requests of one session in flight at once.
pub(crate) const IN_FLIGHT_MAX: usize = 4096;

/// A client request forwarded to the upstream.
#[derive(Debug, Clone)]
struct InFlight {
    /// Its ID on the upstream session.
    upstream: RequestId,
    /// Its ID on the client's session.
    downstream: RequestId,
    /// The progress token rmcp gave it upstream.
    upstream_token: ProgressToken,
    /// The progress token the client gave it, if any.
    downstream_token: Option<ProgressToken>,
}

/// What both directions of a session share.
#[derive(Debug, Default)]
pub(crate) struct SessionState {
    in_flight: Mutex<Vec<InFlight>>,
    /// The session's whole lists.
    pub(crate) lists: Cache,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl SessionState {
    fn add(&self, f: InFlight) -> Result<(), ErrorData> {
        let mut all = locked(&self.in_flight);
        if all.len() >= IN_FLIGHT_MAX {
            return Err(ErrorData::internal_error(
                format!("more than {IN_FLIGHT_MAX} requests of this session are in flight"),
                None,
            ));
        }
        all.push(f);
        Ok(())
    }

    fn remove(&self, upstream: &RequestId) {
        locked(&self.in_flight).retain(|f| f.upstream != *upstream);
    }

    /// The client request an upstream request serves: the one it arrived for, when the
    /// transport says, else the newest in flight.
    fn origin_of(&self, upstream_stream: Option<&RequestId>) -> Option<RequestId> {
        let all = locked(&self.in_flight);
        if let Some(id) = upstream_stream {
            if let Some(f) = all.iter().find(|f| f.upstream == *id) {
                return Some(f.downstream.clone());
            }
        }
        all.last().map(|f| f.downstream.clone())
    }

    /// The client's token for an upstream progress token.
    fn client_token(&self, upstream: &ProgressToken) -> Option<ProgressToken> {
        locked(&self.in_flight)
            .iter()
            .find(|f| f.upstream_token == *upstream)
            .and_then(|f| f.downstream_token.clone())
    }
}

/// The error a failed session gives the request that used it.
pub(crate) fn service_error(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(data) => data,
        ServiceError::TransportClosed => {
            ErrorData::internal_error("the upstream session is closed", None)
        }
        other => ErrorData::internal_error(
            format!(
                "the upstream session failed: {}",
                crate::source::mapping::chain_text(&other)
            ),
            None,
        ),
    }
}

/// Sends `request` on `peer` and waits for its answer, cancelling it there when `ct` is.
async fn answer_or_cancel<R: ServiceRole>(
    mut handle: RequestHandle<R>,
    ct: &CancellationToken,
) -> Result<R::PeerResp, ErrorData> {
    tokio::select! {
        answered = &mut handle.rx => match answered {
            Ok(r) => r.map_err(service_error),
            Err(_) => Err(service_error(ServiceError::TransportClosed)),
        },
        () = ct.cancelled() => {
            let _ = handle.cancel(Some("cancelled by the requester".into())).await;
            Err(ErrorData::internal_error("the request was cancelled", None))
        }
    }
}

/// Forwards a client request to the upstream, keeping it in flight meanwhile.
pub(crate) async fn forward(
    upstream: &Peer<RoleClient>,
    state: &SessionState,
    mut request: rmcp::model::ClientRequest,
    context: &RequestContext<RoleServer>,
) -> Result<rmcp::model::ServerResult, ErrorData> {
    let client_token = context.meta.get_progress_token();
    // The client's `_meta` goes on; rmcp sets the upstream's progress token itself.
    request.get_meta_mut().extend(context.meta.clone());
    let handle = upstream
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .map_err(service_error)?;
    let id = handle.id.clone();
    state.add(InFlight {
        upstream: id.clone(),
        downstream: context.id.clone(),
        upstream_token: handle.progress_token.clone(),
        downstream_token: client_token,
    })?;
    let answered = answer_or_cancel(handle, &context.ct).await;
    state.remove(&id);
    answered
}

/// The upstream session's client: answers what the upstream asks by asking the client.
pub(crate) struct Relay {
    /// The client of the session.
    pub(crate) downstream: Peer<RoleServer>,
    /// What the proxy tells the upstream at `initialize`: the client's capabilities.
    pub(crate) info: ClientConfig,
    pub(crate) state: Arc<SessionState>,
}

impl Service<RoleClient> for Relay {
    async fn handle_request(
        &self,
        mut request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let arrived_for = match context.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
            _ => None,
        };
        if let Some(origin) = self.state.origin_of(arrived_for.as_ref()) {
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
        }
        let handle = self
            .downstream
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(service_error)?;
        answer_or_cancel(handle, &context.ct).await
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let notification = match notification {
            ServerNotification::ProgressNotification(mut n) => {
                // Only to a client that asked for progress, under its own token.
                let Some(token) = self.state.client_token(&n.params.progress_token) else {
                    return Ok(());
                };
                n.params.progress_token = token;
                ServerNotification::ProgressNotification(n)
            }
            // rmcp cancels the handler of the request named; the forwarder passes it on.
            ServerNotification::CancelledNotification(_) => return Ok(()),
            other => {
                let changed = match &other {
                    ServerNotification::ToolListChangedNotification(_) => Some(Kind::Tools),
                    ServerNotification::PromptListChangedNotification(_) => Some(Kind::Prompts),
                    ServerNotification::ResourceListChangedNotification(_) => Some(Kind::Resources),
                    _ => None,
                };
                if let Some(kind) = changed {
                    self.state.lists.invalidate(kind);
                    if kind == Kind::Resources {
                        self.state.lists.invalidate(Kind::Templates);
                    }
                }
                other
            }
        };
        if self
            .downstream
            .send_notification(notification)
            .await
            .is_err()
        {
            tracing::debug!("a notification of the upstream found the client gone");
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}
