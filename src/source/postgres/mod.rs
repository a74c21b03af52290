//! `postgres:CONFIG.json`: keyset pages of one table inside one pinned snapshot.
//!
//! Owns one connection and one `REPEATABLE READ, READ ONLY` transaction per run; the
//! transaction's `pg_export_snapshot()` names the snapshot every page echoes. It never
//! decides completeness (the reconciler does), never retries (the collector does) and never
//! writes to the database. It spawns no task: the connection is driven inside each call,
//! beside the query it serves.
//!
//! Invariants:
//! - A page is served only from a transaction whose snapshot is the one the page echoes, so
//!   a page that echoes the pinned snapshot was read in it.
//! - A continuation (`Request::Cursor`) is served only from the snapshot the request names
//!   (held by this source, or by another session that exported it); when that snapshot is
//!   gone (the process died, the connection broke) the answer is `ExpiredCursor` and the
//!   contract's policy decides. Only a fresh request (`Request::After`, the `high_water`
//!   policy) may open a newer snapshot, and its pages echo that newer snapshot, so a spliced
//!   scan is never presented as pinned.
//! - The end of the scan is a page query that found no row past the page (`LIMIT n + 1`),
//!   never a short page.
//! - The DSN's password never reaches a log, an error, a receipt or `Debug`.

mod config;
mod page;
mod plan;
mod sql;
#[cfg(test)]
mod tests;
mod tls;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use self::config::PgConfig;
use self::sql::{ContentKind, KeyKind};
use super::{FetchError, PageRequest, PageSource};
use crate::contract::Page;
use crate::error::SourceError;
use crate::reconcile::Request;

/// The connection's stream: TLS through rustls when `sslmode` asks for it.
type TlsStream =
    <tokio_postgres_rustls::MakeRustlsConnect as tokio_postgres::tls::MakeTlsConnect<
        tokio_postgres::Socket,
    >>::Stream;
type Connection = tokio_postgres::Connection<tokio_postgres::Socket, TlsStream>;

/// A PostgreSQL table as a page source (`postgres:CONFIG.json`, docs/guide-postgres.md).
///
/// Opening reads the config (and the DSN from `dsn_env`) but does not connect: the first
/// page (or `count`) connects, inside the caller's runtime.
pub struct PostgresSource {
    config: PgConfig,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    session: Option<Session>,
    /// A shard's key range, as the statements' bounds: first key and last key (inclusive).
    key_range: Option<(i64, i64)>,
}

impl std::fmt::Debug for PostgresSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSource")
            .field("config", &self.config)
            .field("connected", &self.session.is_some())
            .finish_non_exhaustive()
    }
}

/// One connection, its prepared statements and its open transaction.
struct Session {
    /// Shared with a prefetched page's future, which must own what it borrows.
    client: Arc<Client>,
    connection: Pin<Box<Connection>>,
    plan: Option<Plan>,
    txn: Option<Txn>,
    /// The next page, already asked of the server (see `page::Prefetch`).
    prefetch: Option<page::Prefetch>,
}

/// The prepared statements of one session and how to read their rows.
struct Plan {
    key: KeyKind,
    content: Vec<ContentKind>,
    first: Statement,
    after: Statement,
    count: Statement,
    /// Present when the key column is nullable: a NULL key cannot be reached by key.
    null_keys: Option<Statement>,
}

/// The open transaction.
struct Txn {
    /// The snapshot its pages echo.
    snapshot: String,
    /// The snapshot a `high_water` continuation replaced: requests still name it.
    replaces: Option<String>,
    /// The NULL-key check ran in this snapshot.
    keys_checked: bool,
}

/// Why a call to the server produced nothing.
enum Failure {
    /// The server answered with an error, or the client failed.
    Query(tokio_postgres::Error),
    /// The connection ended (closed, reset) while a call was waiting.
    Ended,
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        Failure::Query(e)
    }
}

/// Runs one client call through [`drive`] on the session, classifying a failure (which may
/// drop the transaction or the session): `call!(self, "what", |client| future)`.
macro_rules! call {
    ($source:ident, $doing:expr, |$client:ident| $body:expr) => {{
        let result = match $source.session.as_mut() {
            Some(s) => {
                let $client = &s.client;
                drive(&mut s.connection, $body).await
            }
            None => Err(Failure::Ended),
        };
        result.map_err(|f| $source.classify(f, $doing))
    }};
}
use call;

