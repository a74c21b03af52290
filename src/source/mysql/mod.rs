//! `mysql:CONFIG.json`: the MySQL/MariaDB dialect of the SQL core (`source::sql`;
//! docs/guide-mysql.md is the reference).
//!
//! One connection holds `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY` (REPEATABLE
//! READ, session time zone `+00:00`); every page is the core's keyset statement in it. MySQL
//! cannot export a snapshot, so its `snapshot_id` names the server, the connection, the moment
//! and the binlog position (`snapshot.rs`); only the connection that created it can read it, so
//! a request for a snapshot this source does not hold answers `ExpiredCursor`
//! (`sql::dialect::decide`), and a `high_water` request is served from a fresh snapshot whose
//! new ID is echoed. A table whose engine is not InnoDB echoes no snapshot: its pages claim
//! only the live collection.
//!
//! It never prints, logs or stores the DSN's password. Every read is bounded: the core's row
//! limit, and `PAGE_SIZE_BYTES_MAX` bytes counted while the rows stream in (`page.rs`).
//!
//! One page in flight ahead: when a page has a successor, the core has its statement sent
//! before the page is returned (`Dialect::ahead`), so the server computes it while the
//! collector reconciles and checkpoints. The session's connection then belongs to that one
//! statement's future (`Ahead`), which nothing polls in the background: the request is
//! written to the socket, the server's answer waits in the socket buffers. The next page
//! takes the answer's head and streams its rows (hashed as they arrive, as any page's) if it
//! runs exactly that statement with the same parameters (the same session, so the same
//! snapshot); anything else first reads the answer to its end and drops it, so the connection
//! is always back in its session, with nothing pending, before another statement runs on it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::sql::config::SqlConfig;
use super::sql::dialect::{
    decide, Catalogue, Dialect, Fatal, Held, Holding, NameError, Otherwise, ParamKind, Step, Stmt,
    StmtId, TableName, Target, Want,
};
use super::sql::key::Param;
use super::sql::rows::PageRows;
use super::sql::SqlSource;
use super::{FetchError, PageRequest, PageSource};
use crate::contract::{IdCodecKind, Page, Scope};
use crate::error::SourceError;

mod connect;
mod error;
mod page;
mod probe;
mod sample;
mod snapshot;
mod sync;
#[cfg(test)]
mod tests;
mod value;

use connect::MyConnect;
use error::{classify, Class};
use probe::Kind;

/// How long closing an old connection may take before it is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A parsed `mysql:` source config. `Debug` never shows the password.
#[derive(Clone)]
pub struct MysqlConfig {
    pub(crate) sql: SqlConfig,
    pub(crate) connect: MyConnect,
}

impl std::fmt::Debug for MysqlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlConfig")
            .field("dsn", &self.redacted_dsn())
            .field("sql", &self.sql)
            .finish()
    }
}

impl MysqlConfig {
    /// Reads and parses a config file; a `dsn_env` is read from the environment now.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable, `SourceError::ConfigFile` naming the key.
    pub fn open(path: &Path) -> Result<MysqlConfig, SourceError> {
        let (sql, connect) = super::sql::config::open::<MyDialect>(path)?;
        Ok(MysqlConfig { sql, connect })
    }

    /// Parses config text; `path` only names the file in errors, `env` looks up `dsn_env`.
    ///
    /// # Errors
    /// `SourceError::ConfigFile` naming the key.
    pub fn parse(
        path: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<MysqlConfig, SourceError> {
        let (sql, connect) = super::sql::config::parse::<MyDialect>(path, text, env)?;
        Ok(MysqlConfig { sql, connect })
    }

    /// Narrows the scope to integer keys in `ranges` (ascending, disjoint, inclusive): the
    /// config's `where`, `AND` the ranges.
    pub fn narrow_to_keys(&mut self, ranges: &[(u64, u64)]) {
        self.sql.narrow_to_keys::<MyDialect>(ranges);
    }

    /// `mysql://USER@HOST:PORT/DB` without the password, for logs and `Debug`.
    #[must_use]
    pub fn redacted_dsn(&self) -> String {
        use super::sql::dialect::Connect;
        self.connect.redacted()
    }
}

/// The MySQL/MariaDB source.
#[derive(Debug)]
pub struct MysqlSource(SqlSource<MyDialect>);

impl MysqlSource {
    /// Reads the config file; connects only on the first request.
    ///
    /// # Errors
    /// `SourceError::Io` or `SourceError::ConfigFile` naming the key.
    pub fn open(path: &Path) -> Result<MysqlSource, SourceError> {
        Ok(MysqlSource(SqlSource::open(path)?))
    }

