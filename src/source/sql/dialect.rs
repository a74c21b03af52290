//! What a SQL dialect supplies to the core, and the plain types they exchange.
//!
//! A dialect is the part of a SQL source that differs between servers: how identifiers are
//! quoted and parameters written, the catalogue query that says which orders the key is unique
//! under, how a snapshot is begun, imported and named, how a row's values are decoded. The
//! core (`super`) owns everything else: the key-order rule, the statements, the keyset paging,
//! the cursors, the page checks and the content digests.
//!
//! Invariants: a dialect never decides completeness, the key order or a page's end; it runs
//! the statements the core wrote with the parameters the core gave, and feeds every row it
//! reads to [`PageRows`] in the order the server sent them.

use std::future::Future;
use std::path::Path;

use serde_json::{Map, Value};

use super::key::{KeyType, Param};
use super::rows::PageRows;
use crate::json::ConfigError;
use crate::source::FetchError;

/// The connection options of one dialect: its DSN parsed, with any keys of the config file
/// that only this dialect reads. `Debug` never shows a password.
pub(crate) trait Connect: Sized + Clone + Send + std::fmt::Debug {
    /// Config keys only this dialect reads (besides the shared ones).
    const KEYS: &'static [&'static str];

    /// Query keys of an inline spec that are the driver's own DSN parameters (`sslmode`):
    /// passed on in the DSN as written.
    const DSN_KEYS: &'static [&'static str];

    /// The DSN of an inline spec: `base` (the spec before its `?`) with the driver's own
    /// parameters (`KEY=VALUE`, as written) and the password from the environment (`env`).
    /// The error never quotes a password.
    fn inline_dsn(
        base: &str,
        params: &[&str],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, String>;

    /// Parses the DSN and this dialect's own keys of `obj` (the config file's object, or an
    /// inline spec's parameters); `path` is the config file, for relative paths.
    ///
    /// # Errors
    /// What is wrong, naming the key; never quoting the DSN.
    fn parse(dsn: &str, obj: &Map<String, Value>, path: &Path) -> Result<Self, ConfigError>;

    /// The DSN without its password, for `Debug` and messages.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    fn redacted(&self) -> String;

    /// The database the DSN names, if any (a MySQL table without a schema is in it).
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    fn database(&self) -> Option<&str>;
}

/// A name of the config (the table, a column) that a dialect cannot use; the words say why
/// (the core names the key: `table`, `key`, `content[N]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NameError(pub(crate) String);

/// A table's name: an optional schema and the name, as the server spells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableName {
    /// The schema (database), when named.
    pub(crate) schema: Option<String>,
    /// The table.
    pub(crate) name: String,
}

/// How a statement parameter is written, for the dialects that type their parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamKind {
    /// A key of the key column's type.
    Key(KeyType),
    /// A row count.
    Count,
}

/// Which statement of a source this is (a dialect may prepare and keep it per session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum StmtId {
    /// The first page.
    First,
    /// A page after a key.
    After,
    /// `count(*)` of the scope.
    Count,
    /// The rows of the scope whose key is NULL.
    Nulls,
    /// The scope's smallest and largest key.
    Bounds,
}

/// What a bound parameter of a statement stands for; the core fills in its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The key the page continues from.
    Bound,
    /// The row limit.
    Limit,
    /// The span's first key.
    SpanLo,
    /// The span's last key.
    SpanLast,
}

/// A statement: its text and what each of its parameters is, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stmt {
    /// Which statement.
    pub(crate) id: StmtId,
    /// The SQL text.
    pub(crate) text: String,
    /// The parameters, in the order the text numbers them.
    pub(crate) roles: Vec<Role>,
}

/// A statement's text being written: every parameter is numbered as it is written, so the
/// text is right for numbered (`$1`) and positional (`?`) parameters alike.
pub(crate) struct SqlText {
    text: String,
    roles: Vec<Role>,
    key: KeyType,
    param: fn(usize, ParamKind) -> String,
}

impl SqlText {
    /// An empty text for a key of type `key`, with the dialect's parameter syntax.
    pub(crate) fn new(key: KeyType, param: fn(usize, ParamKind) -> String) -> SqlText {
        SqlText {
            text: String::with_capacity(256),
            roles: Vec::new(),
            key,
            param,
        }
    }

