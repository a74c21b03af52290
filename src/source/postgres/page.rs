//! One keyset page: the request turned into a key bound, the prepared statement run in the
//! session's transaction, the rows decoded into a page that echoes the transaction's
//! snapshot.
//!
//! Never opens a transaction (the caller has made the right one current) and never decides
//! the end from a short page: a page has a `next` cursor exactly when the query found a row
//! past it.

use tokio_postgres::types::ToSql;

use super::sql::{self, KeyParam};
use super::{call, drive, Failure, PostgresSource};
use crate::contract::Page;
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest};

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
        let rows = match &bound {
            None => call!(self, "reading a page", |c| c.query(&first, &[&limit]))?,
            Some(key) => {
                let key: &(dyn ToSql + Sync) = match key {
                    KeyParam::Int(n) => n,
                    KeyParam::Text(s) => s,
                };
                call!(self, "reading a page", |c| c.query(&after, &[key, &limit]))?
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
}
