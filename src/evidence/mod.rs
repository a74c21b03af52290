//! Evidence over stored runs: `diff` of two runs, `verify` of a receipt, and the pure
//! comparisons under them (`diff`, `verify`).
//!
//! Every function here reads through one `Snapshot`, so a concurrent scan never shows it a
//! torn state. The pure modules do no IO; the functions below only read the store.

mod across;
pub mod diff;
mod export;
mod gaps;
mod ids;
mod lists;
mod migration;
mod page;
mod render;
mod runs;
mod side;
mod stream;
mod text;
pub mod verify;

use crate::receipt::{Receipt, RunId};
use crate::store::{ReadError, RunHeader, Snapshot};

pub use across::{
    changed_ids, comparable_across, content_diff, diff_across, differing_content_leaves,
    int_accumulators, ContentDiff,
};
pub use diff::{Diff, NotComparable, RangeList};
pub use page::{page_of_run, PageRunError, RunPage};
pub use render::Renderer;
pub use verify::{FoundIn, Mismatch};

pub use export::{export_of, Export, ExportError, ExportShape, ExportSummary};
pub use gaps::{gaps_of, Gaps, RangeError};
pub use ids::{parse_given, GivenId, IdTextError};
pub use lists::{
    compare, diff_report, missing_report, Compared, DiffReport, MissingReport, RunAt, Which,
};
pub use migration::{
    check_source_columns, diff_content, shell_word, side_checkpoint_every, side_contract,
    verify_migration, ChangedColumns, ContentReport, ExcludeError, MigrationError, MigrationLists,
    MigrationReport, MigrationRequest, RereadFailure, RereadReport, RereadSources, Side,
    StreamReport, Unreproduced, EXCLUDED_IDS_MAX, EXCLUDE_BYTES_MAX, IDS_SHOWN_MAX,
    SIDE_CHECKPOINT_EVERY, SIDE_PAGE_SIZE,
};
pub use runs::{
    mcp_server_of, page_report, receipt_report, runs_report, verify_report, PageReport,
    ReceiptReport, RunFilter, RunRef, RunRefError, RunRow, RunTextError, RunsQuery, RunsReport,
    VerifyReport,
};
pub use side::{run_names, run_side, RunName, RunSide};
pub use stream::{EmitError, RangeTally, Tally};
pub use text::{write_json, write_lists, ListForm, ListStream, Walk};

/// Why two runs could not be diffed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiffError {
    /// The runs are not comparable (another source or tenant, another codec).
    #[error(transparent)]
    NotComparable(#[from] NotComparable),
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl DiffError {
    /// What to do next, when something helps: runs of another scope are compared with
    /// `--across`.
    #[must_use]
    pub fn hint(&self) -> Option<&'static str> {
        matches!(
            self,
            DiffError::NotComparable(NotComparable::OtherScope { .. })
        )
        .then_some("to compare two collections (a migration's source and target), add --across")
    }
}

/// The diff of two stored runs, with what it took.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunDiff {
    /// The old run.
    pub old: RunHeader,
    /// The new run.
    pub new: RunHeader,
    /// What changed from old to new.
    pub diff: Diff,
    /// Partition bitmaps read from the store (0 when the roots matched).
    pub partitions_loaded: u64,
}

/// What decides whether a run's IDs can be compared with another's.
#[must_use]
pub fn comparable_of(h: &RunHeader) -> diff::Comparable<'_> {
    diff::Comparable {
        run: h.run_id,
        source: &h.contract.scope.source,
        tenant: h.contract.scope.tenant.as_deref(),
        codec: h.contract.id_codec,
        prefix: h.id_prefix.as_deref(),
    }
}

/// Diffs two runs of one (source, tenant): compares the stored Merkle roots, then the leaves,
/// then loads only the partitions whose leaves differ. Two equal finished runs cost two
/// run-record reads.
///
/// # Errors
/// `NotComparable` for runs of different scopes or codecs; `Read` when a run is unknown,
/// unreadable or damaged.
pub fn diff_runs(snap: &Snapshot<'_>, old: RunId, new: RunId) -> Result<RunDiff, DiffError> {
    let old_h = snap.header(old)?;
    let new_h = snap.header(new)?;
    diff::comparable(&comparable_of(&old_h), &comparable_of(&new_h))?;
    if let (Some(a), Some(b)) = (old_h.merkle_root, new_h.merkle_root) {
        if a == b {
            return Ok(RunDiff {
                old: old_h,
                new: new_h,
                diff: Diff::default(),
                partitions_loaded: 0,
            });
        }
    }
    diff_of_leaves(snap, old_h, snap, new_h)
}

/// The diff of two runs whose roots differ, each read through its own snapshot (the same one
/// for two runs of one store): their leaves, then only the partitions whose leaves differ.
pub(crate) fn diff_of_leaves(
    old_snap: &Snapshot<'_>,
    old_h: RunHeader,
    new_snap: &Snapshot<'_>,
    new_h: RunHeader,
) -> Result<RunDiff, DiffError> {
    let (old, new) = (old_h.run_id, new_h.run_id);
    let differing = diff::differing_partitions(&old_snap.leaves(old)?, &new_snap.leaves(new)?);
    let old_parts = old_snap.partitions_of(old, &differing)?;
    let new_parts = new_snap.partitions_of(new, &differing)?;
    let partitions_loaded = old_parts
        .iter()
        .chain(&new_parts)
        .filter(|(_, b)| b.is_some())
        .count() as u64;
    let diff = diff::of_partitions(
        old_parts
            .iter()
            .zip(&new_parts)
            .map(|((p, o), (_, n))| (*p, o.as_ref(), n.as_ref())),
    );
    Ok(RunDiff {
        old: old_h,
        new: new_h,
        diff,
        partitions_loaded,
    })
}

/// Recomputes a receipt from the store's evidence for its run (`verify::check`). An unknown
/// or malformed `run_id` is a mismatch of that field, not an error.
///
/// # Errors
/// `ReadError` when the store or the run's records are unreadable or damaged.
pub fn verify_receipt(snap: &Snapshot<'_>, receipt: &Receipt) -> Result<Vec<Mismatch>, ReadError> {
    let run_mismatch = |why: String| {
        vec![Mismatch {
            field: "run_id".to_owned(),
            found_in: FoundIn::Receipt,
            found: serde_json::Value::String(receipt.run_id.clone()).to_string(),
            recomputed: why,
            detail: None,
        }]
    };
    let Ok(run) = receipt.run_id.parse::<RunId>() else {
        return Ok(run_mismatch("a run ID of the form run-N".to_owned()));
    };
    let loaded = match snap.load(run) {
        Ok(l) => l,
        Err(ReadError::UnknownRun { path, .. }) => {
            return Ok(run_mismatch(format!(
                "no such run in store {}",
                path.display()
            )))
        }
        Err(e) => return Err(e),
    };
    let pages: Vec<verify::PageEvidence> = loaded
        .pages
        .iter()
        .map(|p| verify::PageEvidence {
            cursor_hash: p.cursor_hash,
            n_items: p.n_items,
        })
        .collect();
    let leaves = snap.leaves(run)?;
    let evidence = verify::Evidence {
        contract: &loaded.contract,
        meta: &loaded.meta,
        reconciler: &loaded.reconciler,
        pages: &pages,
        stored_root: loaded.stored_root,
        stored_leaves: &leaves,
    };
    Ok(verify::check(receipt, &evidence))
}
