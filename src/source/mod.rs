//! Page sources: where pages come from. `replay:FILE` (a scripted scenario), `sim:` (a
//! deterministic generator for demos, benches and simulation tests), and with their default-on
//! features `postgres:CONFIG.json` (keyset pages of a table in one exported snapshot),
//! `mysql:CONFIG.json` (a MySQL/MariaDB table in one consistent snapshot),
//! `sqlite:CONFIG.json` (a SQLite table in one read transaction) — each SQL kind also inline,
//! without a file: `postgres://USER@HOST/DB?table=T&key=K`, `mysql://...?...`,
//! `sqlite:PATH?table=T&key=K` (`inline`, `sql::spec`) — and
//! `http:CONFIG.json` (a JSON HTTP API, through the shared response `mapping`) and
//! `mcp:CONFIG.json` (a paginated MCP tool or protocol list, through the same mapping).
//!
//! A source only fetches: it never decides completeness (that is `reconcile`) and never
//! retries (that is `collect`). Sources may sleep (`delay_ms`) through tokio's timer, which the
//! collector's timeouts bound.

use serde_json::Value;

use crate::contract::Page;
use crate::reconcile::Request;

mod error;
#[cfg(feature = "http")]
mod http;
mod inline;
pub(crate) use inline::scope_name as inline_scope_name;
pub mod mapping;
#[cfg(feature = "mcp")]
pub(crate) mod mcp;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
mod replay;
pub(crate) mod sim;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub(crate) mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "http",
    feature = "mcp"
))]
pub(crate) use error::config_error;
pub use error::SourceError;
#[cfg(feature = "http")]
pub use http::HttpSource;
pub use inline::{
    content_pairs, inline_content, inline_kind, recordable_spec, refuse_password,
    shown as shown_spec, spec_with_file, with_content,
};
#[cfg(feature = "mcp")]
pub use mcp::{ListKind as McpList, McpConfig, McpSource};
#[cfg(feature = "mysql")]
pub use mysql::{MysqlConfig, MysqlSource};
#[cfg(feature = "postgres")]
pub use postgres::PostgresSource;
pub use replay::ReplaySource;
pub use sim::{SimConfig, SimSource};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteSource;

/// One page request, exactly as the collector resends it on a retry.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRequest {
    /// What to fetch.
    pub request: Request,
    /// Items asked for.
    pub page_size: u32,
    /// The pinned snapshot, sent along when known.
    pub snapshot: Option<String>,
    /// The contract's query, sent on every page.
    pub query: Value,
}

/// Why a fetch produced no page.
#[derive(Debug)]
#[non_exhaustive]
pub enum FetchError {
    /// The source timed out (the collector's own timeout is separate and also counts).
    Timeout,
    /// The source answered with a server error; retried.
    ServerError,
    /// The source asked us to slow down (HTTP 429, or 503 with `Retry-After`): retried after
    /// at least `retry_after`, never past the deadline.
    Throttled {
        /// How long the source asked us to wait.
        retry_after: std::time::Duration,
    },
    /// The cursor expired (or the pinned snapshot can no longer be read); the contract's
    /// policy decides.
    ExpiredCursor,
    /// Access denied; not retried.
    Forbidden,
    /// The response is not a page the source's mapping can read (not JSON, a duplicate key,
    /// the items missing, a body over the size bound): `invalid_page` (R16), not retried.
    /// `detail` names what is wrong and where, never with a raw cursor or a secret.
    InvalidPage {
        /// What is wrong.
        detail: String,
    },
    /// The source cannot go on at all (a replay file without an answer, a configuration the
    /// server refuses): an input error.
    Fatal(SourceError),
}

/// A source of pages. Futures are `Send`, so a scan can run on a multi-threaded runtime.
pub trait PageSource {
    /// Fetches one page.
    fn fetch(
        &mut self,
        req: &PageRequest,
    ) -> impl std::future::Future<Output = Result<Page, FetchError>> + Send;

