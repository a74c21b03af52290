//! Beginning a consistent snapshot and naming it.
//!
//! The snapshot ID is `FLAVOR:HOST:PORT;server_id=N;conn=C;at=UTC_TIME;POSITION` where POSITION
//! is `binlog=FILE:POS` (MariaDB: `binlog_snapshot_file`/`_position`, exactly the snapshot's
//! point), `gtid=SET` (MySQL with GTIDs: `gtid_executed` read just after the snapshot began),
//! `binlog=FILE:POS` (MySQL without GTIDs: `SHOW MASTER STATUS` just after), or
//! `no binlog position` when the server keeps no binary log. The connection ID and the time make
//! it unique: a snapshot of another connection or process never has this ID.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::digest;

/// Characters of a GTID set kept in a snapshot ID; a longer one is replaced by its digest.
const GTID_LEN_MAX: usize = 256;

use super::probe::{int, text};

/// Begins the consistent snapshot on `conn` and names it.
pub(crate) async fn begin(conn: &mut Conn) -> Result<String, mysql_async::Error> {
    // UTC, so TIMESTAMP values are read in UTC; REPEATABLE READ, which the consistent snapshot
    // needs (under READ COMMITTED each statement would see a new state).
    conn.query_drop("SET time_zone = '+00:00'").await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await?;
    snapshot_id(conn).await
}

async fn snapshot_id(conn: &mut Conn) -> Result<String, mysql_async::Error> {
    let row: Option<Row> = conn
        .query_first(
            "SELECT @@hostname, @@port, @@server_id, CONNECTION_ID(), \
             DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'), VERSION(), @@log_bin",
        )
        .await?;
    let get = |i| {
        row.as_ref()
            .and_then(|r| text(r, i))
            .unwrap_or_else(|| "?".into())
    };
    let mariadb = get(5).contains("MariaDB");
    let position = if row.as_ref().and_then(|r| int(r, 6)).unwrap_or(0) == 0 {
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
