//! Merging a plan's shards: the shard stores' runs checked against the plan, their sets
//! united, one reconciler state for the run of the whole plan.
//!
//! Reads through the shard stores' `Snapshot`s only and writes nothing (the caller records the
//! result with `Store::write_merged`). A runner's own success is never trusted: only what each
//! shard's run records (its contract, its snapshot, its IDs, its status and violations).
//!
//! Rules (docs/REFERENCE.md, merge): every run of the shard stores but a superseded one is an
//! attempt of a shard; an attempt of another plan, contract or key range is `shard_mismatch`
//! (failed); two attempts of one shard are `shard_conflict` (failed); a shard without a
//! finished attempt is `shard_missing` (unknown); an ID outside its shard's range is
//! `invalid_page` (failed); a shard pinned to another snapshot than the plan's is
//! `snapshot_changed` (failed). Each shard's own violations are carried, naming the shard.
//! The merged run is pinned to a snapshot only when the plan names one, or every shard pinned
//! the same one; otherwise it concludes at most `all_records_live`.
//!
//! Invariants: the merged ID set is the union of the shards' (disjoint by their ranges), so
//! its root, counts and partitions are those of one scan that saw the same IDs; the merged
//! page log is the shards' in shard order, renumbered, and the chain is recomputed over it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::contract::{KeyRange, VIOLATIONS_KEPT_MAX};
use crate::digest;
use crate::idset::{partition_of, IdSet, PARTITION_WIDTH};
use crate::receipt::{MergedFrom, RunId, ShardEntry, ShardFinding, ShardRange};
use crate::reconcile::{PageLog, Progress, Reconciler, Violation, ViolationKind};
use crate::store::{ReadError, RunState, Snapshot};

use super::plan::Plan;

/// One shard store, opened by the caller.
#[derive(Debug)]
pub struct ShardStore<'s> {
    /// Its path, for the findings (the receipt's list names its file).
    pub path: PathBuf,
    /// A read view of it.
    pub snapshot: Snapshot<'s>,
}

/// The merged run, ready to record.
#[derive(Debug)]
pub struct Merged {
    /// The run's state: the union, the sums, the carried and the merge's own violations.
    pub reconciler: Reconciler,
    /// The page log: the shards' in shard order, renumbered from 1.
    pub pages: Vec<PageLog>,
    /// The earliest start among the shards taken (ms since the epoch).
    pub started_at_ms: u64,
    /// The plan's digest and, per shard in order, what the merge found and took: the list
    /// the merged run's receipt carries (`Store::write_merged` records it).
    pub merged_from: MergedFrom,
}

/// One attempt of a shard: where, which run, its state.
struct Attempt {
    store: usize,
    run: RunId,
    state: RunState,
}

/// Collects findings into a progress, keeping the first `VIOLATIONS_KEPT_MAX`.
fn record(p: &mut Progress, kind: ViolationKind, page: u32, detail: String) {
    if p.violations.len() < VIOLATIONS_KEPT_MAX {
        p.violations.push(Violation { kind, page, detail });
    } else {
        p.violations_dropped = p.violations_dropped.saturating_add(1);
        p.violations_dropped_worst = p.violations_dropped_worst.max(Some(kind.status()));
    }
}

