//! The conversations with the server that are not pages: learning the table once
//! (`information_schema`), and beginning a consistent snapshot and naming it.
//!
//! The snapshot ID is `FLAVOR:HOST:PORT;server_id=N;conn=C;at=UTC_TIME;POSITION` where POSITION
//! is `binlog=FILE:POS` (MariaDB: `binlog_snapshot_file`/`_position`, exactly the snapshot's
//! point), `gtid=SET` (MySQL with GTIDs: `gtid_executed` read just after the snapshot began),
//! `binlog=FILE:POS` (MySQL without GTIDs: `SHOW MASTER STATUS` just after), or
//! `no binlog position` when the server keeps no binary log. The connection ID and the time make
//! it unique: a snapshot of another connection or process never has this ID.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Statement, Value};

use super::config::MysqlConfig;
use super::sql::{self, ColumnInfo, Plan};
use crate::digest;

/// Characters of a GTID set kept in a snapshot ID; a longer one is replaced by its digest.
const GTID_LEN_MAX: usize = 256;

/// Why a step failed: the server said no, or the config cannot work.
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

fn text(row: &Row, i: usize) -> Option<String> {
    match row.as_ref(i)? {
        Value::Bytes(b) => String::from_utf8(b.clone()).ok(),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        _ => None,
    }
}

fn int(row: &Row, i: usize) -> Option<i64> {
    match row.as_ref(i)? {
        Value::Int(n) => Some(*n),
        Value::UInt(n) => i64::try_from(*n).ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Learns the table: the probe gives the server's own answer for privileges and names, then
/// `information_schema` gives the engine, the column types and the unique indexes.
pub(crate) async fn introspect(conn: &mut Conn, c: &MysqlConfig) -> Result<Plan, Failure> {
    let table = sql::table_ref(c);
    let mut cols = vec![sql::quote(&c.key)];
    cols.extend(c.content.iter().map(|n| sql::quote(n)));
    conn.query_drop(format!("SELECT {} FROM {table} LIMIT 0", cols.join(", ")))
        .await?;

    let at = (c.schema.as_str(), c.table.as_str());
    let tables: Vec<Row> = conn.exec(sql::TABLE_SQL, at).await?;
    let Some(t) = tables.first() else {
        return Err(Failure::Config(format!(
            "{table} is not listed in information_schema.TABLES"
        )));
    };
    let kind = text(t, 0).unwrap_or_default();
    if kind != "BASE TABLE" && kind != "SYSTEM VERSIONED" {
        return Err(Failure::Config(format!(
            "{table} is a {kind}, not a base table: keyset pages need a unique index on the key"
        )));
    }
    let consistent = text(t, 1).is_some_and(|e| e.eq_ignore_ascii_case("InnoDB"));

    let rows: Vec<Row> = conn.exec(sql::COLUMNS_SQL, at).await?;
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
                    "column {} of {table} is not listed in information_schema.COLUMNS",
                    sql::quote(name)
                ))
            })
    };
    let key = find(&c.key)?;
    let content = c
        .content
        .iter()
        .map(|n| find(n))
        .collect::<Result<Vec<_>, _>>()?;

    let uniques: Vec<Row> = conn.exec(sql::UNIQUE_SQL, at).await?;
    let unique = uniques.iter().any(|r| {
        int(r, 1) == Some(1)
            && text(r, 2).is_some_and(|n| n.eq_ignore_ascii_case(&c.key))
            && int(r, 3) == Some(0)
    });
    if !unique {
        return Err(Failure::Config(format!(
            "key column {} of {table} has no single-column PRIMARY KEY or UNIQUE index: \
             keyset pages could skip rows that share a key",
            sql::quote(&c.key)
        )));
    }
    sql::plan(c, &key, &content, consistent).map_err(Failure::Config)
}

/// What beginning a snapshot yields: its ID, the two page statements, and the number of rows
/// of the scope with a NULL key (when the key column is nullable).
pub(crate) type Begun = (String, Statement, Statement, u64);

/// Begins the consistent snapshot on `conn` and prepares the page statements in it.
pub(crate) async fn begin(conn: &mut Conn, plan: &Plan) -> Result<Begun, Failure> {
    // UTC, so TIMESTAMP values are read in UTC; REPEATABLE READ, which the consistent snapshot
    // needs (under READ COMMITTED each statement would see a new state).
    conn.query_drop("SET time_zone = '+00:00'").await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await?;
    let id = snapshot_id(conn).await?;
    let first = conn.prep(plan.first_sql.as_str()).await?;
    let next = conn.prep(plan.next_sql.as_str()).await?;
    let null_keys = if plan.key_nullable {
        let row: Option<Row> = conn.query_first(plan.null_keys_sql.as_str()).await?;
        row.and_then(|r| int(&r, 0))
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0)
    } else {
        0
    };
    Ok((id, first, next, null_keys))
}

async fn snapshot_id(conn: &mut Conn) -> Result<String, Failure> {
    let row: Option<Row> = conn
        .query_first(
            "SELECT @@hostname, @@port, @@server_id, CONNECTION_ID(), \
             DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'), VERSION(), @@log_bin",
        )
        .await?;
    let row = row.ok_or_else(|| Failure::Config("the server did not describe itself".into()))?;
    let get = |i| text(&row, i).unwrap_or_else(|| "?".into());
    let mariadb = get(5).contains("MariaDB");
    let position = if int(&row, 6).unwrap_or(0) == 0 {
        "no binlog position".to_owned()
    } else if mariadb {
        mariadb_position(conn).await
    } else {
        mysql_position(conn).await
    };
    Ok(format!(
        "{}:{}:{};server_id={};conn={};at={};{position}",
        if mariadb { "mariadb" } else { "mysql" },
        get(0),
        get(1),
        get(2),
        get(3),
        get(4),
    ))
}

/// MariaDB reports the binlog position of the consistent snapshot itself.
async fn mariadb_position(conn: &mut Conn) -> String {
    let rows: Vec<Row> = conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .unwrap_or_default();
    let find = |name: &str| {
        rows.iter()
            .find(|r| text(r, 0).is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .and_then(|r| text(r, 1))
            .filter(|v| !v.is_empty())
    };
    match (
        find("binlog_snapshot_file"),
        find("binlog_snapshot_position"),
    ) {
        (Some(f), Some(p)) => format!("binlog={f}:{p}"),
        _ => "binlog position unknown".into(),
    }
}

/// MySQL has no snapshot-consistent position: the GTID set (or binlog position) read just after
/// the snapshot began, which is at or after the snapshot's point.
async fn mysql_position(conn: &mut Conn) -> String {
    let gtid: Option<Row> = conn
        .query_first("SELECT @@GLOBAL.gtid_mode, @@GLOBAL.gtid_executed")
        .await
        .ok()
        .flatten();
    if let Some(r) = gtid {
        if text(&r, 0).is_some_and(|m| m.eq_ignore_ascii_case("ON")) {
            let set: String = text(&r, 1)
                .unwrap_or_default()
                .chars()
                .filter(|ch| !ch.is_whitespace())
                .collect();
            return if set.len() <= GTID_LEN_MAX {
                format!("gtid={set}")
            } else {
                format!(
                    "gtid-sha256={}",
                    digest::hex(&digest::sha256(set.as_bytes()))
                )
            };
        }
    }
    for stmt in ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"] {
        if let Ok(Some(r)) = conn.query_first::<Row, _>(stmt).await {
            if let (Some(f), Some(p)) = (text(&r, 0), text(&r, 1)) {
                return format!("binlog={f}:{p}");
            }
        }
    }
    "binlog position unknown".into()
}
