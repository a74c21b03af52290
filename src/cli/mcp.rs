//! `mcp` and `mcp proxy`: scanledger as an MCP server on stdio or streamable HTTP, and the
//! completeness proxy in front of another MCP server (the library's `mcp` module does the
//! work; this file parses, checks the address, and starts the runtime).
//!
//! In stdio mode stdout is the protocol channel: nothing else is ever printed there; notes
//! and logs go to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;

use scanledger::mcp::{Catalog, HttpOptions, Server, ServerOptions};
use scanledger::{Error, StoreOptions};

use super::{CliError, Out};

/// Options of `mcp` (and, for the transport, of `mcp proxy`).
#[derive(Debug, clap::Args)]
pub(crate) struct Serve {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8750).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow --http on an address that is not loopback.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
    /// Accept this Host header too (repeatable); loopback names are always accepted.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allowed_host: Vec<String>,
}

/// `mcp [--sources FILE] [--http ADDR]`.
pub(crate) fn serve(out: &Out, sources: Option<&PathBuf>, serve: &Serve) -> Result<i32, CliError> {
    let catalog = match sources {
        Some(p) => Catalog::read(p).map_err(|e| CliError::from(Error::Source(e)))?,
        None => Catalog::default(),
    };
    if catalog.names().next().is_none() {
        tracing::warn!(
            "no --sources FILE: scan_collection has no source to scan; the read tools work"
        );
    }
    let server = Server::new(ServerOptions {
        store: out.store.clone(),
        catalog,
        store_options: StoreOptions::new(),
    });
    run_on(&runtime()?, move || server.clone(), serve, "scanledger mcp")
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    // Two workers: a scan's store work (its fsyncs) leaves the other to answer other calls.
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the async runtime: {e}")))
}

/// Serves on `rt` as `serve` says: one handler from `session` on stdio, or one per client
/// session over HTTP.
fn run_on<H, F>(
    rt: &tokio::runtime::Runtime,
    session: F,
    serve: &Serve,
    who: &str,
) -> Result<i32, CliError>
where
    H: rmcp::ServerHandler + Send + Sync + 'static,
    F: Fn() -> H + Send + Sync + 'static,
{
    match serve.http {
        None => rt.block_on(async move {
            scanledger::mcp::serve_stdio(session()).await.map_err(|e| {
                CliError::usage(format!("{who}: the client did not initialize: {e}"))
            })?;
            Ok(0)
        }),
        Some(addr) => {
            if !addr.ip().is_loopback() && !serve.allow_remote {
                return Err(CliError::usage(format!(
                    "--http {addr}: not a loopback address; add --allow-remote to serve it (with --allowed-host NAME for the Host it is reached by)"
                ))
                .with_field("--http"));
            }
            let mut options = HttpOptions {
                allowed_hosts: serve.allowed_host.clone(),
            };
            if !addr.ip().is_loopback() {
                options.allowed_hosts.push(addr.ip().to_string());
            }
            let who = who.to_owned();
            rt.block_on(scanledger::mcp::serve_http(
                session,
                addr,
                &options,
                |bound| {
                    eprintln!("{who}: serving streamable HTTP at http://{bound}/mcp");
                },
            ))
            .map_err(|e| CliError::usage(format!("--http {addr}: {e}")).with_field("--http"))?;
            Ok(0)
        }
    }
}

/// `mcp proxy --config FILE [--http ADDR]`.
pub(crate) fn proxy(out: &Out, config: &std::path::Path, serve: &Serve) -> Result<i32, CliError> {
    let _ = out;
    // The upstream session lives on the runtime that started it: one runtime for both.
    let rt = runtime()?;
    let proxy = rt
        .block_on(scanledger::mcp::Proxy::start(config))
        .map_err(|e| CliError::from(Error::Source(e)))?;
    run_on(&rt, move || proxy.session(), serve, "scanledger mcp proxy")
}
