//! scanledger: an embedded scan store with snapshot-pinned traversal.
//!
//! A *scan* follows a paginated source page by page under a *contract* (scope, snapshot,
//! budgets, end signal, policies). The pure `reconcile` core applies the rules R1-R16 of the
//! SPEC to every page; the store checkpoints each page atomically in a redb file; the result
//! is a completeness *receipt* whose status is `verified`, `unknown` or `failed`. A first page
//! never passes for the whole collection.
//!
//! ```
//! use scanledger::{collect, Contract, SimConfig, SimSource, Status};
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! let mut source = SimSource::new(SimConfig { records: 1_000, ..SimConfig::default() });
//! let inventory = rt.block_on(collect::collect(&Contract::new("customers"), &mut source)).unwrap();
//! assert_eq!(inventory.receipt.coverage_status, Status::Verified);
//! assert_eq!(inventory.ids.len(), 1_000);
//! ```

#[doc(hidden)]
pub mod cli;
pub mod codec;
pub mod collect;
pub mod content;
pub mod contract;
pub mod diff;
pub mod digest;
mod error;
pub mod idset;
mod io_bound;
pub mod json;
pub mod receipt;
pub mod reconcile;
pub mod source;
pub mod store;
pub mod token;
pub mod verify;

pub use codec::{CodecError, IdCodec, Interner};
pub use collect::{IncompleteRead, Inventory, MemorySink, RunSink, ScanResult};
pub use contract::{
    Contract, EndSignal, ExpiredPolicy, IdCodecKind, Item, Limits, Mode, Page, RawId, Scope,
    SnapshotPolicy,
};
pub use diff::Diff;
pub use error::{ContractError, Error, FileError, Result, SourceError, StoreError};
pub use idset::IdSet;
pub use receipt::{Receipt, RunId, RunMeta};
pub use reconcile::{Limit, Progress, Reconciler, Request, Status, Step, Violation, ViolationKind};
pub use source::{AnySource, FetchError, PageRequest, PageSource, SimConfig, SimSource};
pub use store::{RunDiff, RunHeader, Store, StoreOptions};
pub use token::TokenError;
pub use verify::Mismatch;