    /// Appends SQL.
    pub(crate) fn push(&mut self, sql: &str) -> &mut SqlText {
        self.text.push_str(sql);
        self
    }

    /// Appends the next parameter, standing for `role`.
    pub(crate) fn param(&mut self, role: Role) -> &mut SqlText {
        self.roles.push(role);
        let kind = match role {
            Role::Limit => ParamKind::Count,
            Role::Bound => ParamKind::Key(self.key),
            Role::SpanLo | Role::SpanLast => ParamKind::Key(self.key),
        };
        let text = (self.param)(self.roles.len(), kind);
        self.text.push_str(&text);
        self
    }

    /// The statement.
    pub(crate) fn finish(self, id: StmtId) -> Stmt {
        Stmt {
            id,
            text: self.text,
            roles: self.roles,
        }
    }
}

/// A page statement's parts ([`PageQuery::rows_sql`] puts them together, for every dialect).
#[derive(Debug)]
pub(crate) struct PageQuery<'a> {
    /// The key as it is selected, compared and ordered (with its `COLLATE`, if any).
    pub(crate) key: &'a str,
    /// The label expressions, then the content expressions.
    pub(crate) columns: &'a [String],
    /// The table, quoted.
    pub(crate) from: &'a str,
    /// The operator's `where`, parenthesised.
    pub(crate) scope: Option<&'a str>,
    /// Which ends of the span bound the key.
    pub(crate) span: (bool, bool),
    /// A page after a key: `key >= bound`, and the rows equal to the bound under the order
    /// counted.
    pub(crate) after: bool,
}

impl PageQuery<'_> {
    /// Writes ` WHERE ...` (the scope, the span, the bound), or nothing.
    /// A page as rows, for a dialect that streams them: the flag "equal to the bound under
    /// the order" (0 on a first page), the key, the labels, the content columns, ordered by
    /// the key and limited.
    pub(crate) fn rows_sql(&self, sql: &mut SqlText) {
        sql.push("SELECT ");
        if self.after {
            sql.push(self.key).push(" = ").param(Role::Bound);
        } else {
            sql.push("0");
        }
        sql.push(", ").push(self.key);
        for c in self.columns {
            sql.push(", ").push(c);
        }
        sql.push(" FROM ").push(self.from);
        self.filter(sql);
        sql.push(" ORDER BY ")
            .push(self.key)
            .push(" LIMIT ")
            .param(Role::Limit);
    }

    pub(crate) fn filter(&self, sql: &mut SqlText) {
        let mut first = true;
        let mut and = |sql: &mut SqlText| {
            sql.push(if first { " WHERE " } else { " AND " });
            first = false;
        };
        if let Some(scope) = self.scope {
            and(sql);
            sql.push(scope);
        }
        if self.span.0 {
            and(sql);
            sql.push(self.key).push(" >= ").param(Role::SpanLo);
        }
        if self.span.1 {
            and(sql);
            sql.push(self.key).push(" <= ").param(Role::SpanLast);
        }
        if self.after {
            and(sql);
            sql.push(self.key).push(" >= ").param(Role::Bound);
        }
    }
}

/// What a source asks of its snapshot before a statement (see [`decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want<'a> {
    /// A count or the key bounds: the open snapshot, or a fresh one.
    Side,
    /// A first page: a fresh snapshot (the open one if it has served no page yet), or the
    /// named one.
    First(Option<&'a str>),
    /// A continuation: the named snapshot, or none (a live scan).
    Next(Option<&'a str>),
    /// A `high_water` request: the named snapshot if it can still be had, else a fresh one
    /// that replaces it.
    HighWater(Option<&'a str>),
}

impl<'a> Want<'a> {
    /// What `request` with `snapshot` wants.
    pub(crate) fn of(request: &crate::reconcile::Request, snapshot: Option<&'a str>) -> Want<'a> {
        match request {
            crate::reconcile::Request::First => Want::First(snapshot),
            crate::reconcile::Request::Cursor(_) => Want::Next(snapshot),
            crate::reconcile::Request::After(_) => Want::HighWater(snapshot),
        }
    }
}

/// The snapshot a dialect holds, as [`decide`] sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holding<'a> {
    /// Its ID, as pages echo it (or a live session's name for itself).
    pub(crate) id: &'a str,
    /// The snapshot a `high_water` continuation replaced: requests may still name it.
    pub(crate) replaces: Option<&'a str>,
    /// Whether a page was served from it.
    pub(crate) served: bool,
}

/// What a dialect does to serve a [`Want`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Serve from the snapshot it holds.
    Keep,
    /// Begin a fresh snapshot (which replaces the named one, for a `high_water` request).
    Open {
        /// The snapshot requests may still name.
        replaces: Option<String>,
    },
    /// Try to hold the named snapshot (a dialect that cannot import one fails at once); when
    /// that fails, `otherwise`.
    Import {
        /// The snapshot.
        named: String,
        /// What to do when it cannot be held.
        otherwise: Otherwise,
    },
}

/// What follows a snapshot that cannot be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Otherwise {
    /// The request expired (`ExpiredCursor`): the contract's policy decides.
    Expired,
    /// A fresh snapshot replaces the named one (`high_water`).
    Open,
}