    /// An authorized server-side count of the scope, if the source offers one (`count` mode).
    fn count(&mut self) -> impl std::future::Future<Output = Option<u64>> + Send {
        std::future::ready(None)
    }

    /// Asks the source to keep each page's encoded content values (`Page::columns`, one record
    /// an item), when it can (the SQL sources); the default keeps none.
    fn digest_columns(&mut self) {}
}

/// Key ranges one re-read asks a SQL source for; more are merged into as many hulls (the rows
/// between them are read and ignored), so the statement stays small.
pub const KEY_RANGES_MAX: usize = 256;

/// A source named on the command line.
#[derive(Debug)]
pub enum AnySource {
    /// `replay:FILE`.
    Replay(ReplaySource),
    /// `sim:KEY=VALUE,...`.
    Sim(SimSource),
    /// `postgres:CONFIG.json`.
    #[cfg(feature = "postgres")]
    Postgres(Box<PostgresSource>),
    /// `http:CONFIG.json`.
    #[cfg(feature = "http")]
    Http(Box<HttpSource>),
    /// `mysql:CONFIG.json`.
    #[cfg(feature = "mysql")]
    Mysql(Box<MysqlSource>),
    /// `mcp:CONFIG.json`.
    #[cfg(feature = "mcp")]
    Mcp(Box<McpSource>),
    /// `sqlite:PATH?table=T&key=K` or `sqlite:CONFIG.json`.
    #[cfg(feature = "sqlite")]
    Sqlite(Box<SqliteSource>),
}

impl AnySource {
    /// Parses a `--source` argument and opens the source.
    ///
    /// # Errors
    /// `SourceError` for an unknown kind, an unreadable or malformed file, bad parameters.
    pub fn open(spec: &str) -> Result<AnySource, SourceError> {
        AnySource::open_for(spec, &crate::contract::Contract::new("-"))
    }

    /// Parses a `--source` argument and opens the source for `contract`, which a source may
    /// check its configuration against (an HTTP source with page-number pagination refuses an
    /// end signal it could show falsely). [`AnySource::open`] checks against the default
    /// contract.
    ///
    /// # Errors
    /// As [`AnySource::open`].
    pub fn open_for(
        spec: &str,
        contract: &crate::contract::Contract,
    ) -> Result<AnySource, SourceError> {
        // Every kind honours a contract's key range (a shard) or refuses it here, before
        // anything is recorded: a source that ignored it would be caught page by page (R16),
        // but never scan its shard.
        let key_range = contract.scope.key_range;
        #[cfg(feature = "http")]
        if let Some(path) = spec.strip_prefix("http:") {
            return Ok(AnySource::Http(Box::new(
                HttpSource::open(path.as_ref(), contract.end_signal)?
                    .with_key_range(path.as_ref(), key_range)?,
            )));
        }
        #[cfg(feature = "mcp")]
        if let Some(rest) = spec.strip_prefix("mcp:") {
            let path = without_provenance(rest);
            return Ok(AnySource::Mcp(Box::new(McpSource::open(
                path.as_ref(),
                contract,
            )?)));
        }
        if let Some(path) = spec.strip_prefix("replay:") {
            return Ok(AnySource::Replay(
                ReplaySource::open(path.as_ref())?.with_key_range(contract),
            ));
        }
        if let Some(params) = spec.strip_prefix("sim:") {
            return Ok(AnySource::Sim(
                SimSource::new(SimConfig::parse(params)?).with_key_range(key_range),
            ));
        }
        // A SQL kind: its config file, or its inline spec.
        let (scope, codec) = (&contract.scope, contract.id_codec);
        #[cfg(feature = "postgres")]
        if source_kind(spec) == Some("postgres") {
            return Ok(AnySource::Postgres(Box::new(
                PostgresSource::open_spec(spec)?.for_scope(scope, codec),
            )));
        }
        #[cfg(feature = "mysql")]
        if source_kind(spec) == Some("mysql") {
            return Ok(AnySource::Mysql(Box::new(
                MysqlSource::open_spec(spec)?.for_scope(scope, codec),
            )));
        }
        #[cfg(feature = "sqlite")]
        if source_kind(spec) == Some("sqlite") {
            return Ok(AnySource::Sqlite(Box::new(
                SqliteSource::open_spec(spec)?.for_scope(scope, codec),
            )));
        }
        let _ = (key_range, scope, codec);
        Err(SourceError::UnknownKind {
            spec: spec.chars().take(64).collect(),
        })
    }
}

