//! scanledger: an embedded scan store with snapshot-pinned traversal.
//!
//! A *scan* follows a paginated source page by page under a *contract* (scope, snapshot,
//! budgets, end signal, policies). The pure reconciliation core applies the rules R1-R16 (see
//! docs/REFERENCE.md) to every page; the store checkpoints each page atomically in one redb
//! file; the result is a completeness *receipt* whose status is `verified`, `unknown` or
//! `failed`. A first page never passes for the whole collection.
//!
//! The all-or-fail read, in memory:
//!
//! ```
//! use scanledger::{collect, Contract, RawId, SimConfig, SimSource, Status};
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! let mut source = SimSource::new(SimConfig::default().with_records(1_000));
//! let inventory = rt.block_on(collect(&Contract::new("customers"), &mut source)).unwrap();
//! assert_eq!(inventory.receipt().coverage_status, Status::Verified);
//! assert_eq!(inventory.ids().count(), 1_000);
//! ```
//!
//! Building the values a library user hands in: the structs and enums a later release may
//! extend (`Contract`, `Scope`, `Limits`, `Page`, `Item`, `SimConfig`, `Raise`, `Receipt`,
//! `Status`, `ViolationKind`, `Limit`, and every error) are `#[non_exhaustive]`, so they are
//! built from a constructor or `Default` and then `with_*` methods (or by assigning their
//! public fields), never by a struct literal, and a `match` on one of the enums ends with a
//! `_` arm:
//!
//! ```
//! use scanledger::{Contract, EndSignal, Item, Limits, Page, Raise, Reconciler, Status};
//! let contract = Contract::new("customers")
//!     .with_tenant("acme")
//!     .with_page_size(2)
//!     .with_end_signal(EndSignal::CursorAbsent)
//!     .with_limits(Limits::default().with_max_pages(10).with_retries(2));
//! assert_eq!(contract.limits.max_pages(), 10);
//! let mut rec = Reconciler::new(&contract);
//! rec.observe(&Page::new(vec![Item::int(1), Item::int(2)]).with_next("c1"));
//! rec.observe(&Page::new(vec![Item::int(3).with_labels(vec!["vip".into()])]));
//! assert_eq!(rec.status(), Status::Verified);
//! let exit = match rec.status() {
//!     Status::Verified => 0,
//!     Status::Failed => 4,
//!     // `unknown`, and any status a later release adds: no verdict.
//!     _ => 3,
//! };
//! assert_eq!(exit, 0);
//! let raise = Raise::default().with_max_pages(100);
//! assert_eq!(raise.max_pages, Some(100));
//! ```
//!
//! For agents (default feature `mcp`): [`McpSource`] pages an MCP tool, `mcp::Server` serves
//! scans and receipts as MCP tools, and `mcp::Proxy` fronts an MCP server so that its paginated
//! tools answer the whole collection or an explicit incomplete read (docs/guide-mcp.md).
//!
//! The durable path: a scan recorded in a store, its receipt read back and verified (the
//! `examples/` folder runs both paths whole: `cargo run --example collect`, `--example durable`;
//! the command line and its dependencies are the default feature `cli`, which a library user
//! can turn off with `default-features = false`).
//!
//! ```
//! use scanledger::{scan, verify_receipt, Contract, SimConfig, SimSource, Store, StoreOptions};
//! # let dir = std::env::temp_dir().join(format!("sl-doc-lib-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let mut store = Store::open(&dir.join("scans.redb"), StoreOptions::new()).unwrap();
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! let mut source = SimSource::new(SimConfig::default().with_records(5_000));
//! let done = rt.block_on(scan(&Contract::new("customers"), &mut source, &mut store)).unwrap();
//! let snapshot = store.read().unwrap();
//! let receipt = snapshot.receipt(done.meta.run_id).unwrap();
//! assert!(verify_receipt(&snapshot, &receipt).unwrap().is_empty());
//! # drop(snapshot); drop(store); std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod codec;
mod collect;
pub mod content;
mod contract;
pub mod digest;
mod error;
mod evidence;
mod idset;
mod io_bound;
pub mod json;
#[cfg(feature = "mcp")]
pub mod mcp;
mod receipt;
mod reconcile;
mod report;
pub mod shard;
mod source;
mod store;
pub mod token;

pub use token::TokenError;

