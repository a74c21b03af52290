//! MCP: scanledger as an MCP server an agent calls (`server`), and the completeness proxy in
//! front of another MCP server (`proxy`). Behind the default feature `mcp`; the command line
//! starts them (`scanledger mcp`, `scanledger mcp proxy`), this module never parses one.
//!
//! What it owns: the tool catalogue and its schemas (`tools`), the answers' shape
//! (`outcome`: an `inventory`, an `incomplete_read` or a `failed_read`, and no total-looking
//! field in a partial answer), the operator's source catalogue (`catalog`), the calls
//! (`scan`, `read`) and the streamable HTTP listener (`http`).
//!
//! Invariants and absences:
//! - An agent names a source only from the operator's catalogue: no argument is a path, a
//!   URL or a command, and only runs of declared sources can be resumed.
//! - One store handle at a time in this process (the store's file locks are per process):
//!   every call opens it under one lock and closes it before the next, so calls wait while a
//!   scan writes, and other processes may read (or, between calls, write) the file.
//! - Scans report MCP progress after every checkpoint when the caller gave a progress token,
//!   and stop at the next page boundary when the call is cancelled (the run stays resumable).
//! - Nothing written to stdout but the protocol (stdio mode); logs go to stderr.

use std::path::PathBuf;
use std::sync::Arc;

use crate::store::StoreOptions;

mod catalog;
mod frame;
mod handler;
mod http;
mod outcome;
mod proxy;
mod read;
mod scan;
mod tools;

pub use catalog::{Catalog, CATALOG_SOURCES_MAX};
pub use frame::MESSAGE_BYTES_MAX;
pub use http::{serve_http, HttpOptions};
pub use outcome::{error_answer, outcome_of, scan_answer, ShownIds, TOTAL_LIKE_KEYS};
pub use proxy::Proxy;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The store file.
    pub store: PathBuf,
    /// The sources an agent may scan.
    pub catalog: Catalog,
    /// How scans write the store.
    pub store_options: StoreOptions,
}

/// The scanledger MCP server: the tools of `tools`, over one store.
#[derive(Debug, Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: ServerOptions,
    /// Held while the store is open: one handle at a time in this process.
    store_lock: tokio::sync::Mutex<()>,
}

impl Server {
    /// A server over `options`.
    #[must_use]
    pub fn new(options: ServerOptions) -> Server {
        Server {
            shared: Arc::new(Shared {
                options,
                store_lock: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Serves MCP on this process's stdin and stdout until the client closes them.
    ///
    /// # Errors
    /// When the session cannot start (the client does not initialize).
    pub async fn serve_stdio(self) -> Result<(), std::io::Error> {
        serve_stdio(self).await
    }
}

/// Serves `handler` on this process's stdin and stdout until the client closes them; every
/// request gets an answer, one over `MESSAGE_BYTES_MAX` an error naming the bound.
///
/// # Errors
/// When the session cannot start (the client does not initialize).
pub async fn serve_stdio<H: rmcp::ServerHandler>(handler: H) -> Result<(), std::io::Error> {
    use rmcp::ServiceExt;
    let (transport, pump) = frame::stdio();
    let ended = async {
        let running = handler
            .serve(transport)
            .await
            .map_err(std::io::Error::other)?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }
    .await;
    pump.abort();
    ended
}