impl AnySource {
    /// Opens a SQL source (`postgres:`, `mysql:` or `sqlite:`) narrowed to integer keys in `ranges`
    /// (ascending, disjoint, inclusive): the config's own scope, `AND` the key ranges. This is
    /// how `diff --reread` reads only the partitions whose content digests differ.
    ///
    /// # Errors
    /// As [`AnySource::open`]; `SourceError::Config` for a source that is not SQL.
    pub fn open_key_ranges(spec: &str, ranges: &[(u64, u64)]) -> Result<AnySource, SourceError> {
        let _ = ranges;
        #[cfg(feature = "postgres")]
        if source_kind(spec) == Some("postgres") {
            return Ok(AnySource::Postgres(Box::new(
                PostgresSource::open_spec(spec)?.narrowed(ranges),
            )));
        }
        #[cfg(feature = "mysql")]
        if source_kind(spec) == Some("mysql") {
            return Ok(AnySource::Mysql(Box::new(
                MysqlSource::open_spec(spec)?.narrowed(ranges),
            )));
        }
        #[cfg(feature = "sqlite")]
        if source_kind(spec) == Some("sqlite") {
            return Ok(AnySource::Sqlite(Box::new(
                SqliteSource::open_spec(spec)?.narrowed(ranges),
            )));
        }
        let kind = spec.split_once(':').map_or(spec, |(k, _)| k);
        let shown = inline::shown(spec);
        Err(SourceError::Config {
            path: shown
                .split_once(':')
                .map_or(shown.as_str(), |(_, p)| p)
                .chars()
                .take(256)
                .collect::<String>()
                .into(),
            problem: format!(
                "a re-read needs a postgres:, mysql: or sqlite: source (key ranges), not {}:",
                kind.chars().take(16).collect::<String>()
            ),
        })
    }
}

impl PageSource for AnySource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        match self {
            AnySource::Replay(s) => s.fetch(req).await,
            AnySource::Sim(s) => s.fetch(req).await,
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.fetch(req).await,
            #[cfg(feature = "http")]
            AnySource::Http(s) => s.fetch(req).await,
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.fetch(req).await,
            #[cfg(feature = "mcp")]
            AnySource::Mcp(s) => s.fetch(req).await,
            #[cfg(feature = "sqlite")]
            AnySource::Sqlite(s) => s.fetch(req).await,
        }
    }

    async fn count(&mut self) -> Option<u64> {
        match self {
            AnySource::Replay(s) => s.count().await,
            AnySource::Sim(s) => s.count().await,
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.count().await,
            #[cfg(feature = "http")]
            AnySource::Http(s) => s.count().await,
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.count().await,
            #[cfg(feature = "mcp")]
            AnySource::Mcp(s) => s.count().await,
            #[cfg(feature = "sqlite")]
            AnySource::Sqlite(s) => s.count().await,
        }
    }

    fn digest_columns(&mut self) {
        match self {
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.digest_columns(),
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.digest_columns(),
            #[cfg(feature = "sqlite")]
            AnySource::Sqlite(s) => s.digest_columns(),
            _ => {}
        }
    }
}

/// What a recorded `mcp:` source spec appends after its path: the server it spoke to.
pub const PROVENANCE_MARK: &str = "#server=";

