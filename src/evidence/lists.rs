//! The answers of `diff` and `missing` (and the ID half of the migration verdict): two runs
//! compared, within one scope or across two (`Compared`), their differences counted partition
//! by partition into capped lists with exact totals (`DiffReport`, `MissingReport`), and every
//! range handed on as it is found when a caller wants them all (`Compared::each_range`).
//!
//! Reads through the snapshots it is given; the walk loads `WALK_CHUNK` partitions of each side
//! at a time, so no answer's memory grows with the number of IDs compared or ranges listed (the
//! `string` codec across scopes is the exception: its strings are compared by digest in
//! memory, `across::strings_diff_of`).
//! A face renders these reports; it decides nothing about them.

use std::path::Path;

use serde::Serialize;

use super::across;
use super::diff::{self, Diff};
use super::side::{run_side, RunSide};
use super::stream::{
    render_shown, Coalesce, EmitError, RangeTally, RenderEach, Sides, Stored, Tally,
};
use super::text::{side_words, Words};
use super::{comparable_of, DiffError};
use crate::contract::IdCodecKind;
use crate::idset::IdSet;
use crate::receipt::{terminal_safe, RunId, RANGES_SHOWN_MAX};
use crate::reconcile::Status;
use crate::store::{ReadError, RunHeader, Snapshot};

/// A run to compare: the snapshot of its store, the run, and the store's path (as given).
#[derive(Clone, Copy)]
pub struct RunAt<'a, 's> {
    /// The store's read view.
    pub snap: &'a Snapshot<'s>,
    /// The run.
    pub run: RunId,
    /// The store file, for reports and names.
    pub store: &'a Path,
}

/// Which list of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Which {
    /// IDs the new run has and the old lacks (the new run's IDs).
    Added,
    /// IDs the old run has and the new lacks (the old run's IDs).
    Removed,
}

/// Two runs ready to be compared: their headers and where their differing partitions are.
pub struct Compared<'a, 's> {
    /// The old run.
    pub old: RunHeader,
    /// The new run.
    pub new: RunHeader,
    old_at: RunAt<'a, 's>,
    new_at: RunAt<'a, 's>,
    sides: Sides<'a, 's>,
    /// Two collections (`--across`) or two store files.
    pub crossing: bool,
    /// Two store files.
    pub two_files: bool,
    /// Bitmaps read from the store to find the differing partitions' leaves (the string codec
    /// across scopes reads every partition).
    loaded: u64,
}

/// Finds where two runs differ: nothing when their stored roots agree, else the partitions
/// whose Merkle leaves differ (for `string` IDs across scopes or files, a diff of the strings'
/// digests). Without `across` the runs must share their scope.
///
/// # Errors
/// `NotComparable` (another scope without `across`, another codec or prefix); `Read`.
pub fn compare<'a, 's>(
    old_at: RunAt<'a, 's>,
    new_at: RunAt<'a, 's>,
    two_files: bool,
    across: bool,
) -> Result<Compared<'a, 's>, DiffError> {
    let old = old_at.snap.header(old_at.run)?;
    let new = new_at.snap.header(new_at.run)?;
    if across {
        across::comparable_across(&old, &new)?;
    } else {
        diff::comparable(&comparable_of(&old), &comparable_of(&new))?;
    }
    let crossing = across || two_files;
    let mut loaded = 0;
    let equal_roots = matches!((old.merkle_root, new.merkle_root), (Some(a), Some(b)) if a == b);
    let sides = if equal_roots {
        Sides::Memory(Diff::default())
    } else if crossing && old.contract.id_codec == IdCodecKind::String {
        let (d, n) = across::strings_diff_of(old_at.snap, &old, new_at.snap, &new)?;
        loaded = n;
        Sides::Memory(d)
    } else {
        let a = old_at.snap.leaves(old.run_id)?;
        let b = new_at.snap.leaves(new.run_id)?;
        Sides::Stored {
            old: Stored {
                snap: old_at.snap,
                run: old.run_id,
            },
            new: Stored {
                snap: new_at.snap,
                run: new.run_id,
            },
            partitions: diff::differing_partitions(&a, &b),
        }
    };
    Ok(Compared {
        old,
        new,
        old_at,
        new_at,
        sides,
        crossing,
        two_files,
        loaded,
    })
}

/// The lists of a comparison, counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tallies {
    pub added: Tally,
    pub removed: Tally,
    /// Partitions where the IDs differ: the first `RANGES_SHOWN_MAX`, and how many in all.
    pub partitions: Vec<u64>,
    pub partitions_total: u64,
    pub loaded: u64,
}

