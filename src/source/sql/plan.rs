//! The key-order rule and the statements of a source.
//!
//! A keyset scan reads `ORDER BY key` pages bounded by `key >= last`: it sees every row only if
//! no two rows are equal under that order. So the pages are ordered and bounded by exactly the
//! order under which a unique index proves the key unique, in every relation the query reads,
//! or the scan is refused before it reads a row, saying why ([`decide`]). Pure: no IO.
//!
//! Invariants: every identifier in a statement is quoted by the dialect; operator predicates
//! are parenthesised and end with a newline, so a trailing `--` comment cannot swallow the
//! rest of the statement; a page statement asks for one row more than the page (and after a
//! key, for the key's own row too), so the end of the scan is known, never guessed from a
//! short page.

use super::config::SqlConfig;
use super::dialect::{Catalogue, Dialect, PageQuery, Role, SqlText, Stmt, StmtId, UniqueOrder};
use super::key::{KeyType, Span};

/// What a source learned from the catalogue, and the statements it reads with.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The key column's type.
    pub(crate) key_type: KeyType,
    /// The key column may hold NULL (checked once per snapshot).
    pub(crate) nullable: bool,
    /// The index whose order the pages follow, for messages.
    pub(crate) order: UniqueOrder,
    /// The span's bounds as parameters, within the key's type.
    pub(crate) span: (Option<i128>, Option<i128>),
    /// The first page.
    pub(crate) first: Stmt,
    /// A page after a key.
    pub(crate) after: Stmt,
    /// `count(*)` of the scope (within the span).
    pub(crate) count: Stmt,
    /// The scope's rows with a NULL key (the whole scope: such a row is in no span).
    pub(crate) nulls: Stmt,
    /// The scope's smallest and largest key (the whole scope).
    pub(crate) bounds: Stmt,
}

/// Why no order proves the key unique, so the scan is refused before it reads a row. `key` is
/// the key column, quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyOrderError {
    /// The table has no such column.
    #[error("key: the table has no column {key}")]
    NoColumn { key: String },
    /// The query also reads relations (inheritance children) no unique index covers.
    #[error(
        "key: a query of the table also reads {} (inheritance children), which its unique indexes do not cover: \
         a key may repeat there, so keyset pages could skip rows; scan each table on its own, \
         or make the table partitioned with a unique index on {key}",
        uncovered.join(", ")
    )]
    Uncovered { key: String, uncovered: Vec<String> },
    /// No unique index on exactly the key column.
    #[error(
        "key: column {key} has no unique index of its own (no single-column PRIMARY KEY or UNIQUE index, valid, \
         not partial, on exactly that column): keyset pages over a key that repeats would skip rows"
    )]
    NotUnique { key: String },
    /// The key column's type is not one keyset pages take.
    #[error("key: column {key} is of type {type_name}; a key must be {expected}")]
    KeyType {
        key: String,
        type_name: String,
        expected: &'static str,
    },
    /// A contract's key range needs an integer key.
    #[error(
        "key: column {key} is of type {type_name}; a contract's key_range needs an integer key"
    )]
    RangeNeedsInteger { key: String, type_name: String },
    /// Every unique index compares with an equality other than its collation's.
    #[error(
        "key: the unique indexes on {key} ({}) compare with an operator class whose equality is not \
         their collation's: no order is proven unique, so keyset pages could skip rows",
        indexes.join(", ")
    )]
    NoExactOrder { key: String, indexes: Vec<String> },
}

/// The order pages may be read in, from what the catalogue says.
///
/// # Errors
/// Why there is none: the scan's refusal, before any row is read.
pub(crate) fn decide<D: Dialect>(
    cat: &Catalogue,
    key: &str,
    span: Option<Span>,
) -> Result<(KeyType, UniqueOrder), KeyOrderError> {
    let key = D::quote(key);
    let Some(type_name) = &cat.type_name else {
        return Err(KeyOrderError::NoColumn { key });
    };
    if !cat.uncovered.is_empty() {
        let uncovered = cat.uncovered.clone();
        return Err(KeyOrderError::Uncovered { key, uncovered });
    }
    if cat.unique.is_empty() {
        return Err(KeyOrderError::NotUnique { key });
    }
    let type_name = type_name.clone();
    let Some(key_type) = cat.key_type else {
        let expected = D::KEY_TYPES;
        return Err(KeyOrderError::KeyType {
            key,
            type_name,
            expected,
        });
    };
    if span.is_some() && !key_type.is_int() {
        return Err(KeyOrderError::RangeNeedsInteger { key, type_name });
    }
    // Paging by the key column's own order keeps the statements as they are (and the index
    // usable); a primary key first.
    let rank = |o: &UniqueOrder| (o.collation.is_some(), !o.primary);
    let mut exact: Vec<&UniqueOrder> = cat.unique.iter().filter(|o| o.exact).collect();
    exact.sort_by_key(|o| rank(o));
    match exact.first() {
        Some(o) => Ok((key_type, (*o).clone())),
        None => Err(KeyOrderError::NoExactOrder {
            key,
            indexes: cat.unique.iter().map(|o| o.name.clone()).collect(),
        }),
    }
}