/// The snapshot rules of every SQL source, in one place: a continuation is served only from
/// the snapshot it names (or it expired), a first page of a pinned run likewise, and only a
/// `high_water` request may move to a fresh snapshot, which its pages then echo.
pub(crate) fn decide(want: Want<'_>, held: Option<Holding<'_>>) -> Step {
    let names = |n: &str| held.is_some_and(|h| h.id == n || h.replaces == Some(n));
    let import = |n: &str, otherwise| Step::Import {
        named: n.to_owned(),
        otherwise,
    };
    let open = Step::Open { replaces: None };
    match want {
        Want::Side | Want::Next(None) | Want::HighWater(None) => {
            if held.is_some() {
                Step::Keep
            } else {
                open
            }
        }
        Want::First(None) => match held {
            Some(h) if !h.served => Step::Keep,
            _ => open,
        },
        Want::First(Some(n)) | Want::Next(Some(n)) => {
            if names(n) {
                Step::Keep
            } else {
                import(n, Otherwise::Expired)
            }
        }
        Want::HighWater(Some(n)) => {
            if names(n) {
                Step::Keep
            } else {
                import(n, Otherwise::Open)
            }
        }
    }
}

/// The snapshot a statement runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// What pages echo (`None`: a live read, no snapshot pinned).
    pub(crate) echo: Option<String>,
    /// Rises with every transaction the dialect begins or imports, so the core knows when a
    /// check that holds per snapshot must run again.
    pub(crate) generation: u64,
}

/// The table and columns a probe asks about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The table.
    pub(crate) table: &'a TableName,
    /// The key column.
    pub(crate) key: &'a str,
    /// The content columns, in the config's order.
    pub(crate) content: &'a [String],
}

/// A unique index whose one key column is the key, and the order it proves uniqueness under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UniqueOrder {
    /// The index's name, for messages.
    pub(crate) name: String,
    /// `None`: the key column's own order; `Some(c)`: the order of collation `c` (SQL, e.g.
    /// `pg_catalog."C"`), which a query must name to page by it.
    pub(crate) collation: Option<String>,
    /// Whether equality under that order is the index's equality, so the index's uniqueness
    /// is uniqueness under the order (a deterministic collation, or the type's default
    /// operator class).
    pub(crate) exact: bool,
    /// A primary key.
    pub(crate) primary: bool,
}

/// What the catalogue says about the key column and the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Catalogue {
    /// The key column's type as the server names it (for messages); `None`: no such column.
    pub(crate) type_name: Option<String>,
    /// The key column's type, when keyset pages can take it.
    pub(crate) key_type: Option<KeyType>,
    /// The key column may hold NULL.
    pub(crate) nullable: bool,
    /// The unique indexes on exactly the key column (valid, not partial).
    pub(crate) unique: Vec<UniqueOrder>,
    /// Relations a query of the table also reads and that no unique index of the table
    /// covers (PostgreSQL inheritance children), by name.
    pub(crate) uncovered: Vec<String>,
    /// The select expression of each content column, in the config's order.
    pub(crate) content: Vec<String>,
}

