//! Synchronized snapshots for the shards of a plan, mydumper's way: MySQL and MariaDB cannot
//! export a snapshot, but every consistent snapshot begun while no transaction can commit sees
//! the same state.
//!
//! The coordinator (`plan --hold-snapshot`) takes a user lock `scanledger:NONCE` (`GET_LOCK`),
//! then `FLUSH TABLES WITH READ LOCK`, which stops every write and every commit, and names the
//! state in a snapshot ID `mysql-sync:HOST:PORT;server_id=N;conn=C;lock=NAME;at=TIME;POSITION`
//! (the binlog position read under the lock is exactly the state's). Each shard begins its
//! `START TRANSACTION WITH CONSISTENT SNAPSHOT` and then checks that connection C still holds
//! the user lock: the coordinator gives the user lock up before `UNLOCK TABLES`, so a shard
//! that sees it held began its snapshot while the read lock was held, in the named state; a
//! shard that does not cannot join (`ExpiredCursor`), never reads another state.
//!
//! Invariant: a shard echoes the synchronized ID only after that check succeeded.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::probe::{int, text};

/// The prefix of a synchronized snapshot's ID.
pub(crate) const PREFIX: &str = crate::source::SYNC_SNAPSHOT_PREFIX;

/// The coordinator's connection that holds the read lock and the user lock.
pub(crate) struct SyncLock {
    conn: Conn,
    lock: String,
}

/// Takes the user lock and the global read lock on `conn`; the lock and the snapshot ID.
pub(crate) async fn lock(mut conn: Conn, nonce: &str) -> Result<(SyncLock, String), String> {
    let lock = format!("scanledger:{nonce}");
    let got: Option<Row> = conn
        .exec_first("SELECT GET_LOCK(?, 0)", (lock.as_str(),))
        .await
        .map_err(|e| format!("GET_LOCK: {e}"))?;
    if got.as_ref().and_then(|r| int(r, 0)) != Some(1) {
        return Err(format!("the user lock {lock} is taken by another session"));
    }
    conn.query_drop("FLUSH TABLES WITH READ LOCK")
        .await
        .map_err(|e| format!("FLUSH TABLES WITH READ LOCK: {e}"))?;
    let row: Option<Row> = conn
        .query_first(
            "SELECT @@hostname, @@port, @@server_id, CONNECTION_ID(), \
             DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'), @@log_bin",
        )
        .await
        .map_err(|e| format!("naming the state: {e}"))?;
    let get = |i| {
        row.as_ref()
            .and_then(|r| text(r, i))
            .unwrap_or_else(|| "?".into())
    };
    let position = if row.as_ref().and_then(|r| int(r, 5)).unwrap_or(0) == 0 {
        "no binlog position".to_owned()
    } else {
        position(&mut conn).await
    };
    let id = format!(
        "{PREFIX}{}:{};server_id={};conn={};lock={lock};at={};{position}",
        get(0),
        get(1),
        get(2),
        get(3),
        get(4)
    );
    Ok((SyncLock { conn, lock }, id))
}

/// The binlog position under the read lock: exactly the state every shard's snapshot sees.
async fn position(conn: &mut Conn) -> String {
    for stmt in ["SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"] {
        if let Ok(Some(r)) = conn.query_first::<Row, _>(stmt).await {
            if let (Some(f), Some(p)) = (text(&r, 0), text(&r, 1)) {
                return format!("binlog={f}:{p}");
            }
        }
    }
    "binlog position unknown".into()
}

/// Gives the user lock up, then the read lock: writers go on.
pub(crate) async fn unlock(sync: SyncLock) -> Result<(), String> {
    let SyncLock { mut conn, lock } = sync;
    conn.exec_drop("SELECT RELEASE_LOCK(?)", (lock.as_str(),))
        .await
        .map_err(|e| format!("RELEASE_LOCK: {e}"))?;
    conn.query_drop("UNLOCK TABLES")
        .await
        .map_err(|e| format!("UNLOCK TABLES: {e}"))?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// The coordinator's connection and user lock a synchronized ID names; `None` for any other
/// ID (or a malformed one, which then cannot be joined).
pub(crate) fn parse(id: &str) -> Option<(u64, &str)> {
    let rest = id.strip_prefix(PREFIX)?;
    let field = |name: &str| {
        rest.split(';')
            .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
    };
    let conn = field("conn")?.parse::<u64>().ok()?;
    let lock = field("lock")?;
    Some((conn, lock))
}

/// Whether the snapshot begun on `conn` (already in its transaction) is the synchronized state:
/// connection `holder` still holds the user lock `lock`.
pub(crate) async fn joined(conn: &mut Conn, holder: u64, lock: &str) -> Result<bool, String> {
    let row: Option<Row> = conn
        .exec_first("SELECT IS_USED_LOCK(?)", (lock,))
        .await
        .map_err(|e| format!("IS_USED_LOCK: {e}"))?;
    Ok(row
        .as_ref()
        .and_then(|r| int(r, 0))
        .and_then(|n| u64::try_from(n).ok())
        == Some(holder))
}
