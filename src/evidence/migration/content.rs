//! The content half of a comparison (`diff --content`, `migration verify --content`): the
//! runs' per-partition content accumulators compared leaf by leaf, split into partitions whose
//! IDs are the same (a differing digest there is a changed record) and partitions whose IDs
//! differ too (their digests cannot say whether a record changed), and optionally re-read.
//!
//! Before any digest is compared, the two sides' content columns are checked where their
//! source configs still say them: another number of columns, or the same columns in another
//! order, is an error naming both lists, never "content differs".

use std::path::Path;

use serde::Serialize;

use super::reread::{reread, RereadOutcome, RereadSources, Side};
use super::MigrationError;
use crate::evidence::across::{content_diff, ContentDiff};
use crate::evidence::lists::Compared;
use crate::evidence::Renderer;
use crate::receipt::RANGES_SHOWN_MAX;

/// IDs listed by name (changed IDs, unmatched exclusions) unless every one is asked for.
pub const IDS_SHOWN_MAX: usize = 100;
// A changed ID a verdict names has its columns kept by the comparator.
const _: () = assert!(IDS_SHOWN_MAX <= crate::collect::CHANGED_COLUMNS_MAX);
/// Bytes of a source config read for its `content` list.
const CONFIG_BYTES_MAX: u64 = 1024 * 1024;

/// The content comparison of two runs (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ContentReport {
    /// Whether every leaf's accumulator agrees.
    pub equal: bool,
    /// Leaves compared (partitions, or digest buckets for `string` IDs).
    pub leaves_compared: u64,
    /// The first leaves whose accumulators differ.
    pub partitions_differing: Vec<u64>,
    /// Leaves whose accumulators differ, in all.
    pub partitions_differing_total: u64,
    /// Leaves whose content could not be compared by digest because their IDs differ too.
    pub partitions_uncompared: u64,
    /// The re-read, with `--reread`.
    pub reread: Option<RereadReport>,
}

/// What a re-read found (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RereadReport {
    /// The partitions re-read.
    pub partitions: Vec<u64>,
    /// Records both runs hold whose content differs, in partitions both re-reads reproduced.
    pub changed_count: u64,
    /// The first of them, in the new run's original form.
    pub changed_ids: Vec<serde_json::Value>,
    /// Of `changed_ids`, in order, those whose differing content columns are known, with them.
    pub changed_columns: Vec<ChangedColumns>,
    /// Partitions a re-read did not reproduce (the source changed since the scan).
    pub unreproduced: Vec<Unreproduced>,
    /// Re-reads that did not verify.
    pub failed: Vec<RereadFailure>,
    /// Whether the re-read is complete evidence for its partitions.
    pub exact: bool,
}

/// Which content columns of a changed record differ (docs/REFERENCE.md §8), told by the
/// two rows' encoded values: known for the first 100 changed records the comparison met
/// (`collect::CHANGED_COLUMNS_MAX`), when both sources gave them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ChangedColumns {
    /// The record's ID, as `changed_ids` writes it.
    pub id: serde_json::Value,
    /// Its content columns whose values differ, by the `--from` side's names (`#N` for the
    /// N-th column when its config no longer says).
    pub columns: Vec<String>,
    /// The same columns by the `--to` side's names, when it names one of them otherwise
    /// (`--content email=mail`); else null.
    pub to_columns: Option<Vec<String>>,
}

/// Both runs' content column names, as their recorded source specs say them.
pub(crate) struct ColumnNames {
    from: Vec<String>,
    to: Vec<String>,
}

impl ColumnNames {
    /// The names of `cmp`'s two runs' content columns (empty where a spec no longer says).
    pub(crate) fn of(cmp: &Compared<'_, '_>) -> ColumnNames {
        let of = |h: &crate::store::RunHeader| {
            h.source_spec
                .as_deref()
                .and_then(content_columns)
                .unwrap_or_default()
        };
        ColumnNames {
            from: of(&cmp.old),
            to: of(&cmp.new),
        }
    }