/// A SQL dialect. Its value holds the connection options and the session (connection and
/// transaction); the associated functions are its syntax.
pub(crate) trait Dialect: Send + Sized {
    /// Its connection options.
    type Connect: Connect;
    /// The source kind, as a spec names it (`postgres`, `mysql`).
    const KIND: &'static str;
    /// What every cursor of this dialect begins with.
    const CURSOR_TAG: &'static str;
    /// The key column types keyset pages take, for the message that refuses another.
    const KEY_TYPES: &'static str;

    /// A dialect value (no session yet) for `connect`; `fatal` makes the errors that name the
    /// config file and the table.
    fn new(connect: Self::Connect, fatal: Fatal) -> Self;

    /// An identifier, quoted.
    fn quote(name: &str) -> String;

    /// The `n`-th parameter (from 1) of a statement.
    fn param(n: usize, kind: ParamKind) -> String;

    /// `expr` as text (counts and key bounds are read as their decimal text).
    fn text_of(expr: &str) -> String;

    /// A label's select expression: true when the predicate holds (NULL is false).
    fn label(predicate: &str) -> String;

    /// Parses the config's `table` (with the DSN's database as a default schema).
    ///
    /// # Errors
    /// What is wrong with the name.
    fn table(text: &str, connect: &Self::Connect) -> Result<TableName, NameError>;

    /// Parses one column name of the config.
    ///
    /// # Errors
    /// What is wrong with the name.
    fn column(text: &str) -> Result<String, NameError>;

    /// Whether two column names (as [`Dialect::column`] gives them) name the same column.
    fn same_column(a: &str, b: &str) -> bool {
        a == b
    }

    /// Makes the transaction that serves `want` current (the rules are [`decide`]'s).
    fn snapshot(&mut self, want: Want<'_>)
        -> impl Future<Output = Result<Held, FetchError>> + Send;

    /// Reads the catalogue about `target`. Never reads a row of the table.
    fn probe(
        &mut self,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Catalogue, FetchError>> + Send;

    /// Has the server check a statement without running it (a predicate of the config);
    /// `field` names the config key in the error.
    fn check(
        &mut self,
        sql: &str,
        field: &str,
    ) -> impl Future<Output = Result<(), FetchError>> + Send;

    /// Runs a page statement and feeds its rows to `rows` in the order the server sent them.
    fn page(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
        rows: &mut PageRows<'_>,
    ) -> impl Future<Output = Result<(), FetchError>> + Send;

    /// Sends the next page's statement ahead, so the server computes it while the current
    /// page is checkpointed; the next [`Dialect::page`] with the same statement and
    /// parameters in the same transaction takes its answer. A dialect may do nothing.
    fn ahead(&mut self, stmt: &Stmt, params: Vec<Param>) -> impl Future<Output = ()> + Send {
        let _ = (stmt, params);
        std::future::ready(())
    }

    /// Keys that cut the rows of `target` with keys in `lo..=hi` into `n` parts of about
    /// equal counts, from the server's statistics of the key or one read of the key column
    /// alone (an integer key only). `Ok(None)`: none, and `plan` cuts equal widths.
    fn quantiles(
        &mut self,
        target: Target<'_>,
        lo: i128,
        hi: i128,
        n: u32,
    ) -> impl Future<Output = Result<Option<super::quantiles::Quantiles>, FetchError>> + Send {
        let _ = (target, lo, hi, n);
        std::future::ready(Ok(None))
    }

    /// Runs a statement whose one row is text values (counts, key bounds).
    fn texts(
        &mut self,
        stmt: &Stmt,
        params: Vec<Param>,
    ) -> impl Future<Output = Result<Vec<Option<String>>, FetchError>> + Send;

    /// The traversal is over: a dialect may release its snapshot.
    fn end(&mut self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// Makes the fatal errors of a source: `table T: problem`, under the config file's name.
#[derive(Debug, Clone)]
pub(crate) struct Fatal {
    /// The config file (or the inline spec, without its password).
    pub(crate) path: std::path::PathBuf,
    /// The table as SQL.
    pub(crate) table: String,
}

impl Fatal {
    /// An error that stops the scan as an input error.
    pub(crate) fn error(&self, problem: impl std::fmt::Display) -> FetchError {
        FetchError::Fatal(crate::error::config_error(
            &self.path,
            format!("table {}: {problem}", self.table),
        ))
    }
}
