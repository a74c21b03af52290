//! The review packet: one self-contained HTML file per run, for a person deciding
//! whether to trust "all records were checked".
//!
//! Owns: `ReportInput`, the plain data a report is made of, and `render`, which turns it into
//! one HTML document (inline CSS and SVG, no script, a strict Content-Security-Policy).
//! Only `gather` touches the store; every other file here is pure (`ReportInput -> String`:
//! no IO, no clock, no store), so the renderer is tested and benchmarked without a store.
//! Never: a figure that is not computed from the input, a string from the source that is not
//! HTML-escaped, a URL or a resource outside the file.
//! Invariants: the output's size is bounded whatever the input (the coverage map has at most
//! `map::CELLS_MAX` cells, every list shown is capped, every source string is clipped), so a
//! run of a million partitions still gives a file under `REPORT_BYTES_MAX`.

use serde::{Deserialize, Serialize};

use crate::contract::IdCodecKind;
use crate::receipt::Receipt;
use crate::reconcile::Status;

mod gather;
mod html;
mod map;
mod migration;
mod shards;
mod text;
mod timeline;
mod verdict;

pub use gather::{gather, gather_migration};
#[cfg(test)]
use text::escape;
#[cfg(test)]
use text::thousands;
#[cfg(test)]
use verdict::verdict;

/// The size a report stays under, whatever the run (bytes).
#[cfg(test)]
pub(crate) const REPORT_BYTES_MAX: usize = 5 * 1024 * 1024;

/// Everything a report shows, read from the store by `gather` (or built in memory by tests
/// and benches). Plain data: no handle, no bitmap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportInput {
    /// The run's receipt, as `receipt RUN` prints it (`missing_id_ranges` filled when a
    /// reference is given).
    pub receipt: Receipt,
    /// The run's state: `running`, `interrupted`, `finished` or `superseded`.
    pub state: String,
    /// The error that stopped the run, while it is what left the run `interrupted`.
    #[serde(default)]
    pub stopped_by: Option<crate::store::StopCause>,
    /// How the run's IDs are encoded; decides how partition ID ranges are shown.
    pub id_codec: IdCodecKind,
    /// The `prefixed` codec's prefix, given or learned.
    pub id_prefix: Option<String>,
    /// Observed unique IDs per non-empty partition, ascending by partition index.
    pub partitions: Vec<(u64, u64)>,
    /// The counts the source reported per partition (the contract's `expected_partitions`),
    /// ascending by partition index.
    pub expected_partitions: Option<Vec<(u64, u64)>>,
    /// The reference run given with `--against` (a migration's source run).
    pub reference: Option<Reference>,
    /// The migration verdict, for the packet of a migration (`migration verify --report`):
    /// the report's run is then the target's and the reference the source's.
    #[serde(default)]
    pub migration: Option<MigrationSection>,
    /// The scanledger version that wrote the report.
    pub generator: String,
}

/// The reference run of `report RUN --against OTHER` and how the run differs from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// The reference run, `run-N`.
    pub run_id: String,
    /// Its coverage status.
    pub coverage_status: Status,
    /// The snapshot it was pinned to, if any.
    pub snapshot_id: Option<String>,
    /// Its unique IDs.
    pub unique_ids: u64,
    /// Its unique IDs per non-empty partition, ascending.
    pub partitions: Vec<(u64, u64)>,
    /// IDs the run has and the reference lacks.
    pub added: RangeSummary,
    /// IDs the reference has and the run lacks (missing against the reference).
    pub removed: RangeSummary,
    /// Partitions whose IDs differ between the two, ascending (all of them).
    pub partitions_differing: Vec<u64>,
}

/// What a migration packet shows of the verdict (`evidence::migration::MigrationReport`),
/// the lists as capped as the verdict's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrationSection {
    /// `verified`, `unknown` or `failed`.
    pub verdict: Status,
    /// The source's run, named with its store when two are involved.
    pub from: String,
    /// The target's run, likewise.
    pub to: String,
    /// IDs of the source missing from the target, less declared exclusions.
    pub missing_count: u64,
    /// IDs only in the target.
    pub extra_count: u64,
    /// Records whose content differs; `None` when not known.
    pub changed_count: Option<u64>,
    /// The first missing ranges.
    pub missing_ranges: Vec<String>,
    /// Missing ranges in all.
    pub missing_ranges_total: u64,
    /// The first extra ranges.
    pub extra_ranges: Vec<String>,
    /// Extra ranges in all.
    pub extra_ranges_total: u64,
    /// The first changed IDs.
    pub changed_ids: Vec<String>,
    /// Whether content was compared.
    pub content_checked: bool,
    /// Why the verdict is not `verified`.
    pub reasons: Vec<String>,
}

impl From<&crate::evidence::MigrationReport> for MigrationSection {
    fn from(m: &crate::evidence::MigrationReport) -> MigrationSection {
        MigrationSection {
            verdict: m.verdict,
            from: m.names.0.to_string(),
            to: m.names.1.to_string(),
            missing_count: m.missing_count,
            extra_count: m.extra_count,
            changed_count: m.changed_count,
            missing_ranges: m.missing_ranges.clone(),
            missing_ranges_total: m.missing_ranges_total,
            extra_ranges: m.extra_ranges.clone(),
            extra_ranges_total: m.extra_ranges_total,
            changed_ids: m
                .changed_ids
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect(),
            content_checked: m.content_checked,
            reasons: m.reasons.clone(),
        }
    }
}

/// A set of IDs as a count and its first ranges in original form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSummary {
    /// IDs in the set.
    pub count: u64,
    /// `"FIRST..LAST"` strings, the first few.
    pub ranges: Vec<String>,
    /// Ranges in all.
    pub ranges_total: u64,
}

/// Renders a report: one HTML document, self-contained, under `REPORT_BYTES_MAX`.
#[must_use]
pub fn render(input: &ReportInput) -> String {
    html::page(input)
}

#[cfg(test)]
mod tests;