/// A recorded spec's path without the provenance a run appended to it.
/// The prefix of the ID of a MySQL/MariaDB snapshot synchronized by a coordinator's read lock
/// (`plan --hold-snapshot` on a `mysql:` source): each shard held its own snapshot of one
/// state, and none outlives its shard.
pub(crate) const SYNC_SNAPSHOT_PREFIX: &str = "mysql-sync:";

/// The kinds of source a spec names before its colon (`mysql:orders.json`, `sim:records=10`),
/// as [`AnySource::open`] reads them; a build without a kind's feature refuses it there.
pub const SOURCE_KINDS: &[&str] = &[
    "replay", "sim", "postgres", "mysql", "sqlite", "http", "mcp",
];

/// The kinds whose spec names a file after the colon (a replay or a config file, or an inline
/// `sqlite:` spec's database); `sim:` takes parameters instead.
const FILE_KINDS: &[&str] = &["replay", "postgres", "mysql", "sqlite", "http", "mcp"];

/// The kind a source spec names, when it names one and something after its colon:
/// `Some("mysql")` for `mysql:orders.json` and for an inline `mysql://root@h/db?table=t&key=id`
/// (`Some("postgres")` for `postgresql://...` too); `None` for `run-3`, `oracle:x` or `mysql:`.
#[must_use]
pub fn source_kind(spec: &str) -> Option<&'static str> {
    if let Some(kind) = inline::inline_kind(spec) {
        return Some(kind);
    }
    let (kind, rest) = spec.split_once(':')?;
    let kind = SOURCE_KINDS.iter().find(|k| **k == kind)?;
    (!rest.is_empty()).then_some(*kind)
}

/// The file a file-backed spec names, with its kind, as [`AnySource::open`] reads it:
/// `("mysql", "orders.json")` for `mysql:orders.json`; a recorded `mcp:` spec's provenance
/// ([`PROVENANCE_MARK`]) is not part of its path; `("sqlite", "a.db")` for the inline
/// `sqlite:a.db?table=t&key=id`. `None` for `sim:`, for an inline `postgres://` or `mysql://`
/// spec (it names no file) and for a spec of no kind.
#[must_use]
pub fn spec_file(spec: &str) -> Option<(&'static str, &str)> {
    let kind = source_kind(spec)?;
    if let Some(file) = inline::sqlite_file(spec) {
        return Some((kind, file));
    }
    if !FILE_KINDS.contains(&kind) || inline::inline_kind(spec).is_some() {
        return None;
    }
    let rest = &spec[kind.len() + 1..];
    Some((
        kind,
        if kind == "mcp" {
            without_provenance(rest)
        } else {
            rest
        },
    ))
}

fn without_provenance(rest: &str) -> &str {
    rest.rfind(PROVENANCE_MARK).map_or(rest, |i| &rest[..i])
}

impl AnySource {
    /// Makes the source ready before a run begins: an MCP source starts or reaches its
    /// server now, and a SQL source checks its config against the server's catalogue (the
    /// table, the key's unique index, the columns, the predicates), so a server that cannot be
    /// had or a config it refuses is an error before anything is recorded. Other sources have
    /// nothing to do.
    ///
    /// # Errors
    /// `SourceError` when the source cannot be made ready.
    pub async fn prepare(&mut self) -> Result<(), SourceError> {
        match self {
            #[cfg(feature = "mcp")]
            AnySource::Mcp(s) => s.prepare().await,
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.preflight().await,
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.preflight().await,
            #[cfg(feature = "sqlite")]
            AnySource::Sqlite(s) => s.preflight().await,
            _ => Ok(()),
        }
    }

