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
//! A page read ahead (`fetch_rows`, while the collector checkpoints the page before it) is
//! kept as rows, within the same bounds, and fed to the core when it asks (`feed_all`).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use super::probe::Kind;
use super::value;
use crate::contract::PAGE_SIZE_BYTES_MAX;
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
    let mut result = conn.exec_iter(sql, params).await.map_err(Stop::Driver)?;
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

/// Feeds rows already read (a prefetched page's) to `rows`.
pub(crate) fn feed_all(read: &[Row], kinds: &[Kind], rows: &mut PageRows<'_>) -> Result<(), Stop> {
    for (i, row) in read.iter().enumerate() {
        if !feed(row, i.saturating_add(1), kinds, rows)? {
            break;
        }
    }
    Ok(())
}

/// Runs `sql` with `params` and keeps its rows: a page read ahead, before the core asks for
/// it. At most the statement's row limit, and the read stops once the rows pass
/// `PAGE_SIZE_BYTES_MAX` bytes (the row that passes it is kept, so feeding the rows meets the
/// same bound as a direct read).
pub(crate) async fn fetch_rows(
    conn: &mut Conn,
    sql: &str,
    params: Vec<Value>,
) -> Result<Vec<Row>, mysql_async::Error> {
    let mut result = conn.exec_iter(sql, params).await?;
    let mut out = Vec::new();
    let mut bytes = 0u64;
    while let Some(row) = result.next().await? {
        bytes = bytes.saturating_add(row_bytes(&row));
        out.push(row);
        if bytes > PAGE_SIZE_BYTES_MAX {
            break;
        }
    }
    result.drop_result().await?;
    Ok(out)
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
    rows.add_bytes(row_bytes(row)).map_err(Stop::Invalid)?;
    let equal = row.as_ref(0).is_some_and(value::is_set);
    let key = row
        .as_ref(1)
        .ok_or_else(|| invalid("no key column".into()))?;
    let key = value::key_of(key_type, key).map_err(invalid)?;
    match rows.row(key, equal).map_err(Stop::Invalid)? {
        Fed::Bound => {}
        Fed::Past => return Ok(false),
        Fed::Item(mut r) => {
            for j in 0..n_labels {
                r.label(j, row.as_ref(2 + j).is_some_and(value::is_set));
            }
            let cell = |c: usize| row.as_ref(2 + n_labels + c).unwrap_or(&value::NULL);
            value::each_content(kinds, cell, |cv| r.value(cv))
                .map_err(|(c, p)| Stop::Invalid(r.problem(c, &p)))?;
            r.end().map_err(Stop::Invalid)?;
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
