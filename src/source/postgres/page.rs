//! One keyset page of PostgreSQL: the core's statement run in the session's transaction (or
//! its answer taken from a prefetch), and its rows fed to the core in the order they came.
//!
//! Never opens a transaction (the caller has made the right one current) and never decides
//! the end (the core does, from the rows).
//!
//! Prefetch: when a page has a successor, the core has its statement sent before the page is
//! returned, so the server computes it while the collector reconciles and checkpoints; the
//! next request takes the answer if it runs exactly that statement with the same parameters
//! in the same transaction, and otherwise the prefetched answer is dropped (the driver
//! discards it). Nothing runs in the background: the request is written to the socket, and
//! the server's answer waits in the socket buffers until the next call reads it.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::value::{self, Raw};
use super::{call, drive, Arc, Failure, PgDialect};
use crate::source::sql::dialect::{Stmt, StmtId};
use crate::source::sql::key::{KeyType, Param};
use crate::source::sql::rows::{Fed, PageRows};
use crate::source::FetchError;

/// A page statement already sent: which, with what, in which transaction, and the answer to
/// come.
pub(super) struct Prefetch {
    id: StmtId,
    params: Vec<Param>,
    generation: u64,
    answer: Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send>>,
}

/// A parameter as the driver binds it.
pub(super) enum Value {
    Int(i64),
    Text(String),
}

/// The parameters as the driver binds them: integers as `int8`.
pub(super) fn values(params: &[Param]) -> Result<Vec<Value>, String> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(n) => i64::try_from(*n)
                .map(Value::Int)
                .map_err(|_| format!("the key {n} is not a bigint")),
            Param::Text(s) => Ok(Value::Text(s.clone())),
        })
        .collect()
}

/// References to `values`, as a query takes them.
pub(super) fn refs(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|v| match v {
            Value::Int(n) => n as &(dyn ToSql + Sync),
            Value::Text(s) => s as &(dyn ToSql + Sync),
        })
        .collect()
}

impl PgDialect {
    fn generation_now(&self) -> Option<u64> {
        self.session
            .as_ref()
            .and_then(|s| s.txn.as_ref())
            .map(|t| t.generation)
    }

    /// Runs `stmt` (or takes its prefetched answer) and feeds the page to `rows`.
    pub(super) async fn read_page(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
        rows: &mut PageRows<'_>,
    ) -> Result<(), FetchError> {
        let generation = self.generation_now().ok_or(FetchError::ServerError)?;
        let prefetched = self
            .session
            .as_mut()
            .and_then(|s| s.prefetch.take())
            .filter(|p| p.id == stmt.id && p.params == params && p.generation == generation);
        let answer = match prefetched {
            Some(p) => {
                let answer = p.answer;
                call!(self, "reading a page", |_c| answer)?
            }
            None => {
                let prepared = self.prepared(stmt, "preparing the page query").await?;
                let values =
                    values(&params).map_err(|detail| FetchError::InvalidPage { detail })?;
                let refs = refs(&values);
                call!(self, "reading a page", |c| c.query(&prepared, &refs))?
            }
        };
        if let Some(t) = self.session.as_mut().and_then(|s| s.txn.as_mut()) {
            t.served = true;
        }
        decode(&answer, rows, &self.kinds, self.key_bits)
            .map_err(|detail| FetchError::InvalidPage { detail })
    }

    /// Sends `stmt` with `params` and returns without its answer.
    pub(super) async fn prefetch(&mut self, stmt: &Stmt, params: Vec<Param>) {
        let Some(generation) = self.generation_now() else {
            return;
        };
        let Ok(prepared) = self.prepared(stmt, "preparing the page query").await else {
            return;
        };
        let Ok(owned) = values(&params) else {
            return;
        };
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let client = Arc::clone(&s.client);
        let mut answer: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(async move {
            let refs = refs(&owned);
            client.query(&prepared, &refs).await
        });
        // One poll hands the request to the connection, one poll of the connection writes
        // it to the socket; neither waits for the server.
        let connection = &mut s.connection;
        let (answered, ended) = std::future::poll_fn(|cx| {
            // An answer this early (only a failure can be) is not kept: a finished future
            // must not be polled again, and the next page asks again anyway.
            if answer.as_mut().poll(cx).is_ready() {
                return Poll::Ready((true, false));
            }
            Poll::Ready((false, connection.as_mut().poll(cx).is_ready()))
        })
        .await;
        if ended {
            // The connection is gone; the next page reconnects and meets what that means.
            self.session = None;
            return;
        }
        if answered {
            return;
        }
        s.prefetch = Some(Prefetch {
            id: stmt.id,
            params,
            generation,
            answer,
        });
    }
}

/// Decodes a page (its rows: the flag "equal to the bound under the order", the key, the
/// labels, the content values, in key order) into `rows`. An error is the page's
/// `invalid_page` detail.
fn decode(
    answer: &[Row],
    rows: &mut PageRows<'_>,
    kinds: &[value::ContentKind],
    key_bits: u32,
) -> Result<(), String> {
    let labels = rows.labels();
    let width = 2 + labels + kinds.len();
    // The statement's LIMIT bounds the rows; a server that sent more is not believed.
    if answer.len() > rows.rows_max() {
        return Err(format!(
            "{} rows where at most {} were asked",
            answer.len(),
            rows.rows_max()
        ));
    }
    let key_type: KeyType = rows.key_type();
    for (n, row) in answer.iter().enumerate() {
        if row.len() != width {
            return Err(format!("a page row of {} columns", row.len()));
        }
        // Each cell is read once; its bytes are counted as it is read, and the row's against
        // the page's bound once the row is through.
        let mut bytes = 0u64;
        let mut cell = |i: usize| -> Result<Option<&[u8]>, String> {
            let raw = row
                .try_get::<usize, Raw<'_>>(i)
                .map(|r| r.0)
                .map_err(|e| format!("row {} of the page: column {i}: {e}", n + 1))?;
            bytes = bytes.saturating_add(raw.map_or(1, |b| b.len() as u64));
            Ok(raw)
        };
        // `0` (an int4) on a first page, `key = bound` (a boolean) after a key.
        let equal = cell(0)?.is_some_and(|b| b.iter().any(|x| *x != 0));
        let key = cell(1)?.ok_or_else(|| "a key is NULL".to_owned())?;
        let key = value::key_of(key_type, key_bits, key)?;
        match rows.row(key, equal)? {
            Fed::Bound => {}
            Fed::Past => break,
            Fed::Item(mut r) => {
                for j in 0..labels {
                    r.label(j, cell(2 + j)? == Some(&[1u8][..]));
                }
                for (c, kind) in kinds.iter().enumerate() {
                    let raw = cell(2 + labels + c)?;
                    let v = value::content_value(*kind, raw).map_err(|p| r.problem(c, &p))?;
                    r.value(&v).map_err(|p| r.problem(c, &p))?;
                }
                r.end()?;
            }
        }
        rows.add_bytes(bytes)?;
    }
    Ok(())
}
