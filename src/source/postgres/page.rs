//! One keyset page: the request turned into a key bound, the prepared statement run in the
//! session's transaction, the rows decoded into a page that echoes the transaction's
//! snapshot.
//!
//! Never opens a transaction (the caller has made the right one current) and never decides
//! the end from a short page: a page has a `next` cursor exactly when the query found a row
//! past it.
//!
//! Prefetch: when a page has a successor, its query is sent before the page is returned, so
//! the server computes it while the collector reconciles and checkpoints; the next request
//! takes the answer if it asks for exactly that page in the same transaction, and otherwise
//! the prefetched answer is dropped (the driver discards it). Nothing runs in the
//! background: the request is written to the socket, and the server's answer waits in the
//! socket buffers until the next call reads it. With `page_delay_ms` there is no prefetch,
//! so the delay spares the server as it says.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::sql::{self, KeyParam};
use super::{call, drive, Arc, Failure, PostgresSource};
use crate::contract::Page;
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest};

/// A page query already sent: its key bound, size and snapshot, and the answer to come.
pub(super) struct Prefetch {
    bound: KeyParam,
    page_size: u32,
    snapshot: String,
    answer: Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send>>,
}

impl PostgresSource {
    /// Serves `req` from the current transaction.
    pub(super) async fn page(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let (plan_key, first, after, null_keys, snapshot, keys_checked) = {
            let s = self.session.as_ref().ok_or(FetchError::ServerError)?;
            let plan = s.plan.as_ref().ok_or(FetchError::ServerError)?;
            let txn = s.txn.as_ref().ok_or(FetchError::ServerError)?;
            (
                plan.key,
                plan.first.clone(),
                plan.after.clone(),
                plan.null_keys.clone(),
                txn.snapshot.clone(),
                txn.keys_checked,
            )
        };
        if let (Some(stmt), false) = (null_keys, keys_checked) {
            let row = call!(self, "checking for NULL keys", |c| c.query_one(&stmt, &[]))?;
            if row.get::<_, bool>(0) {
                return Err(FetchError::InvalidPage {
                    detail: format!(
                        "table {} has rows whose key {:?} is NULL: keyset pages cannot reach them, so the scan could never be complete",
                        self.config.table, self.config.key
                    ),
                });
            }
            if let Some(txn) = self.session.as_mut().and_then(|s| s.txn.as_mut()) {
                txn.keys_checked = true;
            }
        }

        let bound = match &req.request {
            Request::First => None,
            Request::Cursor(c) => Some(KeyParam::from_cursor(plan_key, c).ok_or_else(|| {
                FetchError::InvalidPage {
                    detail: "the stored cursor was not made by this source for this key column"
                        .to_owned(),
                }
            })?),
            Request::After(k) => {
                Some(
                    KeyParam::from_text(plan_key, k).ok_or_else(|| FetchError::InvalidPage {
                        detail: format!(
                            "the high-water key {k:?} is not a value of key column {:?}",
                            self.config.key
                        ),
                    })?,
                )
            }
        };
        let page_size = usize::try_from(req.page_size).unwrap_or(usize::MAX);
        // One row past the page tells whether another page exists.
        let limit = i64::from(req.page_size).saturating_add(1);
        let prefetched = self
            .session
            .as_mut()
            .and_then(|s| s.prefetch.take())
            .filter(|p| {
                Some(&p.bound) == bound.as_ref()
                    && p.page_size == req.page_size
                    && p.snapshot == snapshot
            });
        let range = self.range_params();
        let rows = match (prefetched, &bound) {
            (Some(p), _) => {
                let answer = p.answer;
                call!(self, "reading a page", |_c| answer)?
            }
            (None, None) => {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
                params.extend(range.iter().map(|p| p as &(dyn ToSql + Sync)));
                call!(self, "reading a page", |c| c.query(&first, &params))?
            }
            (None, Some(key)) => {
                let key: &(dyn ToSql + Sync) = match key {
                    KeyParam::Int(n) => n,
                    KeyParam::Text(s) => s,
                };
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![key, &limit];
                params.extend(range.iter().map(|p| p as &(dyn ToSql + Sync)));
                call!(self, "reading a page", |c| c.query(&after, &params))?
            }
        };
        let content_kinds = self
            .session
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .map(|p| p.content.clone())
            .unwrap_or_default();
        let decoded = sql::decode(
            &rows,
            page_size,
            plan_key,
            &self.config.labels,
            &content_kinds,
            &self.config.content,
        )
        .map_err(|detail| FetchError::InvalidPage { detail })?;
        let next = if decoded.more {
            decoded.last.as_ref().map(KeyParam::cursor)
        } else {
            None
        };
        if let (true, Some(last)) = (decoded.more, &decoded.last) {
            if self.config.page_delay.is_zero() {
                self.prefetch(last.clone(), req.page_size, snapshot.clone(), after, limit)
                    .await;
            }
        }
        Ok(Page {
            items: decoded.items,
            complete: Some(next.is_none()),
            next,
            snapshot: Some(snapshot),
            query: None,
            truncated: false,
            total: None,
            size_bytes: decoded.size_bytes,
        })
    }

    /// Sends the query of the page after `bound` and returns without its answer.
    async fn prefetch(
        &mut self,
        bound: KeyParam,
        page_size: u32,
        snapshot: String,
        after: tokio_postgres::Statement,
        limit: i64,
    ) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let client = Arc::clone(&s.client);
        let key = bound.clone();
        let range = self
            .key_range
            .map_or_else(Vec::new, |(lo, last)| vec![lo, last]);
        let mut answer: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(async move {
            let key: &(dyn ToSql + Sync) = match &key {
                KeyParam::Int(n) => n,
                KeyParam::Text(s) => s,
            };
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![key, &limit];
            params.extend(range.iter().map(|p| p as &(dyn ToSql + Sync)));
            client.query(&after, &params).await
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
            bound,
            page_size,
            snapshot,
            answer,
        });
    }
}
