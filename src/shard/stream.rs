//! The merge streamed into the merged store: the shard stores read partition by partition,
//! the merged run written in bounded batches, so memory holds a batch and the plan, not the
//! union.
//!
//! Same rules, findings and order as [`super::merge`] (which holds the union in memory and
//! stays the reference the tests compare with): per shard in plan order, the finding of a
//! shard missing or in conflict, or the shard taken: its record (progress, counts, root), the
//! finding of an unfinished shard, its findings absorbed, then its page log (renumbered, the
//! chain folded), its ID partitions (united into the merged run's; the first ID outside its
//! range looked for on the way), its label partitions and content accumulators, then the
//! findings of an ID outside the range and of another snapshot. The snapshot the merged run
//! is pinned to is decided first, from the shards' records, since the chain starts from it.
//!
//! Invariants: what `Snapshot::load` refuses of a shard (counts that disagree with its
//! bitmaps or page log, a label outside its IDs) is refused here too, and no merged run is
//! committed then; the merged run is committed in one transaction, after its last batch.

use crate::contract::{IdCodecKind, KeyRange};
use crate::digest::{self, Hash, MerkleFold};
use crate::receipt::{MergedFrom, RunId, ShardEntry, ShardFinding, ShardRange};
use crate::reconcile::ViolationKind;
use crate::store::{
    MergedWriter, ReadError, RunState, Store, WriteError, PARTITION_BATCH, RECORD_BATCH,
};

use super::merge::{attempts_of, Attempt, FirstOutside, Merging};
use super::plan::Plan;
use super::ShardStore;

/// A merge that could not be carried out: a shard store could not be read whole, or the
/// merged store could not be written. Nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A shard store is unreadable or damaged.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The merged store cannot be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The merged run recorded by [`merge_into`].
#[derive(Debug)]
pub struct MergedRun {
    /// Its ID in the merged store.
    pub run: RunId,
    /// The plan's digest and, per shard in order, what the merge found and took (as the
    /// run's receipt lists them).
    pub merged_from: MergedFrom,
}

