//! Reaching an MCP server: a child process on stdio or a streamable HTTP endpoint, the
//! `initialize` handshake under a timeout, and the server's identity for provenance.
//!
//! The child's stderr is piped and drained by one task owned by the connection (aborted with
//! it): appended to `stderr_log` up to `STDERR_LOG_BYTES_MAX` when the config names one,
//! counted otherwise. It never reaches our stdout or stderr, since a server may print its
//! environment (and so a secret) there. The client's response cache is off: a stale list
//! page served on an error would pass for a fresh one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{RunningService, Service};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientCacheConfig, RoleClient, ServiceExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::config::{McpConfig, Transport};
use crate::error::SourceError;
use crate::receipt::terminal_safe;

/// Bytes of the child's stderr written to `stderr_log`; the rest is counted, not kept.
const STDERR_LOG_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Bytes of a server's name or version kept for provenance.
const SERVER_INFO_LEN_MAX: usize = 128;
/// Slack over `max_result_bytes` for the JSON-RPC envelope, so the bound that fires is ours
/// (an invalid page naming the bound), not the transport's.
const ENVELOPE_BYTES: usize = 64 * 1024;

/// One initialized session with a server; `S` answers what the server asks (the source's
/// plain client config, or the proxy's relay).
pub(crate) struct Connection<S: Service<RoleClient> = ClientConfig> {
    pub(crate) service: RunningService<RoleClient, S>,
    /// `name version` of the server, as it introduced itself (terminal-safe, bounded).
    pub(crate) server: String,
    stderr: Option<StderrTap>,
}

impl<S: Service<RoleClient>> std::fmt::Debug for Connection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// The task draining a child's stderr, and what it has seen.
struct StderrTap {
    task: tokio::task::JoinHandle<()>,
    seen_bytes: Arc<AtomicU64>,
}

impl Drop for StderrTap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<S: Service<RoleClient>> Connection<S> {
    /// Bytes the child wrote to its stderr so far (0 for HTTP).
    pub(crate) fn stderr_bytes(&self) -> u64 {
        self.stderr
            .as_ref()
            .map_or(0, |t| t.seen_bytes.load(Ordering::Relaxed))
    }

    /// Ends the session: the transport is closed and a child is asked to exit (then killed).
    pub(crate) async fn close(self) {
        let Connection {
            service, stderr, ..
        } = self;
        let _ = tokio::time::timeout(Duration::from_secs(5), service.cancel()).await;
        drop(stderr);
    }
}

/// Why a connection could not be made.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The configuration cannot work (the program cannot be started): an input error.
    Fatal(SourceError),
    /// The server refused the credentials.
    Forbidden,
    /// The server did not answer in time, or the transport failed: worth another try.
    Transient(String),
}

/// The identity we give servers.
pub(crate) fn client_config() -> ClientConfig {
    let mut c = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("scanledger", env!("CARGO_PKG_VERSION")),
    );
    // The pagination this source follows is the 2025-11-25 protocol's, which servers on the
    // `initialize` handshake speak.
    c.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
    c
}

/// Starts or reaches the server of `cfg` and initializes a session.
pub(crate) async fn connect(cfg: &McpConfig, path: &Path) -> Result<Connection, ConnectError> {
    connect_with(cfg, path, client_config()).await
}

