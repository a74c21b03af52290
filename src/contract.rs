//! The vocabulary of a scan: scope, contract, page, item, and every bound.
//!
//! This module owns the words the rest of the crate speaks and the limits it enforces.
//! It does no IO: contracts are parsed from text that the caller has already read.
//! Invariant: a `Contract` that exists has passed `Contract::from_json` validation,
//! so every limit in it is within the crate-wide `*_MAX` bounds below.

use serde_json::{Map, Value};

mod columns;
mod file;
pub use columns::PageColumns;

/// The closest known word to a misspelt one (the strict config layer's; kept here for the
/// formats not yet read through it).
pub(crate) use crate::json::closest;
pub use file::ContractError;

/// Items one page may carry; a larger page is `invalid_page` (R16).
pub const ITEMS_PER_PAGE_MAX: u32 = 100_000;
/// Bytes one page may take on the wire; a larger page is `invalid_page` (R16).
pub const PAGE_SIZE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Bytes of one continuation cursor; longer cursors are `invalid_page` (R16).
pub const CURSOR_LEN_MAX: usize = 4096;
/// Bytes of one ID in its original form; longer IDs are `invalid_page` (R16).
pub const ID_LEN_MAX: usize = 512;
/// Labels one item may carry.
pub const LABELS_PER_ITEM_MAX: usize = 16;
/// Distinct labels one run may carry.
pub const LABELS_PER_RUN_MAX: usize = 64;
/// Bytes of one label name.
pub const LABEL_LEN_MAX: usize = 128;
/// Pages one run may observe, whatever its contract says; the hard stop of every traversal.
pub const PAGES_PER_RUN_MAX: u32 = 10_000_000;
/// Attempts per page request (first try plus retries).
pub const FETCH_ATTEMPTS_MAX: u32 = 11;
/// Restarts (expired cursor or changed snapshot) one scan may take before it gives up.
pub const RESTARTS_MAX: u32 = 8;
/// Violations kept per run; more are counted, not stored.
pub const VIOLATIONS_KEPT_MAX: usize = 256;
/// Bytes of one contract file.
pub const CONTRACT_BYTES_MAX: usize = 1024 * 1024;
/// Bytes of a prefixed codec's prefix.
pub const PREFIX_LEN_MAX: usize = 128;
/// Default per-page timeout, when the contract names none.
pub const PAGE_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Upper bound of a contract's per-page timeout.
pub const PAGE_TIMEOUT_MS_MAX: u64 = 3_600_000;
/// Upper bound of a contract's deadline.
pub const DEADLINE_SECONDS_MAX: u64 = 30 * 24 * 3600;
/// Default retries per page, when the contract names none.
pub const RETRIES_DEFAULT: u32 = 2;
/// Default page size asked of the source.
pub const PAGE_SIZE_DEFAULT: u32 = 100;

const _: () = assert!(ITEMS_PER_PAGE_MAX as u64 * PAGES_PER_RUN_MAX as u64 <= u64::MAX / 2);
const _: () = assert!(FETCH_ATTEMPTS_MAX >= 1);
const _: () = assert!(RETRIES_DEFAULT < FETCH_ATTEMPTS_MAX);
const _: () = assert!(VIOLATIONS_KEPT_MAX >= 16);

/// What a scan enumerates: the scope's fields feed the query digest.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Scope {
    /// Name of the tool or table.
    pub source: String,
    /// Tenant, if any.
    pub tenant: Option<String>,
    /// The filters, as any JSON.
    pub query: Value,
    /// Sort with a unique tie-breaker, as any JSON.
    pub order: Value,
    /// The slice `[lo, hi)` of the u64 ID space the scan covers (one shard of a plan), to the
    /// end of the space when `hi` is 2^64 - 1 (`KeyRange`); `None` covers the whole space. An ID
    /// outside it is `invalid_page` (R16).
    pub key_range: Option<KeyRange>,
    /// The plan this scope is a shard of, when it is one.
    pub shard: Option<ShardRef>,
}