    /// Opens `mysql:CONFIG.json` or an inline `mysql://USER@HOST/DB?table=T&key=K`.
    pub(crate) fn open_spec(spec: &str) -> Result<MysqlSource, SourceError> {
        Ok(MysqlSource(SqlSource::open_spec(spec)?))
    }

    /// Narrowed to integer keys in `ranges` (a re-read).
    pub(crate) fn narrowed(self, ranges: &[(u64, u64)]) -> MysqlSource {
        MysqlSource(self.0.narrowed(ranges))
    }

    /// A source for a parsed config.
    #[must_use]
    pub fn new(config: MysqlConfig) -> MysqlSource {
        MysqlSource(SqlSource::new(config.sql, config.connect))
    }

    /// Serves only the keys of `range` (a shard's contract, IDs of the `int` codec) with
    /// bound parameters; a key column that is not an integer is refused at the first page.
    #[must_use]
    pub fn with_key_range(self, range: Option<crate::contract::KeyRange>) -> MysqlSource {
        MysqlSource(self.0.with_key_range(range))
    }

    /// Serves a contract's scope (its key range, under its codec).
    pub(crate) fn for_scope(self, scope: &Scope, codec: IdCodecKind) -> MysqlSource {
        MysqlSource(self.0.for_scope(scope, codec))
    }

    /// The snapshot ID of the open session, if any (tests and progress lines).
    #[must_use]
    pub fn snapshot_id(&self) -> Option<&str> {
        self.0.dialect().session.as_ref().map(|s| s.id.as_str())
    }

    /// Takes the global read lock for a plan's shards (`plan --hold-snapshot`): every shard
    /// that begins its snapshot while it is held reads the state the returned ID names
    /// (`sync.rs`). Writers wait until [`MysqlSource::unlock_for_shards`] (or until this
    /// source's connection ends).
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the lock (`RELOAD` is needed).
    pub async fn lock_for_shards(&mut self) -> Result<String, FetchError> {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).map_err(|_| FetchError::ServerError)?;
        let nonce: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let d = self.0.dialect_mut();
        let conn = match Conn::new(d.connect.opts.clone()).await {
            Ok(c) => c,
            Err(e) => return Err(d.failed(&e, "")),
        };
        let (lock, id) = sync::lock(conn, &nonce)
            .await
            .map_err(|e| d.fatal(format!("--hold-snapshot: {e}")))?;
        d.sync = Some(lock);
        Ok(id)
    }

    /// Gives up the read lock [`MysqlSource::lock_for_shards`] took: writers go on, and a
    /// shard that begins after this cannot join the synchronized snapshot.
    ///
    /// # Errors
    /// `FetchError` when the lock's connection is gone (the server released it then).
    pub async fn unlock_for_shards(&mut self) -> Result<(), FetchError> {
        let d = self.0.dialect_mut();
        let Some(lock) = d.sync.take() else {
            return Ok(());
        };
        sync::unlock(lock).await.map_err(|e| d.fatal(e))
    }

    /// Begins the snapshot `id` names now, before the first page: a shard of a plan whose
    /// snapshot is synchronized joins it (and may then say so); any other ID that this source
    /// does not hold fails (`ExpiredCursor`).
    ///
    /// # Errors
    /// `ExpiredCursor` when the snapshot cannot be joined (the read lock is gone).
    pub async fn join_snapshot(&mut self, id: &str) -> Result<(), FetchError> {
        self.0
            .dialect_mut()
            .snapshot(Want::First(Some(id)))
            .await
            .map(|_| ())
    }