impl<'a, 's> Compared<'a, 's> {
    /// `string` IDs are numbered by the dictionary, not ordered as strings: every one is its
    /// own range, so a list never reads as an alphabetical range.
    fn merge(&self) -> bool {
        self.old.contract.id_codec != IdCodecKind::String
    }

    /// Whether the two ID sets are equal.
    #[must_use]
    pub fn is_equal(&self) -> bool {
        match &self.sides {
            Sides::Memory(d) => d.is_empty(),
            Sides::Stored { partitions, .. } => partitions.is_empty(),
        }
    }

    /// The partitions whose IDs differ, ascending (every one).
    #[must_use]
    pub fn partitions(&self) -> &[u64] {
        match &self.sides {
            Sides::Memory(d) => &d.partitions_differing,
            Sides::Stored { partitions, .. } => partitions,
        }
    }

    /// Counts both lists in one walk, less the IDs of `exclude` (old side, new side), calling
    /// `each` on every partition too (the migration verdict's exclusions and content need it).
    pub(crate) fn tally(
        &self,
        exclude: Option<(&IdSet, &IdSet)>,
        mut each: impl FnMut(&super::stream::Step<'_>),
    ) -> Result<Tallies, ReadError> {
        let mut added = RangeTally::new(RANGES_SHOWN_MAX, self.merge());
        let mut removed = RangeTally::new(RANGES_SHOWN_MAX, self.merge());
        let mut t = Tallies {
            loaded: self.loaded,
            ..Tallies::default()
        };
        let loaded = self.sides.walk(|step| -> Result<(), ReadError> {
            each(&step);
            let (a, r) = excluded(&step, exclude);
            added.push_bitmap(step.partition, a.as_ref().unwrap_or(step.added));
            removed.push_bitmap(step.partition, r.as_ref().unwrap_or(step.removed));
            if t.partitions.len() < RANGES_SHOWN_MAX {
                t.partitions.push(step.partition);
            }
            t.partitions_total += 1;
            Ok(())
        })?;
        t.loaded += loaded;
        t.added = added.finish();
        t.removed = removed.finish();
        Ok(t)
    }

    /// Hands on every range of one list, rendered in its run's original form, ascending, as it
    /// is found (less the IDs of `exclude`, in that list's run's space).
    ///
    /// # Errors
    /// `EmitError::Read` when the store fails, `Io` when `emit` does.
    pub fn each_range(
        &self,
        which: Which,
        exclude: Option<&IdSet>,
        emit: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<(), EmitError> {
        let (at, header) = match which {
            Which::Added => (self.new_at, &self.new),
            Which::Removed => (self.old_at, &self.old),
        };
        let mut out = RenderEach::new(at.snap, header, emit);
        let mut push = |a, b| out.push(a, b);
        let mut c = Coalesce::new(self.merge());
        self.sides.walk(|step| -> Result<(), EmitError> {
            let bitmap = match which {
                Which::Added => step.added,
                Which::Removed => step.removed,
            };
            let less = exclude.and_then(|e| e.partition(step.partition));
            match less {
                Some(x) => c.push_bitmap(step.partition, &(bitmap - x), &mut push),
                None => c.push_bitmap(step.partition, bitmap, &mut push),
            }
        })?;
        c.finish(&mut push)?;
        out.finish()
    }

    /// The old run's side (its store, scope, snapshot, status, roots).
    ///
    /// # Errors
    /// `ReadError`.
    pub fn old_side(&self) -> Result<RunSide, ReadError> {
        run_side(self.old_at.snap, &self.old, self.old_at.store)
    }

    /// The new run's side.
    ///
    /// # Errors
    /// `ReadError`.
    pub fn new_side(&self) -> Result<RunSide, ReadError> {
        run_side(self.new_at.snap, &self.new, self.new_at.store)
    }

    /// Both runs' sides when the comparison crosses collections or files.
    fn sides(&self) -> Result<Option<(RunSide, RunSide)>, ReadError> {
        if !self.crossing {
            return Ok(None);
        }
        Ok(Some((self.old_side()?, self.new_side()?)))
    }

    /// How the text names the runs: with scope and snapshot across collections (a diff's new
    /// run with its scope always), and with its store's name across two files.
    fn words(&self, sides: Option<&(RunSide, RunSide)>, diff: bool) -> Words {
        let (a, b) = super::side::run_names(
            self.old.run_id,
            self.old_at.store,
            self.new.run_id,
            self.two_files.then_some(self.new_at.store),
        );
        let names = (a.to_string(), b.to_string());
        let scope = |h: &RunHeader| {
            format!(
                "{} / {}",
                terminal_safe(&h.contract.scope.source),
                terminal_safe(h.contract.scope.tenant.as_deref().unwrap_or("-"))
            )
        };
        let (old, new) = match sides {
            Some((x, y)) => (
                format!("{} ({})", names.0, side_words(x)),
                format!("{} ({})", names.1, side_words(y)),
            ),
            None if diff => (
                names.0.clone(),
                format!("{} ({})", names.1, scope(&self.new)),
            ),
            None => names.clone(),
        };
        Words {
            old,
            new,
            names,
            strings: !self.merge(),
            unique_ids: self.new.unique_ids_observed,
            statuses: Some((self.old.coverage_status, self.new.coverage_status)),
        }
    }

    /// The first ranges of a tally, rendered in the original form of `which`'s run.
    pub(crate) fn render(&self, which: Which, tally: &Tally) -> Result<Vec<String>, ReadError> {
        match which {
            Which::Added => render_shown(self.new_at.snap, &self.new, &tally.shown),
            Which::Removed => render_shown(self.old_at.snap, &self.old, &tally.shown),
        }
    }

    /// Where the two runs are read from (old, new).
    #[must_use]
    pub fn at(&self) -> (RunAt<'a, 's>, RunAt<'a, 's>) {
        (self.old_at, self.new_at)
    }
}

/// A partition's lists less the excluded IDs, when there are any in it.
fn excluded(
    step: &super::stream::Step<'_>,
    exclude: Option<(&IdSet, &IdSet)>,
) -> (
    Option<roaring::RoaringBitmap>,
    Option<roaring::RoaringBitmap>,
) {
    let Some((old, new)) = exclude else {
        return (None, None);
    };
    (
        new.partition(step.partition).map(|x| step.added - x),
        old.partition(step.partition).map(|x| step.removed - x),
    )
}

/// The answer of `diff OLD NEW` (docs/REFERENCE.md §8): what was added and removed, as capped
/// lists of ranges in the IDs' original form with exact totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DiffReport {
    /// The old run.
    pub old_run: String,
    /// The new run.
    pub new_run: String,
    /// The new run's source.
    pub source: String,
    /// The new run's tenant.
    pub tenant: Option<String>,
    /// The old run's status: a difference is a finding only between verified runs.
    pub old_coverage_status: Status,
    /// The new run's status.
    pub new_coverage_status: Status,
    /// Whether the ID sets are equal.
    pub equal: bool,
    /// IDs in the new run and not in the old.
    pub added_count: u64,
    /// IDs in the old run and not in the new.
    pub removed_count: u64,
    /// The first `RANGES_SHOWN_MAX` ranges added, `"FIRST..LAST"` (one ID each for `string`
    /// IDs).
    pub added_ranges: Vec<String>,
    /// Ranges added in all.
    pub added_ranges_total: u64,
    /// The first ranges removed.
    pub removed_ranges: Vec<String>,
    /// Ranges removed in all.
    pub removed_ranges_total: u64,
    /// The first partitions whose IDs differ (for `string` IDs, blocks of the dictionary's
    /// numbering, not of the strings' order).
    pub partitions_differing: Vec<u64>,
    /// Partitions whose IDs differ in all.
    pub partitions_differing_total: u64,
    /// Partition bitmaps read from the store (0 when the roots matched).
    pub partitions_loaded: u64,
    /// The file every range was written to, when the face wrote one.
    pub output: Option<String>,
    /// With `--across` or two store files: the old run's side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<RunSide>,
    /// With `--across` or two store files: the new run's side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<RunSide>,
    /// With `--content`: the content comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<super::migration::ContentReport>,
    /// How the text names the runs.
    #[serde(skip)]
    pub(crate) words: Words,
}

impl DiffReport {
    /// The worse status of the two runs: the report is an inventory's only when both are
    /// verified.
    #[must_use]
    pub fn status(&self) -> Status {
        super::side::worse(self.old_coverage_status, self.new_coverage_status)
    }
}

/// The diff report of two compared runs (without content).
///
/// ```
/// # use scanledger::*;
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("s.redb");
/// # let mut store = Store::open(&path, StoreOptions::new()).unwrap();
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// # for n in [10, 12] {
/// #     let mut src = SimSource::new(SimConfig::default().with_records(n));
/// #     rt.block_on(scan(&Contract::new("s"), &mut src, &mut store)).unwrap();
/// # }
/// let snap = store.read().unwrap();
/// let at = |run| RunAt { snap: &snap, run: RunId(run), store: &path };
/// let cmp = compare_runs(at(1), at(2), false, false).unwrap();
/// let report = diff_report(&cmp).unwrap();
/// assert_eq!((report.added_count, report.removed_count), (2, 0));
/// assert_eq!(report.added_ranges, vec!["11..12"]);
/// ```
///
/// # Errors
/// `ReadError` when the store fails.
pub fn diff_report(cmp: &Compared<'_, '_>) -> Result<DiffReport, ReadError> {
    let t = cmp.tally(None, |_| {})?;
    let (old, new) = (&cmp.old, &cmp.new);
    let sides = cmp.sides()?;
    Ok(DiffReport {
        words: cmp.words(sides.as_ref(), true),
        old_run: old.run_id.to_string(),
        new_run: new.run_id.to_string(),
        source: new.contract.scope.source.clone(),
        tenant: new.contract.scope.tenant.clone(),
        old_coverage_status: old.coverage_status,
        new_coverage_status: new.coverage_status,
        equal: cmp.is_equal(),
        added_count: t.added.count(),
        removed_count: t.removed.count(),
        added_ranges: cmp.render(Which::Added, &t.added)?,
        added_ranges_total: t.added.ranges_total,
        removed_ranges: cmp.render(Which::Removed, &t.removed)?,
        removed_ranges_total: t.removed.ranges_total,
        partitions_differing: t.partitions,
        partitions_differing_total: t.partitions_total,
        partitions_loaded: t.loaded,
        output: None,
        old: sides.as_ref().map(|s| s.0.clone()),
        new: sides.map(|s| s.1),
        content: None,
    })
}

/// The answer of `missing RUN --against OTHER | --range LO..HI` (docs/REFERENCE.md §8): the
/// IDs the reference has and the run lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct MissingReport {
    /// The run.
    pub run_id: String,
    /// The reference: a run (`run-N`) or the range as given.
    pub reference: String,
    /// The run's status: what a run that did not verify lacks may be what it did not reach.
    pub coverage_status: Status,
    /// The reference run's status; null for a range.
    pub reference_coverage_status: Option<Status>,
    /// IDs missing (u128: a range may span the whole u64 space).
    pub missing_count: u128,
    /// The first `RANGES_SHOWN_MAX` ranges missing, in the reference's original form.
    pub missing_ranges: Vec<String>,
    /// Ranges missing in all.
    pub missing_ranges_total: u64,
    /// The file every range was written to, when the face wrote one.
    pub output: Option<String>,
    /// Across scopes or files: the run's side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSide>,
    /// Across scopes or files: the reference's side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<RunSide>,
    /// How the text names the run and its reference.
    #[serde(skip)]
    pub(crate) words: Words,
}