/// A range of the u64 ID space, `lo < hi`: half-open `[lo, hi)`, except that `hi` = 2^64 - 1
/// ([`KeyRange::END`]) means to the end of the space, the ID 2^64 - 1 included (no half-open
/// range on u64 could hold it), so the last shard of a plan holds every ID above its `lo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyRange {
    /// The first ID of the range.
    pub lo: u64,
    /// One past the last ID of the range, or [`KeyRange::END`]: to the end, 2^64 - 1 included.
    pub hi: u64,
}

impl KeyRange {
    /// The `hi` of a range that runs to the end of the ID space (2^64 - 1 included).
    pub const END: u64 = u64::MAX;

    /// A range, or `None` unless `lo < hi`.
    ///
    /// ```
    /// let r = scanledger::KeyRange::new(10, 20).unwrap();
    /// assert!(r.contains(10) && r.contains(19) && !r.contains(20));
    /// assert!(scanledger::KeyRange::new(5, 5).is_none());
    /// let end = scanledger::KeyRange::new(10, u64::MAX).unwrap();
    /// assert!(end.contains(u64::MAX) && end.last() == u64::MAX && !end.contains(9));
    /// ```
    #[must_use]
    pub fn new(lo: u64, hi: u64) -> Option<KeyRange> {
        (lo < hi).then_some(KeyRange { lo, hi })
    }

    /// Whether the range runs to the end of the ID space.
    #[must_use]
    pub fn to_end(&self) -> bool {
        self.hi == KeyRange::END
    }

    /// The last ID of the range (inclusive).
    #[must_use]
    pub fn last(&self) -> u64 {
        if self.to_end() {
            u64::MAX
        } else {
            // lo < hi, so hi >= 1.
            self.hi.saturating_sub(1)
        }
    }

    /// Whether `id` is in the range.
    #[must_use]
    pub fn contains(&self, id: u64) -> bool {
        self.lo <= id && id <= self.last()
    }

    /// The range as people read it: `[LO, HI)`, or `[LO, 2^64-1]` to the end.
    #[must_use]
    pub fn shown(&self) -> String {
        if self.to_end() {
            format!("[{}, {}]", self.lo, u64::MAX)
        } else {
            format!("[{}, {})", self.lo, self.hi)
        }
    }

    /// The range as JSON: `{"hi": HI, "lo": LO}`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::json!({ "lo": self.lo, "hi": self.hi })
    }
}

/// Which shard of which plan a scope is: written by `plan` into each shard's contract, so a
/// shard's receipt (its query digest) names its plan, and `merge` can refuse a shard of
/// another plan.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardRef {
    /// The plan's digest (`sha256:` + hex; docs/FORMAT.md, plans).
    pub plan: String,
    /// The shard's index, from 0.
    pub index: u32,
    /// How many shards the plan has.
    pub count: u32,
}

impl ShardRef {
    /// The reference as JSON: `{"count": N, "index": K, "plan": DIGEST}`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::json!({ "plan": self.plan, "index": self.index, "count": self.count })
    }
}

/// Shards one plan may have.
pub const SHARDS_MAX: u32 = 4096;

impl Scope {
    /// The scope of a source with no tenant, query or order.
    #[must_use]
    pub fn new(source: &str) -> Scope {
        Scope {
            source: source.to_owned(),
            tenant: None,
            query: Value::Null,
            order: Value::Null,
            key_range: None,
            shard: None,
        }
    }
}

/// How the end of a traversal is signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndSignal {
    /// A page without a `next` cursor is the last.
    CursorAbsent,
    /// A page with `complete: true` is the last.
    CompleteFlag,
    /// The last page has no cursor and says `complete: true`.
    Both,
    /// For page-number and offset pagination: the page at which the items observed reach the
    /// total the source echoes is the last.
    Total,
    /// An empty page is the last. A weaker claim (a source that returns an empty page early
    /// ends the scan early), accepted only when the contract says so; the receipt states it.
    EmptyPage,
}

