//! The SQL the MySQL source sends: identifier quoting, the column plan read from
//! `information_schema` (which column maps to which content value), and the page statements.
//!
//! Identifiers are always quoted with backticks, a backtick inside doubled, so a table or column
//! name can never break out of its quotes. Predicates (`where`, labels) are trusted operator
//! SQL, inserted verbatim between parentheses and newlines (a trailing `--` comment cannot
//! swallow the closing parenthesis). Pure: no IO.

use super::config::MysqlConfig;

/// How one column's values become content values (see docs/guide-mysql.md for the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Integer types, YEAR: `ContentValue::Int`.
    Int,
    /// DECIMAL/NUMERIC: `ContentValue::Decimal` of the server's text.
    Decimal,
    /// FLOAT (single precision): its shortest round-trip decimal as a float.
    Float32,
    /// DOUBLE: `ContentValue::Float`.
    Float64,
    /// BIT(n): the big-endian bits as an integer.
    Bit,
    /// Character types, ENUM, SET: `ContentValue::Text`.
    Text,
    /// Binary types and BLOBs: `ContentValue::Bytes`.
    Bytes,
    /// DATE: `ContentValue::Date`.
    Date,
    /// DATETIME and TIMESTAMP: `ContentValue::TimestampMicros`, UTC.
    Timestamp,
    /// Anything else (TIME, JSON, UUID, INET6, spatial, ...): `CAST(... AS CHAR)` as text.
    Cast,
}

impl Kind {
    /// The kind of an `information_schema.COLUMNS.DATA_TYPE`.
    pub(crate) fn of(data_type: &str, charset: Option<&str>) -> Kind {
        match data_type.to_ascii_lowercase().as_str() {
            "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => {
                Kind::Int
            }
            "decimal" | "numeric" => Kind::Decimal,
            "float" => Kind::Float32,
            "double" | "real" | "double precision" => Kind::Float64,
            "bit" => Kind::Bit,
            "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum"
            | "set" => {
                if charset.is_some_and(|c| c.eq_ignore_ascii_case("binary")) {
                    Kind::Bytes
                } else {
                    Kind::Text
                }
            }
            "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => Kind::Bytes,
            "date" => Kind::Date,
            "datetime" | "timestamp" => Kind::Timestamp,
            _ => Kind::Cast,
        }
    }
}

/// How the key column's values become IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// An integer column: `RawId::Int` (negative values are `RawId::Other`, refused by R16).
    Int,
    /// CHAR/VARCHAR: `RawId::Str`.
    Text,
}

/// One column of the plan, as `information_schema` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnInfo {
    /// The name as the server spells it.
    pub(crate) name: String,
    /// `DATA_TYPE`.
    pub(crate) data_type: String,
    /// `COLUMN_TYPE` (e.g. `bigint(20) unsigned`), for messages.
    pub(crate) column_type: String,
    /// `IS_NULLABLE = 'YES'`.
    pub(crate) nullable: bool,
    /// `CHARACTER_SET_NAME`.
    pub(crate) charset: Option<String>,
}

/// What the source learned about the table once, before its first snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// How key values become IDs.
    pub(crate) key_kind: KeyKind,
    /// The key column may hold NULL (such rows cannot be identified; checked per snapshot).
    pub(crate) key_nullable: bool,
    /// Content column kinds, in the config's order.
    pub(crate) content: Vec<Kind>,
    /// The table is InnoDB, so `WITH CONSISTENT SNAPSHOT` pins what the pages see.
    pub(crate) consistent: bool,
    /// `SELECT ... FROM ... WHERE ... ORDER BY key LIMIT ?`.
    pub(crate) first_sql: String,
    /// The same with `key > ?` before the limit.
    pub(crate) next_sql: String,
    /// `SELECT COUNT(*) ...` of the scope.
    pub(crate) count_sql: String,
    /// `SELECT COUNT(*) ... key IS NULL` of the scope.
    pub(crate) null_keys_sql: String,
}

/// `name` quoted as a MySQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `schema`.`table`, quoted.
pub(crate) fn table_ref(c: &MysqlConfig) -> String {
    format!("{}.{}", quote(&c.schema), quote(&c.table))
}

