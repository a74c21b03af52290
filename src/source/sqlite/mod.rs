//! `sqlite:PATH?table=T&key=K` and `sqlite:CONFIG.json`: the SQLite dialect of the SQL core
//! (`source::sql`; docs/guide-sqlite.md is the reference).
//!
//! One read-only connection holds one read transaction (`BEGIN`, then a read that starts it)
//! for the whole scan: SQLite's isolation is serializable, so every page sees the one state
//! the transaction began in (in WAL mode beside concurrent writers; in rollback-journal mode
//! by holding a shared lock, which makes writers wait for the scan). That transaction is the
//! snapshot pages echo, under a random ID; nothing else can read it, so a request for a
//! snapshot this source does not hold (a resume in another process) answers `ExpiredCursor`
//! (`sql::dialect::decide`), and the contract's policy decides.
//!
//! SQLite is a C library called synchronously: every call runs on tokio's blocking pool
//! (`spawn_blocking`), the connection moved there and back, so a scan never blocks the runtime.
//! A page's rows are read there into owned values (the core's row limit, and
//! `PAGE_SIZE_BYTES_MAX` bytes counted as they are read) and fed to the core here, in order.

mod connect;
mod probe;
#[cfg(test)]
mod tests;
mod value;

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use super::sql::dialect::{
    decide, Catalogue, Dialect, Fatal, Held, Holding, NameError, Otherwise, ParamKind, Step, Stmt,
    TableName, Target, Want,
};
use super::sql::key::Param;
use super::sql::rows::{Fed, PageRows};
use super::sql::SqlSource;
use super::{FetchError, PageRequest, PageSource};
use crate::contract::{IdCodecKind, Page, Scope, PAGE_SIZE_BYTES_MAX};
use crate::error::SourceError;

use connect::LiteConnect;
use value::Kind;

/// How long a statement waits for a lock a writer holds before the page is retried.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A SQLite table as a page source.
#[derive(Debug)]
pub struct SqliteSource(SqlSource<LiteDialect>);

impl SqliteSource {
    /// Opens `sqlite:CONFIG.json` or an inline `sqlite:PATH?table=T&key=K`; the database is
    /// opened (read-only) only by the first request.
    ///
    /// # Errors
    /// `SourceError::Config` naming the key that is wrong, `SourceError::Io` for an unreadable
    /// config file.
    pub fn open_spec(spec: &str) -> Result<SqliteSource, SourceError> {
        if crate::source::inline_kind(spec).is_none() {
            let path = spec.strip_prefix("sqlite:").unwrap_or(spec);
            if !path.ends_with(".json") {
                return Err(crate::error::config_error(
                    Path::new(&crate::source::shown_spec(path)),
                    "name the table and key (sqlite:PATH?table=T&key=K), or give a config file (sqlite:CONFIG.json)",
                ));
            }
        }
        Ok(SqliteSource(SqlSource::open_spec(spec)?))
    }

    /// Narrowed to integer keys in `ranges` (a re-read).
    #[must_use]
    pub(crate) fn narrowed(self, ranges: &[(u64, u64)]) -> SqliteSource {
        SqliteSource(self.0.narrowed(ranges))
    }

    /// Serves a contract's scope (its key range, under its codec).
    pub(crate) fn for_scope(self, scope: &Scope, codec: IdCodecKind) -> SqliteSource {
        SqliteSource(self.0.for_scope(scope, codec))
    }

    /// Checks the config against the database's catalogue before a run begins.
    ///
    /// # Errors
    /// `SourceError::Config` naming what the database refused.
    pub async fn preflight(&mut self) -> Result<(), SourceError> {
        self.0.preflight().await
    }

    /// The smallest and largest key of the scope (an integer key), for `plan`.
    ///
    /// # Errors
    /// `FetchError` when the database cannot be read.
    pub async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        self.0.key_bounds().await
    }
}

