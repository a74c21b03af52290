//! Source mapping: turns a JSON response into a [`Page`], and a [`PageRequest`] into the named
//! parameters a JSON API expects. Shared by every JSON source (HTTP, MCP).
//!
//! This module owns the meaning of the mapping keys of docs/guide-http.md (`items`, `id`, `next`,
//! `complete`, `has_more`, `snapshot`, `query`, `total`, `truncated`, `labels`, `content`,
//! the request parameter names, page-number and offset pagination) and the presets. It never
//! does IO, never speaks HTTP and never decides completeness: it reports what the response
//! says, and the reconciler judges. Errors never carry a raw cursor or a response value: they
//! name the pointer and the JSON type found.
//!
//! # Use
//! 1. [`Mapping::from_config`] reads the mapping keys of a config object ([`KEYS`]); a source
//!    splits its own keys off first. [`Mapping::check_end_signal`] refuses a contract whose end
//!    signal this mapping could never show, or could show falsely.
//! 2. Per page, [`Mapping::call`] turns the request into a [`Call`]: the parameters to send
//!    (the contract's query keys, then page size, cursor or position, pinned snapshot) and the
//!    [`Position`] asked for.
//! 3. [`Mapping::map_body`] (bytes, bounded before parsing, strict JSON) or
//!    [`Mapping::map_value`] (an already parsed value) maps the response at that position.
//!    `map_body` parses under the rules of `crate::json` but builds only the values the
//!    pointers reach (`select`), and gives exactly the page `map_value` gives on the full parse.
//!    [`Mapping::map_tool_result`] maps an MCP tool result: its `structuredContent`, the
//!    Python SDK's `{"result": "JSON text"}` wrapper, or the JSON text of its first text block,
//!    by one rule of precedence (`tool_result.rs`).
//!
//! # How a response becomes a page
//! Page-level pointers are read under `root` when one is set (a GraphQL connection such as
//! `/data/repository/issues`), item pointers (`id`, labels, content) within each item.
//! - `items` must name an array; `id` must name a non-null value in each item. A page holding
//!   more than `ITEMS_PER_PAGE_MAX` items is cut one past the bound so the reconciler reports
//!   it (R16) without the mapping allocating the rest.
//! - `next`: a non-empty string (a number is taken as its decimal text); absent, `null` and
//!   `""` (AIP-158's last page) all mean no cursor.
//! - `complete`: a boolean, or absent/`null` for none.
//! - `has_more` (when configured): must be a boolean on every page; a missing flag is an
//!   invalid page, never taken for the end. `true`: the cursor is next, and with no cursor the
//!   page says `complete: false` (so R7 fires: more was promised, nothing to continue from).
//!   `false`: there is no next, whatever end cursor the page carries (GraphQL's last page), and
//!   the page says `complete: true` unless a `complete` pointer says otherwise.
//! - `total`: a non-negative integer; a negative one (Jira's `-1`), absent or `null` is
//!   unknown. `truncated`: `true` is a truncation warning (R9). `snapshot`: a string (or a
//!   number's text). `query`: any value, compared with the contract's query (R6).
//! - `labels`: each label names a pointer within the item and one test (`eq`, `ne`, `in`,
//!   `exists`, `truthy`, see [`pointer::Test`]); the item carries the labels whose test holds.
//! - `content`: pointers whose values feed `content::record_hash`: a number by its decimal
//!   text, a string as text, a boolean, `null` or absent as null, an object or array as its
//!   canonical JSON text.
//!
//! # Page-number and offset pagination
//! With `page_param` (pages from `page_start`, default 1) or `offset_param` (from 0) the
//! position advances by itself: the page gets an opaque synthetic cursor, `p:N` (the next page
//! number) or `o:N` (the offset after the items received), so resume works through the stored
//! cursor like any other. A page ends the traversal only by the contract's end signal: the
//! API's own flag (`has_more: false` or `complete: true`: no next), an empty page (no next:
//! the end under `empty_page`, missing completion evidence, R8, under `total`), or the echoed
//! total (which the reconciler compares). `cursor_absent` is refused for these mappings unless
//! a `has_more` flag is configured, since an empty page would otherwise pass for the end.