/// How IDs map to the u64 space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdCodecKind {
    /// Non-negative JSON integers (0 to 2^64-1), the ID is the integer.
    Int,
    /// A fixed prefix and decimal digits without leading zeros.
    Prefixed,
    /// Any UTF-8 string, interned per (source, tenant).
    String,
    /// Signed 64-bit integers (-2^63 to 2^63-1) in key order: the ID of `n` is
    /// `(n as u64) XOR 2^63` (docs/FORMAT.md §5), printed as `n`.
    Signed,
}

impl IdCodecKind {
    /// The codec's name, as a contract writes it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            IdCodecKind::Int => "int",
            IdCodecKind::Prefixed => "prefixed",
            IdCodecKind::String => "string",
            IdCodecKind::Signed => "signed",
        }
    }

    /// Whether IDs are integers in their original form (`int`, `signed`).
    #[must_use]
    pub fn is_integer(self) -> bool {
        matches!(self, IdCodecKind::Int | IdCodecKind::Signed)
    }
}

/// The stopping rule (docs/REFERENCE.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Traverse to the end signal or say why not.
    All,
    /// Stop after this many items; no collection-wide claim.
    Sample(u64),
    /// Ask the source for a server-side count, else traverse fully.
    Count,
}

impl Mode {
    /// The mode's name as receipts print it.
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Mode::All => "all".to_owned(),
            Mode::Sample(n) => format!("sample {n}"),
            Mode::Count => "count".to_owned(),
        }
    }
}

/// What to do when the source says a cursor expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiredPolicy {
    /// A new run under a fresh snapshot; the old run is superseded.
    Restart,
    /// Continue after the last ordering key with a fresh request.
    HighWater,
    /// Stop: `expired_cursor` (R15).
    Block,
}

/// What to do when the echoed snapshot differs from the pinned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotPolicy {
    /// Stop: `snapshot_changed` (R5).
    Block,
    /// A new run under the new snapshot; the old run is superseded.
    Restart,
}

/// Traversal budgets. `None` means the crate-wide bound only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Limits {
    /// Pages to observe before `limit_reached` (pages).
    pub max_pages: Option<u32>,
    /// Items to observe before `limit_reached` (records).
    pub max_records: Option<u64>,
    /// Bytes of page responses before `limit_reached` (bytes).
    pub max_bytes: Option<u64>,
    /// Seconds of wall time for the whole run before `limit_reached` (deadline).
    pub deadline_seconds: Option<u64>,
    /// Milliseconds one page request may take before it counts as a timeout.
    pub page_timeout_ms: Option<u64>,
    /// Retries of a failed page request (timeouts and server errors).
    pub retries: Option<u32>,
}

impl Limits {
    /// Stop after `pages` pages (`limit_reached`).
    #[must_use]
    pub fn with_max_pages(mut self, pages: u32) -> Limits {
        self.max_pages = Some(pages);
        self
    }
    /// Stop after `records` items.
    #[must_use]
    pub fn with_max_records(mut self, records: u64) -> Limits {
        self.max_records = Some(records);
        self
    }
    /// Stop after `bytes` bytes of page responses.
    #[must_use]
    pub fn with_max_bytes(mut self, bytes: u64) -> Limits {
        self.max_bytes = Some(bytes);
        self
    }
    /// Stop after `seconds` seconds of wall time.
    #[must_use]
    pub fn with_deadline_seconds(mut self, seconds: u64) -> Limits {
        self.deadline_seconds = Some(seconds);
        self
    }
    /// Give one page request `ms` milliseconds before it counts as a timeout.
    #[must_use]
    pub fn with_page_timeout_ms(mut self, ms: u64) -> Limits {
        self.page_timeout_ms = Some(ms);
        self
    }
    /// Retry a failed page request `retries` times.
    #[must_use]
    pub fn with_retries(mut self, retries: u32) -> Limits {
        self.retries = Some(retries);
        self
    }
    /// The per-page timeout in force.
    #[must_use]
    pub fn page_timeout_ms(&self) -> u64 {
        self.page_timeout_ms.unwrap_or(PAGE_TIMEOUT_MS_DEFAULT)
    }
    /// The retries in force.
    #[must_use]
    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(RETRIES_DEFAULT)
    }
    /// The page budget in force.
    #[must_use]
    pub fn max_pages(&self) -> u32 {
        self.max_pages.unwrap_or(PAGES_PER_RUN_MAX)
    }
}

