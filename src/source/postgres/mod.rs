//! `postgres:CONFIG.json`: the PostgreSQL dialect of the SQL core (`source::sql`).
//!
//! Owns one connection and one `REPEATABLE READ, READ ONLY` transaction per run; the
//! transaction's `pg_export_snapshot()` names the snapshot every page echoes, and another
//! session (a shard's) can import it. Pages come as rows (`page.rs`), the
//! catalogue from `probe.rs`, values from `value.rs`. It spawns no task: the connection is
//! driven inside each call, beside the query it serves.
//!
//! Invariants:
//! - A page is served only from a transaction whose snapshot is the one the page echoes, so
//!   a page that echoes the pinned snapshot was read in it.
//! - A continuation is served only from the snapshot the request names (held by this source,
//!   or by another session that exported it); when that snapshot is gone (the process died,
//!   the connection broke) the answer is `ExpiredCursor` (`sql::dialect::decide`).
//! - The DSN's password never reaches a log, an error, a receipt or `Debug`.

mod connect;
mod page;
mod probe;
#[cfg(test)]
mod tests;
mod tls;
mod value;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Statement};

use self::connect::{quote_ident, PgConnect};
use self::value::ContentKind;
use super::sql::dialect::{
    decide, Catalogue, Dialect, Fatal, Held, Holding, NameError, Otherwise, ParamKind, Step, Stmt,
    StmtId, TableName, Target, Want,
};
use super::sql::key::{KeyType, Param};
use super::sql::rows::PageRows;
use super::sql::SqlSource;
use super::{FetchError, PageRequest, PageSource};
use crate::contract::{IdCodecKind, Page, Scope};
use crate::error::SourceError;

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
#[derive(Debug)]
pub struct PostgresSource(SqlSource<PgDialect>);

/// The PostgreSQL dialect: the connection options and the session.
pub(crate) struct PgDialect {
    connect: PgConnect,
    fatal: Fatal,
    session: Option<Session>,
    /// How each content column is read (from the catalogue).
    kinds: Vec<ContentKind>,
    /// The bits of an integer key (16, 32 or 64).
    key_bits: u32,
    /// Rises with every transaction begun or imported.
    generation: u64,
}

/// One connection, its prepared statements and its open transaction.
struct Session {
    /// Shared with a prefetched page's future, which must own what it borrows.
    client: Arc<Client>,
    connection: Pin<Box<Connection>>,
    statements: Vec<(StmtId, Statement)>,
    txn: Option<Txn>,
    /// The next page, already asked of the server (see `page::Prefetch`).
    prefetch: Option<page::Prefetch>,
}

/// The open transaction.
struct Txn {
    /// The snapshot its pages echo.
    snapshot: String,
    /// The snapshot a `high_water` continuation replaced: requests still name it.
    replaces: Option<String>,
    /// A page was served from it.
    served: bool,
    generation: u64,
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
    /// `SourceError::Io` when unreadable, `SourceError::ConfigFile` naming the key that is wrong
    /// (an unknown key, a missing DSN, an `sslrootcert` that is not PEM, ...).
    pub fn open(path: &Path) -> Result<PostgresSource, SourceError> {
        Ok(PostgresSource(SqlSource::open(path)?))
    }

    /// Opens `postgres:CONFIG.json` or an inline `postgres://USER@HOST/DB?table=T&key=K`.
    pub(crate) fn open_spec(spec: &str) -> Result<PostgresSource, SourceError> {
        Ok(PostgresSource(SqlSource::open_spec(spec)?))
    }

    /// Narrowed to integer keys in `ranges` (a re-read).
    pub(crate) fn narrowed(self, ranges: &[(u64, u64)]) -> PostgresSource {
        PostgresSource(self.0.narrowed(ranges))
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
        Ok(PostgresSource(SqlSource::open_key_ranges(path, ranges)?))
    }

    /// Serves only the keys of `range` (a shard's contract, IDs of the `int` codec):
    /// `WHERE key >= lo AND key <= hi - 1` with bound parameters. A key column that is not an
    /// integer is refused at the first page.
    #[must_use]
    pub fn with_key_range(self, range: Option<crate::contract::KeyRange>) -> PostgresSource {
        PostgresSource(self.0.with_key_range(range))
    }

    /// Serves a contract's scope (its key range, under its codec).
    pub(crate) fn for_scope(self, scope: &Scope, codec: IdCodecKind) -> PostgresSource {
        PostgresSource(self.0.for_scope(scope, codec))
    }

    /// Opens (and exports) the run's snapshot now and keeps it open for as long as this
    /// source lives: a coordinator's snapshot (`plan --hold-snapshot`), which every shard's
    /// source imports (`SET TRANSACTION SNAPSHOT`). Returns its ID as pages echo it.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses.
    pub async fn hold_snapshot(&mut self) -> Result<String, FetchError> {
        self.0.hold().await?.ok_or(FetchError::ServerError)
    }