/// Polls `fut` and the connection together, so the client's requests are written and the
/// server's answers read without a spawned task. When the connection ends first, the session
/// is unusable and the caller drops it.
async fn drive<T>(
    connection: &mut Pin<Box<Connection>>,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, Failure> {
    tokio::select! {
        biased;
        out = fut => out.map_err(Failure::Query),
        _ = connection.as_mut() => Err(Failure::Ended),
    }
}

impl PostgresSource {
    /// Reads a `postgres:` config file.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable, `SourceError::Config` naming the key that is wrong
    /// (an unknown key, a missing DSN, an `sslrootcert` that is not PEM, ...).
    pub fn open(path: &Path) -> Result<PostgresSource, SourceError> {
        PostgresSource::with_config(path, PgConfig::open(path)?)
    }

    /// Reads the config file and narrows its scope to integer keys in `ranges` (ascending,
    /// disjoint, inclusive): the config's `where`, `AND` the ranges.
    ///
    /// # Errors
    /// As [`PostgresSource::open`].
    pub fn open_key_ranges(
        path: &Path,
        ranges: &[(u64, u64)],
    ) -> Result<PostgresSource, SourceError> {
        let mut config = PgConfig::open(path)?;
        let sql = super::key_ranges_sql(&config::quote_ident(&config.key), ranges);
        config.where_sql = Some(super::narrowed(config.where_sql.as_deref(), &sql));
        PostgresSource::with_config(path, config)
    }

    fn with_config(path: &Path, config: PgConfig) -> Result<PostgresSource, SourceError> {
        let tls =
            tls::connector(config.rootcert.as_deref()).map_err(|problem| SourceError::Config {
                path: path.to_owned(),
                problem,
            })?;
        Ok(PostgresSource {
            config,
            tls,
            session: None,
            key_range: None,
        })
    }

    /// Serves only the keys of `range` (a shard's contract): `WHERE key >= lo AND key < hi`
    /// with bound parameters. A key column that is not an integer is refused at the first
    /// page.
    #[must_use]
    pub fn with_key_range(mut self, range: Option<crate::contract::KeyRange>) -> PostgresSource {
        self.key_range = range.map(|r| range_bounds(r.lo, r.hi));
        self
    }

    /// The parameters the statements take after their own: the key range's bounds.
    fn range_params(&self) -> Vec<i64> {
        self.key_range
            .map_or_else(Vec::new, |(lo, last)| vec![lo, last])
    }

    fn fatal(&self, problem: String) -> FetchError {
        FetchError::Fatal(SourceError::Config {
            path: self.config.path.clone(),
            problem: format!("table {}: {problem}", self.config.table),
        })
    }

    /// Maps a failure to what the collector should do; a failure that may have broken the
    /// transaction drops it (and a broken connection drops the session), so the next
    /// attempt either re-attaches to the snapshot or says it expired.
    fn classify(&mut self, failure: Failure, doing: &str) -> FetchError {
        let e = match failure {
            Failure::Ended => {
                self.session = None;
                return FetchError::ServerError;
            }
            Failure::Query(e) => e,
        };
        if e.is_closed() || e.code().is_none() {
            // Not an answer of the server: the session cannot be trusted any more.
            self.session = None;
            // The driver's kinds are only told apart by their text. A refused certificate
            // or an unusable configuration does not heal by retrying; I/O trouble may.
            let shown = e.to_string();
            if shown.starts_with("error performing TLS handshake")
                || shown.starts_with("invalid configuration")
            {
                return self.fatal(format!("{doing}: {}", chain(&e)));
            }
            if shown.starts_with("authentication error") {
                return FetchError::Forbidden;
            }
            return FetchError::ServerError;
        }
        if let Some(s) = self.session.as_mut() {
            s.txn = None;
            s.prefetch = None;
        }
        let code = e.code().cloned().unwrap_or(SqlState::INTERNAL_ERROR);
        let message = e
            .as_db_error()
            .map_or_else(|| e.to_string(), |d| d.message().to_owned());
        match code.code() {
            // Insufficient privilege; invalid authorization, invalid password.
            "42501" | "28000" | "28P01" => FetchError::Forbidden,
            // Query cancelled (statement_timeout), lock timeout.
            "57014" | "55P03" => FetchError::Timeout,
            c if c.starts_with("08")      // connection exception
                || c.starts_with("40")    // serialization failure, deadlock
                || c.starts_with("53")    // insufficient resources
                || c.starts_with("57")    // operator intervention (shutdown, recovery conflict)
                || c.starts_with("58") =>
            // system error (I/O)
            {
                FetchError::ServerError
            }
            _ => self.fatal(format!("{doing}: {message} (SQLSTATE {})", code.code())),
        }
    }

    async fn connect(&mut self) -> Result<(), FetchError> {
        if self.session.is_some() {
            return Ok(());
        }
        match self.config.connect.connect(self.tls.clone()).await {
            Ok((client, connection)) => {
                self.session = Some(Session {
                    client: Arc::new(client),
                    connection: Box::pin(connection),
                    plan: None,
                    txn: None,
                    prefetch: None,
                });
                Ok(())
            }
            Err(e) => Err(self.classify(Failure::Query(e), "connecting")),
        }
    }

    /// Makes the session's transaction the one `req` may be served from, opening or
    /// importing a snapshot as the module's invariants say.
    async fn transaction(
        &mut self,
        request: &Request,
        snapshot: Option<&str>,
    ) -> Result<(), FetchError> {
        self.connect().await?;
        let Some(s) = self.session.as_mut() else {
            return Err(FetchError::ServerError);
        };
        if let Some(txn) = &s.txn {
            let usable = match snapshot {
                None => true,
                Some(named) => txn.snapshot == named || txn.replaces.as_deref() == Some(named),
            };
            if usable {
                return Ok(());
            }
            s.txn = None;
            s.prefetch = None;
        }
        let imported = match snapshot {
            Some(named) => self.import(named).await?,
            None => false,
        };
        if imported {
            return Ok(());
        }
        match (request, snapshot) {
            (_, None) => self.export(None).await,
            (Request::After(_), Some(named)) => self.export(Some(named.to_owned())).await,
            // A continuation or a first page that names a snapshot nobody holds any more.
            (_, Some(_)) => Err(FetchError::ExpiredCursor),
        }
    }

    /// Opens a transaction in a fresh snapshot and exports it.
    async fn export(&mut self, replaces: Option<String>) -> Result<(), FetchError> {
        let begin = format!("ROLLBACK; {BEGIN}");
        call!(self, "opening a snapshot", |c| c.batch_execute(&begin))?;
        let row = call!(self, "exporting the snapshot", |c| c.query_one(EXPORT, &[]))?;
        let id: String = row.get(0);
        let start: i64 = row.get(1);
        if let Some(s) = self.session.as_mut() {
            s.txn = Some(Txn {
                snapshot: format!("{id}@{start}"),
                replaces,
                keys_checked: false,
            });
        }
        Ok(())
    }

    /// Tries to open a transaction in the snapshot `named` (`ID` as `pg_export_snapshot()`
    /// gives it, or `ID@START` as this source echoes it). Ok(false) when it cannot be held.
    async fn import(&mut self, named: &str) -> Result<bool, FetchError> {
        let (id, start) = match named.split_once('@') {
            Some((id, start)) => match start.parse::<i64>() {
                Ok(start) => (id, Some(start)),
                Err(_) => return Ok(false),
            },
            None => (named, None),
        };
        // Validated, so it can be written into the statement as a literal.
        if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        {
            return Ok(false);
        }
        let batch = format!("ROLLBACK; {BEGIN}; SET TRANSACTION SNAPSHOT '{id}'");
        let result = match self.session.as_mut() {
            Some(s) => drive(&mut s.connection, s.client.batch_execute(&batch)).await,
            None => Err(Failure::Ended),
        };
        match result {
            Ok(()) => {}
            Err(Failure::Query(e)) if e.as_db_error().is_some() => {
                // No live transaction exports that snapshot (or it is from another
                // database): it cannot be held. The aborted transaction ends at the next
                // open, which begins with ROLLBACK.
                return Ok(false);
            }
            Err(f) => return Err(self.classify(f, "importing the snapshot")),
        }
        // The ID alone repeats after a server restart; the server's start time tells the
        // snapshot this source exported from a namesake.
        let row = call!(self, "importing the snapshot", |c| c.query_one(START, &[]))?;
        let now: i64 = row.get(0);
        if start.is_some_and(|start| start != now) {
            return Ok(false);
        }
        if let Some(s) = self.session.as_mut() {
            s.txn = Some(Txn {
                snapshot: named.to_owned(),
                replaces: None,
                keys_checked: false,
            });
        }
        Ok(true)
    }
}

impl PostgresSource {
    /// Opens (and exports) the run's snapshot now and keeps it open for as long as this
    /// source lives: a coordinator's snapshot (`plan --hold-snapshot`), which every shard's
    /// source imports (`SET TRANSACTION SNAPSHOT`). Returns its ID as pages echo it.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses.
    pub async fn hold_snapshot(&mut self) -> Result<String, FetchError> {
        self.transaction(&Request::First, None).await?;
        self.session
            .as_ref()
            .and_then(|s| s.txn.as_ref())
            .map(|t| t.snapshot.clone())
            .ok_or(FetchError::ServerError)
    }

    /// Checks that the held snapshot is still open (one `SELECT 1` in its transaction).
    ///
    /// # Errors
    /// `FetchError` when the connection or its transaction is gone.
    pub async fn keep_alive(&mut self) -> Result<(), FetchError> {
        if self.session.as_ref().and_then(|s| s.txn.as_ref()).is_none() {
            return Err(FetchError::ExpiredCursor);
        }
        call!(self, "keeping the snapshot", |c| c
            .batch_execute("SELECT 1"))?;
        Ok(())
    }

    /// The smallest and largest key of the scope in the current (or a fresh) snapshot, for
    /// `plan`; `None` for an empty scope or a key that is not an integer.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the query.
    pub async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        self.transaction(&Request::First, None).await?;
        self.plan().await?;
        let key = self
            .session
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .map(|p| p.key);
        if !matches!(key, Some(KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8)) {
            return Ok(None);
        }
        let text = sql::bounds(&self.config);
        let row = call!(self, "reading the key's bounds", |c| c
            .query_one(&text, &[]))?;
        let lo: Option<i64> = row.get(0);
        let hi: Option<i64> = row.get(1);
        // A negative key is below every ID: the span starts at 0.
        Ok(match (lo, hi) {
            (Some(lo), Some(hi)) if hi >= 0 => Some((
                u64::try_from(lo).unwrap_or(0),
                u64::try_from(hi).unwrap_or(0),
            )),
            _ => None,
        })
    }
}