/// One execution plan: scope, snapshot, expectations, budgets, rules and policies.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Contract {
    /// What is enumerated.
    pub scope: Scope,
    /// The snapshot to pin to; `None` pins to the first echoed one, or scans live.
    pub snapshot_id: Option<String>,
    /// Unique IDs the source says the scope holds.
    pub expected_count: Option<u64>,
    /// Partition index to the count the source reports for it.
    pub expected_partitions: Option<Vec<(u64, u64)>>,
    /// Items asked per page.
    pub page_size: u32,
    /// Budgets.
    pub limits: Limits,
    /// How the last page is recognised.
    pub end_signal: EndSignal,
    /// How IDs are decoded.
    pub id_codec: IdCodecKind,
    /// The prefix of the `prefixed` codec; learned from the first ID when absent.
    pub id_prefix: Option<String>,
    /// Stopping rule.
    pub mode: Mode,
    /// Policy on an expired cursor.
    pub on_expired_cursor: ExpiredPolicy,
    /// Policy on a changed snapshot.
    pub on_snapshot_change: SnapshotPolicy,
}

impl Contract {
    /// A contract with defaults for everything but the source name.
    ///
    /// ```
    /// let c = scanledger::Contract::new("customers");
    /// assert_eq!(c.scope.source, "customers");
    /// assert_eq!(c.page_size, 100);
    /// ```
    #[must_use]
    pub fn new(source: &str) -> Contract {
        Contract {
            scope: Scope::new(source),
            snapshot_id: None,
            expected_count: None,
            expected_partitions: None,
            page_size: PAGE_SIZE_DEFAULT,
            limits: Limits::default(),
            end_signal: EndSignal::CursorAbsent,
            id_codec: IdCodecKind::Int,
            id_prefix: None,
            mode: Mode::All,
            on_expired_cursor: ExpiredPolicy::Block,
            on_snapshot_change: SnapshotPolicy::Block,
        }
    }