use serde_json::{Map, Value};

use crate::content::ContentError;
use crate::contract::EndSignal;
use crate::json::JsonError;

mod config;
mod page;
pub mod pointer;
mod request;
mod select;
#[cfg(test)]
mod tests;
mod tool_result;

pub use config::{Preset, KEYS};
use pointer::{Pointer, Test};
pub use tool_result::{tool_result_page, ResultFrom, ResultPart};

/// A mapping key that cannot be used: the strict config layer's error, worded and placed as
/// every config file's.
pub use crate::json::ConfigError;

/// A request that cannot be made: a configuration problem found when paging (the source
/// cannot go on, an input error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A stored cursor that this positional mapping did not make (the config changed).
    #[error("{cursor} is not a position of this {paging} mapping; was the source config changed since the run began?")]
    ForeignCursor {
        /// The cursor's fingerprint.
        cursor: String,
        /// `page-number` or `offset`.
        paging: &'static str,
    },
    /// The contract's query is not an object, so it cannot become named parameters.
    #[error(
        "the contract's query is {found}; it must be an object (or null) to be sent as parameters"
    )]
    QueryNotObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A query key has the name of one of the mapping's own parameters.
    #[error("the contract's query key {name:?} is also the mapping's parameter name; rename one")]
    ParamCollision {
        /// The parameter name.
        name: String,
    },
    /// A `high_water` continuation, which needs `after_param` and cursor pagination.
    #[error(
        "the high_water policy needs \"after_param\" in the source config and cursor pagination"
    )]
    NoAfterParam,
}

/// A response that is not a page this mapping can read: `invalid_page` (R16).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PageError {
    /// The body is over the size bound.
    #[error("the response body is over the bound of {max_bytes} bytes")]
    TooLarge {
        /// The bound.
        max_bytes: u64,
    },
    /// The body is not strict JSON.
    #[error("the response is not strict JSON")]
    Json(#[source] JsonError),
    /// A pointer the mapping needs names nothing.
    #[error("{what} pointer {pointer:?} names nothing in the response")]
    Missing {
        /// Which key.
        what: &'static str,
        /// The pointer.
        pointer: String,
    },
    /// A pointer names a value of the wrong type.
    #[error("{what} pointer {pointer:?}: expected {expected}, found {found}")]
    WrongType {
        /// Which key.
        what: &'static str,
        /// The pointer.
        pointer: String,
        /// What the key needs.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// An item without an ID.
    #[error("item {index}: id pointer {pointer:?} names nothing (or null)")]
    NoId {
        /// The item's index in the page.
        index: usize,
        /// The pointer.
        pointer: String,
    },
    /// An MCP tool result that holds no page: not an object, no structured content and no
    /// text block, a text block that is not text.
    #[error("tool result: {problem}")]
    ToolResult {
        /// What is wrong, naming the part of the result.
        problem: String,
    },
    /// An item whose content cannot be hashed.
    #[error("item {index}: content pointer {pointer:?} cannot be hashed")]
    Content {
        /// The item's index in the page.
        index: usize,
        /// The pointer.
        pointer: String,
        /// Why.
        #[source]
        source: ContentError,
    },
}

/// How a mapping pages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Paging {
    /// The API hands out cursors.
    Cursor { next: Pointer, param: String },
    /// Page numbers from `start`.
    Page { param: String, start: u64 },
    /// Item offsets from 0.
    Offset { param: String },
}

/// One label: a name, a pointer within the item and a test of the value there.
#[derive(Debug, Clone, PartialEq)]
struct Label {
    name: String,
    pointer: Pointer,
    test: Test,
}

