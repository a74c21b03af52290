//! One keyset page of MySQL: the core's statement run in the session's snapshot, each row
//! turned, as it arrives, into what the core makes of it (key, flag, labels, content values).
//!
//! Rows are hashed while the server is still sending the following ones, so on a machine with
//! more than one core the digests overlap the server's work instead of following it; the
//! core's one hasher serves the whole page, so a row allocates nothing for its digest.
//! (Hashing on a second thread was measured and lost: handing each decoded row to another core
//! cost more than its digest.) The page's bytes are counted while they arrive and the read
//! stops at `PAGE_SIZE_BYTES_MAX`.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

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

/// Runs `sql` with `params` and feeds its rows to `rows`.
pub(crate) async fn read(
    conn: &mut Conn,
    sql: &str,
    params: Vec<Value>,
    kinds: &[Kind],
    rows: &mut PageRows<'_>,
) -> Result<(), Stop> {
    let n_labels = rows.labels();
    let key_type = rows.key_type();
    let mut result = conn.exec_iter(sql, params).await.map_err(Stop::Driver)?;
    let mut row_no = 0usize;
    while let Some(row) = result.next().await.map_err(Stop::Driver)? {
        row_no = row_no.saturating_add(1);
        let invalid = |p: String| Stop::Invalid(format!("row {row_no} of the page: {p}"));
        let row_bytes: u64 = (0..row.len())
            .filter_map(|i| row.as_ref(i))
            .map(value_bytes)
            .sum();
        rows.add_bytes(row_bytes).map_err(Stop::Invalid)?;
        let equal = row.as_ref(0).is_some_and(value::is_set);
        let key = row
            .as_ref(1)
            .ok_or_else(|| invalid("no key column".into()))?;
        let key = value::key_of(key_type, key).map_err(invalid)?;
        match rows.row(key, equal).map_err(Stop::Invalid)? {
            Fed::Bound => {}
            Fed::Past => break,
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
    }
    result.drop_result().await.map_err(Stop::Driver)?;
    Ok(())
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
