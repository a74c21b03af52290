//! The MySQL catalogue (`information_schema`): the table's type and engine, the key's and
//! content columns' types, and the unique indexes on exactly the key column.
//!
//! MySQL indexes compare by their column's collation, and a query compares the key by the
//! same collation, so a unique index on exactly the key (no prefix) proves it unique under the
//! order pages are read in, case-insensitive and PAD SPACE collations included ('a', 'A' and
//! 'a ' are one key to both). Never reads a row of the table.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use crate::source::sql::dialect::{Catalogue, UniqueOrder};
use crate::source::sql::key::KeyType;

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

    /// The column's select expression.
    pub(crate) fn select(self, quoted: &str) -> String {
        if self == Kind::Cast {
            format!("CAST({quoted} AS CHAR CHARACTER SET utf8mb4)")
        } else {
            quoted.to_owned()
        }
    }
}

/// One column, as `information_schema` describes it.
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

/// The key type of a column, when keyset pages can take it: an integer type (its range from
/// the type and `unsigned`), or CHAR/VARCHAR text.
pub(crate) fn key_type(col: &ColumnInfo) -> Option<KeyType> {
    let unsigned = col.column_type.to_ascii_lowercase().contains("unsigned");
    let bits = match col.data_type.to_ascii_lowercase().as_str() {
        "tinyint" => 8,
        "smallint" => 16,
        "mediumint" => 24,
        "int" | "integer" => 32,
        "bigint" => 64,
        "year" => return Some(KeyType::unsigned(16)),
        "char" | "varchar" if Kind::of(&col.data_type, col.charset.as_deref()) == Kind::Text => {
            return Some(KeyType::Text)
        }
        _ => return None,
    };
    Some(if unsigned {
        KeyType::unsigned(bits)
    } else {
        KeyType::signed(bits)
    })
}

/// `name` quoted as a MySQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The `information_schema` queries (parameters: schema, table).
const TABLE_SQL: &str = "SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";
const COLUMNS_SQL: &str = "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, \
     CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";
/// Unique indexes of the table: name, number of columns, one column, whether any is a prefix.
const UNIQUE_SQL: &str = "SELECT INDEX_NAME, COUNT(*), MAX(COLUMN_NAME), \
     MAX(SUB_PART IS NOT NULL) FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 GROUP BY INDEX_NAME";

/// Why a probe failed: the server said no, or the table cannot be scanned as configured.
pub(crate) enum Failure {
    /// A driver or server error, classified by the caller.
    Driver(mysql_async::Error),
    /// The table or its columns cannot be scanned as configured; says why.
    Config(String),
}

impl From<mysql_async::Error> for Failure {
    fn from(e: mysql_async::Error) -> Failure {
        Failure::Driver(e)
    }
}

pub(crate) fn text(row: &Row, i: usize) -> Option<String> {
    match row.as_ref(i)? {
        Value::Bytes(b) => String::from_utf8(b.clone()).ok(),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(crate) fn int(row: &Row, i: usize) -> Option<i64> {
    match row.as_ref(i)? {
        Value::Int(n) => Some(*n),
        Value::UInt(n) => i64::try_from(*n).ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// What a probe learned: the catalogue, the content kinds, and whether the table's engine
/// pins what a consistent snapshot's pages see (InnoDB).
pub(crate) struct Probed {
    pub(crate) catalogue: Catalogue,
    pub(crate) kinds: Vec<Kind>,
    pub(crate) consistent: bool,
}

/// Learns the table: the probe gives the server's own answer for privileges and names, then
/// `information_schema` gives the engine, the column types and the unique indexes.
pub(crate) async fn probe(
    conn: &mut Conn,
    schema: &str,
    table: &str,
    key: &str,
    content: &[String],
) -> Result<Probed, Failure> {
    let table_sql = format!("{}.{}", quote(schema), quote(table));
    let mut cols = vec![quote(key)];
    cols.extend(content.iter().map(|n| quote(n)));
    conn.query_drop(format!(
        "SELECT {} FROM {table_sql} LIMIT 0",
        cols.join(", ")
    ))
    .await?;

    let at = (schema, table);
    let tables: Vec<Row> = conn.exec(TABLE_SQL, at).await?;
    let Some(t) = tables.first() else {
        return Err(Failure::Config(format!(
            "{table_sql} is not listed in information_schema.TABLES"
        )));
    };
    let kind = text(t, 0).unwrap_or_default();
    if kind != "BASE TABLE" && kind != "SYSTEM VERSIONED" {
        return Err(Failure::Config(format!(
            "{table_sql} is a {kind}, not a base table: keyset pages need a unique index on the key"
        )));
    }
    let consistent = text(t, 1).is_some_and(|e| e.eq_ignore_ascii_case("InnoDB"));

    let rows: Vec<Row> = conn.exec(COLUMNS_SQL, at).await?;
    let infos: Vec<ColumnInfo> = rows
        .iter()
        .map(|r| ColumnInfo {
            name: text(r, 0).unwrap_or_default(),
            data_type: text(r, 1).unwrap_or_default(),
            column_type: text(r, 2).unwrap_or_default(),
            nullable: text(r, 3).is_some_and(|v| v == "YES"),
            charset: text(r, 4),
        })
        .collect();
    let find = |name: &str| {
        infos
            .iter()
            .find(|i| i.name.eq_ignore_ascii_case(name))
            .cloned()
            .ok_or_else(|| {
                Failure::Config(format!(
                    "column {} of {table_sql} is not listed in information_schema.COLUMNS",
                    quote(name)
                ))
            })
    };
    let key_col = find(key)?;
    let kinds = content
        .iter()
        .map(|n| find(n).map(|c| Kind::of(&c.data_type, c.charset.as_deref())))
        .collect::<Result<Vec<_>, _>>()?;

    let uniques: Vec<Row> = conn.exec(UNIQUE_SQL, at).await?;
    let unique = uniques
        .iter()
        .filter(|r| {
            int(r, 1) == Some(1)
                && text(r, 2).is_some_and(|n| n.eq_ignore_ascii_case(key))
                && int(r, 3) == Some(0)
        })
        .map(|r| {
            let name = text(r, 0).unwrap_or_default();
            UniqueOrder {
                primary: name == "PRIMARY",
                name,
                collation: None,
                exact: true,
            }
        })
        .collect();
    Ok(Probed {
        catalogue: Catalogue {
            type_name: Some(key_col.column_type.clone()),
            key_type: key_type(&key_col),
            nullable: key_col.nullable,
            unique,
            uncovered: Vec::new(),
            content: content
                .iter()
                .zip(&kinds)
                .map(|(c, k)| k.select(&quote(c)))
                .collect(),
        },
        kinds,
        consistent,
    })
}