pub use codec::{signed_id, signed_of, CodecError, IdCodec, Interner, INTERNED_MAX};
pub use collect::{
    collect, continue_or_begin, io_words, key_streams, now_ms, reread_contents, reread_key_ranges,
    reread_streamed, resume, resume_with, said_once, scan, scan_with, stop_cause, Error,
    IncompleteRead, Inventory, KeyComparator, KeySender, KeyTap, MemoryLog, Reread, Result, RunLog,
    ScanResult, ScanStart, StreamedKeys, StreamedReread, CHANGED_COLUMNS_MAX, KEY_PAGES_AHEAD,
};
pub use contract::{
    Contract, ContractError, EndSignal, ExpiredPolicy, IdCodecKind, Item, KeyRange, Limits, Mode,
    Page, PageColumns, RawId, Scope, ShardRef, SnapshotPolicy, CONTRACT_BYTES_MAX, CURSOR_LEN_MAX,
    DEADLINE_SECONDS_MAX, FETCH_ATTEMPTS_MAX, ID_LEN_MAX, ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX,
    LABELS_PER_RUN_MAX, LABEL_LEN_MAX, PAGES_PER_RUN_MAX, PAGE_SIZE_BYTES_MAX, PAGE_SIZE_DEFAULT,
    PAGE_TIMEOUT_MS_DEFAULT, PAGE_TIMEOUT_MS_MAX, PREFIX_LEN_MAX, RESTARTS_MAX, RETRIES_DEFAULT,
    SHARDS_MAX, VIOLATIONS_KEPT_MAX,
};
pub use evidence::{
    changed_ids, comparable_across, comparable_of, content_diff, diff, diff_across, diff_runs,
    differing_content_leaves, int_accumulators, page_of_run, verify, verify_receipt, ContentDiff,
    Diff, DiffError, FoundIn, Mismatch, NotComparable, PageRunError, RangeList, Renderer, RunDiff,
    RunPage,
};
// The answers: one typed report per question, for every face (docs/REFERENCE.md §8).
pub use evidence::{
    check_source_columns, compare as compare_runs, diff_content, diff_report, export_of, gaps_of,
    mcp_server_of, missing_report, page_report, parse_given, receipt_report, run_names, run_side,
    runs_report, shell_word, side_checkpoint_every, side_contract, verify_migration, verify_report,
    ChangedColumns, Compared, ContentReport, DiffReport, EmitError, ExcludeError, Export,
    ExportError, ExportShape, ExportSummary, Gaps, GivenId, IdTextError, MigrationError,
    MigrationLists, MigrationReport, MigrationRequest, MissingReport, PageReport, RangeError,
    RangeTally, ReceiptReport, RereadFailure, RereadReport, RereadSources, RunAt, RunName, RunRow,
    RunSide, RunsQuery, RunsReport, Side, StreamReport, Tally, Unreproduced, VerifyReport, Which,
    EXCLUDED_IDS_MAX, EXCLUDE_BYTES_MAX, IDS_SHOWN_MAX, SIDE_CHECKPOINT_EVERY, SIDE_PAGE_SIZE,
};
pub use evidence::{
    write_json, write_lists, ListForm, ListStream, RunFilter, RunRef, RunRefError, RunTextError,
    Walk,
};
pub use idset::{partition_of, IdSet, PARTITION_BITS, PARTITION_WIDTH};
pub use io_bound::{read_text as read_bounded, FileError};
pub use receipt::{
    merkle_root_of, range_evidence, range_words, rfc3339, terminal_safe, Emphasis, LabelSummary,
    MergedFrom, Ranges, RangesFold, Receipt, ReceiptError, ReceiptFacts, RunId, RunMeta,
    ShardEntry, ShardFinding, ShardRange, RANGES_SHOWN_MAX, RECEIPT_FORMAT_VERSION, RECEIPT_KEYS,
    RECEIPT_MERGED_KEYS,
};
pub use reconcile::{
    ConclusionScope, Delta, FetchFailure, Limit, Observation, PageLog, PartitionCheck, Progress,
    Reconciler, Request, Status, Step, Violation, ViolationKind,
};
pub use report::{
    gather as gather_report, gather_migration as gather_migration_report, render as render_report,
    MigrationSection, RangeSummary, Reference as ReportReference, ReportInput,
};
pub use source::mapping;
#[cfg(feature = "http")]
pub use source::HttpSource;
#[cfg(feature = "postgres")]
pub use source::PostgresSource;
#[cfg(feature = "sqlite")]
pub use source::SqliteSource;
pub use source::{
    content_pairs, inline_content, inline_kind, recordable_spec, refuse_password, shown_spec,
    source_kind, spec_file, spec_with_file, with_content,
};
pub use source::{
    AnySource, FetchError, PageRequest, PageSource, ReplaySource, SimConfig, SimSource,
    SourceError, KEY_RANGES_MAX, PROVENANCE_MARK, SOURCE_KINDS,
};
#[cfg(feature = "mcp")]
pub use source::{McpConfig, McpList, McpSource};
#[cfg(feature = "mysql")]
pub use source::{MysqlConfig, MysqlSource};
/// A simulated disk under a store and its page journal, with power cuts (the crash fuzzer's);
/// not part of the API.
#[cfg(feature = "sim-disk")]
#[doc(hidden)]
pub use store::simdisk as sim_disk;
pub use store::{
    inside_engine_call, Cause, ErrorClass, LoadedRun, OpenError, Raise, ReadError, RunHeader,
    RunState, RunSummary, RunWriter, ScopeKey, Snapshot, StopCause, Store, StoreOptions,
    WriteError, FORMAT_VERSION, STOP_MESSAGE_BYTES_MAX, TOKEN_KEY_LEN,
};