    /// The same contract for this tenant.
    #[must_use]
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Contract {
        self.scope.tenant = Some(tenant.into());
        self
    }
    /// The same contract with these filters (any JSON; part of the query digest).
    #[must_use]
    pub fn with_query(mut self, query: Value) -> Contract {
        self.scope.query = query;
        self
    }
    /// The same contract with this sort (any JSON; part of the query digest).
    #[must_use]
    pub fn with_order(mut self, order: Value) -> Contract {
        self.scope.order = order;
        self
    }
    /// The same contract pinned to this snapshot.
    #[must_use]
    pub fn with_snapshot_id(mut self, snapshot: impl Into<String>) -> Contract {
        self.snapshot_id = Some(snapshot.into());
        self
    }
    /// The same contract expecting this many unique IDs.
    #[must_use]
    pub fn with_expected_count(mut self, count: u64) -> Contract {
        self.expected_count = Some(count);
        self
    }
    /// The same contract asking `items` items per page.
    #[must_use]
    pub fn with_page_size(mut self, items: u32) -> Contract {
        self.page_size = items;
        self
    }
    /// The same contract with these budgets.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Contract {
        self.limits = limits;
        self
    }
    /// The same contract with this end signal.
    #[must_use]
    pub fn with_end_signal(mut self, end: EndSignal) -> Contract {
        self.end_signal = end;
        self
    }
    /// The same contract with this ID codec.
    #[must_use]
    pub fn with_id_codec(mut self, codec: IdCodecKind) -> Contract {
        self.id_codec = codec;
        self
    }
    /// The same contract with this stopping rule.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Contract {
        self.mode = mode;
        self
    }
    /// The same contract with this policy on an expired cursor.
    #[must_use]
    pub fn with_on_expired_cursor(mut self, policy: ExpiredPolicy) -> Contract {
        self.on_expired_cursor = policy;
        self
    }
    /// The same contract with this policy on a changed snapshot.
    #[must_use]
    pub fn with_on_snapshot_change(mut self, policy: SnapshotPolicy) -> Contract {
        self.on_snapshot_change = policy;
        self
    }

    /// The contract without its shard: no `key_range`, no `shard`. Every shard of a plan has
    /// the same base, whose digest the plan records.
    #[must_use]
    pub fn base(&self) -> Contract {
        let mut c = self.clone();
        c.scope.key_range = None;
        c.scope.shard = None;
        c
    }

    /// The contract as the JSON of a contract file; `from_value(to_value(c)) == c`.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("source".into(), Value::from(self.scope.source.clone()));
        m.insert("tenant".into(), opt_json(self.scope.tenant.clone()));
        m.insert("query".into(), self.scope.query.clone());
        m.insert("order".into(), self.scope.order.clone());
        m.insert("snapshot_id".into(), opt_json(self.snapshot_id.clone()));
        m.insert("expected_count".into(), opt_json(self.expected_count));
        m.insert(
            "expected_partitions".into(),
            match &self.expected_partitions {
                None => Value::Null,
                Some(p) => Value::Object(
                    p.iter()
                        .map(|(k, n)| (k.to_string(), Value::from(*n)))
                        .collect(),
                ),
            },
        );
        m.insert("page_size".into(), Value::from(self.page_size));
        // The limits and the policies are derived `Serialize` of plain fields and unit
        // variants: they always serialize, never to the `Null` below (which would change the
        // contract digest); `from_value(to_value(c)) == c` is tested in `contract/file.rs`.
        m.insert(
            "limits".into(),
            serde_json::to_value(self.limits).unwrap_or(Value::Null),
        );
        m.insert(
            "end_signal".into(),
            serde_json::to_value(self.end_signal).unwrap_or(Value::Null),
        );
        m.insert(
            "id_codec".into(),
            serde_json::to_value(self.id_codec).unwrap_or(Value::Null),
        );
        m.insert("id_prefix".into(), opt_json(self.id_prefix.clone()));
        m.insert(
            "mode".into(),
            match self.mode {
                Mode::All => Value::from("all"),
                Mode::Count => Value::from("count"),
                Mode::Sample(n) => serde_json::json!({ "sample": n }),
            },
        );
        m.insert(
            "on_expired_cursor".into(),
            serde_json::to_value(self.on_expired_cursor).unwrap_or(Value::Null),
        );
        m.insert(
            "on_snapshot_change".into(),
            serde_json::to_value(self.on_snapshot_change).unwrap_or(Value::Null),
        );
        // Written only when present, so the JSON of an unsharded contract is what it always was.
        if let Some(r) = &self.scope.key_range {
            m.insert("key_range".into(), r.to_value());
        }
        if let Some(s) = &self.scope.shard {
            m.insert("shard".into(), s.to_value());
        }
        Value::Object(m)
    }
}

fn opt_json<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// An ID as the source gave it, before the codec maps it to u64.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RawId {
    /// A non-negative integer (0 to 2^64-1).
    Int(u64),
    /// A negative integer (-2^63 to -1); the `signed` codec takes it, `int` refuses it.
    Neg(i64),
    /// A JSON string.
    Str(String),
    /// Anything else the source sent (a float, an integer below -2^63, an object), kept for
    /// the error.
    Other(String),
}

impl RawId {
    /// The ID of an integer: `Int` when it is not negative, else `Neg`.
    ///
    /// ```
    /// use scanledger::RawId;
    /// assert_eq!(RawId::of_i64(-5), RawId::Neg(-5));
    /// assert_eq!(RawId::of_i64(5), RawId::Int(5));
    /// ```
    #[must_use]
    pub fn of_i64(n: i64) -> RawId {
        u64::try_from(n).map_or(RawId::Neg(n), RawId::Int)
    }
}