    /// The entry of the changed ID rendered as `id`, with the columns of `bits`.
    fn entry(&self, id: serde_json::Value, bits: u64) -> ChangedColumns {
        let name = |list: &[String], i: usize| {
            list.get(i)
                .cloned()
                .unwrap_or_else(|| format!("#{}", i.saturating_add(1)))
        };
        let set: Vec<usize> = (0..64).filter(|i| bits & (1u64 << i) != 0).collect();
        let columns: Vec<String> = set.iter().map(|&i| name(&self.from, i)).collect();
        let to: Vec<String> = set.iter().map(|&i| name(&self.to, i)).collect();
        ChangedColumns {
            id,
            to_columns: (to != columns).then_some(to),
            columns,
        }
    }

    /// The entries of those of `ids` (rendered by `rn`) whose columns are known: looked up in
    /// `kept` (ascending by ID, as the comparator keeps them).
    pub(crate) fn entries(
        &self,
        rn: &Renderer,
        ids: impl Iterator<Item = u64>,
        kept: &[(u64, Option<u64>)],
    ) -> Vec<ChangedColumns> {
        ids.filter_map(|id| {
            let i = kept.binary_search_by_key(&id, |(k, _)| *k).ok()?;
            let bits = kept.get(i)?.1?;
            Some(self.entry(rn.json(id), bits))
        })
        .collect()
    }
}

/// A partition a re-read did not reproduce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreproduced {
    /// Which run's source.
    pub run: Side,
    /// The partition.
    pub partition: u64,
}

/// A re-read that did not verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RereadFailure {
    /// Which run's source.
    pub run: Side,
    /// Why.
    pub why: String,
}

/// What the content comparison found, before it is rendered.
pub(crate) struct Findings {
    pub cd: ContentDiff,
    /// Differing leaves whose IDs differ too.
    pub with_ids: Vec<u64>,
    /// Differing leaves with the same IDs: a record there changed.
    pub pure: Vec<u64>,
    pub reread: Option<RereadOutcome>,
}

/// The `content` list of a source config (`postgres:`, `mysql:`, `sqlite:`, `http:`, `mcp:`),
/// if the recorded file still says one, or of an inline SQL spec (its `content=` key).
fn content_columns(spec: &str) -> Option<Vec<String>> {
    if crate::source::inline_kind(spec).is_some() {
        return crate::source::inline_content(spec);
    }
    let (_, path) = spec.split_once(':')?;
    let path = path.split('#').next()?;
    let text = crate::io_bound::read_text(Path::new(path), CONFIG_BYTES_MAX).ok()?;
    let v = crate::json::parse(&text, crate::json::Numbers::Any).ok()?;
    v.get("content")?
        .as_array()?
        .iter()
        .map(|c| c.as_str().map(str::to_owned))
        .collect()
}

/// Whether two lists of content columns cannot be compared: another number of columns, or
/// the same columns in another order.
fn columns_clash(old: &[String], new: &[String]) -> bool {
    let mut a = old.to_vec();
    let mut b = new.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    old.len() != new.len() || (a == b && old != new)
}

/// Refuses two runs whose content columns cannot be compared: another number of columns, or
/// the same columns in another order (where both source configs still say them).
pub(crate) fn check_columns(cmp: &Compared<'_, '_>) -> Result<(), MigrationError> {
    let of = |h: &crate::store::RunHeader| h.source_spec.as_deref().and_then(content_columns);
    let (Some(old), Some(new)) = (of(&cmp.old), of(&cmp.new)) else {
        return Ok(());
    };
    if columns_clash(&old, &new) {
        return Err(MigrationError::ContentColumns {
            old_run: cmp.old.run_id,
            old,
            new_run: cmp.new.run_id,
            new,
        });
    }
    Ok(())
}

/// Before two sources are scanned for a verdict with content (`migration verify --content`
/// with a source on each side): each config must name content columns, and the two lists
/// must be comparable (as many columns; the same columns in the same order). Checked first,
/// so a scan of millions of rows never ends in "the columns differ". A side whose config
/// cannot be read here is left to the scan, which reports it.
///
/// # Errors
/// `SourceContent` naming both lists (an empty list for a side that names none).
pub fn check_source_columns(from: &str, to: &str) -> Result<(), MigrationError> {
    let (Some(old), Some(new)) = (content_columns_or_none(from), content_columns_or_none(to))
    else {
        return Ok(());
    };
    if old.is_empty() || new.is_empty() || columns_clash(&old, &new) {
        return Err(MigrationError::SourceContent {
            from: from.to_owned(),
            old,
            to: to.to_owned(),
            new,
        });
    }
    Ok(())
}

