//! A page's rows on their way to becoming items: each row's key, labels and content digest,
//! the page's end, and the checks every page makes of its keys.
//!
//! A dialect feeds rows in the order the server sent them; this module decides what each row
//! is: the previous page's last key read again (a page after a key reads from `key >= bound`,
//! so a row equal to the bound under the order is seen, never skipped), an item, or the row
//! past the page that says another page exists. Pure: no IO.
//!
//! Invariants, each an `invalid_page` (R16) when broken, never a silently skipped row:
//! - after a key, at most one row is equal to it under the page order, and that row is the
//!   first and holds exactly the key (the server counts equality, so a collation that calls
//!   `a` and `A` equal is caught however the client would compare them);
//! - integer and uuid keys strictly increase through the page, from the bound on (the client
//!   knows their order);
//! - a page holds at most `page_size` items and `PAGE_SIZE_BYTES_MAX` bytes.

use std::cmp::Ordering;

use super::key::{Key, KeyType};
use crate::content::{ContentError, ContentValue, RecordHasher};
use crate::contract::{Item, PageColumns, PAGE_SIZE_BYTES_MAX};

/// Rows that cannot make a page: the detail of the page's `invalid_page` (R16). Keys are shown
/// as [`Key::shown`] gives them.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowsError {
    /// The page's values pass `PAGE_SIZE_BYTES_MAX`.
    #[error("a page of more than {PAGE_SIZE_BYTES_MAX} bytes ({rows} rows read); lower page_size")]
    TooLarge { rows: usize },
    /// A key the client can order does not follow the one before it.
    #[error(
        "key {key} follows key {previous}: the keys do not strictly increase in the page order"
    )]
    NotIncreasing { key: String, previous: String },
    /// A row's content cannot be hashed.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// A row gave another number of content values than the config names.
    #[error("row with key {key}: {given} content values where {expected} were expected")]
    ContentCount {
        key: String,
        given: usize,
        expected: usize,
    },
    /// Rows after the bound are equal to it under the page order: the key is not unique there.
    #[error(
        "{others} row(s) after key {bound} (the previous page's last) are equal to it in the order the pages are read in: \
         the key is not unique under that order, so keyset pages would skip rows"
    )]
    BoundRepeats { others: u64, bound: String },
}

/// A dialect's page reader says a page's problem as the page's detail text.
impl From<RowsError> for String {
    fn from(e: RowsError) -> String {
        e.to_string()
    }
}

/// The rows of one page statement.
pub(crate) struct PageRows<'a> {
    page_size: usize,
    key_type: KeyType,
    bound: Option<&'a Key>,
    labels: &'a [(String, String)],
    content: &'a [String],
    hasher: &'a mut RecordHasher,
    /// The items' encoded content values, when asked for.
    columns: Option<PageColumns>,
    items: Vec<Item>,
    /// Rows fed so far.
    rows: usize,
    /// The first row holds exactly the bound.
    first_is_bound: bool,
    /// Rows equal to the bound under the page order, as the server said.
    equal_to_bound: u64,
    /// The previous row's key, where the client knows the order.
    previous: Option<Key>,
    size_bytes: u64,
    more: bool,
}

/// What a fed row is.
pub(crate) enum Fed<'r, 'a> {
    /// An item: give its labels and content values, then [`Row::end`].
    Item(Row<'r, 'a>),
    /// The previous page's last key, read again: not an item.
    Bound,
    /// The row past the page: another page exists; stop reading.
    Past,
}

/// One item being built.
pub(crate) struct Row<'r, 'a> {
    rows: &'r mut PageRows<'a>,
    key: Key,
    labels: Vec<String>,
    values: usize,
}

/// A finished page.
#[derive(Debug)]
pub(crate) struct Built {
    /// At most `page_size` items, in key order.
    pub(crate) items: Vec<Item>,
    /// A row past the page exists.
    pub(crate) more: bool,
    /// Bytes of the values read.
    pub(crate) size_bytes: u64,
    /// The items' encoded content values, when asked for.
    pub(crate) columns: Option<Box<PageColumns>>,
}