impl PageSource for SqliteSource {
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

/// The SQLite dialect: the file, the connection (on loan to the blocking pool during a call)
/// and its read transaction.
pub(crate) struct LiteDialect {
    connect: LiteConnect,
    fatal: Fatal,
    conn: Option<Connection>,
    txn: Option<Txn>,
    kinds: Vec<Kind>,
    generation: u64,
}

/// The open read transaction.
struct Txn {
    id: String,
    /// The snapshot a `high_water` continuation replaced.
    replaces: Option<String>,
    served: bool,
    generation: u64,
}

/// A page's rows, read on the blocking thread.
struct Read {
    rows: Vec<Vec<Value>>,
}

impl LiteDialect {
    /// Runs `f` on the connection (opened read-only if none yet) on the blocking pool.
    async fn run<T: Send + 'static>(
        &mut self,
        doing: &str,
        f: impl FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Result<T, FetchError> {
        let conn = self.conn.take();
        let path = self.connect.path.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut conn = match conn {
                Some(c) => c,
                None => match open(&path) {
                    Ok(c) => c,
                    Err(e) => return (None, Err(e)),
                },
            };
            let r = f(&mut conn);
            (Some(conn), r)
        })
        .await;
        match joined {
            Ok((conn, r)) => {
                if conn.is_none() {
                    self.txn = None;
                }
                self.conn = conn;
                r.map_err(|e| self.failed(&e, doing))
            }
            Err(_) => {
                // The call panicked or was cancelled: the connection and its transaction are
                // gone.
                self.txn = None;
                Err(FetchError::ServerError)
            }
        }
    }

    /// What a SQLite error becomes: a lock a writer holds is retried, anything else is the
    /// config's or the file's and stops the scan.
    fn failed(&mut self, e: &rusqlite::Error, doing: &str) -> FetchError {
        use rusqlite::ErrorCode as C;
        let code = e.sqlite_error_code();
        match code {
            Some(C::DatabaseBusy | C::DatabaseLocked | C::SchemaChanged) => FetchError::ServerError,
            Some(C::SystemIoFailure) => {
                self.txn = None;
                self.conn = None;
                FetchError::ServerError
            }
            _ => {
                let what: String = e.to_string().chars().take(512).collect();
                let what = match code {
                    Some(C::CannotOpen) => format!(
                        "cannot open the database {}: {what}",
                        self.connect.path.display()
                    ),
                    _ => what,
                };
                if doing.is_empty() {
                    self.fatal.error(what)
                } else {
                    self.fatal.error(format!("{doing}: {what}"))
                }
            }
        }
    }

    /// Ends the open transaction (if any) and begins a fresh one, started by a read.
    async fn open_txn(&mut self, replaces: Option<String>) -> Result<(), FetchError> {
        self.txn = None;
        let mut b = [0u8; 12];
        getrandom::fill(&mut b).map_err(|_| FetchError::ServerError)?;
        self.run("opening a read transaction", |c| {
            if !c.is_autocommit() {
                c.execute_batch("COMMIT")?;
            }
            c.execute_batch("BEGIN")?;
            // The transaction's snapshot is taken by its first read, now.
            let started = c.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()));
            if started.is_err() {
                let _ = c.execute_batch("ROLLBACK");
            }
            started
        })
        .await?;
        self.generation = self.generation.saturating_add(1);
        self.txn = Some(Txn {
            id: format!("sqlite:{}", hex::encode(b)),
            replaces,
            served: false,
            generation: self.generation,
        });
        Ok(())
    }
}

fn open(path: &Path) -> Result<Connection, rusqlite::Error> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

fn params_of(params: &[Param]) -> Vec<Value> {
    params.iter().map(value::param).collect()
}

impl Dialect for LiteDialect {
    type Connect = LiteConnect;
    const KIND: &'static str = "sqlite";
    const CURSOR_TAG: &'static str = "after:";
    const KEY_TYPES: &'static str =
        "a column of INTEGER or TEXT affinity (INTEGER, BIGINT, TEXT, VARCHAR, ...)";

    fn new(connect: LiteConnect, fatal: Fatal) -> LiteDialect {
        LiteDialect {
            connect,
            fatal,
            conn: None,
            txn: None,
            kinds: Vec::new(),
            generation: 0,
        }
    }

    fn quote(name: &str) -> String {
        connect::quote(name)
    }

    fn param(n: usize, _: ParamKind) -> String {
        format!("?{n}")
    }

    fn text_of(expr: &str) -> String {
        format!("CAST({expr} AS TEXT)")
    }

    fn label(predicate: &str) -> String {
        format!("CASE WHEN (\n{predicate}\n) THEN 1 ELSE 0 END")
    }

    fn table(text: &str, _: &LiteConnect) -> Result<TableName, NameError> {
        connect::table(text).map_err(NameError)
    }

    fn column(text: &str) -> Result<String, NameError> {
        connect::ident(text).map_err(NameError)?;
        Ok(text.to_owned())
    }

    fn same_column(a: &str, b: &str) -> bool {
        // SQLite column names compare without (ASCII) case.
        a.eq_ignore_ascii_case(b)
    }

    async fn snapshot(&mut self, want: Want<'_>) -> Result<Held, FetchError> {
        let held = self.txn.as_ref().map(|t| Holding {
            id: &t.id,
            replaces: t.replaces.as_deref(),
            served: t.served,
        });
        match decide(want, held) {
            Step::Keep => {}
            Step::Open { replaces } => self.open_txn(replaces).await?,
            // No other connection's transaction can be joined.
            Step::Import { named, otherwise } => match otherwise {
                Otherwise::Expired => return Err(FetchError::ExpiredCursor),
                Otherwise::Open => self.open_txn(Some(named)).await?,
            },
        }
        let t = self.txn.as_ref().ok_or(FetchError::ServerError)?;
        Ok(Held {
            echo: Some(t.id.clone()),
            generation: t.generation,
        })
    }