    /// Checks that the held snapshot is still open (one `SELECT 1` in its transaction).
    ///
    /// # Errors
    /// `FetchError` when the connection or its transaction is gone.
    pub async fn keep_alive(&mut self) -> Result<(), FetchError> {
        let d = self.0.dialect_mut();
        if d.session.as_ref().and_then(|s| s.txn.as_ref()).is_none() {
            return Err(FetchError::ExpiredCursor);
        }
        call!(d, "keeping the snapshot", |c| c.batch_execute("SELECT 1"))?;
        Ok(())
    }

    /// The server's limits on the held transaction, in milliseconds, as this session sees them
    /// (role and database settings included): `idle_in_transaction_session_timeout` (a ping
    /// inside it keeps the transaction) and `transaction_timeout` (PostgreSQL 17; no ping
    /// helps), each `None` when 0 (off) or unknown to the server.
    ///
    /// # Errors
    /// `FetchError` when the connection or its transaction is gone.
    pub async fn hold_limits(&mut self) -> Result<(Option<u64>, Option<u64>), FetchError> {
        const SQL: &str = "SELECT current_setting('idle_in_transaction_session_timeout', true), \
                           current_setting('transaction_timeout', true)";
        let d = self.0.dialect_mut();
        if d.session.as_ref().and_then(|s| s.txn.as_ref()).is_none() {
            return Err(FetchError::ExpiredCursor);
        }
        let rows = call!(d, "reading the session's timeouts", |c| c.simple_query(SQL))?;
        let row = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        });
        let ms = |i: usize| row.and_then(|r| r.get(i)).and_then(setting_ms);
        Ok((ms(0), ms(1)))
    }

    /// The smallest and largest key of the scope in the current (or a fresh) snapshot, for
    /// `plan`; `None` for an empty scope or a key that is not an integer.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the query.
    pub async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        self.0.key_bounds().await
    }

    /// IDs that cut the scope's rows in `lo..=last` into `n` parts of about equal counts,
    /// from the server's statistics of the key, and how they were found; `None` when it has
    /// none.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the query.
    pub async fn key_cuts(
        &mut self,
        lo: u64,
        last: u64,
        n: u32,
    ) -> Result<Option<(&'static str, Vec<u64>)>, FetchError> {
        self.0.key_cuts(lo, last, n).await
    }
}

impl PostgresSource {
    /// Checks the config against the server's catalogue (table, key, columns, predicates)
    /// before a run begins.
    ///
    /// # Errors
    /// `SourceError::Config` naming what the server refused; a failure that may heal is left
    /// to the first page.
    pub async fn preflight(&mut self) -> Result<(), SourceError> {
        self.0.preflight().await
    }
}

impl PageSource for PostgresSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        self.0.fetch(req).await
    }

    async fn count(&mut self) -> Option<u64> {
        self.0.count().await
    }

    fn digest_columns(&mut self) {
        self.0.digest_columns = true;
    }
}

impl PgDialect {
    fn fatal(&self, problem: impl std::fmt::Display) -> FetchError {
        self.fatal.error(problem)
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
        let connected = self.connect.config.connect(self.connect.tls.clone()).await;
        match connected {
            Ok((client, connection)) => {
                self.session = Some(Session {
                    client: Arc::new(client),
                    connection: Box::pin(connection),
                    statements: Vec::new(),
                    txn: None,
                    prefetch: None,
                });
                Ok(())
            }
            Err(e) => Err(self.classify(Failure::Query(e), "connecting")),
        }
    }

    fn begun(&mut self, snapshot: String, replaces: Option<String>) {
        self.generation = self.generation.saturating_add(1);
        let generation = self.generation;
        if let Some(s) = self.session.as_mut() {
            s.txn = Some(Txn {
                snapshot,
                replaces,
                served: false,
                generation,
            });
        }
    }

    /// Opens a transaction in a fresh snapshot and exports it.
    async fn export(&mut self, replaces: Option<String>) -> Result<(), FetchError> {
        let begin = format!("ROLLBACK; {BEGIN}");
        call!(self, "opening a snapshot", |c| c.batch_execute(&begin))?;
        let row = call!(self, "exporting the snapshot", |c| c.query_one(EXPORT, &[]))?;
        let id: String = row.get(0);
        let start: i64 = row.get(1);
        self.begun(format!("{id}@{start}"), replaces);
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
        self.begun(named.to_owned(), None);
        Ok(true)
    }

    /// The session's prepared statement for `stmt`, prepared once per session.
    async fn prepared(&mut self, stmt: &Stmt, doing: &str) -> Result<Statement, FetchError> {
        if let Some((_, s)) = self
            .session
            .as_ref()
            .and_then(|s| s.statements.iter().find(|(id, _)| *id == stmt.id))
        {
            return Ok(s.clone());
        }
        let prepared = call!(self, doing, |c| c.prepare(&stmt.text))?;
        if let Some(s) = self.session.as_mut() {
            s.statements.push((stmt.id, prepared.clone()));
        }
        Ok(prepared)
    }
}

