//! Streamable HTTP at `/mcp` (the MCP 2025-11-25 transport), served by hyper over rmcp's
//! session manager, for the server and the proxy alike.
//!
//! Loopback by default: the caller refuses another address unless the operator allows it,
//! and the `Host` header is checked against the allowed names (loopback names, plus what the
//! operator adds), which defends a local server against DNS rebinding; a browser `Origin`
//! must be a loopback one. Connections are bounded (`CONNECTIONS_MAX`, each a task of one
//! `JoinSet`), request bodies by rmcp (4 MiB), and any other path answers 404.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;
use tokio::task::JoinSet;

/// Connections served at once; more wait in the listen queue.
const CONNECTIONS_MAX: usize = 64;

/// How `--http` serves.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Extra `Host` names (or `host:port`) to accept besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

/// Serves `handler` (a fresh clone per session) at `http://ADDR/mcp` until the process ends;
/// calls `ready` with the bound address once listening.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_http<H: ServerHandler + Clone + Send + Sync + 'static>(
    handler: H,
    addr: SocketAddr,
    options: &HttpOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), std::io::Error> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let mut hosts: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "[::1]".into(),
    ];
    hosts.extend(options.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]);
    let service: StreamableHttpService<H, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::default(), config);
    ready(bound);
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let mut tasks = JoinSet::new();
    loop {
        // Finished connections leave the set as they end, so it never holds more than the
        // semaphore allows.
        while tasks.try_join_next().is_some() {}
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return Ok(());
        };
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::info!("accepting a connection failed: {e}");
                continue;
            }
        };
        let service = service.clone();
        tasks.spawn(async move {
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    async move {
                        if req.uri().path() != "/mcp" {
                            let body = Full::new(Bytes::from_static(
                                b"not found: the MCP endpoint is /mcp\n",
                            ))
                            .map_err(|e: Infallible| match e {})
                            .boxed();
                            let mut resp = hyper::Response::new(body);
                            *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
                            return Ok::<_, Infallible>(resp);
                        }
                        Ok(service.handle(req).await)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            drop(permit);
        });
    }
}