/// [`connect`] with `handler` answering the server's requests and notifications (its
/// `get_info` is the client's `initialize`).
pub(crate) async fn connect_with<S: Service<RoleClient>>(
    cfg: &McpConfig,
    path: &Path,
    handler: S,
) -> Result<Connection<S>, ConnectError> {
    let init = Duration::from_millis(cfg.init_timeout_ms);
    let (service, stderr) = match &cfg.transport {
        Transport::Command {
            argv,
            env,
            cwd,
            stderr_log,
        } => {
            let mut cmd = tokio::process::Command::new(&argv[0]);
            cmd.args(&argv[1..]).kill_on_drop(true);
            for (k, v) in env {
                cmd.env(k, &v.0);
            }
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| {
                    ConnectError::Fatal(SourceError::Other {
                        what: format!(
                            "{}: cannot start the MCP server {:?}",
                            path.display(),
                            terminal_safe(&argv[0])
                        ),
                        source: Box::new(e),
                    })
                })?;
            let tap = stderr.map(|s| drain(s, stderr_log.clone()));
            let service = tokio::time::timeout(init, handler.serve(child))
                .await
                .map_err(|_| timed_out(cfg.init_timeout_ms, tap.as_ref()))?
                .map_err(|e| init_failed(&e, tap.as_ref()))?;
            (service, tap)
        }
        Transport::Url { url, bearer } => {
            // The ring provider, installed once per process (an earlier one is kept).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .tls_backend_rustls()
                .build()
                .map_err(|e| {
                    ConnectError::Fatal(SourceError::Other {
                        what: "cannot build the HTTP client".into(),
                        source: Box::new(e.without_url()),
                    })
                })?;
            let limit = usize::try_from(cfg.max_result_bytes)
                .unwrap_or(usize::MAX)
                .saturating_add(ENVELOPE_BYTES);
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .max_json_response_size(limit);
            config.max_sse_event_size = limit;
            if let Some(token) = bearer {
                config = config.auth_header(token.0.clone());
            }
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let service = tokio::time::timeout(init, handler.serve(transport))
                .await
                .map_err(|_| timed_out(cfg.init_timeout_ms, None))?
                .map_err(|e| init_failed(&e, None))?;
            (service, None)
        }
    };
    service
        .peer()
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    let server = service
        .peer_info()
        .and_then(|info| info.server_info.clone())
        .map_or_else(
            || "(unnamed server)".to_owned(),
            |i| format!("{} {}", shown(&i.name), shown(&i.version)),
        );
    Ok(Connection {
        service,
        server,
        stderr,
    })
}

/// A server-given string as provenance shows it: terminal-safe and bounded.
fn shown(s: &str) -> String {
    let safe = terminal_safe(s).into_owned();
    if safe.len() <= SERVER_INFO_LEN_MAX {
        return safe;
    }
    let mut cut = SERVER_INFO_LEN_MAX;
    while !safe.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &safe[..cut])
}

fn stderr_note(tap: Option<&StderrTap>) -> String {
    match tap.map(|t| t.seen_bytes.load(Ordering::Relaxed)) {
        None | Some(0) => String::new(),
        Some(n) => format!(
            " (it wrote {n} bytes to its stderr, which is never shown: set \"stderr_log\" to keep them)"
        ),
    }
}

fn timed_out(ms: u64, tap: Option<&StderrTap>) -> ConnectError {
    ConnectError::Transient(format!(
        "the MCP server did not complete initialization within {ms} ms{}",
        stderr_note(tap)
    ))
}

fn init_failed(e: &rmcp::service::ClientInitializeError, tap: Option<&StderrTap>) -> ConnectError {
    if e.is_authorization_required() || e.auth_challenge().is_some() {
        return ConnectError::Forbidden;
    }
    // The error's words come from the transport and the protocol, never from a cursor (none
    // was sent yet); they are shortened and made terminal-safe all the same.
    ConnectError::Transient(format!(
        "the MCP server failed to initialize: {}{}",
        shown(&e.to_string()),
        stderr_note(tap)
    ))
}

/// Drains a child's stderr: counted, and appended to `log` (bounded) when one is named.
fn drain(mut stderr: tokio::process::ChildStderr, log: Option<PathBuf>) -> StderrTap {
    let seen_bytes = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&seen_bytes);
    let task = tokio::spawn(async move {
        let mut file = match &log {
            Some(p) => tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .await
                .ok(),
            None => None,
        };
        let mut written = 0u64;
        let mut buf = vec![0u8; 8192];
        // Bounded by the child: the loop ends at EOF (the child exits) or when the
        // connection aborts the task.
        loop {
            let n = match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            seen.fetch_add(n as u64, Ordering::Relaxed);
            if let Some(f) = file.as_mut() {
                let room = STDERR_LOG_BYTES_MAX.saturating_sub(written);
                let take = usize::try_from(room).unwrap_or(usize::MAX).min(n);
                if take > 0 && f.write_all(&buf[..take]).await.is_ok() {
                    written = written.saturating_add(take as u64);
                }
            }
        }
        if let Some(mut f) = file {
            let _ = f.flush().await;
        }
    });
    StderrTap { task, seen_bytes }
}