/// Merges the shard stores' runs under `plan` into a new run of `target`, streamed: the same
/// run [`super::merge`] and `Store::write_merged` record, in memory bounded by a batch of
/// partitions and the plan. `finished_at_ms` is asked when the run is complete. (A plan of
/// the `string` codec, which `plan` never makes, is merged in memory.)
///
/// # Errors
/// `MergeError::Read` when a shard store cannot be read (damaged, unreadable), `Write` when
/// the merged run cannot be recorded; nothing is recorded then.
pub fn merge_into(
    plan: &Plan,
    stores: &[ShardStore<'_>],
    target: &mut Store,
    finished_at_ms: impl FnOnce() -> u64,
) -> Result<MergedRun, MergeError> {
    if plan.contract.id_codec == IdCodecKind::String {
        let m = super::merge(plan, stores)?;
        let run = target.write_merged(
            &plan.contract,
            &m.reconciler,
            m.pages,
            Some(&m.merged_from),
            m.started_at_ms,
            finished_at_ms(),
        )?;
        return Ok(MergedRun {
            run,
            merged_from: m.merged_from,
        });
    }
    let plan_digest = plan.digest();
    let mut m = Merging::start(plan);
    let attempts = attempts_of(plan, &plan_digest, stores, &mut m.reconciler)?;
    let pinned = pinned_snapshot(plan, stores, &attempts)?;
    let mut w = target.begin_merged(&plan.contract, 0)?;
    let mut chain = m.reconciler.merge_chain_start(pinned.as_deref());
    for (k, range) in plan.shards.iter().enumerate() {
        let outcome = match attempts[k].as_slice() {
            [one] => {
                let mut s = Streaming {
                    m: &mut m,
                    w: &mut w,
                    chain: &mut chain,
                };
                s.take(plan, &stores[one.store], one, k, *range)?
            }
            list => m.not_taken(stores, k, *range, list),
        };
        m.outcomes.push(outcome);
    }
    let mut check = m.reconciler.merge_partition_check();
    let union = w.seal(&mut check)?;
    let mut reconciler = m.reconciler;
    reconciler.merge_end_streamed(pinned, m.all_taken, chain, union.unique_ids, check);
    let merged_from = MergedFrom {
        plan_digest,
        shards: m.outcomes,
    };
    let started = m.started_at_ms.unwrap_or(0);
    let run = w.finish(started, &reconciler, &union, &merged_from, finished_at_ms())?;
    Ok(MergedRun { run, merged_from })
}

/// The snapshot the merged run is pinned to: the plan's, or the one every shard taken
/// pinned (a shard is taken when it has exactly one attempt).
fn pinned_snapshot(
    plan: &Plan,
    stores: &[ShardStore<'_>],
    attempts: &[Vec<Attempt>],
) -> Result<Option<String>, ReadError> {
    if let Some(s) = &plan.snapshot_id {
        return Ok(Some(s.clone()));
    }
    let mut first: Option<Option<String>> = None;
    for list in attempts {
        if let [a] = list.as_slice() {
            let pinned = stores[a.store]
                .snapshot
                .run_record(a.run)?
                .progress
                .pinned_snapshot;
            match &first {
                None => first = Some(pinned),
                Some(f) if *f == pinned => {}
                Some(_) => return Ok(None),
            }
        }
    }
    Ok(first.flatten())
}

/// One shard taken into a streamed merge.
struct Streaming<'a, 'w, 's> {
    m: &'a mut Merging,
    w: &'a mut MergedWriter<'s>,
    chain: &'w mut Hash,
}

impl Streaming<'_, '_, '_> {
    /// Takes attempt `a` of shard `k` from `store`: checks it, streams it into the merged run.
    fn take(
        &mut self,
        plan: &Plan,
        store: &ShardStore<'_>,
        a: &Attempt,
        k: usize,
        range: KeyRange,
    ) -> Result<ShardEntry, MergeError> {
        let snap = &store.snapshot;
        let rec = snap.run_record(a.run)?;
        let p = &rec.progress;
        let path = &store.path;
        let mut outcome = entry(k, range);
        outcome.finding = ShardFinding::Merged;
        outcome.store = Some(path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ));
        outcome.run_id = Some(a.run.to_string());
        outcome.coverage_status = Some(p.status());
        outcome.unique_ids_observed = rec.unique_ids;
        let reconciler = &mut self.m.reconciler;
        if a.state != RunState::Finished || !p.terminal_observed {
            outcome.finding = ShardFinding::Unfinished;
            self.m.all_taken = false;
            reconciler.merge_finding(
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
        let labels = reconciler.absorb_shard_progress(p, &format!("shard {k}"));
        let pages = self.pages(store, a.run)?;
        if pages != p.pages_observed {
            let what = "the page log's length differs from the run record";
            return Err(snap.damaged("pages", Some(a.run), what).into());
        }
        let (unique, root, outside) = self.ids(store, a.run, range, rec.root.is_none())?;
        if unique != rec.unique_ids {
            let what = "the bitmaps' cardinality differs from the run record";
            return Err(snap.damaged("ids", Some(a.run), what).into());
        }
        self.labels(store, a.run, &labels)?;
        self.content(store, a.run)?;
        // The root the shard's own receipt shows: stored when it finished (and checked by
        // verify against its bitmaps), computed from them for a run that has not.
        let root = rec
            .root
            .or(root)
            .unwrap_or_else(|| MerkleFold::new().root());
        outcome.merkle_root = Some(digest::display(&root));
        let reconciler = &mut self.m.reconciler;
        if let Some(outside) = outside {
            reconciler.merge_finding(
                ViolationKind::InvalidPage,
                0,
                format!(
                    "shard {k} holds ID {} outside its key range {}",
                    crate::codec::IdCodec::new(plan.contract.id_codec, p.id_prefix.clone())
                        .render(outside),
                    range.shown()
                ),
            );
        }
        if let Some(want) = &plan.snapshot_id {
            if p.pinned_snapshot.as_ref() != Some(want) {
                reconciler.merge_finding(
                    ViolationKind::SnapshotChanged,
                    0,
                    format!("shard {k} is not pinned to the plan's snapshot"),
                );
            }
        }
        self.m.snapshots.push(p.pinned_snapshot.clone());
        let started = rec.started_at_ms;
        self.m.started_at_ms = Some(self.m.started_at_ms.map_or(started, |s| s.min(started)));
        Ok(outcome)
    }

    /// Streams the shard's page log into the merged run's: counted, the chain folded.
    /// Returns its length.
    fn pages(&mut self, store: &ShardStore<'_>, run: RunId) -> Result<u32, MergeError> {
        let mut n = 0u32;
        let mut from = 1u32;
        loop {
            let batch = store.snapshot.page_batch(run, from, RECORD_BATCH)?;
            for page in &batch {
                self.m.reconciler.absorb_page(page);
                *self.chain = digest::chain_next(self.chain, &page.cursor_hash);
            }
            self.w.append_pages(&batch)?;
            // At most 2^32 pages: `page_batch` numbers them by u32.
            n = n.saturating_add(u32::try_from(batch.len()).unwrap_or(u32::MAX));
            match batch.last() {
                Some(last) if batch.len() == RECORD_BATCH => match last.page_idx.checked_add(1) {
                    Some(next) => from = next,
                    None => return Ok(n),
                },
                _ => return Ok(n),
            }
        }
    }

    /// Streams the shard's ID partitions into the merged run's. Returns its unique IDs, its
    /// root when `want_root`, and its first ID outside `range`.
    fn ids(
        &mut self,
        store: &ShardStore<'_>,
        run: RunId,
        range: KeyRange,
        want_root: bool,
    ) -> Result<(u64, Option<Hash>, Option<u64>), MergeError> {
        let outside_of = FirstOutside::new(range);
        let mut outside = None;
        let mut fold = want_root.then(MerkleFold::new);
        let mut scratch = Vec::new();
        let mut unique = 0u64;
        let mut from = Some(0u64);
        while let Some(first) = from {
            let mut batch = store.snapshot.id_batch(run, first, PARTITION_BATCH)?;
            from = match batch.last() {
                Some((p, _)) if batch.len() == PARTITION_BATCH => p.checked_add(1),
                _ => None,
            };
            // An empty stored bitmap is no partition (the in-memory set drops it too).
            batch.retain(|(_, b)| !b.is_empty());
            for (p, b) in &batch {
                unique = unique.saturating_add(b.len());
                if let Some(fold) = &mut fold {
                    fold.push(&digest::leaf_hash(*p, b, &mut scratch));
                }
                if outside.is_none() {
                    outside = outside_of.see(*p, b);
                }
            }
            self.w.unite_ids(&batch)?;
        }
        Ok((unique, fold.map(MerkleFold::root), outside))
    }

    /// Streams the shard's label partitions into the merged run's, each label under its
    /// index in the merge (`labels`, by the shard's index); each must lie within the shard's
    /// IDs, as `Snapshot::load` holds.
    fn labels(
        &mut self,
        store: &ShardStore<'_>,
        run: RunId,
        labels: &[u32],
    ) -> Result<(), MergeError> {
        let snap = &store.snapshot;
        let mut from = Some((0u32, 0u64));
        while let Some(first) = from {
            let batch = snap.label_batch(run, first, PARTITION_BATCH)?;
            from = match batch.last() {
                Some((l, p, _)) if batch.len() == PARTITION_BATCH => match p.checked_add(1) {
                    Some(q) => Some((*l, q)),
                    None => l.checked_add(1).map(|m| (m, 0)),
                },
                _ => None,
            };
            let parts: Vec<u64> = batch.iter().map(|(_, p, _)| *p).collect();
            let ids = snap.partitions_of(run, &parts)?;
            let mut mapped = Vec::with_capacity(batch.len());
            for ((l, p, b), (_, within)) in batch.into_iter().zip(ids) {
                let Some(at) = labels.get(l as usize) else {
                    let what = "a label index without a name";
                    return Err(snap.damaged("labels", Some(run), what).into());
                };
                if !within.is_some_and(|ids| b.is_subset(&ids)) && !b.is_empty() {
                    let what = "a label holds an ID the run never observed";
                    return Err(snap.damaged("labels", Some(run), what).into());
                }
                if !b.is_empty() {
                    mapped.push((*at, p, b));
                }
            }
            self.w.unite_labels(&mapped)?;
        }
        Ok(())
    }

    /// Streams the shard's content accumulators into the merged run's.
    fn content(&mut self, store: &ShardStore<'_>, run: RunId) -> Result<(), MergeError> {
        let mut from = Some(0u64);
        while let Some(first) = from {
            let batch = store.snapshot.content_batch(run, first, RECORD_BATCH)?;
            from = match batch.last() {
                Some((leaf, _)) if batch.len() == RECORD_BATCH => leaf.checked_add(1),
                _ => None,
            };
            self.w.set_content(&batch)?;
        }
        Ok(())
    }
}

/// The list entry of shard `k` before the merge looks at it: missing.
pub(super) fn entry(k: usize, range: KeyRange) -> ShardEntry {
    ShardEntry {
        // Bounded by SHARDS_MAX.
        index: u32::try_from(k).unwrap_or(u32::MAX),
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
    }
}