    /// The smallest and largest key of the scope (an integer key), for `plan`; `None` for an
    /// empty scope or a key that is not an integer.
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

impl MysqlSource {
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

impl PageSource for MysqlSource {
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

/// The MySQL dialect: connection options, the session, what the probe learned.
pub(crate) struct MyDialect {
    connect: MyConnect,
    fatal: Fatal,
    /// A connection not (yet) in a snapshot: the probe's, taken by the next session.
    idle: Option<Conn>,
    session: Option<Session>,
    /// The pinned snapshot a `high_water` request continued in the open session's snapshot.
    continued: Option<String>,
    kinds: Vec<Kind>,
    /// The table is InnoDB, so `WITH CONSISTENT SNAPSHOT` pins what the pages see.
    consistent: bool,
    generation: u64,
    /// A coordinator's read lock for its plan's shards (`sync.rs`).
    sync: Option<sync::SyncLock>,
}

/// One connection inside its consistent-snapshot transaction.
struct Session {
    /// The connection; `None` exactly while `ahead` holds it.
    conn: Option<Conn>,
    /// The next page's statement, already sent on the connection.
    ahead: Option<Ahead>,
    /// The snapshot's ID (echoed on pages when the table is InnoDB).
    id: String,
    served: bool,
    generation: u64,
}

/// The connection a page statement was sent on, its rows waiting there unread, or why the
/// statement failed.
type Answer = (Conn, Result<(), mysql_async::Error>);

/// A page statement sent ahead: which, with what, and the future that owns the session's
/// connection until it has read the answer.
struct Ahead {
    id: StmtId,
    params: Vec<Param>,
    answer: Pin<Box<dyn Future<Output = Answer> + Send>>,
}

impl Session {
    /// The connection back from a statement sent ahead, the head of its answer read (or why
    /// it failed); its rows wait on the connection.
    async fn settle(&mut self) -> Option<Result<(), mysql_async::Error>> {
        let a = self.ahead.take()?;
        let (conn, answer) = a.answer.await;
        self.conn = Some(conn);
        Some(answer)
    }

    /// The connection back from a statement sent ahead, its rows read and dropped.
    async fn discard(&mut self) -> Result<(), mysql_async::Error> {
        match self.settle().await {
            Some(Ok(())) => match self.conn.as_mut() {
                Some(conn) => page::drop_sent(conn).await,
                None => Ok(()),
            },
            Some(Err(e)) => Err(e),
            None => Ok(()),
        }
    }
}

impl MyDialect {
    /// The session's connection back from a statement sent ahead, its answer dropped; a lost
    /// connection ends the session.
    async fn settle(&mut self) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        if let Err(e) = s.discard().await {
            if matches!(classify(&e), Class::Lost) {
                self.session = None;
                self.idle = None;
            }
        }
    }

    fn fatal(&self, problem: impl std::fmt::Display) -> FetchError {
        self.fatal.error(problem)
    }

    /// The error a driver error becomes; a lost connection takes its snapshot with it.
    fn failed(&mut self, e: &mysql_async::Error, doing: &str) -> FetchError {
        match classify(e) {
            Class::Retry => FetchError::ServerError,
            Class::Lost => {
                self.session = None;
                self.idle = None;
                FetchError::ServerError
            }
            Class::Timeout => FetchError::Timeout,
            Class::Forbidden => FetchError::Forbidden,
            Class::Fatal(problem) if doing.is_empty() => self.fatal(problem),
            Class::Fatal(problem) => self.fatal(format!("{doing}: {problem}")),
        }
    }

    /// A connection: the session's, the idle one, or a new idle one.
    async fn conn(&mut self) -> Result<&mut Conn, FetchError> {
        self.settle().await;
        if self.session.is_none() && self.idle.is_none() {
            match Conn::new(self.connect.opts.clone()).await {
                Ok(c) => self.idle = Some(c),
                Err(e) => return Err(self.failed(&e, "")),
            }
        }
        match (&mut self.session, &mut self.idle) {
            (Some(s), _) => s.conn.as_mut().ok_or(FetchError::ServerError),
            (None, Some(c)) => Ok(c),
            (None, None) => Err(FetchError::ServerError),
        }
    }

    /// Closes the open session (if any) and opens a new one in a fresh snapshot.
    async fn open_session(&mut self, replaces: Option<String>) -> Result<(), FetchError> {
        self.close().await;
        self.conn().await?;
        let Some(mut conn) = self.idle.take() else {
            return Err(FetchError::ServerError);
        };
        let id = match snapshot::begin(&mut conn).await {
            Ok(id) => id,
            Err(e) => return Err(self.failed(&e, "opening a snapshot")),
        };
        self.generation = self.generation.saturating_add(1);
        self.continued = replaces;
        self.session = Some(Session {
            conn: Some(conn),
            ahead: None,
            id,
            served: false,
            generation: self.generation,
        });
        Ok(())
    }