/// The statements of `config` paged by `order`.
pub(crate) fn plan<D: Dialect>(
    config: &SqlConfig,
    cat: &Catalogue,
    key_type: KeyType,
    order: UniqueOrder,
    span: Option<Span>,
) -> Plan {
    let quoted = D::quote(&config.key);
    let key = match &order.collation {
        Some(c) => format!("{quoted} COLLATE {c}"),
        None => quoted.clone(),
    };
    let from = config.table_sql::<D>();
    let scope = config.where_sql.as_ref().map(|w| format!("(\n{w}\n)"));
    let span = span.map_or((None, None), |s| s.params(key_type));
    let mut columns: Vec<String> = config
        .labels
        .iter()
        .map(|(_, predicate)| D::label(predicate))
        .collect();
    columns.extend(cat.content.iter().cloned());
    let query = |after: bool| PageQuery {
        key: &key,
        columns: &columns,
        from: &from,
        scope: scope.as_deref(),
        span: (span.0.is_some(), span.1.is_some()),
        after,
    };
    let page = |after: bool, id: StmtId| {
        let mut sql = SqlText::new(key_type, D::param);
        query(after).rows_sql(&mut sql);
        sql.finish(id)
    };
    let first = page(false, StmtId::First);
    let after = page(true, StmtId::After);

    let mut count = SqlText::new(key_type, D::param);
    count
        .push("SELECT ")
        .push(&D::text_of("count(*)"))
        .push(" FROM ")
        .push(&from);
    query(false).filter(&mut count);

    let mut nulls = SqlText::new(key_type, D::param);
    nulls
        .push("SELECT ")
        .push(&D::text_of("count(*)"))
        .push(" FROM ")
        .push(&from)
        .push(" WHERE ");
    if let Some(s) = &scope {
        nulls.push(s).push(" AND ");
    }
    nulls.push(&quoted).push(" IS NULL");

    let mut bounds = SqlText::new(key_type, D::param);
    bounds
        .push("SELECT ")
        .push(&D::text_of(&format!("min({quoted})")))
        .push(", ")
        .push(&D::text_of(&format!("max({quoted})")))
        .push(" FROM ")
        .push(&from);
    if let Some(s) = &scope {
        bounds.push(" WHERE ").push(s);
    }
    Plan {
        key_type,
        nullable: cat.nullable,
        order,
        span,
        first,
        after,
        count: count.finish(StmtId::Count),
        nulls: nulls.finish(StmtId::Nulls),
        bounds: bounds.finish(StmtId::Bounds),
    }
}

impl Plan {
    /// The parameters of `stmt`: `bound` and `limit` where it takes them, the span's bounds.
    pub(crate) fn params(
        &self,
        stmt: &Stmt,
        bound: Option<&super::key::Key>,
        limit: i128,
    ) -> Vec<super::key::Param> {
        use super::key::Param;
        stmt.roles
            .iter()
            .map(|role| match role {
                Role::Bound => bound.map_or(Param::Int(0), super::key::Key::param),
                Role::Limit => Param::Int(limit),
                Role::SpanLo => Param::Int(self.span.0.unwrap_or(0)),
                Role::SpanLast => Param::Int(self.span.1.unwrap_or(0)),
            })
            .collect()
    }
}

/// A `where` check alone, to name the key when the server refuses it.
pub(crate) fn where_check<D: Dialect>(config: &SqlConfig) -> Option<String> {
    config.where_sql.as_ref().map(|w| {
        format!(
            "SELECT 1 FROM {} WHERE (\n{w}\n) LIMIT 0",
            config.table_sql::<D>()
        )
    })
}

/// A label check alone.
pub(crate) fn label_check<D: Dialect>(config: &SqlConfig, predicate: &str) -> String {
    format!(
        "SELECT {} FROM {} LIMIT 0",
        D::label(predicate),
        config.table_sql::<D>()
    )
}