    /// What the source says about itself, for the run's record: an MCP server's name and
    /// version once connected (`None` for other sources).
    #[must_use]
    pub fn provenance(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "mcp")]
            AnySource::Mcp(s) => s.server(),
            _ => None,
        }
    }

    /// `spec` as a run records it: with the provenance appended after [`PROVENANCE_MARK`]
    /// when the source has one (`mcp:/abs/cfg.json#server=NAME VERSION`); opening the
    /// recorded spec ignores it.
    #[must_use]
    pub fn recorded_spec(&self, spec: &str) -> String {
        match self.provenance() {
            Some(p) if spec.starts_with("mcp:") => {
                format!("{}{PROVENANCE_MARK}{p}", without_provenance(spec))
            }
            _ => spec.to_owned(),
        }
    }

    /// The smallest and largest key of the scope, where the source has statistics to say
    /// (`sim:`, and PostgreSQL and MySQL tables with an integer key); `plan` cuts shards of
    /// equal width between them. `Ok(None)`: no statistics (or an empty scope).
    ///
    /// # Errors
    /// `FetchError` when the source cannot be asked.
    pub async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        match self {
            AnySource::Sim(s) => Ok(s.key_bounds()),
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.key_bounds().await,
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.key_bounds().await,
            #[cfg(feature = "sqlite")]
            AnySource::Sqlite(s) => s.key_bounds().await,
            _ => Ok(None),
        }
    }

    /// IDs that cut the rows with IDs in `lo..=last` into `n` parts of about equal counts,
    /// from the source's statistics of its key (PostgreSQL's `pg_stats` histogram,
    /// a strided sample of a MySQL/MariaDB table's keys), and how they were found, for `plan`
    /// (`shard::split_at`); `Ok(None)`: no statistics, and `plan` cuts equal widths.
    ///
    /// # Errors
    /// `FetchError` when the source cannot be asked.
    pub async fn key_cuts(
        &mut self,
        lo: u64,
        last: u64,
        n: u32,
    ) -> Result<Option<(&'static str, Vec<u64>)>, FetchError> {
        let _ = (lo, last, n);
        match self {
            #[cfg(feature = "postgres")]
            AnySource::Postgres(s) => s.key_cuts(lo, last, n).await,
            #[cfg(feature = "mysql")]
            AnySource::Mysql(s) => s.key_cuts(lo, last, n).await,
            _ => Ok(None),
        }
    }

    /// Releases what the source holds (an MCP server's child process is asked to exit).
    pub async fn close(&mut self) {
        #[cfg(feature = "mcp")]
        if let AnySource::Mcp(s) = self {
            s.close().await;
        }
    }
}

#[cfg(test)]
mod spec_tests {
    use super::{source_kind, spec_file};

    #[test]
    fn a_spec_names_a_kind_and_a_file_backed_kind_its_file() {
        assert_eq!(source_kind("mysql:orders.json"), Some("mysql"));
        assert_eq!(source_kind("sim:records=10"), Some("sim"));
        assert_eq!(source_kind("run-3"), None);
        assert_eq!(source_kind("oracle:x.json"), None);
        assert_eq!(source_kind("mysql:"), None);
        assert_eq!(
            spec_file("replay:/a/p.jsonl"),
            Some(("replay", "/a/p.jsonl"))
        );
        assert_eq!(
            spec_file("mcp:c.json#server=x 1.0"),
            Some(("mcp", "c.json"))
        );
        assert_eq!(
            spec_file("replay:p#server=x"),
            Some(("replay", "p#server=x"))
        );
        assert_eq!(spec_file("sim:records=10"), None);
        assert_eq!(
            source_kind("postgresql://u@h/db?table=t&key=id"),
            Some("postgres")
        );
        assert_eq!(
            source_kind("mysql://root@h/db?table=t&key=id"),
            Some("mysql")
        );
        assert_eq!(source_kind("sqlite:a.db?table=t&key=id"), Some("sqlite"));
        assert_eq!(spec_file("mysql://root@h/db?table=t&key=id"), None);
        assert_eq!(spec_file("sqlite:a.db?table=t"), Some(("sqlite", "a.db")));
        assert_eq!(spec_file("sqlite:c.json"), Some(("sqlite", "c.json")));
        assert_eq!(
            super::spec_with_file("sqlite:a.db?table=t", std::path::Path::new("/x/a.db")),
            "sqlite:/x/a.db?table=t"
        );
    }
}
