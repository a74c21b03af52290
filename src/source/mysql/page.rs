//! One keyset page: stream at most `page_size + 1` rows and turn each, as it arrives, into an
//! item (ID, labels, content digest).
//!
//! Rows are hashed while the server is still sending the following ones, so on a machine with
//! more than one core the digests overlap the server's work instead of following it; one
//! hasher serves the whole page, so a row allocates nothing for its
//! digest. (Hashing on a second thread was measured and lost: handing each decoded row to
//! another core cost more than its digest.) The page's bytes are counted while they arrive and
//! the read stops at `PAGE_SIZE_BYTES_MAX`.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Statement, Value};

use super::config::MysqlConfig;
use super::sql::Plan;
use super::value;
use crate::content::RecordHasher;
use crate::contract::{Item, PAGE_SIZE_BYTES_MAX};

/// A page read from the server.
pub(crate) struct Rows {
    /// The first `page_size` rows as items.
    pub(crate) items: Vec<Item>,
    /// A row past `page_size` exists: this is not the last page.
    pub(crate) more: bool,
    /// Bytes of the values read.
    pub(crate) size_bytes: u64,
}

/// Why a page could not be read.
pub(crate) enum Stop {
    /// The driver or the server failed.
    Driver(mysql_async::Error),
    /// A row cannot be an item (R16); says which and why.
    Invalid(String),
}

/// Runs `stmt` with `params` and reads the page.
pub(crate) async fn read(
    conn: &mut Conn,
    stmt: &Statement,
    params: Vec<Value>,
    page_size: u32,
    plan: &Plan,
    config: &MysqlConfig,
) -> Result<Rows, Stop> {
    let want = usize::try_from(page_size).unwrap_or(usize::MAX);
    let n_labels = config.labels.len();
    let mut hasher = RecordHasher::new();
    let mut result = conn.exec_iter(stmt, params).await.map_err(Stop::Driver)?;
    let mut page = Rows {
        items: Vec::with_capacity(want.min(4096)),
        more: false,
        size_bytes: 0,
    };
    while let Some(row) = result.next().await.map_err(Stop::Driver)? {
        if page.items.len() >= want {
            page.more = true;
            break;
        }
        let row_no = page.items.len() + 1;
        let invalid = |p: String| Stop::Invalid(format!("row {row_no} of the page: {p}"));
        let row_bytes: u64 = (0..row.len())
            .filter_map(|i| row.as_ref(i))
            .map(value_bytes)
            .sum();
        page.size_bytes = page.size_bytes.saturating_add(row_bytes);
        if page.size_bytes > PAGE_SIZE_BYTES_MAX {
            return Err(Stop::Invalid(format!(
                "a page of more than {PAGE_SIZE_BYTES_MAX} bytes ({row_no} rows read); \
                 lower page_size"
            )));
        }
        let key = row
            .as_ref(0)
            .ok_or_else(|| invalid("no key column".into()))?;
        let id = value::key_of(plan.key_kind, key).map_err(invalid)?;
        let mut labels = Vec::new();
        for (j, (name, _)) in config.labels.iter().enumerate() {
            if row.as_ref(1 + j).is_some_and(value::is_set) {
                labels.push(name.clone());
            }
        }
        let content = if plan.content.is_empty() {
            None
        } else {
            let cell = |c: usize| row.as_ref(1 + n_labels + c).unwrap_or(&value::NULL);
            let hash = value::content_hash(&plan.content, &config.content, cell, &mut hasher);
            Some(hash.map_err(invalid)?)
        };
        page.items.push(Item {
            id,
            labels,
            content,
        });
    }
    result.drop_result().await.map_err(Stop::Driver)?;
    Ok(page)
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
