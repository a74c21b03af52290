//! The SQLite catalogue about a table: the key column's declared type (and so its keys'
//! class), whether it may hold NULL, the unique indexes on exactly that column and the
//! collation each proves uniqueness under, and the content columns' declared types. Runs on the
//! blocking thread that holds the connection; never reads a row of the table.

use rusqlite::Connection;

use super::connect::quote;
use super::value::{affinity, Affinity, Kind};
use crate::source::sql::dialect::{Catalogue, Target, UniqueOrder};
use crate::source::sql::key::KeyType;

/// What the probe learned.
pub(crate) struct Probed {
    pub(crate) catalogue: Catalogue,
    /// How each content column's values are read.
    pub(crate) kinds: Vec<Kind>,
}

/// Why the probe stopped.
pub(crate) enum Failure {
    /// The database failed.
    Sqlite(rusqlite::Error),
    /// The config names what the database does not have.
    Config(String),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Sqlite(e)
    }
}

/// One column of `pragma_table_info`.
struct Column {
    name: String,
    declared: String,
    notnull: bool,
    pk: i64,
}

/// The collations whose equality is their order's (SQLite's built-in ones).
const BUILT_IN: &[&str] = &["BINARY", "NOCASE", "RTRIM"];

/// Reads the catalogue about `target`.
pub(crate) fn probe(conn: &Connection, target: Target<'_>) -> Result<Probed, Failure> {
    let schema = target.table.schema.as_deref().unwrap_or("main");
    let table = &target.table.name;
    let found: Option<(String, i64)> = conn
        .prepare(
            "SELECT type, wr FROM pragma_table_list WHERE schema = ?1 AND name = ?2 COLLATE NOCASE",
        )?
        .query_row([schema, table.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some((kind, without_rowid)) = found else {
        return Err(Failure::Config(format!(
            "table: the database has no table {} in schema {}",
            quote(table),
            quote(schema)
        )));
    };
    if kind != "table" {
        return Err(Failure::Config(format!(
            "table: {} is a {kind}, not a table: no index of its own can prove its key unique",
            quote(table)
        )));
    }
    let mut columns = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1, ?2) ORDER BY cid",
        )?;
        let mut rows = stmt.query([table.as_str(), schema])?;
        while let Some(r) = rows.next()? {
            columns.push(Column {
                name: r.get(0)?,
                declared: r.get(1)?,
                notnull: r.get::<_, i64>(2)? != 0,
                pk: r.get(3)?,
            });
            if columns.len() > 100_000 {
                break;
            }
        }
    }
    let find = |name: &str| columns.iter().find(|c| c.name.eq_ignore_ascii_case(name));
    let key = find(target.key);
    let pk_columns = columns.iter().filter(|c| c.pk > 0).count();
    // `INTEGER PRIMARY KEY` of a rowid table is the rowid itself: unique without an index.
    let rowid_alias = key.is_some_and(|k| {
        k.pk > 0
            && pk_columns == 1
            && without_rowid == 0
            && k.declared.eq_ignore_ascii_case("INTEGER")
    });
    let key_type = key.and_then(|k| match affinity(&k.declared) {
        Affinity::Integer => Some(KeyType::signed(64)),
        Affinity::Text => Some(KeyType::Text),
        _ => None,
    });
    let mut unique = Vec::new();
    if rowid_alias {
        unique.push(UniqueOrder {
            name: "INTEGER PRIMARY KEY (the rowid)".to_owned(),
            collation: None,
            exact: true,
            primary: true,
        });
    }
    if key.is_some() {
        unique.extend(unique_orders(conn, schema, table, target.key, key_type)?);
    }
    let mut content = Vec::with_capacity(target.content.len());
    let mut kinds = Vec::with_capacity(target.content.len());
    for c in target.content {
        let Some(col) = find(c) else {
            return Err(Failure::Config(format!(
                "content: the table has no column {}",
                quote(c)
            )));
        };
        content.push(quote(&col.name));
        kinds.push(Kind::of(&col.declared));
    }
    Ok(Probed {
        catalogue: Catalogue {
            type_name: key.map(|k| {
                if k.declared.is_empty() {
                    "(no declared type)".to_owned()
                } else {
                    k.declared.clone()
                }
            }),
            key_type,
            nullable: key.is_some_and(|k| !k.notnull && !rowid_alias),
            unique,
            uncovered: Vec::new(),
            content,
        },
        kinds,
    })
}

/// The unique, not partial indexes whose one key column is `key`, each with the collation it
/// compares text under (none for an integer key, whose order has no collation).
fn unique_orders(
    conn: &Connection,
    schema: &str,
    table: &str,
    key: &str,
    key_type: Option<KeyType>,
) -> Result<Vec<UniqueOrder>, Failure> {
    let mut indexes: Vec<(String, String)> = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT name, origin FROM pragma_index_list(?1, ?2) WHERE \"unique\" = 1 AND partial = 0",
        )?;
        let mut rows = stmt.query([table, schema])?;
        while let Some(r) = rows.next()? {
            indexes.push((r.get(0)?, r.get(1)?));
            if indexes.len() > 10_000 {
                break;
            }
        }
    }
    let mut out = Vec::new();
    for (name, origin) in indexes {
        let mut stmt =
            conn.prepare("SELECT cid, name, coll FROM pragma_index_xinfo(?1, ?2) WHERE key = 1")?;
        let cols: Vec<(i64, Option<String>, Option<String>)> = stmt
            .query_map([name.as_str(), schema], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .take(2)
            .collect::<Result<_, _>>()?;
        let [(cid, Some(col), coll)] = cols.as_slice() else {
            continue;
        };
        if *cid < 0 || !col.eq_ignore_ascii_case(key) {
            continue;
        }
        let coll = coll.clone().unwrap_or_else(|| "BINARY".to_owned());
        let text = key_type == Some(KeyType::Text);
        out.push(UniqueOrder {
            name: quote(&name),
            // Text pages name the index's collation, so they are ordered and compared exactly
            // as the index proves the key unique.
            collation: text.then(|| coll.to_ascii_uppercase()),
            exact: !text || BUILT_IN.iter().any(|b| b.eq_ignore_ascii_case(&coll)),
            primary: origin == "pk",
        });
    }
    Ok(out)
}
