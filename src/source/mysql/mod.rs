//! `mysql:CONFIG.json`: a MySQL or MariaDB table read in keyset pages inside one consistent
//! snapshot (docs/guide-mysql.md is the reference).
//!
//! One connection holds `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY` (REPEATABLE
//! READ, session time zone `+00:00`); every page is `WHERE key > ? ORDER BY key LIMIT n+1` in it,
//! so a page of fewer than n+1 rows is the end and a short page is never mistaken for one.
//! MySQL cannot export a snapshot, so its `snapshot_id` names the server, the connection, the
//! moment and the binlog position; only the connection that created it can read it. A request
//! for a snapshot this source instance does not hold (a resume after the process died, a lost
//! connection) answers `ExpiredCursor`, and the run's policy decides: a `high_water` request
//! (`Request::After`) is then served from a fresh snapshot whose new ID is echoed, so the
//! receipt's scope drops to `all_records_live`.
//!
//! It never decides completeness, never retries (the collector does both) and never prints,
//! logs or stores the DSN's password. Every read is bounded: at most `page_size + 1` rows per
//! page and `PAGE_SIZE_BYTES_MAX` bytes, counted while the rows stream in.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Statement, Value};

use super::{FetchError, PageRequest, PageSource};
use crate::contract::Page;
use crate::error::SourceError;
use crate::reconcile::Request;

mod config;
mod error;
mod page;
mod snapshot;
mod sql;
#[cfg(test)]
mod tests;
mod value;

pub use config::MysqlConfig;

use config::config_err;
use error::{classify, Class};
use sql::Plan;

/// The prefix of every cursor this source issues; the rest is the last key of the page.
const CURSOR_PREFIX: &str = "after:";
/// How long closing an old connection may take before it is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The MySQL/MariaDB source.
#[derive(Debug)]
pub struct MysqlSource {
    config: MysqlConfig,
    plan: Option<Plan>,
    session: Option<Session>,
    /// The pinned snapshot a high-water request continued in the open session's snapshot.
    continued: Option<String>,
    pages_served: u64,
}

/// One connection inside its consistent-snapshot transaction.
struct Session {
    conn: Conn,
    /// The snapshot's ID (echoed on pages when the table is InnoDB).
    id: String,
    first: Statement,
    next: Statement,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl MysqlSource {
    /// Reads the config file; connects only on the first request.
    ///
    /// # Errors
    /// `SourceError::Io` or `SourceError::Config` naming the key.
    pub fn open(path: &std::path::Path) -> Result<MysqlSource, SourceError> {
        Ok(MysqlSource::new(MysqlConfig::open(path)?))
    }

    /// Serves only the keys of `range` (a shard's contract): `WHERE key >= ? AND key < ?`
    /// with bound parameters; a key column that is not an integer is refused at the first
    /// page.
    #[must_use]
    pub fn with_key_range(mut self, range: Option<crate::contract::KeyRange>) -> MysqlSource {
        self.config.key_range = range;
        self
    }

    /// The key range's bounds, the first parameters of every statement but the NULL check.
    fn range_params(&self) -> Vec<Value> {
        self.config
            .key_range
            .map_or_else(Vec::new, |r| vec![Value::UInt(r.lo), Value::UInt(r.hi)])
    }

    /// A source for a parsed config.
    #[must_use]
    pub fn new(config: MysqlConfig) -> MysqlSource {
        MysqlSource {
            config,
            plan: None,
            session: None,
            continued: None,
            pages_served: 0,
        }
    }

    /// The snapshot ID of the open session, if any (tests and progress lines).
    #[must_use]
    pub fn snapshot_id(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.id.as_str())
    }

    fn fatal(&self, problem: String) -> FetchError {
        FetchError::Fatal(config_err(&self.config.path, problem))
    }