/// The plan for `c`, given the key's and content columns' descriptions and the table's engine.
///
/// # Errors
/// A message for a key of a type keyset pages cannot use.
pub(crate) fn plan(
    c: &MysqlConfig,
    key: &ColumnInfo,
    content: &[ColumnInfo],
    consistent: bool,
) -> Result<Plan, String> {
    let key_kind = match Kind::of(&key.data_type, key.charset.as_deref()) {
        Kind::Int => KeyKind::Int,
        Kind::Text
            if matches!(
                key.data_type.to_ascii_lowercase().as_str(),
                "char" | "varchar"
            ) =>
        {
            KeyKind::Text
        }
        _ => {
            return Err(format!(
                "key column {} is {}: a key must be an integer type or CHAR/VARCHAR",
                quote(&key.name),
                key.column_type
            ))
        }
    };
    let kinds: Vec<Kind> = content
        .iter()
        .map(|col| Kind::of(&col.data_type, col.charset.as_deref()))
        .collect();
    let k = quote(&c.key);
    let mut select = format!("SELECT {k}");
    for (_, pred) in &c.labels {
        select.push_str(&format!(", CASE WHEN (\n{pred}\n) THEN 1 ELSE 0 END"));
    }
    for (col, kind) in c.content.iter().zip(&kinds) {
        let q = quote(col);
        if *kind == Kind::Cast {
            select.push_str(&format!(", CAST({q} AS CHAR CHARACTER SET utf8mb4)"));
        } else {
            select.push_str(&format!(", {q}"));
        }
    }
    if c.key_range.is_some() && key_kind != KeyKind::Int {
        return Err(format!(
            "key column {} is {}: a contract's key_range needs an integer key",
            quote(&key.name),
            key.column_type
        ));
    }
    let from = format!(" FROM {}", table_ref(c));
    // A shard's range is two bound parameters ahead of the page's own (`?` are positional):
    // `key >= ? AND key < ?` (`range_params`).
    let scope = match (&c.where_sql, c.key_range.is_some()) {
        (Some(w), true) => Some(format!("(\n{w}\n) AND {k} >= ? AND {k} < ?")),
        (None, true) => Some(format!("{k} >= ? AND {k} < ?")),
        (Some(w), false) => Some(format!("(\n{w}\n)")),
        (None, false) => None,
    };
    let with = |extra: &str| match (&scope, extra.is_empty()) {
        (None, true) => String::new(),
        (None, false) => format!(" WHERE {extra}"),
        (Some(s), true) => format!(" WHERE {s}"),
        (Some(s), false) => format!(" WHERE {s} AND {extra}"),
    };
    Ok(Plan {
        key_kind,
        key_nullable: key.nullable,
        content: kinds,
        consistent,
        first_sql: format!("{select}{from}{} ORDER BY {k} LIMIT ?", with("")),
        next_sql: format!(
            "{select}{from}{} ORDER BY {k} LIMIT ?",
            with(&format!("{k} > ?"))
        ),
        count_sql: format!("SELECT COUNT(*){from}{}", with("")),
        // Over the whole scope, with no range (and so no parameter): a NULL key is in no
        // shard, and makes every one of them incomplete.
        null_keys_sql: match &c.where_sql {
            Some(w) => format!("SELECT COUNT(*){from} WHERE (\n{w}\n) AND {k} IS NULL"),
            None => format!("SELECT COUNT(*){from} WHERE {k} IS NULL"),
        },
    })
}

/// The `information_schema` queries (parameters: schema, table).
pub(crate) const TABLE_SQL: &str = "SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";
pub(crate) const COLUMNS_SQL: &str = "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, \
     CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";
/// Unique indexes of the table: name, number of columns, one column, whether any is a prefix.
pub(crate) const UNIQUE_SQL: &str = "SELECT INDEX_NAME, COUNT(*), MAX(COLUMN_NAME), \
     MAX(SUB_PART IS NOT NULL) FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 GROUP BY INDEX_NAME";
