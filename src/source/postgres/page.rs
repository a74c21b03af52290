//! One keyset page of PostgreSQL: the core's statement run in the session's transaction (or
//! its answer taken from a prefetch), the one row of arrays decoded, and its elements fed to
//! the core in key order.
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

use super::value::{self, array_elements, Raw};
use super::{call, drive, Arc, Failure, PgDialect};
use crate::source::sql::dialect::{Stmt, StmtId};
use crate::source::sql::key::{Key, KeyType, Param};
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
        let after = stmt.id == StmtId::After;
        decode(&answer, rows, &self.kinds, self.key_bits, after)
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

/// The order in which a page's elements are its rows. The page is the smallest keys, so the
/// elements go in key order where the client can tell it (integer and uuid keys; text keys
/// come ordered by the collation inside the aggregate); a page whose keys repeat is refused
/// (the unique index says they cannot).
pub(crate) fn page_order(keys: &[Key]) -> Result<Vec<usize>, String> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let comparable = keys.first().is_some_and(|k| k.client_cmp(k).is_some());
    if !comparable {
        return Ok(order);
    }
    let cmp = |a: &Key, b: &Key| a.client_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
    if !keys.windows(2).all(|w| cmp(&w[0], &w[1]).is_lt()) {
        order.sort_by(|a, b| cmp(&keys[*a], &keys[*b]));
        if order
            .windows(2)
            .any(|w| cmp(&keys[w[0]], &keys[w[1]]).is_eq())
        {
            return Err("a key appears twice in one page".to_owned());
        }
    }
    Ok(order)
}

/// Decodes a page (one row of arrays) into `rows`. An error is the page's `invalid_page`
/// detail.
fn decode(
    answer: &[Row],
    rows: &mut PageRows<'_>,
    kinds: &[value::ContentKind],
    key_bits: u32,
    after: bool,
) -> Result<(), String> {
    let row = match answer {
        [row] => row,
        _ => {
            return Err(format!(
                "{} result rows where one was expected",
                answer.len()
            ))
        }
    };
    let max = rows.rows_max();
    let labels = rows.labels();
    if row.len() != 1 + labels + kinds.len() + usize::from(after) {
        return Err(format!("a page row of {} columns", row.len()));
    }
    let column = |i: usize, rows: &mut PageRows<'_>| -> Result<Vec<Option<&[u8]>>, String> {
        let raw = row
            .try_get::<usize, Raw<'_>>(i)
            .map_err(|e| format!("column {i}: {e}"))?
            .0;
        rows.add_bytes(raw.map_or(0, |b| b.len() as u64))?;
        array_elements(raw, max).map_err(|p| format!("column {i}: {p}"))
    };
    let raw_keys = column(0, rows)?;
    let label_cols = (0..labels)
        .map(|l| column(1 + l, rows))
        .collect::<Result<Vec<_>, _>>()?;
    let content_cols = (0..kinds.len())
        .map(|c| column(1 + labels + c, rows))
        .collect::<Result<Vec<_>, _>>()?;
    let m = raw_keys.len();
    if label_cols.iter().chain(&content_cols).any(|c| c.len() != m) {
        return Err("the page's columns have different lengths".to_owned());
    }
    let key_type: KeyType = rows.key_type();
    let mut keys = Vec::with_capacity(m);
    for raw in &raw_keys {
        let raw = raw.ok_or_else(|| "a key is NULL".to_owned())?;
        keys.push(value::key_of(key_type, key_bits, raw)?);
    }
    let order = page_order(&keys)?;
    let mut keys: Vec<Option<Key>> = keys.into_iter().map(Some).collect();
    for i in order {
        let key = keys[i].take().ok_or("a key read twice")?;
        match rows.row(key, false)? {
            Fed::Bound => continue,
            Fed::Past => break,
            Fed::Item(mut r) => {
                for (j, col) in label_cols.iter().enumerate() {
                    r.label(j, col[i] == Some(&[1u8][..]));
                }
                for (c, (kind, col)) in kinds.iter().zip(&content_cols).enumerate() {
                    let v = value::content_value(*kind, col[i]).map_err(|p| r.problem(c, &p))?;
                    r.value(&v).map_err(|p| r.problem(c, &p))?;
                }
                r.end()?;
            }
        }
    }
    if after {
        let equal: i64 = row
            .try_get(row.len().saturating_sub(1))
            .map_err(|e| format!("the count of keys equal to the bound: {e}"))?;
        rows.set_equal_to_bound(u64::try_from(equal).unwrap_or(0));
    }
    Ok(())
}