impl<'a> PageRows<'a> {
    /// The rows of a page of at most `page_size` items after `bound` (or the first page).
    pub(crate) fn new(
        page_size: usize,
        key_type: KeyType,
        bound: Option<&'a Key>,
        labels: &'a [(String, String)],
        content: &'a [String],
        hasher: &'a mut RecordHasher,
    ) -> PageRows<'a> {
        PageRows {
            page_size,
            key_type,
            bound,
            labels,
            content,
            hasher,
            columns: None,
            items: Vec::with_capacity(page_size.min(4096)),
            rows: 0,
            first_is_bound: false,
            equal_to_bound: 0,
            previous: bound.cloned().filter(|b| b.client_cmp(b).is_some()),
            size_bytes: 0,
            more: false,
        }
    }

    /// Keeps the items' encoded content values (`Page::columns`) when `on`.
    #[must_use]
    pub(crate) fn with_columns(mut self, on: bool) -> PageRows<'a> {
        let (records, values) = (self.page_size, self.content.len());
        self.columns = on.then(|| PageColumns::with_capacity(records, values));
        self
    }

    /// The rows the statement may return: the page, one past it, and the bound's own row.
    pub(crate) fn limit(page_size: u32, after: bool) -> i128 {
        i128::from(page_size) + 1 + i128::from(after)
    }

    /// The most rows a page statement returns (for a dialect that bounds what it decodes).
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn rows_max(&self) -> usize {
        self.page_size
            .saturating_add(1)
            .saturating_add(usize::from(self.bound.is_some()))
    }

    /// How many labels each row carries.
    pub(crate) fn labels(&self) -> usize {
        self.labels.len()
    }

    /// The key column's type.
    pub(crate) fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// Counts `n` bytes of values read.
    ///
    /// # Errors
    /// The page is larger than `PAGE_SIZE_BYTES_MAX`.
    pub(crate) fn add_bytes(&mut self, n: u64) -> Result<(), RowsError> {
        self.size_bytes = self.size_bytes.saturating_add(n);
        if self.size_bytes > PAGE_SIZE_BYTES_MAX {
            return Err(RowsError::TooLarge { rows: self.rows });
        }
        Ok(())
    }

    /// The next row: its key, and whether the server found it equal to the bound under the
    /// page order.
    ///
    /// # Errors
    /// The keys do not strictly increase where the client can tell.
    pub(crate) fn row(&mut self, key: Key, equal: bool) -> Result<Fed<'_, 'a>, RowsError> {
        let first = self.rows == 0;
        self.rows = self.rows.saturating_add(1);
        self.equal_to_bound = self.equal_to_bound.saturating_add(u64::from(equal));
        if first && self.bound == Some(&key) {
            self.first_is_bound = true;
            return Ok(Fed::Bound);
        }
        if let Some(previous) = &self.previous {
            if key.client_cmp(previous) != Some(Ordering::Greater) {
                return Err(RowsError::NotIncreasing {
                    key: key.shown(),
                    previous: previous.shown(),
                });
            }
        }
        if self.items.len() >= self.page_size {
            self.more = true;
            return Ok(Fed::Past);
        }
        if key.client_cmp(&key).is_some() {
            self.previous = Some(key.clone());
        }
        if !self.content.is_empty() {
            self.hasher.begin_record(self.content.len())?;
        }
        Ok(Fed::Item(Row {
            rows: self,
            key,
            labels: Vec::new(),
            values: 0,
        }))
    }

    /// The page, once every row was fed.
    ///
    /// # Errors
    /// A row other than the bound's own is equal to the bound under the page order: the key
    /// is not unique under the order the pages are read in, and a keyset scan would skip it.
    pub(crate) fn finish(self) -> Result<Built, RowsError> {
        if let Some(bound) = self.bound {
            let ok = match self.equal_to_bound {
                0 => !self.first_is_bound,
                1 => self.first_is_bound,
                _ => false,
            };
            if !ok {
                let others = self
                    .equal_to_bound
                    .saturating_sub(u64::from(self.first_is_bound));
                let bound = bound.shown();
                return Err(RowsError::BoundRepeats { others, bound });
            }
        }
        // One record an item, or none: the page's records line up with its items.
        let items = self.items.len();
        Ok(Built {
            columns: self.columns.filter(|c| c.len() == items).map(Box::new),
            items: self.items,
            more: self.more,
            size_bytes: self.size_bytes,
        })
    }
}

impl Row<'_, '_> {
    /// Label `j` of the config is set on this row, or not.
    pub(crate) fn label(&mut self, j: usize, set: bool) {
        if set {
            if let Some((name, _)) = self.rows.labels.get(j) {
                self.labels.push(name.clone());
            }
        }
    }

    /// The next content value of the row.
    ///
    /// # Errors
    /// The value cannot be hashed (say where with [`Row::problem`]).
    pub(crate) fn value(&mut self, v: &ContentValue<'_>) -> Result<(), RowsError> {
        self.values = self.values.saturating_add(1);
        Ok(self.rows.hasher.add_value(v)?)
    }

    /// A message about content column `i` of this row.
    pub(crate) fn problem(&self, i: usize, problem: impl std::fmt::Display) -> String {
        let name = self.rows.content.get(i).map_or("?", String::as_str);
        format!(
            "row with key {}: content column {name:?}: {problem}",
            self.key.shown()
        )
    }

    /// The item is complete.
    ///
    /// # Errors
    /// Fewer content values were given than the config names.
    pub(crate) fn end(self) -> Result<(), RowsError> {
        let content = if self.rows.content.is_empty() {
            None
        } else {
            if self.values != self.rows.content.len() {
                return Err(RowsError::ContentCount {
                    key: self.key.shown(),
                    given: self.values,
                    expected: self.rows.content.len(),
                });
            }
            if let Some(c) = self.rows.columns.as_mut() {
                let (values, starts) = self.rows.hasher.values();
                c.push(values, starts);
            }
            Some(self.rows.hasher.record_digest())
        };
        self.rows.items.push(Item {
            id: self.key.into_raw_id(),
            labels: self.labels,
            content,
        });
        Ok(())
    }
}