/// A readable SQL config's `content` list (empty when it names none); `None` when the spec is
/// not a readable JSON config file.
fn content_columns_or_none(spec: &str) -> Option<Vec<String>> {
    if crate::source::inline_kind(spec).is_some() {
        return crate::source::inline_content(spec);
    }
    let (_, path) = spec.split_once(':')?;
    let text = crate::io_bound::read_text(Path::new(path), CONFIG_BYTES_MAX).ok()?;
    let v = crate::json::parse(&text, crate::json::Numbers::Any).ok()?;
    match v.as_object()?.get("content") {
        None | Some(serde_json::Value::Null) => Some(Vec::new()),
        Some(_) => content_columns(spec),
    }
}

/// Compares the content accumulators of the two runs, then re-reads the differing leaves when
/// asked. `id_parts` are the partitions whose IDs differ (ascending).
pub(crate) fn compare(
    cmp: &Compared<'_, '_>,
    id_parts: &[u64],
    reread_from: Option<&RereadSources>,
) -> Result<Findings, MigrationError> {
    check_columns(cmp)?;
    let (old_at, new_at) = cmp.at();
    let cd = content_diff(old_at.snap, cmp.old.run_id, new_at.snap, cmp.new.run_id)?;
    let leaves = &cd.leaves_differing;
    let ints = cmp.old.contract.id_codec == crate::contract::IdCodecKind::Int;
    let (with_ids, pure): (Vec<u64>, Vec<u64>) = if ints {
        leaves
            .iter()
            .partition(|p| id_parts.binary_search(p).is_ok())
    } else if id_parts.is_empty() {
        // Digest buckets are not partitions of IDs: only equal ID sets make them comparable.
        (Vec::new(), leaves.clone())
    } else {
        (leaves.clone(), Vec::new())
    };
    let both = cd.old_has_content && cd.new_has_content;
    let reread = match reread_from {
        Some(sources) if both && !leaves.is_empty() => Some(reread(cmp, leaves, sources)?),
        Some(sources) if both => Some(reread(cmp, &[], sources)?),
        _ => None,
    };
    Ok(Findings {
        cd,
        with_ids,
        pure,
        reread,
    })
}

impl Findings {
    /// The report, with the changed IDs (less `less`) rendered in the new run's form.
    pub(crate) fn report(
        &self,
        cmp: &Compared<'_, '_>,
        less: &crate::idset::IdSet,
        all: bool,
    ) -> Result<ContentReport, crate::store::ReadError> {
        let leaves = &self.cd.leaves_differing;
        let cap = if all { usize::MAX } else { RANGES_SHOWN_MAX };
        let reread = match &self.reread {
            None => None,
            Some(r) => Some(reread_report(cmp, r, less, all)?),
        };
        Ok(ContentReport {
            equal: leaves.is_empty(),
            leaves_compared: self.cd.leaves_compared,
            partitions_differing: leaves.iter().take(cap).copied().collect(),
            partitions_differing_total: leaves.len() as u64,
            partitions_uncompared: self.with_ids.len() as u64,
            reread,
        })
    }
}

fn reread_report(
    cmp: &Compared<'_, '_>,
    r: &RereadOutcome,
    less: &crate::idset::IdSet,
    all: bool,
) -> Result<RereadReport, crate::store::ReadError> {
    let changed = r.changed.difference(less);
    let cap = if all { usize::MAX } else { IDS_SHOWN_MAX };
    let (_, new_at) = cmp.at();
    let rn = Renderer::for_ids(new_at.snap, &cmp.new, changed.iter().take(cap))?;
    let names = ColumnNames::of(cmp);
    Ok(RereadReport {
        partitions: r.partitions.clone(),
        changed_count: changed.len(),
        changed_ids: changed.iter().take(cap).map(|id| rn.json(id)).collect(),
        changed_columns: names.entries(&rn, changed.iter().take(cap), &r.changed_columns),
        unreproduced: r
            .unreproduced
            .iter()
            .map(|(run, partition)| Unreproduced {
                run: *run,
                partition: *partition,
            })
            .collect(),
        failed: r
            .failed
            .iter()
            .map(|(run, why)| RereadFailure {
                run: *run,
                why: why.clone(),
            })
            .collect(),
        exact: r.is_exact(),
    })
}