/// A half-open u64 range as inclusive bounds of an `int8` key: `[lo, hi)` is
/// `lo <= key <= hi - 1`; a range past `i64::MAX` holds no `int8`, so it becomes an empty one.
pub(crate) fn range_bounds(lo: u64, hi: u64) -> (i64, i64) {
    match (i64::try_from(lo), hi.checked_sub(1)) {
        (Ok(lo), Some(last)) => (lo, i64::try_from(last).unwrap_or(i64::MAX)),
        // No key of the column is in the range: 0 <= key <= -1 holds for none.
        _ => (0, -1),
    }
}

/// An error and its causes, `: `-separated. The driver's messages never hold the DSN.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    // Bound: error chains are short; eight links is more than any driver makes.
    for _ in 0..8 {
        let Some(c) = cause else { break };
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// The transaction of a run: a stable snapshot, and no write possible.
const BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
/// The server's start, in microseconds since the Unix epoch.
const START: &str =
    "SELECT (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) * 1000000)::int8";
const EXPORT: &str = "SELECT pg_catalog.pg_export_snapshot(), \
    (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) * 1000000)::int8";

impl PageSource for PostgresSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if !self.config.page_delay.is_zero() {
            tokio::time::sleep(self.config.page_delay).await;
        }
        self.transaction(&req.request, req.snapshot.as_deref())
            .await?;
        self.plan().await?;
        self.page(req).await
    }

    async fn count(&mut self) -> Option<u64> {
        // Any failure means "no server count": the collector then traverses fully.
        self.transaction(&Request::First, None).await.ok()?;
        self.plan().await.ok()?;
        let stmt = self.session.as_ref()?.plan.as_ref()?.count.clone();
        let range = self.range_params();
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = range
            .iter()
            .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        let row = call!(self, "counting", |c| c.query_one(&stmt, &params)).ok()?;
        u64::try_from(row.try_get::<_, i64>(0).ok()?).ok()
    }
}
