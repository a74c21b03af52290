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
//! - One writer handle at a time in this process (a second would be refused as busy, like
//!   another process): a scan opens the store under `writer_lock` and closes it when done, so
//!   scans wait for each other, and other processes may read (or, between scans, write) the
//!   file. The read tools open their own read handle beside it (under `store_lock`, which no
//!   scan holds), so a read is answered while a scan runs, from the store's last fold.
//! - Store work never stalls the executor: on a multi-thread runtime (the one `scanledger mcp`
//!   builds) a scan's opens, checkpoints (their fsyncs), finish and read-back run in
//!   `blocking`, which hands the worker's other tasks to another thread first.
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
pub use proxy::{Proxy, ProxySession, SESSIONS_MAX};

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
    /// Held by a read tool while its read handle is open (never by a scan).
    store_lock: tokio::sync::Mutex<()>,
    /// Held by a scan while its writer handle is open: one writer at a time in this process.
    writer_lock: tokio::sync::Mutex<()>,
}

impl Server {
    /// A server over `options`.
    #[must_use]
    pub fn new(options: ServerOptions) -> Server {
        Server {
            shared: Arc::new(Shared {
                options,
                store_lock: tokio::sync::Mutex::new(()),
                writer_lock: tokio::sync::Mutex::new(()),
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

/// Runs blocking store work (an open, a checkpoint's fsync, a read-back) without stalling the
/// executor: on a multi-thread runtime the worker first hands its other tasks to another
/// thread (`block_in_place`); on a current-thread runtime it runs in place.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
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