/// A resolved mapping (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    preset: Option<Preset>,
    root: Option<Pointer>,
    items: Pointer,
    id: Pointer,
    paging: Paging,
    complete: Option<Pointer>,
    has_more: Option<Pointer>,
    snapshot: Option<Pointer>,
    query: Option<Pointer>,
    total: Option<Pointer>,
    truncated: Option<Pointer>,
    labels: Vec<Label>,
    content: Vec<Pointer>,
    page_size_param: Option<String>,
    snapshot_param: Option<String>,
    after_param: Option<String>,
    /// The parameters (lo, hi) that ask for one key range, from `key_range_params`.
    key_range_params: Option<(String, String)>,
    /// The key range sent on every request (a shard's contract), bound by `bind_key_range`.
    key_range: Option<crate::contract::KeyRange>,
    /// The paths `map_body` keeps when it parses (built from the pointers above).
    select: select::Trie,
}

/// Where a request points: the first page, a cursor, a page number, an offset, or the page
/// after an ordering key (`high_water`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// The first page of cursor pagination.
    First,
    /// The page a cursor points to.
    Cursor(String),
    /// A page number.
    Page(u64),
    /// An item offset.
    Offset(u64),
    /// The page after this ordering key.
    After(String),
}

/// One request as named parameters, and the position it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Parameter names and values in order: the contract's query keys, then the page size,
    /// the cursor (or page number, offset, after key) and the pinned snapshot.
    pub params: Vec<(String, Value)>,
    /// The position asked for; [`Mapping::map_body`] needs it to compute the next one.
    pub position: Position,
}

impl Mapping {
    /// Reads the mapping keys of a config object (docs/guide-http.md); every key must be in [`KEYS`].
    ///
    /// ```
    /// use scanledger::mapping::Mapping;
    /// let cfg = serde_json::json!({"preset": "notion", "labels": {"archived": {"pointer": "/archived", "eq": true}}});
    /// let m = Mapping::from_config(cfg.as_object().unwrap()).unwrap();
    /// assert_eq!(m.preset().map(|p| p.name()), Some("notion"));
    /// ```
    ///
    /// # Errors
    /// `ConfigError` naming the key: an unknown key, a malformed pointer, a bad label, both
    /// cursor and positional pagination.
    pub fn from_config(obj: &Map<String, Value>) -> Result<Mapping, ConfigError> {
        config::resolve(obj)
    }

    /// The preset the mapping started from, if any.
    #[must_use]
    pub fn preset(&self) -> Option<Preset> {
        self.preset
    }

    /// Whether the mapping pages by page number or offset rather than by cursor.
    #[must_use]
    pub fn is_positional(&self) -> bool {
        !matches!(self.paging, Paging::Cursor { .. })
    }

    /// Refuses an end signal this mapping could never show (`complete_flag` without a flag
    /// pointer, `total` without a total pointer), or could show falsely (`cursor_absent` under
    /// positional pagination without `has_more`, where an empty page has no cursor).
    ///
    /// # Errors
    /// `ConfigError` naming the mapping key that is missing.
    pub fn check_end_signal(&self, end: EndSignal) -> Result<(), ConfigError> {
        let flag = self.complete.is_some() || self.has_more.is_some();
        match end {
            EndSignal::CursorAbsent if self.is_positional() && self.has_more.is_none() => {
                Err(ConfigError::invalid(
                    match self.paging {
                        Paging::Offset { .. } => "offset_param",
                        _ => "page_param",
                    },
                    "page-number and offset pagination have no cursor to end on: the contract's end_signal must be \"total\" or \"empty_page\" (or the mapping needs a \"has_more\" flag)",
                ))
            }
            EndSignal::CompleteFlag | EndSignal::Both if !flag => Err(ConfigError::invalid(
                "complete",
                "the contract's end_signal needs a completion flag: set a \"complete\" or \"has_more\" pointer",
            )),
            EndSignal::Total if self.total.is_none() => Err(ConfigError::invalid(
                "total",
                "the contract's end_signal \"total\" needs a \"total\" pointer",
            )),
            _ => Ok(()),
        }
    }
}

/// The text of an error and its causes, `: `-separated, for a page violation's detail.
#[must_use]
pub fn chain_text(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    // Bounded: a chain longer than this is a bug somewhere else; the detail stays short.
    for _ in 0..8 {
        let Some(c) = cause else { break };
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
