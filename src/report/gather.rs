//! Every store access of the report, in one place: from a store and run IDs to a `ReportInput`.
//!
//! Owns: which store calls a report makes and how their results become plain data. The rest
//! of `report` never sees the store, so a change of the store's API touches this file only.
//! Never: writes (the store is opened read-only), renders, or loads a bitmap it does not use.
//! Invariants: partition lists are ascending (the store's order); the comparison comes from
//! the existing diff machinery (`evidence::diff_runs`: Merkle leaves first, then only the
//! differing partitions), with the reference as the old side and the run as the new one.

use crate::contract::IdCodecKind;
use crate::evidence::{diff_across, diff_runs, DiffError, RangeList, RunDiff};
use crate::idset::IdSet;
use crate::receipt::{Ranges, Receipt, RunId};
use crate::store::Snapshot;

use super::{MigrationSection, RangeSummary, Reference, ReportInput};

/// String IDs a comparison lists one by one (the report shows the first 8 of a list).
const IDS_LISTED_MAX: usize = 8;

/// Gathers the report of `run`, compared with `against`, from one read view of the store.
///
/// # Errors
/// `DiffError::Read` when the store or a run is unreadable, unknown or damaged;
/// `DiffError::NotComparable` when the two runs are not comparable (another source, tenant or
/// codec).
pub fn gather(
    snap: &Snapshot<'_>,
    run: RunId,
    against: Option<RunId>,
) -> Result<ReportInput, DiffError> {
    // The diff first: runs that cannot be compared are refused before either is loaded whole.
    let diff = against
        .map(|other| diff_runs(snap, other, run))
        .transpose()?;
    let reference = against.zip(diff).map(|(other, rd)| (snap, other, rd));
    build(snap, run, reference)
}

/// Gathers the review packet of a migration: the target's run `to` (read through `to_snap`),
/// compared with the source's run `from` (through `from_snap`, the same store or another) as
/// its reference, and the verdict `verdict` the library gave for the two.
///
/// # Errors
/// As [`gather`], the runs compared across their sources (`evidence::diff_across`).
pub fn gather_migration(
    from_snap: &Snapshot<'_>,
    from: RunId,
    to_snap: &Snapshot<'_>,
    to: RunId,
    verdict: &crate::evidence::MigrationReport,
) -> Result<ReportInput, DiffError> {
    let rd = diff_across(from_snap, from, to_snap, to)?;
    let mut input = build(to_snap, to, Some((from_snap, from, rd)))?;
    input.migration = Some(MigrationSection::from(verdict));
    Ok(input)
}

/// The report of `run` (through `snap`), with the reference run and its diff when there is
/// one (the reference read through its own view).
fn build(
    snap: &Snapshot<'_>,
    run: RunId,
    reference: Option<(&Snapshot<'_>, RunId, RunDiff)>,
) -> Result<ReportInput, DiffError> {
    let loaded = snap.load(run)?;
    let rec = &loaded.reconciler;
    let codec = rec.codec();
    let mut receipt: Receipt = Receipt::build(&loaded.contract, &loaded.meta, rec);
    let reference = match reference {
        Some((ref_snap, other, rd)) => {
            let theirs = ref_snap.load(other)?;
            let summary = |set: &IdSet| {
                let list = RangeList::of(set);
                RangeSummary {
                    count: set.len(),
                    ranges: list.render(codec),
                    ranges_total: list.ranges_total,
                }
            };
            // String IDs are numbered by the collection's dictionary in the order it first
            // saw them, so a range of them would read as alphabetical and is not: the
            // comparison lists them one by one.
            let shown = |set: &IdSet| {
                if loaded.contract.id_codec != IdCodecKind::String {
                    return summary(set);
                }
                let list = RangeList::of(set);
                let ranges = list
                    .shown
                    .iter()
                    .flat_map(|&(first, last)| (first..=last).take(IDS_LISTED_MAX))
                    .take(IDS_LISTED_MAX)
                    .map(|id| {
                        let one = codec.render(id);
                        format!("{one}..{one}")
                    })
                    .collect();
                RangeSummary {
                    count: set.len(),
                    ranges,
                    ranges_total: set.len(),
                }
            };
            let removed = summary(&rd.diff.removed);
            receipt.missing_id_ranges = Some(Ranges {
                ranges: removed.ranges.clone(),
                ranges_total: removed.ranges_total,
            });
            let removed = shown(&rd.diff.removed);
            Some(Reference {
                run_id: other.to_string(),
                coverage_status: theirs.reconciler.status(),
                snapshot_id: theirs.reconciler.progress().pinned_snapshot.clone(),
                unique_ids: theirs.reconciler.ids().len(),
                partitions: counts(theirs.reconciler.ids()),
                added: shown(&rd.diff.added),
                removed,
                partitions_differing: rd.diff.partitions_differing,
            })
        }
        None => None,
    };
    Ok(ReportInput {
        state: loaded.state.as_str().to_owned(),
        stopped_by: snap.header(run)?.stopped_by,
        id_codec: loaded.contract.id_codec,
        id_prefix: rec
            .progress()
            .id_prefix
            .clone()
            .or_else(|| loaded.contract.id_prefix.clone()),
        partitions: counts(rec.ids()),
        expected_partitions: loaded.contract.expected_partitions.clone(),
        reference,
        migration: None,
        generator: env!("CARGO_PKG_VERSION").to_owned(),
        receipt,
    })
}

/// Unique IDs per non-empty partition, ascending.
fn counts(ids: &IdSet) -> Vec<(u64, u64)> {
    ids.partitions().map(|(p, b)| (p, b.len())).collect()
}