impl MissingReport {
    /// The worse status of the run and its reference run.
    #[must_use]
    pub fn status(&self) -> Status {
        self.reference_coverage_status
            .map_or(self.coverage_status, |r| {
                super::side::worse(self.coverage_status, r)
            })
    }
}

/// What `missing RUN --against OTHER` answers: the comparison's `Added` list, with the run as
/// the old side and the reference as the new one.
///
/// # Errors
/// `ReadError` when the store fails.
pub fn missing_report(cmp: &Compared<'_, '_>) -> Result<MissingReport, ReadError> {
    let mut added = RangeTally::new(RANGES_SHOWN_MAX, cmp.merge());
    cmp.sides.walk(|s| -> Result<(), ReadError> {
        added.push_bitmap(s.partition, s.added);
        Ok(())
    })?;
    let added = added.finish();
    let sides = cmp.sides()?;
    Ok(MissingReport {
        words: cmp.words(sides.as_ref(), false),
        run_id: cmp.old.run_id.to_string(),
        reference: cmp.new.run_id.to_string(),
        coverage_status: cmp.old.coverage_status,
        reference_coverage_status: Some(cmp.new.coverage_status),
        missing_count: added.ids_total,
        missing_ranges: cmp.render(Which::Added, &added)?,
        missing_ranges_total: added.ranges_total,
        output: None,
        run: sides.as_ref().map(|s| s.0.clone()),
        against: sides.map(|s| s.1),
    })
}

#[cfg(test)]
mod tests;