    /// Begins a snapshot and keeps it as the synchronized state `named` if its coordinator
    /// still holds the lock (so the read lock was held when it began); else `ExpiredCursor`.
    async fn join(&mut self, named: String) -> Result<(), FetchError> {
        let Some((holder, lock)) = sync::parse(&named).map(|(h, l)| (h, l.to_owned())) else {
            return Err(FetchError::ExpiredCursor);
        };
        self.open_session(None).await?;
        let Some(conn) = self.session.as_mut().and_then(|s| s.conn.as_mut()) else {
            return Err(FetchError::ServerError);
        };
        match sync::joined(conn, holder, &lock).await {
            Ok(true) => {
                if let Some(s) = self.session.as_mut() {
                    s.id = named;
                }
                Ok(())
            }
            Ok(false) => {
                self.close().await;
                Err(FetchError::ExpiredCursor)
            }
            Err(e) => {
                self.close().await;
                Err(self.fatal(format!("joining the synchronized snapshot: {e}")))
            }
        }
    }

    /// Ends the open session's transaction and closes its connection.
    async fn close(&mut self) {
        if let Some(mut s) = self.session.take() {
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, async move {
                let _ = s.discard().await;
                if let Some(mut conn) = s.conn.take() {
                    let _ = conn.query_drop("COMMIT").await;
                    let _ = conn.disconnect().await;
                }
            })
            .await;
        }
    }
}

impl Dialect for MyDialect {
    type Connect = MyConnect;
    const KIND: &'static str = "mysql";
    const CURSOR_TAG: &'static str = "after:";
    const KEY_TYPES: &'static str = "an integer type or CHAR/VARCHAR";

    fn new(connect: MyConnect, fatal: Fatal) -> MyDialect {
        MyDialect {
            connect,
            fatal,
            idle: None,
            session: None,
            continued: None,
            kinds: Vec::new(),
            consistent: false,
            generation: 0,
            sync: None,
        }
    }

    fn quote(name: &str) -> String {
        probe::quote(name)
    }

    fn param(_: usize, _: ParamKind) -> String {
        "?".to_owned()
    }

    fn text_of(expr: &str) -> String {
        format!("CAST({expr} AS CHAR)")
    }

    fn label(predicate: &str) -> String {
        format!("CASE WHEN (\n{predicate}\n) THEN 1 ELSE 0 END")
    }

    fn table(text: &str, connect: &MyConnect) -> Result<TableName, NameError> {
        connect::table(text, connect).map_err(NameError)
    }

    fn column(text: &str) -> Result<String, NameError> {
        connect::ident(text).map_err(NameError)?;
        Ok(text.to_owned())
    }

    fn same_column(a: &str, b: &str) -> bool {
        // MySQL column names compare without case.
        a.eq_ignore_ascii_case(b)
    }

    async fn snapshot(&mut self, want: Want<'_>) -> Result<Held, FetchError> {
        let held = self.session.as_ref().map(|s| Holding {
            id: &s.id,
            replaces: self.continued.as_deref(),
            served: s.served,
        });
        match decide(want, held) {
            Step::Keep => {}
            Step::Open { replaces } => self.open_session(replaces).await?,
            // MySQL cannot import a snapshot another connection began; it can join a
            // synchronized one while its coordinator holds the read lock.
            Step::Import { named, otherwise } => match otherwise {
                Otherwise::Expired if sync::parse(&named).is_some() => self.join(named).await?,
                Otherwise::Expired => return Err(FetchError::ExpiredCursor),
                Otherwise::Open => self.open_session(Some(named)).await?,
            },
        }
        let s = self.session.as_ref().ok_or(FetchError::ServerError)?;
        Ok(Held {
            echo: self.consistent.then(|| s.id.clone()),
            generation: s.generation,
        })
    }

