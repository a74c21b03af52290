//! Streamable HTTP at `/mcp` (the MCP 2025-11-25 transport), served by hyper over rmcp's
//! session manager, for the server and the proxy alike.
//!
//! Loopback by default: the caller refuses another address unless the operator allows it,
//! and the `Host` header is checked against the allowed names (loopback names, plus what the
//! operator adds), which defends a local server against DNS rebinding; a browser `Origin`
//! must be a loopback one. Connections are bounded (`CONNECTIONS_MAX`, each a task of one
//! `JoinSet`), request bodies by `frame::MESSAGE_BYTES_MAX` (a larger one is read through
//! and answered 413 with a JSON-RPC error naming the bound, its `id` when it has one), and
//! any other path answers 404.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;
use tokio::task::JoinSet;

use super::frame::{self, Scanner, MESSAGE_BYTES_MAX};

/// Connections served at once; more wait in the listen queue.
const CONNECTIONS_MAX: usize = 64;
/// Bytes of an oversized body read through to find its `id`; past them it is answered as it
/// stands and the connection closed.
const OVERSIZED_READ_MAX: u64 = 256 * 1024 * 1024;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// How `--http` serves.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Extra `Host` names (or `host:port`) to accept besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

/// Serves a handler made by `session` for each client session at `http://ADDR/mcp` until the
/// process ends; calls `ready` with the bound address once listening.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_http<H, F>(
    session: F,
    addr: SocketAddr,
    options: &HttpOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), std::io::Error>
where
    H: ServerHandler + Send + Sync + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
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
        .with_max_request_body_bytes(MESSAGE_BYTES_MAX)
        .with_allowed_hosts(hosts)
        .with_allowed_origins(["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]);
    let service: StreamableHttpService<H, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(session()), Arc::default(), config);
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
                            return Ok::<_, Infallible>(plain(
                                hyper::StatusCode::NOT_FOUND,
                                "not found: the MCP endpoint is /mcp\n",
                            ));
                        }
                        let req = if req.method() == hyper::Method::POST {
                            match bounded(req).await {
                                Ok(r) => r,
                                Err(resp) => return Ok(resp),
                            }
                        } else {
                            // GET (the event stream) and DELETE carry no body.
                            req.map(|_| Full::new(Bytes::new()).boxed())
                        };
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

fn plain(status: hyper::StatusCode, text: &'static str) -> hyper::Response<Body> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *resp.status_mut() = status;
    resp
}

/// A request whose body is kept whole when within `MESSAGE_BYTES_MAX`; else the 413 answer:
/// a JSON-RPC error naming the bound, with the request's `id` when it has one.
async fn bounded(
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Request<Body>, hyper::Response<Body>> {
    let (parts, mut body) = req.into_parts();
    let mut kept: Vec<u8> = Vec::new();
    let mut over: Option<Scanner> = None;
    // Bounded: the body ends, fails, or passes `OVERSIZED_READ_MAX`.
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(plain(
                hyper::StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            ));
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if let Some(scan) = over.as_mut() {
            scan.feed(&data);
            if scan.bytes > OVERSIZED_READ_MAX {
                break;
            }
        } else if kept.len().saturating_add(data.len()) > MESSAGE_BYTES_MAX {
            let mut scan = Scanner::default();
            scan.feed(&kept);
            scan.feed(&data);
            kept = Vec::new();
            over = Some(scan);
        } else {
            kept.extend_from_slice(&data);
        }
    }
    match over {
        None => Ok(hyper::Request::from_parts(
            parts,
            Full::new(Bytes::from(kept)).boxed(),
        )),
        Some(scan) => {
            tracing::warn!(
                bytes = scan.bytes,
                "a request body over the bound of {MESSAGE_BYTES_MAX} bytes was answered 413"
            );
            let id = (scan.kind() == frame::Kind::Request)
                .then(|| scan.id())
                .flatten();
            let text = frame::error_response(id, &scan.error()).to_string();
            let mut resp = hyper::Response::new(Full::new(Bytes::from(text)).boxed());
            *resp.status_mut() = hyper::StatusCode::PAYLOAD_TOO_LARGE;
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            // The rest of an unread body would be taken for the next request.
            resp.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
            Err(resp)
        }
    }
}
