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

use std::path::PathBuf;

use crate::contract::{Contract, KeyRange};
use crate::digest;
use crate::idset::{partition_of, IdSet, PARTITION_WIDTH};
use crate::receipt::{MergedFrom, RunId, ShardEntry, ShardFinding};
use crate::reconcile::{PageLog, Reconciler, ViolationKind};
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
pub(super) struct Attempt {
    pub(super) store: usize,
    pub(super) run: RunId,
    pub(super) state: RunState,
}

/// Merges the shard stores' runs under `plan`.
///
/// # Errors
/// `ReadError` when a shard store cannot be read (damaged, unreadable): no merge is made of a
/// store the merge could not read whole.
pub fn merge(plan: &Plan, stores: &[ShardStore<'_>]) -> Result<Merged, ReadError> {
    let plan_digest = plan.digest();
    let mut m = Merging::start(plan);
    let attempts = attempts_of(plan, &plan_digest, stores, &mut m.reconciler)?;
    for (k, range) in plan.shards.iter().enumerate() {
        m.shard(plan, stores, k, *range, &attempts[k])?;
    }
    // One snapshot for the whole plan, or none (the shards each pinned their own).
    let pinned = match &plan.snapshot_id {
        Some(s) => Some(s.clone()),
        None => match m.snapshots.split_first() {
            Some((first, rest)) if first.is_some() && rest.iter().all(|s| s == first) => {
                first.clone()
            }
            _ => None,
        },
    };
    let mut reconciler = m.reconciler;
    reconciler.merge_end(pinned, m.all_taken, &m.pages);
    Ok(Merged {
        reconciler,
        pages: m.pages,
        started_at_ms: m.started_at_ms.unwrap_or(0),
        merged_from: MergedFrom {
            plan_digest,
            shards: m.outcomes,
        },
    })
}

/// A merge under way: the merged run so far and what the merge keeps beside it.
pub(super) struct Merging {
    pub(super) reconciler: Reconciler,
    /// The shards' page logs so far, renumbered (empty in a streamed merge).
    pub(super) pages: Vec<PageLog>,
    /// Per shard so far, what the merge found and took.
    pub(super) outcomes: Vec<ShardEntry>,
    pub(super) started_at_ms: Option<u64>,
    /// The snapshot each shard taken pinned.
    pub(super) snapshots: Vec<Option<String>>,
    /// Every shard so far was taken, and finished in its store.
    pub(super) all_taken: bool,
}

/// Every run of every store: an attempt of a shard of this plan (listed per shard), or a
/// mismatch (recorded).
pub(super) fn attempts_of(
    plan: &Plan,
    plan_digest: &str,
    stores: &[ShardStore<'_>],
    reconciler: &mut Reconciler,
) -> Result<Vec<Vec<Attempt>>, ReadError> {
    let mut attempts: Vec<Vec<Attempt>> = (0..plan.shards.len()).map(|_| Vec::new()).collect();
    for (i, s) in stores.iter().enumerate() {
        for summary in s.snapshot.runs()? {
            if summary.state == RunState::Superseded {
                // Replaced by a restart of the same attempt, linked to it.
                continue;
            }
            let header = s.snapshot.header(summary.run_id)?;
            let c = &header.contract;
            let what = format!("{} {}", s.path.display(), summary.run_id);
            match (mismatch(plan, plan_digest, c), &c.scope.shard) {
                (Some(p), _) => {
                    reconciler.merge_finding(ViolationKind::ShardMismatch, 0, format!("{what} {p}"))
                }
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
    Ok(attempts)
}

/// Why a run under contract `c` is not an attempt of a shard of `plan`, if it is not.
fn mismatch(plan: &Plan, plan_digest: &str, c: &Contract) -> Option<String> {
    match &c.scope.shard {
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
    }
}

impl Merging {
    /// A merge of `plan` begun: nothing absorbed yet, and the finding that the plan's ranges
    /// do not cover the key space when they do not (no ID in two shards and none in no shard;
    /// a plan read from its file was checked, one made in code may not have been).
    pub(super) fn start(plan: &Plan) -> Merging {
        let mut m = Merging {
            reconciler: Reconciler::merge_start(&plan.contract),
            pages: Vec::new(),
            outcomes: Vec::with_capacity(plan.shards.len()),
            started_at_ms: None,
            snapshots: Vec::new(),
            all_taken: true,
        };
        if let Err(gap) = plan.check_cover() {
            m.reconciler.merge_finding(
                ViolationKind::ShardMismatch,
                0,
                format!("the plan's shards do not cover the key space: {gap}"),
            );
        }
        m
    }

    /// Shard `k` of the plan, over `range`: its one attempt taken and absorbed, or the
    /// finding that none can be.
    fn shard(
        &mut self,
        plan: &Plan,
        stores: &[ShardStore<'_>],
        k: usize,
        range: KeyRange,
        list: &[Attempt],
    ) -> Result<(), ReadError> {
        let outcome = match list {
            [one] => {
                let mut outcome = super::stream::entry(k, range);
                self.take(plan, &stores[one.store], one, k, range, &mut outcome)?;
                outcome
            }
            list => self.not_taken(stores, k, range, list),
        };
        self.outcomes.push(outcome);
        Ok(())
    }

    /// Shard `k`, over `range`, without exactly one attempt (`list`): the finding that it is
    /// missing, or that its attempts conflict; its list entry.
    pub(super) fn not_taken(
        &mut self,
        stores: &[ShardStore<'_>],
        k: usize,
        range: KeyRange,
        list: &[Attempt],
    ) -> ShardEntry {
        let mut outcome = super::stream::entry(k, range);
        self.all_taken = false;
        if list.is_empty() {
            self.reconciler.merge_finding(
                ViolationKind::ShardMissing,
                0,
                format!("shard {k} has no run in the shard stores"),
            );
            return outcome;
        }
        outcome.finding = ShardFinding::Conflict;
        let names: Vec<String> = list
            .iter()
            .map(|a| format!("{} {}", stores[a.store].path.display(), a.run))
            .collect();
        self.reconciler.merge_finding(
            ViolationKind::ShardConflict,
            0,
            format!(
                "shard {k} has {} attempts ({}); exactly one is merged",
                list.len(),
                names.join(", ")
            ),
        );
        outcome
    }

    /// Takes attempt `a` of shard `k` from `store`: checks it, absorbs it into the merged run.
    fn take(
        &mut self,
        plan: &Plan,
        store: &ShardStore<'_>,
        a: &Attempt,
        k: usize,
        range: KeyRange,
        outcome: &mut ShardEntry,
    ) -> Result<(), ReadError> {
        let loaded = store.snapshot.load(a.run)?;
        let rec = &loaded.reconciler;
        let p = rec.progress();
        let path = &store.path;
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
            self.all_taken = false;
            self.reconciler.merge_finding(
                ViolationKind::ShardMissing,
                0,
                format!(
                    "shard {k} ({} {}) is {} and has not reached its end; resume it",
                    path.display(),
                    a.run,
                    a.state.as_str()
                ),
            );
        }
        // The shard's page log on the merged numbering; its findings follow it there.
        let first = self.pages.len();
        for page in &loaded.pages {
            let mut page = page.clone();
            page.page_idx = u32::try_from(self.pages.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            self.pages.push(page);
        }
        self.reconciler
            .absorb_shard(rec, &format!("shard {k}"), &self.pages[first..]);
        if let Some(outside) = first_outside(rec.ids(), range) {
            self.reconciler.merge_finding(
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
                self.reconciler.merge_finding(
                    ViolationKind::SnapshotChanged,
                    0,
                    format!("shard {k} is not pinned to the plan's snapshot"),
                );
            }
        }
        self.snapshots.push(p.pinned_snapshot.clone());
        let started = store.snapshot.record(a.run)?.started_at_ms;
        self.started_at_ms = Some(self.started_at_ms.map_or(started, |s| s.min(started)));
        Ok(())
    }
}

/// The first ID of `ids` outside `range`, if any: only the partitions at and past the range's
/// ends are looked into.
fn first_outside(ids: &IdSet, range: KeyRange) -> Option<u64> {
    let first = FirstOutside::new(range);
    for (part, bitmap) in ids.partitions() {
        if let Some(id) = first.see(part, bitmap) {
            return Some(id);
        }
    }
    None
}

/// The first ID outside a shard's range, found as its partitions come in order: only the
/// partitions at and past the range's ends are looked into.
pub(super) struct FirstOutside {
    range: KeyRange,
    lo_part: u64,
    hi_part: u64,
}

impl FirstOutside {
    pub(super) fn new(range: KeyRange) -> FirstOutside {
        FirstOutside {
            range,
            lo_part: partition_of(range.lo),
            hi_part: partition_of(range.last()),
        }
    }

    /// The first ID of partition `part` outside the range, if any.
    pub(super) fn see(&self, part: u64, bitmap: &roaring::RoaringBitmap) -> Option<u64> {
        let (lo_part, hi_part, range) = (self.lo_part, self.hi_part, self.range);
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
        None
    }
}