/// Merges the shard stores' runs under `plan`.
///
/// # Errors
/// `ReadError` when a shard store cannot be read (damaged, unreadable): no merge is made of a
/// store the merge could not read whole.
pub fn merge(plan: &Plan, stores: &[ShardStore<'_>]) -> Result<Merged, ReadError> {
    let plan_digest = plan.digest();
    let contract = &plan.contract;
    let mut progress = Reconciler::new(contract).progress().clone();
    progress.next = None;
    progress.finished = true;
    // The plan's ranges cover the key space, no ID in two shards and none in no shard (a plan
    // read from its file was checked; one made in code may not have been).
    if let Err(gap) = super::plan::check_shards(&plan.shards) {
        record(
            &mut progress,
            ViolationKind::ShardMismatch,
            0,
            format!("the plan's shards do not cover the key space: {gap}"),
        );
    }
    let mut attempts: Vec<Vec<Attempt>> = (0..plan.shards.len()).map(|_| Vec::new()).collect();
    let shown = |i: usize| stores[i].path.display().to_string();

    // Every run of every store: an attempt of a shard of this plan, or a mismatch.
    for (i, s) in stores.iter().enumerate() {
        for summary in s.snapshot.runs()? {
            if summary.state == RunState::Superseded {
                // Replaced by a restart of the same attempt, linked to it.
                continue;
            }
            let header = s.snapshot.header(summary.run_id)?;
            let c = &header.contract;
            let what = format!("{} {}", shown(i), summary.run_id);
            let problem = match &c.scope.shard {
                None => Some("is not a shard of a plan".to_owned()),
                Some(r) if r.plan != plan_digest => {
                    Some(format!("is a shard of another plan ({})", r.plan))
                }
                Some(r) if r.count as usize != plan.shards.len() => {
                    Some(format!("says the plan has {} shards", r.count))
                }
                Some(r)
                    if plan.shard_contract(r.index).is_none_or(|want| {
                        digest::contract_digest(c) != digest::contract_digest(&want)
                    }) =>
                {
                    Some(format!(
                        "runs under another contract than the plan's shard {}",
                        r.index
                    ))
                }
                Some(r) if c.scope.key_range != plan.shards.get(r.index as usize).copied() => {
                    Some(format!("covers another key range than shard {}", r.index))
                }
                Some(_) => None,
            };
            match (problem, &c.scope.shard) {
                (Some(p), _) => record(
                    &mut progress,
                    ViolationKind::ShardMismatch,
                    0,
                    format!("{what} {p}"),
                ),
                (None, Some(r)) => {
                    if let Some(list) = attempts.get_mut(r.index as usize) {
                        list.push(Attempt {
                            store: i,
                            run: summary.run_id,
                            state: summary.state,
                        });
                    }
                }
                (None, None) => {}
            }
        }
    }

    let mut ids = IdSet::new();
    let mut label_names: Vec<String> = Vec::new();
    let mut labels: Vec<IdSet> = Vec::new();
    let mut content = BTreeMap::new();
    let mut pages: Vec<PageLog> = Vec::new();
    let mut outcomes = Vec::with_capacity(plan.shards.len());
    let mut started_at_ms: Option<u64> = None;
    let mut snapshots: Vec<Option<String>> = Vec::new();
    let mut all_terminal = true;

    for (k, range) in plan.shards.iter().enumerate() {
        // Bounded by SHARDS_MAX.
        let index = u32::try_from(k).unwrap_or(u32::MAX);
        let mut outcome = ShardEntry {
            index,
            key_range: ShardRange {
                lo: range.lo,
                hi: range.hi,
            },
            finding: ShardFinding::Missing,
            store: None,
            run_id: None,
            coverage_status: None,
            unique_ids_observed: 0,
            merkle_root: None,
        };
        let list = &attempts[k];
        let taken = match list.as_slice() {
            [] => {
                record(
                    &mut progress,
                    ViolationKind::ShardMissing,
                    0,
                    format!("shard {k} has no run in the shard stores"),
                );
                None
            }
            [one] => Some(one),
            several => {
                outcome.finding = ShardFinding::Conflict;
                let names: Vec<String> = several
                    .iter()
                    .map(|a| format!("{} {}", shown(a.store), a.run))
                    .collect();
                record(
                    &mut progress,
                    ViolationKind::ShardConflict,
                    0,
                    format!(
                        "shard {k} has {} attempts ({}); exactly one is merged",
                        several.len(),
                        names.join(", ")
                    ),
                );
                None
            }
        };
        let Some(a) = taken else {
            all_terminal = false;
            outcomes.push(outcome);
            continue;
        };
        let loaded = stores[a.store].snapshot.load(a.run)?;
        let rec = &loaded.reconciler;
        let p = rec.progress();
        let path = &stores[a.store].path;
        outcome.finding = ShardFinding::Merged;
        outcome.store = Some(path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ));
        outcome.run_id = Some(a.run.to_string());
        outcome.coverage_status = Some(rec.status());
        outcome.unique_ids_observed = rec.ids().len();
        // The root the shard's own receipt shows: stored when it finished (and checked by
        // verify against its bitmaps), computed from them for a run that has not.
        let root = loaded
            .stored_root
            .unwrap_or_else(|| crate::receipt::merkle_root_of(rec.ids(), rec.codec()).0);
        outcome.merkle_root = Some(digest::display(&root));
        if a.state != RunState::Finished || !p.terminal_observed {
            outcome.finding = ShardFinding::Unfinished;
            all_terminal = false;
            record(
                &mut progress,
                ViolationKind::ShardMissing,
                0,
                format!(
                    "shard {k} ({} {}) is {} and has not reached its end; resume it",
                    shown(a.store),
                    a.run,
                    a.state.as_str()
                ),
            );
        }
        // The shard's own findings, on the merged page numbering.
        let offset = u32::try_from(pages.len()).unwrap_or(u32::MAX);
        for v in &p.violations {
            record(
                &mut progress,
                v.kind,
                v.page.saturating_add(offset),
                format!("shard {k}: {}", v.detail),
            );
        }
        progress.violations_dropped = progress
            .violations_dropped
            .saturating_add(p.violations_dropped);
        progress.violations_dropped_worst = progress
            .violations_dropped_worst
            .max(p.violations_dropped_worst);
        for l in &p.limits_hit {
            if !progress.limits_hit.contains(l) {
                progress.limits_hit.push(*l);
            }
        }
        if let Some(outside) = first_outside(rec.ids(), *range) {
            record(
                &mut progress,
                ViolationKind::InvalidPage,
                0,
                format!(
                    "shard {k} holds ID {} outside its key range {}",
                    rec.codec().render(outside),
                    range.shown()
                ),
            );
        }
        if let Some(want) = &plan.snapshot_id {
            if p.pinned_snapshot.as_ref() != Some(want) {
                record(
                    &mut progress,
                    ViolationKind::SnapshotChanged,
                    0,
                    format!("shard {k} is not pinned to the plan's snapshot"),
                );
            }
        }
        if p.spliced || p.high_water_unconfirmed {
            progress.spliced = true;
        }
        snapshots.push(p.pinned_snapshot.clone());
        if progress.id_prefix.is_none() {
            progress.id_prefix.clone_from(&p.id_prefix);
        }
        let started = stores[a.store].snapshot.record(a.run)?.started_at_ms;
        started_at_ms = Some(started_at_ms.map_or(started, |s| s.min(started)));

        // The union: partitions of disjoint ranges never overlap; if they did (a range not on
        // a partition boundary), the overlap would count as duplicates, never be lost.
        for (part, bitmap) in rec.ids().partitions() {
            let merged = match ids.partition(part) {
                Some(have) => have | bitmap,
                None => bitmap.clone(),
            };
            ids.set_partition(part, merged);
        }
        for (name, set) in p.label_names.iter().zip(rec.labels()) {
            let at = match label_names.iter().position(|n| n == name) {
                Some(at) => at,
                None => {
                    label_names.push(name.clone());
                    labels.push(IdSet::new());
                    labels.len() - 1
                }
            };
            for (part, bitmap) in set.partitions() {
                let merged = match labels[at].partition(part) {
                    Some(have) => have | bitmap,
                    None => bitmap.clone(),
                };
                labels[at].set_partition(part, merged);
            }
        }
        for (leaf, acc) in rec.content() {
            content.insert(*leaf, *acc);
        }
        progress.bytes_observed = progress.bytes_observed.saturating_add(p.bytes_observed);
        if let Some(t) = p.echoed_total {
            progress.echoed_total = Some(progress.echoed_total.unwrap_or(0).saturating_add(t));
        }
        for page in &loaded.pages {
            let mut page = page.clone();
            page.page_idx = u32::try_from(pages.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            pages.push(page);
        }
        outcomes.push(outcome);
    }

    // One snapshot for the whole plan, or none (the shards each pinned their own).
    progress.pinned_snapshot = match &plan.snapshot_id {
        Some(s) => Some(s.clone()),
        None => match snapshots.split_first() {
            Some((first, rest)) if first.is_some() && rest.iter().all(|s| s == first) => {
                first.clone()
            }
            _ => None,
        },
    };
    progress
        .serving_snapshot
        .clone_from(&progress.pinned_snapshot);
    progress.terminal_observed = all_terminal;
    progress.pages_observed = u32::try_from(pages.len()).unwrap_or(u32::MAX);
    // Records are the pages' items; a union smaller than their sum counts the rest as
    // duplicates, so records = unique + duplicates holds.
    progress.records_observed = pages.iter().map(|p| u64::from(p.n_items)).sum();
    progress.duplicate_ids = progress.records_observed.saturating_sub(ids.len());
    let duplicates = progress.duplicate_ids;
    if duplicates > 0 {
        record(
            &mut progress,
            ViolationKind::DuplicateId,
            0,
            format!("{duplicates} items of the shards repeat an ID already seen"),
        );
    }
    let query_digest = digest::query_digest(&contract.scope);
    progress.chain = digest::chain_of(
        &query_digest,
        progress.pinned_snapshot.as_deref(),
        pages.iter().map(|p| &p.cursor_hash),
    );
    progress.label_names = label_names;
    if let Some(expected) = contract.expected_count {
        if all_terminal && ids.len() != expected {
            record(
                &mut progress,
                ViolationKind::CountMismatch,
                0,
                format!(
                    "the shards hold {} unique IDs, the contract expects {expected}",
                    ids.len()
                ),
            );
        }
    }
    if all_terminal {
        if let Some(detail) = partition_differences(contract.expected_partitions.as_deref(), &ids) {
            record(&mut progress, ViolationKind::PartitionMismatch, 0, detail);
        }
    }
    let codec = crate::codec::IdCodec::new(contract.id_codec, progress.id_prefix.clone());
    let mut reconciler = Reconciler::restore(
        contract,
        progress,
        ids,
        labels,
        pages.iter().map(|p| p.cursor_hash),
        codec,
    );
    reconciler.set_content(content);
    Ok(Merged {
        reconciler,
        pages,
        started_at_ms: started_at_ms.unwrap_or(0),
        merged_from: MergedFrom {
            plan_digest,
            shards: outcomes,
        },
    })
}

/// The first ID of `ids` outside `range`, if any: only the partitions at and past the range's
/// ends are looked into.
fn first_outside(ids: &IdSet, range: KeyRange) -> Option<u64> {
    let lo_part = partition_of(range.lo);
    let hi_part = partition_of(range.last());
    for (part, bitmap) in ids.partitions() {
        if part < lo_part || part > hi_part {
            let low = bitmap.min()?;
            return Some(part * PARTITION_WIDTH + u64::from(low));
        }
        if part == lo_part || part == hi_part {
            for low in bitmap {
                let id = part * PARTITION_WIDTH + u64::from(low);
                if !range.contains(id) {
                    return Some(id);
                }
            }
        }
    }
    None
}

/// The partitions whose count in `ids` differs from the contract's `expected_partitions` (an
/// unlisted partition is expected empty), as R11 words them; `None` when all agree.
fn partition_differences(expected: Option<&[(u64, u64)]>, ids: &IdSet) -> Option<String> {
    const SHOWN_MAX: usize = 16;
    let expected = expected?;
    let mut differing = Vec::new();
    let mut total = 0usize;
    let mut note = |p: u64, want: u64, seen: u64| {
        total += 1;
        if differing.len() < SHOWN_MAX {
            differing.push(format!("partition {p} (expected {want}, observed {seen})"));
        }
    };
    for (p, n) in expected {
        let seen = ids.partition(*p).map_or(0, roaring::RoaringBitmap::len);
        if seen != *n {
            note(*p, *n, seen);
        }
    }
    for (p, b) in ids.partitions() {
        if expected.binary_search_by_key(&p, |(q, _)| *q).is_err() {
            note(p, 0, b.len());
        }
    }
    (total > 0).then(|| {
        format!(
            "{total} partitions of the shards' union differ from the contract's counts: {}",
            differing.join(", ")
        )
    })
}