    async fn probe(&mut self, target: Target<'_>) -> Result<Catalogue, FetchError> {
        let table = target.table.clone();
        let key = target.key.to_owned();
        let content = target.content.to_vec();
        let probed = self
            .run("", move |c| {
                let target = Target {
                    table: &table,
                    key: &key,
                    content: &content,
                };
                Ok(probe::probe(c, target))
            })
            .await?;
        match probed {
            Ok(p) => {
                self.kinds = p.kinds;
                Ok(p.catalogue)
            }
            Err(probe::Failure::Sqlite(e)) => Err(self.failed(&e, "")),
            Err(probe::Failure::Config(p)) => Err(self.fatal.error(p)),
        }
    }

    async fn check(&mut self, sql: &str, field: &str) -> Result<(), FetchError> {
        let sql = sql.to_owned();
        self.run(field, move |c| c.prepare(&sql).map(drop)).await
    }

    async fn page(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
        rows: &mut PageRows<'_>,
    ) -> Result<(), FetchError> {
        let Some(txn) = self.txn.as_mut() else {
            return Err(FetchError::ExpiredCursor);
        };
        txn.served = true;
        let sql = stmt.text.clone();
        let values = params_of(&params);
        let max = rows.rows_max();
        let read = self
            .run("", move |c| read_page(c, &sql, values, max))
            .await?;
        for (i, row) in read.rows.iter().enumerate() {
            if !feed(row, i.saturating_add(1), &self.kinds, rows)
                .map_err(|detail| FetchError::InvalidPage { detail })?
            {
                break;
            }
        }
        Ok(())
    }

    async fn texts(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
    ) -> Result<Vec<Option<String>>, FetchError> {
        let sql = stmt.text.clone();
        let values = params_of(&params);
        self.run("", move |c| {
            let mut s = c.prepare_cached(&sql)?;
            let n = s.column_count();
            let mut q = s.query(rusqlite::params_from_iter(values))?;
            Ok(match q.next()? {
                Some(r) => (0..n)
                    .map(|i| r.get::<_, Value>(i).map(|v| value::text(&v)))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            })
        })
        .await
    }

    async fn end(&mut self) {
        // The traversal is over: end the read transaction (a writer in rollback-journal mode
        // waits for it).
        if self.txn.take().is_some() {
            let _ = self
                .run("", |c| {
                    if !c.is_autocommit() {
                        c.execute_batch("COMMIT")?;
                    }
                    Ok(())
                })
                .await;
        }
    }
}

/// Reads at most `max` rows of a page statement, stopping once their bytes pass
/// `PAGE_SIZE_BYTES_MAX` (the core then refuses the page, saying so).
fn read_page(
    c: &mut Connection,
    sql: &str,
    values: Vec<Value>,
    max: usize,
) -> Result<Read, rusqlite::Error> {
    let mut s = c.prepare_cached(sql)?;
    let n = s.column_count();
    let mut q = s.query(rusqlite::params_from_iter(values))?;
    let mut rows = Vec::with_capacity(max.min(4096));
    let mut bytes = 0u64;
    while let Some(r) = q.next()? {
        let row = (0..n)
            .map(|i| r.get::<_, Value>(i))
            .collect::<Result<Vec<_>, _>>()?;
        bytes = bytes.saturating_add(row.iter().map(value::bytes).sum());
        rows.push(row);
        if rows.len() >= max || bytes > PAGE_SIZE_BYTES_MAX {
            break;
        }
    }
    Ok(Read { rows })
}

/// Feeds one row (1-based `row_no`) to `rows`; `false` once the page is past its end.
fn feed(
    row: &[Value],
    row_no: usize,
    kinds: &[Kind],
    rows: &mut PageRows<'_>,
) -> Result<bool, String> {
    let n_labels = rows.labels();
    let key_type = rows.key_type();
    rows.add_bytes(row.iter().map(value::bytes).sum())?;
    let invalid = |p: String| format!("row {row_no} of the page: {p}");
    let equal = row.first().is_some_and(value::is_set);
    let key = row.get(1).ok_or_else(|| invalid("no key column".into()))?;
    let key = value::key_of(key_type, key).map_err(invalid)?;
    match rows.row(key, equal)? {
        Fed::Bound => {}
        Fed::Past => return Ok(false),
        Fed::Item(mut r) => {
            for j in 0..n_labels {
                r.label(j, row.get(2 + j).is_some_and(value::is_set));
            }
            for (c, kind) in kinds.iter().enumerate() {
                let v = row.get(2 + n_labels + c).unwrap_or(&Value::Null);
                r.value(&value::content(*kind, v))
                    .map_err(|p| r.problem(c, &p))?;
            }
            r.end()?;
        }
    }
    Ok(true)
}