/// An error and its causes, `: `-separated. The driver's messages never hold the DSN.
/// A duration setting as `SHOW` prints it (`0`, `250ms`, `5s`, `2min`, `1h`, `1d`; a bare
/// number is milliseconds), in milliseconds; `None` for 0 (off) or a form not understood.
fn setting_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: u64 = text.get(..digits)?.parse().ok()?;
    let per: u64 = match text.get(digits..)?.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(per).filter(|ms| *ms > 0)
}

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

impl Dialect for PgDialect {
    type Connect = PgConnect;
    const KIND: &'static str = "postgres";
    const CURSOR_TAG: &'static str = "k1:";
    const KEY_TYPES: &'static str = "smallint, integer, bigint, text, varchar or uuid";

    fn new(connect: PgConnect, fatal: Fatal) -> PgDialect {
        PgDialect {
            connect,
            fatal,
            session: None,
            kinds: Vec::new(),
            key_bits: 64,
            generation: 0,
        }
    }

    fn quote(name: &str) -> String {
        quote_ident(name)
    }

    fn param(n: usize, kind: ParamKind) -> String {
        match kind {
            ParamKind::Count | ParamKind::Key(KeyType::Int { .. }) => format!("${n}::int8"),
            ParamKind::Key(KeyType::Text) => format!("${n}::text"),
            ParamKind::Key(KeyType::Uuid) => format!("${n}::text::uuid"),
        }
    }

    fn text_of(expr: &str) -> String {
        format!("({expr})::text")
    }

    fn label(predicate: &str) -> String {
        format!("(({predicate}\n) IS TRUE)")
    }

    fn table(text: &str, _: &PgConnect) -> Result<TableName, NameError> {
        connect::table(text).map_err(NameError)
    }

    fn column(text: &str) -> Result<String, NameError> {
        connect::column(text).map_err(NameError)
    }

    async fn snapshot(&mut self, want: Want<'_>) -> Result<Held, FetchError> {
        self.connect().await?;
        let held = self
            .session
            .as_ref()
            .and_then(|s| s.txn.as_ref())
            .map(|t| Holding {
                id: &t.snapshot,
                replaces: t.replaces.as_deref(),
                served: t.served,
            });
        match decide(want, held) {
            Step::Keep => {}
            Step::Open { replaces } => self.export(replaces).await?,
            Step::Import { named, otherwise } => {
                if let Some(s) = self.session.as_mut() {
                    s.txn = None;
                    s.prefetch = None;
                }
                if !self.import(&named).await? {
                    match otherwise {
                        Otherwise::Expired => return Err(FetchError::ExpiredCursor),
                        Otherwise::Open => self.export(Some(named)).await?,
                    }
                }
            }
        }
        let txn = self
            .session
            .as_ref()
            .and_then(|s| s.txn.as_ref())
            .ok_or(FetchError::ServerError)?;
        Ok(Held {
            echo: Some(txn.snapshot.clone()),
            generation: txn.generation,
        })
    }

    async fn probe(&mut self, target: Target<'_>) -> Result<Catalogue, FetchError> {
        self.connect().await?;
        self.catalogue(target).await
    }

    async fn quantiles(
        &mut self,
        target: Target<'_>,
        lo: i128,
        hi: i128,
        n: u32,
    ) -> Result<Option<crate::source::sql::quantiles::Quantiles>, FetchError> {
        self.connect().await?;
        self.histogram_cuts(target, lo, hi, n).await
    }

    async fn check(&mut self, sql: &str, field: &str) -> Result<(), FetchError> {
        self.connect().await?;
        call!(self, field, |c| c.prepare(sql))?;
        Ok(())
    }

    async fn page(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
        rows: &mut PageRows<'_>,
    ) -> Result<(), FetchError> {
        self.read_page(stmt, params, rows).await
    }

    async fn ahead(&mut self, stmt: &Stmt, params: Vec<Param>) {
        self.prefetch(stmt, params).await;
    }

    async fn texts(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
    ) -> Result<Vec<Option<String>>, FetchError> {
        self.connect().await?;
        let prepared = self.prepared(stmt, "preparing a statement").await?;
        let values = page::values(&params).map_err(|p| self.fatal(p))?;
        let refs = page::refs(&values);
        let row = call!(self, "reading the scope", |c| c.query_one(&prepared, &refs))?;
        (0..row.len())
            .map(|i| {
                row.try_get::<_, Option<String>>(i)
                    .map_err(|e| self.fatal(format!("reading the scope: {e}")))
            })
            .collect()
    }
}
