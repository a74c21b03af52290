//! One keyset page of MySQL: the core's statement run in the session's snapshot, each row
//! turned, as it arrives, into what the core makes of it (key, flag, labels, content values).
//!
//! Rows are hashed while the server is still sending the following ones, so on a machine with
//! more than one core the digests overlap the server's work instead of following it; the
//! core's one hasher serves the whole page, so a row allocates nothing for its digest.
//! (Hashing on a second thread was measured and lost: handing each decoded row to another core
//! cost more than its digest.) The page's bytes are counted while they arrive and the read
//! stops at `PAGE_SIZE_BYTES_MAX`.
//!
//! A page sent ahead (`send`, while the collector checkpoints the page before it) waits on
//! the connection, its rows unread, until the core asks for it (`read_sent`): its rows are
//! then hashed as they arrive, as any page's, within the same bounds.

use mysql_async::prelude::Queryable;
use mysql_async::{BinaryProtocol, Conn, QueryResult, Row, Value};

use super::probe::Kind;
use super::value;
use crate::source::sql::rows::{Fed, PageRows};

/// Why a page could not be read.
pub(crate) enum Stop {
    /// The driver or the server failed.
    Driver(mysql_async::Error),
    /// A row cannot be an item (R16); says which and why.
    Invalid(String),
}

/// Runs `sql` with `params` and feeds its rows to `rows` as they arrive.
pub(crate) async fn read(
    conn: &mut Conn,
    sql: &str,
    params: Vec<Value>,
    kinds: &[Kind],
    rows: &mut PageRows<'_>,
) -> Result<(), Stop> {
    let result = conn.exec_iter(sql, params).await.map_err(Stop::Driver)?;
    stream(result, kinds, rows).await
}

/// Sends `sql` with `params` and waits only for the head of its answer (the columns): the
/// rows stay on the connection, for [`read_sent`] (a page sent ahead).
pub(crate) async fn send(
    conn: &mut Conn,
    sql: &str,
    params: Vec<Value>,
) -> Result<(), mysql_async::Error> {
    conn.exec_iter(sql, params).await.map(drop)
}

/// Feeds to `rows`, as they arrive, the rows of the statement [`send`] left on `conn`.
pub(crate) async fn read_sent(
    conn: &mut Conn,
    kinds: &[Kind],
    rows: &mut PageRows<'_>,
) -> Result<(), Stop> {
    stream(QueryResult::<BinaryProtocol>::new(conn), kinds, rows).await
}

/// Drops what is left of the statement [`send`] left on `conn`, so another can run.
pub(crate) async fn drop_sent(conn: &mut Conn) -> Result<(), mysql_async::Error> {
    QueryResult::<BinaryProtocol>::new(conn).drop_result().await
}

async fn stream(
    mut result: QueryResult<'_, 'static, BinaryProtocol>,
    kinds: &[Kind],
    rows: &mut PageRows<'_>,
) -> Result<(), Stop> {
    let mut row_no = 0usize;
    while let Some(row) = result.next().await.map_err(Stop::Driver)? {
        row_no = row_no.saturating_add(1);
        if !feed(&row, row_no, kinds, rows)? {
            break;
        }
    }
    result.drop_result().await.map_err(Stop::Driver)?;
    Ok(())
}

fn row_bytes(row: &Row) -> u64 {
    (0..row.len())
        .filter_map(|i| row.as_ref(i))
        .map(value_bytes)
        .sum()
}

/// Feeds one row (1-based `row_no`) to `rows`; `false` once the page is past its end.
fn feed(row: &Row, row_no: usize, kinds: &[Kind], rows: &mut PageRows<'_>) -> Result<bool, Stop> {
    let n_labels = rows.labels();
    let key_type = rows.key_type();
    let invalid = |p: String| Stop::Invalid(format!("row {row_no} of the page: {p}"));
    rows.add_bytes(row_bytes(row))
        .map_err(|e| Stop::Invalid(e.into()))?;
    let equal = row.as_ref(0).is_some_and(value::is_set);
    let key = row
        .as_ref(1)
        .ok_or_else(|| invalid("no key column".into()))?;
    let key = value::key_of(key_type, key).map_err(invalid)?;
    match rows.row(key, equal).map_err(|e| Stop::Invalid(e.into()))? {
        Fed::Bound => {}
        Fed::Past => return Ok(false),
        Fed::Item(mut r) => {
            for j in 0..n_labels {
                r.label(j, row.as_ref(2 + j).is_some_and(value::is_set));
            }
            let cell = |c: usize| row.as_ref(2 + n_labels + c).unwrap_or(&value::NULL);
            value::each_content(kinds, cell, |cv| r.value(cv).map_err(String::from))
                .map_err(|(c, p)| Stop::Invalid(r.problem(c, &p)))?;
            r.end().map_err(|e| Stop::Invalid(e.into()))?;
        }
    }
    Ok(true)
}

fn value_bytes(v: &Value) -> u64 {
    match v {
        Value::NULL => 1,
        Value::Bytes(b) => u64::try_from(b.len()).unwrap_or(u64::MAX),
        Value::Float(_) => 4,
        Value::Int(_) | Value::UInt(_) | Value::Double(_) => 8,
        Value::Date(..) => 11,
        Value::Time(..) => 12,
    }
}
