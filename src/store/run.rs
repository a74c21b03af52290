//! What the store says about a run: its state, its summary in a listing, its header, a run
//! loaded to resume, the budgets a resume may raise, and the key of a collection's string
//! dictionary.

use crate::contract::Contract;
use crate::digest::Hash;
use crate::receipt::{RunId, RunMeta};
use crate::reconcile::{PageLog, Reconciler, Status};

use super::stops::StopCause;

/// The key of a collection's string dictionary: source and tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeKey(Vec<u8>);

impl ScopeKey {
    /// The dictionary key of a contract's (source, tenant).
    #[must_use]
    pub fn of(contract: &Contract) -> ScopeKey {
        let mut k = contract.scope.source.as_bytes().to_vec();
        k.push(0);
        k.extend_from_slice(contract.scope.tenant.as_deref().unwrap_or("").as_bytes());
        ScopeKey(k)
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A run's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunState {
    /// Being written by a live process.
    Running,
    /// Recorded as running, but its writer is gone (killed, or Ctrl-C before a clean stop):
    /// `resume` continues it.
    Interrupted,
    /// Stopped; resumable when its stop was transient.
    Finished,
    /// Replaced by a restart.
    Superseded,
}

impl RunState {
    /// The name `runs` prints.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Interrupted => "interrupted",
            RunState::Finished => "finished",
            RunState::Superseded => "superseded",
        }
    }
}

/// One line of `runs`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// The scope's source.
    pub source: String,
    /// The scope's tenant.
    pub tenant: Option<String>,
    /// Its state.
    pub state: RunState,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed.
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339, `None` while running.
    pub finished_at: Option<String>,
    /// The error that stopped the run, while it is what left the run interrupted.
    pub stopped_by: Option<StopCause>,
}

/// What `diff`, `missing`, `export` and `page` need of a run, read without its bitmaps.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunHeader {
    /// The run.
    pub run_id: RunId,
    /// Its effective contract.
    pub contract: Contract,
    /// Its state.
    pub state: RunState,
    /// The coverage status as of the last checkpoint.
    pub coverage_status: Status,
    /// Pages observed (also the run's version stamp: every checkpoint adds a page).
    pub pages_observed: u32,
    /// Unique IDs observed.
    pub unique_ids_observed: u64,
    /// Non-empty partitions of its ID set.
    pub partitions: u64,
    /// The receipt's Merkle root, stored when the run finished.
    pub merkle_root: Option<Hash>,
    /// The `prefixed` codec's prefix, given or learned.
    pub id_prefix: Option<String>,
    /// The snapshot the run is pinned to.
    pub snapshot_id: Option<String>,
    /// The source the run was started with.
    pub source_spec: Option<String>,
    /// The error that stopped the run, while it is what left the run interrupted.
    pub stopped_by: Option<StopCause>,
}

/// A run loaded whole from the store.
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadedRun {
    /// The run's effective contract.
    pub contract: Contract,
    /// Its metadata.
    pub meta: RunMeta,
    /// Its state, with the request to continue from when kept.
    pub reconciler: Reconciler,
    /// Its lifecycle state.
    pub state: RunState,
    /// The source the run was started with, if recorded.
    pub source_spec: Option<String>,
    /// The receipt root stored when it finished.
    pub stored_root: Option<Hash>,
    /// Its page log.
    pub pages: Vec<PageLog>,
}

/// Budgets a resume may raise.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Raise {
    /// New `max_pages`.
    pub max_pages: Option<u32>,
    /// New `max_records`.
    pub max_records: Option<u64>,
    /// New `max_bytes`.
    pub max_bytes: Option<u64>,
    /// New `deadline_seconds` for this session of the run.
    pub deadline_seconds: Option<u64>,
}

impl Raise {
    /// Raise the page budget to `pages`.
    #[must_use]
    pub fn with_max_pages(mut self, pages: u32) -> Raise {
        self.max_pages = Some(pages);
        self
    }
    /// Raise the record budget to `records`.
    #[must_use]
    pub fn with_max_records(mut self, records: u64) -> Raise {
        self.max_records = Some(records);
        self
    }
    /// Raise the byte budget to `bytes`.
    #[must_use]
    pub fn with_max_bytes(mut self, bytes: u64) -> Raise {
        self.max_bytes = Some(bytes);
        self
    }
    /// Give this session of the run `seconds` seconds.
    #[must_use]
    pub fn with_deadline_seconds(mut self, seconds: u64) -> Raise {
        self.deadline_seconds = Some(seconds);
        self
    }
}
