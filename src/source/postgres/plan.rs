//! Preparing a session: the key column checked against the catalog, every operator
//! predicate checked on its own (so an error names its config key), the page statements
//! prepared once (binary protocol, one parse per session).
//!
//! Never reads a row of the table. Invariant: a `Plan` exists only for a key that is of a
//! supported type and covered by a unique, non-partial, valid index on exactly that column,
//! since a keyset scan over a non-unique key would skip the rows that share a page's last key.

use tokio_postgres::types::Type;

use super::sql::{self, ContentKind, KeyKind};
use super::{call, drive, Failure, Plan, PostgresSource};
use crate::source::FetchError;

impl PostgresSource {
    /// Prepares the session's statements, once per connection.
    pub(super) async fn plan(&mut self) -> Result<(), FetchError> {
        if self.session.as_ref().is_some_and(|s| s.plan.is_some()) {
            return Ok(());
        }
        let table = self.config.table.sql();
        let key_name = self.config.key.clone();
        let rows = call!(self, "reading the table's columns", |c| c
            .query(sql::KEY_PROBE, &[&table, &key_name]))?;
        let Some(row) = rows.first() else {
            return Err(self.fatal(format!("key: the table has no column {key_name:?}")));
        };
        let oid: u32 = row.get(0);
        let not_null: bool = row.get(1);
        let type_name: String = row.get(2);
        let unique: bool = row.get(3);
        let key = Type::from_oid(oid)
            .as_ref()
            .and_then(KeyKind::of)
            .ok_or_else(|| {
                self.fatal(format!(
                    "key: column {key_name:?} is of type {type_name}; a key must be smallint, integer, bigint, text, varchar or uuid"
                ))
            })?;
        if !unique {
            return Err(self.fatal(format!(
                "key: column {key_name:?} has no unique index of its own (a primary key or a unique, non-partial index on exactly that column): keyset pages over a key that repeats would skip rows"
            )));
        }

        if let Some(probe) = sql::where_probe(&self.config) {
            call!(self, "where", |c| c.prepare(&probe))?;
        }
        let labels = self.config.labels.clone();
        for (name, predicate) in &labels {
            let probe = sql::label_probe(&self.config, predicate);
            let doing = format!("labels.{name}");
            call!(self, &doing, |c| c.prepare(&probe))?;
        }
        let mut content = Vec::new();
        if !self.config.content.is_empty() {
            let probe = sql::content_probe(&self.config);
            let stmt = call!(self, "content", |c| c.prepare(&probe))?;
            content = stmt
                .columns()
                .iter()
                .map(|col| ContentKind::of(col.type_()))
                .collect();
        }

        if self.key_range.is_some() && !matches!(key, KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8)
        {
            return Err(self.fatal(format!(
                "key: column {key_name:?} is of type {type_name}; a contract's key_range needs an integer key (smallint, integer or bigint)"
            )));
        }
        let texts = sql::statements(&self.config, key, &content, self.key_range.is_some());
        let first = call!(self, "preparing the first-page query", |c| c
            .prepare(&texts.first))?;
        let after = call!(self, "preparing the page query", |c| c
            .prepare(&texts.after))?;
        let count = call!(self, "preparing the count query", |c| c
            .prepare(&texts.count))?;
        let null_keys = if not_null {
            None
        } else {
            Some(call!(self, "preparing the NULL-key check", |c| c
                .prepare(&texts.null_keys))?)
        };
        if let Some(s) = self.session.as_mut() {
            s.plan = Some(Plan {
                key,
                content,
                first,
                after,
                count,
                null_keys,
            });
        }
        Ok(())
    }
}