    /// The error a driver error becomes; a lost connection takes its snapshot with it.
    fn failed(&mut self, e: &mysql_async::Error) -> FetchError {
        match classify(e) {
            Class::Retry => FetchError::ServerError,
            Class::Lost => {
                self.session = None;
                FetchError::ServerError
            }
            Class::Timeout => FetchError::Timeout,
            Class::Forbidden => FetchError::Forbidden,
            Class::Fatal(problem) => self.fatal(format!(
                "{problem}; table {}.{}",
                sql::quote(&self.config.schema),
                sql::quote(&self.config.table)
            )),
        }
    }

    /// Whether the open session serves a request pinned to `snapshot`.
    fn serves(&self, snapshot: Option<&str>) -> bool {
        match (&self.session, snapshot) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(s), Some(want)) => s.id == want || self.continued.as_deref() == Some(want),
        }
    }

    async fn connect(&mut self) -> Result<Conn, FetchError> {
        let mut conn = match Conn::new(self.config.opts.clone()).await {
            Ok(c) => c,
            Err(e) => return Err(self.failed(&e)),
        };
        if self.plan.is_none() {
            let plan = snapshot::introspect(&mut conn, &self.config).await;
            match plan {
                Ok(p) => self.plan = Some(p),
                Err(snapshot::Failure::Driver(e)) => return Err(self.failed(&e)),
                Err(snapshot::Failure::Config(p)) => return Err(self.fatal(p)),
            }
        }
        Ok(conn)
    }

    /// Closes the open session (if any) and opens a new one in a fresh snapshot.
    async fn open_session(&mut self) -> Result<(), FetchError> {
        self.close().await;
        let mut conn = self.connect().await?;
        let plan = self
            .plan
            .clone()
            .ok_or_else(|| self.fatal("no plan".into()))?;
        let begun = snapshot::begin(&mut conn, &plan).await;
        let (id, first, next, null_keys) = match begun {
            Ok(b) => b,
            Err(snapshot::Failure::Driver(e)) => return Err(self.failed(&e)),
            Err(snapshot::Failure::Config(p)) => return Err(self.fatal(p)),
        };
        if null_keys > 0 {
            // Rows without a key cannot be identified, so no page could ever show them.
            return Err(FetchError::InvalidPage {
                detail: format!(
                    "{null_keys} row(s) of the scope have a NULL key {}: they cannot be listed",
                    sql::quote(&self.config.key)
                ),
            });
        }
        self.continued = None;
        self.session = Some(Session {
            conn,
            id,
            first,
            next,
        });
        Ok(())
    }

    /// Ends the open session's transaction and closes its connection.
    async fn close(&mut self) {
        if let Some(s) = self.session.take() {
            let mut conn = s.conn;
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, async move {
                let _ = conn.query_drop("COMMIT").await;
                let _ = conn.disconnect().await;
            })
            .await;
        }
    }

    async fn fetch_page(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if self.config.pause_ms > 0 && self.pages_served > 0 {
            tokio::time::sleep(Duration::from_millis(self.config.pause_ms)).await;
        }
        let after = match &req.request {
            Request::First => None,
            Request::Cursor(c) => Some(
                c.strip_prefix(CURSOR_PREFIX)
                    .ok_or_else(|| FetchError::InvalidPage {
                        detail: "the cursor was not issued by this source".into(),
                    })?
                    .to_owned(),
            ),
            Request::After(k) => Some(k.clone()),
        };
        let pinned = req.snapshot.as_deref();
        let in_place = match &req.request {
            // A first page begins a fresh snapshot unless it retries one this source holds.
            Request::First => pinned.is_some() && self.serves(pinned),
            _ => self.serves(pinned),
        };
        if !in_place {
            match (&req.request, pinned) {
                (Request::After(_), Some(old)) => {
                    self.open_session().await?;
                    self.continued = Some(old.to_owned());
                }
                (_, None) => self.open_session().await?,
                (_, Some(_)) => return Err(FetchError::ExpiredCursor),
            }
        }
        let page = self.read_page(after.as_deref(), req.page_size).await?;
        self.pages_served = self.pages_served.saturating_add(1);
        if page.next.is_none() {
            // The traversal is over: release the snapshot (InnoDB keeps undo for it).
            self.close().await;
        }
        Ok(page)
    }

    async fn read_page(&mut self, after: Option<&str>, page_size: u32) -> Result<Page, FetchError> {
        let plan = self
            .plan
            .clone()
            .ok_or_else(|| self.fatal("no plan".into()))?;
        let page_size = page_size.max(1);
        let limit = Value::UInt(u64::from(page_size) + 1);
        let mut params = self.range_params();
        match after {
            None => params.push(limit),
            Some(k) => {
                let key = value::key_param(plan.key_kind, k)
                    .map_err(|detail| FetchError::InvalidPage { detail })?;
                params.extend([key, limit]);
            }
        }
        let Some(session) = self.session.as_mut() else {
            return Err(FetchError::ExpiredCursor);
        };
        let stmt = if after.is_some() {
            session.next.clone()
        } else {
            session.first.clone()
        };
        let snapshot = plan.consistent.then(|| session.id.clone());
        let read = page::read(
            &mut session.conn,
            &stmt,
            params,
            page_size,
            &plan,
            &self.config,
        )
        .await;
        let rows = match read {
            Ok(r) => r,
            Err(page::Stop::Driver(e)) => return Err(self.failed(&e)),
            Err(page::Stop::Invalid(detail)) => return Err(FetchError::InvalidPage { detail }),
        };
        let (items, more, size_bytes) = (rows.items, rows.more, rows.size_bytes);
        let next = if more {
            items
                .last()
                .map(|i| format!("{CURSOR_PREFIX}{}", value::key_text(&i.id)))
        } else {
            None
        };
        Ok(Page {
            items,
            complete: Some(next.is_none()),
            next,
            snapshot,
            query: None,
            truncated: false,
            total: None,
            size_bytes,
        })
    }

    /// The smallest and largest key of the scope (an integer key), for `plan`; `None` for an
    /// empty scope or a key that is not an integer. One statement on a fresh connection.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the query.
    pub async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        let mut conn = self.connect().await?;
        let Some(plan) = self.plan.clone() else {
            return Ok(None);
        };
        if plan.key_kind != sql::KeyKind::Int {
            return Ok(None);
        }
        let k = sql::quote(&self.config.key);
        let scope = self
            .config
            .where_sql
            .as_ref()
            .map_or(String::new(), |w| format!(" WHERE (\n{w}\n)"));
        let text = format!(
            "SELECT CAST(MIN({k}) AS CHAR), CAST(MAX({k}) AS CHAR) FROM {}{scope}",
            sql::table_ref(&self.config)
        );
        let row = conn.query_first::<Row, _>(text).await;
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.disconnect()).await;
        let row = row.map_err(|e| self.failed(&e))?;
        let num = |v: Option<&Value>| -> Option<u64> {
            match v {
                Some(Value::Bytes(b)) => {
                    let t = std::str::from_utf8(b).ok()?;
                    // A negative key is below every ID: the span starts at 0.
                    if t.starts_with('-') {
                        Some(0)
                    } else {
                        t.parse().ok()
                    }
                }
                _ => None,
            }
        };
        Ok(row.and_then(|r| Some((num(r.as_ref(0))?, num(r.as_ref(1))?))))
    }

    async fn count_scope(&mut self) -> Option<u64> {
        // A fresh connection and one statement: InnoDB answers a single SELECT from one read
        // view, so the count is of one consistent state of the scope.
        let mut conn = self.connect().await.ok()?;
        let sql = self.plan.as_ref()?.count_sql.clone();
        let n = conn
            .exec_first::<Row, _, _>(sql, self.range_params())
            .await
            .ok()
            .flatten()
            .and_then(|r| match r.as_ref(0) {
                Some(Value::Int(i)) => u64::try_from(*i).ok(),
                Some(Value::UInt(u)) => Some(*u),
                Some(Value::Bytes(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
                _ => None,
            });
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, conn.disconnect()).await;
        n
    }
}

impl PageSource for MysqlSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        self.fetch_page(req).await
    }

    async fn count(&mut self) -> Option<u64> {
        self.count_scope().await
    }
}