    async fn probe(&mut self, target: Target<'_>) -> Result<Catalogue, FetchError> {
        let schema = target.table.schema.clone().unwrap_or_default();
        let table = target.table.name.clone();
        let conn = self.conn().await?;
        match probe::probe(conn, &schema, &table, target.key, target.content).await {
            Ok(p) => {
                self.kinds = p.kinds;
                self.consistent = p.consistent;
                Ok(p.catalogue)
            }
            Err(probe::Failure::Driver(e)) => Err(self.failed(&e, "")),
            Err(probe::Failure::Config(p)) => Err(self.fatal(p)),
        }
    }

    async fn check(&mut self, sql: &str, field: &str) -> Result<(), FetchError> {
        let conn = self.conn().await?;
        let result = conn.prep(sql).await;
        match result {
            Ok(stmt) => {
                let _ = conn.close(stmt).await;
                Ok(())
            }
            Err(e) => Err(self.failed(&e, field)),
        }
    }

    async fn page(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
        rows: &mut PageRows<'_>,
    ) -> Result<(), FetchError> {
        let Some(session) = self.session.as_mut() else {
            return Err(FetchError::ExpiredCursor);
        };
        session.served = true;
        let asked = session
            .ahead
            .as_ref()
            .is_some_and(|a| a.id == stmt.id && a.params == params);
        let sent = if asked {
            session.settle().await
        } else {
            session.discard().await.err().map(Err)
        };
        let read = match (sent, session.conn.as_mut()) {
            (Some(Err(e)), _) => Err(page::Stop::Driver(e)),
            (_, None) => return Err(FetchError::ServerError),
            (Some(Ok(())), Some(conn)) => page::read_sent(conn, &self.kinds, rows).await,
            (None, Some(conn)) => {
                let params = params.iter().map(value::param).collect();
                page::read(conn, &stmt.text, params, &self.kinds, rows).await
            }
        };
        match read {
            Ok(()) => Ok(()),
            Err(page::Stop::Driver(e)) => Err(self.failed(&e, "")),
            Err(page::Stop::Invalid(detail)) => Err(FetchError::InvalidPage { detail }),
        }
    }

    async fn ahead(&mut self, stmt: &Stmt, params: Vec<Param>) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        if s.ahead.is_some() {
            return;
        }
        let Some(mut conn) = s.conn.take() else {
            return;
        };
        let sql = stmt.text.clone();
        let values: Vec<mysql_async::Value> = params.iter().map(value::param).collect();
        let mut answer: Pin<Box<dyn Future<Output = Answer> + Send>> = Box::pin(async move {
            let sent = page::send(&mut conn, &sql, values).await;
            (conn, sent)
        });
        // One poll writes the statement to the socket (it is prepared: the page before ran
        // it) and stops at waiting for the server.
        let early = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await;
        match early {
            // An answer this early (a failure, or a head already there) is not kept: its rows
            // are dropped when the connection runs its next statement, which asks again.
            Poll::Ready((conn, _)) => s.conn = Some(conn),
            Poll::Pending => {
                s.ahead = Some(Ahead {
                    id: stmt.id,
                    params,
                    answer,
                });
            }
        }
    }

    async fn quantiles(
        &mut self,
        target: Target<'_>,
        lo: i128,
        hi: i128,
        n: u32,
    ) -> Result<Option<crate::source::sql::quantiles::Quantiles>, FetchError> {
        let table = crate::source::sql::config::SqlConfig::table_of::<MyDialect>(target.table);
        let key = probe::quote(target.key);
        let conn = self.conn().await?;
        match sample::cuts(conn, &table, &key, lo, hi, n).await {
            Ok(q) => Ok(q),
            Err(e) => Err(self.failed(&e, "")),
        }
    }

    async fn texts(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
    ) -> Result<Vec<Option<String>>, FetchError> {
        let params: Vec<mysql_async::Value> = params.iter().map(value::param).collect();
        let conn = self.conn().await?;
        let row = conn
            .exec_first::<Row, _, _>(stmt.text.as_str(), params)
            .await;
        match row {
            Ok(row) => Ok(row.map_or_else(Vec::new, |r| {
                (0..r.len()).map(|i| probe::text(&r, i)).collect()
            })),
            Err(e) => Err(self.failed(&e, "")),
        }
    }

    async fn end(&mut self) {
        // The traversal is over: release the snapshot (InnoDB keeps undo for it).
        self.close().await;
    }
}