/// One item of a page: an ID, the labels the source attached to it, and optionally the
/// digest of its content (`content::record_hash`) when the source config names content.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Item {
    /// The item's ID in its original form.
    pub id: RawId,
    /// Label names (e.g. `needs_migration`).
    pub labels: Vec<String>,
    /// The digest of the item's content, when the source computes one.
    pub content: Option<[u8; 32]>,
}

impl Item {
    /// An item with an integer ID and no labels.
    #[must_use]
    pub fn int(id: u64) -> Item {
        Item::new(RawId::Int(id))
    }

    /// An item with this ID, no labels and no content digest.
    #[must_use]
    pub fn new(id: RawId) -> Item {
        Item {
            id,
            labels: Vec::new(),
            content: None,
        }
    }
}

impl Item {
    /// The same item with these labels.
    #[must_use]
    pub fn with_labels(mut self, labels: Vec<String>) -> Item {
        self.labels = labels;
        self
    }
    /// The same item with this content digest (`content::record_hash`).
    #[must_use]
    pub fn with_content(mut self, digest: [u8; 32]) -> Item {
        self.content = Some(digest);
        self
    }
}

/// One response of a source.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Page {
    /// The items, in source order.
    pub items: Vec<Item>,
    /// The cursor to continue from, if any.
    pub next: Option<String>,
    /// The source's explicit completion flag, if it sends one.
    pub complete: Option<bool>,
    /// The snapshot the source says it served.
    pub snapshot: Option<String>,
    /// The query the source says it ran.
    pub query: Option<Value>,
    /// The source warned that it cut the page short.
    pub truncated: bool,
    /// The total the source says the scope holds, when it echoes one (a negative or absent
    /// total is `None`: unknown, never a count).
    pub total: Option<u64>,
    /// Size of the response on the wire.
    pub size_bytes: u64,
    /// The items' content values as encoded, one record an item, when the source was asked
    /// for them (`PageSource::digest_columns`): they name which columns of a changed record
    /// differ. Never stored.
    pub columns: Option<Box<PageColumns>>,
}

impl Page {
    /// A page of these items, with no cursor (a last page, by the `no_cursor` end signal)
    /// and nothing else echoed.
    ///
    /// ```
    /// use scanledger::{Item, Page};
    /// let p = Page::new(vec![Item::int(1), Item::int(2)]).with_next("c2").with_size_bytes(40);
    /// assert_eq!(p.next.as_deref(), Some("c2"));
    /// ```
    #[must_use]
    pub fn new(items: Vec<Item>) -> Page {
        Page {
            items,
            ..Page::default()
        }
    }
    /// The cursor to continue from.
    #[must_use]
    pub fn with_next(mut self, cursor: impl Into<String>) -> Page {
        self.next = Some(cursor.into());
        self
    }
    /// The source's explicit completion flag.
    #[must_use]
    pub fn with_complete(mut self, complete: bool) -> Page {
        self.complete = Some(complete);
        self
    }
    /// The snapshot the source says it served.
    #[must_use]
    pub fn with_snapshot(mut self, snapshot: impl Into<String>) -> Page {
        self.snapshot = Some(snapshot.into());
        self
    }
    /// The query the source says it ran.
    #[must_use]
    pub fn with_query(mut self, query: Value) -> Page {
        self.query = Some(query);
        self
    }
    /// Whether the source warned that it cut the page short.
    #[must_use]
    pub fn with_truncated(mut self, truncated: bool) -> Page {
        self.truncated = truncated;
        self
    }
    /// The total the source says the scope holds.
    #[must_use]
    pub fn with_total(mut self, total: u64) -> Page {
        self.total = Some(total);
        self
    }
    /// The size of the response on the wire, in bytes.
    #[must_use]
    pub fn with_size_bytes(mut self, bytes: u64) -> Page {
        self.size_bytes = bytes;
        self
    }
}
