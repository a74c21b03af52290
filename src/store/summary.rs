//! A run's receipt without loading its sets: from its record (progress, counts, the root
//! stored when it finished) and its label partitions and content accumulators read one batch
//! at a time. Memory holds one batch and the receipt, whatever the size of the run.

use std::collections::BTreeMap;

use super::error::ReadError;
use super::merged::{PARTITION_BATCH, RECORD_BATCH};
use super::records::RunRecord;
use super::snapshot::{meta_of, Snapshot};
use crate::codec::IdCodec;
use crate::contract::IdCodecKind;
use crate::digest::{self, Hash, MerkleFold};
use crate::receipt::{RangesFold, Receipt, ReceiptFacts, RunId};

impl Snapshot<'_> {
    /// The receipt of a run as stored: byte for byte what [`Snapshot::receipt_loaded`] builds
    /// from the run loaded whole, without loading its ID or label sets. The root and counts are
    /// folded from its partitions, one batch at a time, and a finished run's must be the root
    /// stored when it finished (else the IDs are damaged), each label's count and ranges
    /// are folded from its partitions in order, the content root from the accumulators. A
    /// `string`-codec run (its root is over the original strings, its ranges are rendered
    /// through the dictionary) is loaded whole.
    ///
    /// # Errors
    /// `ReadError` when unreadable, unknown or damaged.
    pub fn receipt(&self, run: RunId) -> Result<Receipt, ReadError> {
        let rec = self.record(run)?;
        let contract = self.contract_of(run, &rec)?;
        if contract.id_codec == IdCodecKind::String {
            return self.receipt_loaded(run);
        }
        self.check_record(run, &rec)?;
        let mut codec = IdCodec::new(contract.id_codec, contract.id_prefix.clone());
        codec.set_prefix(rec.progress.id_prefix.clone());
        // The IDs are folded even when the record holds the root, one batch at a time: the
        // receipt vouches for the evidence behind it, so damage there is reported here, as the
        // whole load reported it.
        let (root, partitions) = self.fold_ids(run, &rec)?;
        if rec.merkle_root.is_some_and(|stored| stored != root) {
            return Err(self.damaged(
                "ids",
                Some(run),
                "the IDs do not give the root stored when the run finished",
            ));
        }
        let facts = ReceiptFacts {
            progress: &rec.progress,
            query_digest: digest::query_digest(&contract.scope),
            unique_ids: rec.unique_ids,
            root,
            partitions,
            content_root: self.content_root(run)?,
            labels: self.label_summaries(run, &rec.progress.label_names, &codec)?,
        };
        Ok(Receipt::from_facts(&contract, &meta_of(run, &rec), facts))
    }

    /// The root and partitions of a run's ID set, folded one batch of partitions at a time;
    /// its size must be the record's.
    fn fold_ids(&self, run: RunId, rec: &RunRecord) -> Result<(Hash, u64), ReadError> {
        let (mut fold, mut scratch) = (MerkleFold::new(), Vec::with_capacity(8192));
        let (mut partitions, mut ids) = (0u64, 0u64);
        let mut from = Some(0u64);
        while let Some(first) = from {
            let batch = self.id_batch(run, first, PARTITION_BATCH)?;
            from = match batch.last() {
                Some((p, _)) if batch.len() == PARTITION_BATCH => p.checked_add(1),
                _ => None,
            };
            for (p, b) in &batch {
                fold.push(&digest::leaf_hash(*p, b, &mut scratch));
                partitions = partitions.saturating_add(1);
                ids = ids.saturating_add(b.len());
            }
        }
        if ids != rec.unique_ids {
            return Err(self.damaged(
                "ids",
                Some(run),
                "the bitmaps' cardinality differs from the run record",
            ));
        }
        Ok((fold.root(), partitions))
    }

    /// Each label's count and ranges, from its partitions read in (label, partition) order.
    fn label_summaries(
        &self,
        run: RunId,
        names: &[String],
        codec: &IdCodec,
    ) -> Result<BTreeMap<String, crate::receipt::LabelSummary>, ReadError> {
        let mut folds = vec![RangesFold::default(); names.len()];
        let mut from = Some((0u32, 0u64));
        while let Some(first) = from {
            let batch = self.label_batch(run, first, PARTITION_BATCH)?;
            from = match batch.last() {
                Some((l, p, _)) if batch.len() == PARTITION_BATCH => match p.checked_add(1) {
                    Some(next) => Some((*l, next)),
                    None => l.checked_add(1).map(|l| (l, 0)),
                },
                _ => None,
            };
            for (l, p, b) in &batch {
                let fold = folds.get_mut(*l as usize).ok_or_else(|| {
                    self.damaged("labels", Some(run), "a label index without a name")
                })?;
                fold.push_partition(*p, b, codec);
            }
        }
        Ok(names
            .iter()
            .cloned()
            .zip(folds.into_iter().map(|f| f.label_summary(codec)))
            .collect())
    }

    /// The content root of a run's accumulators, folded one batch at a time; `None` when it
    /// has none.
    fn content_root(&self, run: RunId) -> Result<Option<Hash>, ReadError> {
        let (mut fold, mut leaves) = (MerkleFold::new(), 0u64);
        let mut from = Some(0u64);
        while let Some(first) = from {
            let batch = self.content_batch(run, first, RECORD_BATCH)?;
            from = match batch.last() {
                Some((leaf, _)) if batch.len() == RECORD_BATCH => leaf.checked_add(1),
                _ => None,
            };
            for (leaf, acc) in &batch {
                fold.push(&crate::content::leaf_hash(*leaf, acc));
                leaves = leaves.saturating_add(1);
            }
        }
        Ok((leaves > 0).then(|| fold.root()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
mod tests {
    use super::super::simdisk::SimDisk;
    use super::super::{Raise, Store, StoreOptions};
    use crate::contract::{Contract, Item, Page, RawId};
    use crate::receipt::RunId;
    use crate::reconcile::{Reconciler, Status, Step};

    /// The streamed receipt of `run` is byte for byte the loaded one.
    #[track_caller]
    fn same(store: &Store, run: RunId) -> crate::receipt::Receipt {
        let snap = store.read().unwrap();
        let (streamed, loaded) = (
            snap.receipt(run).unwrap(),
            snap.receipt_loaded(run).unwrap(),
        );
        assert_eq!(
            serde_json::to_string(&streamed).unwrap(),
            serde_json::to_string(&loaded).unwrap(),
            "{run}"
        );
        streamed
    }

    /// Page `i` of a collection whose IDs cross partition boundaries, with two labels
    /// (one in runs across a boundary, one scattered past `RANGES_SHOWN_MAX` ranges) and
    /// content digests; `next` as given.
    fn page(i: u64, next: Option<&str>) -> Page {
        let ids = (0..40u64).map(|k| i * 100_003 + 65_520 + k + (k / 8) * 5);
        Page {
            items: ids
                .map(|id| {
                    let mut item = Item::new(RawId::Int(id));
                    if id % 7 < 3 {
                        item.labels.push("runs".into());
                    }
                    if id % 5 == 0 {
                        item.labels.push("scattered".into());
                    }
                    item.content = Some([(id % 251) as u8; 32]);
                    item
                })
                .collect(),
            next: next.map(str::to_owned),
            size_bytes: 100,
            ..Page::default()
        }
    }

    /// Observes `pages` into run `w`'s reconciler; finishes the run when a page ends it.
    fn feed(w: &mut super::super::RunWriter<'_>, rec: &mut Reconciler, pages: &[Page]) -> bool {
        for p in pages {
            let seen = rec.observe(p);
            w.checkpoint(rec, seen.delta).unwrap();
            if matches!(seen.step, Step::Done) {
                return true;
            }
        }
        false
    }

    #[test]
    fn the_streamed_receipt_is_the_loaded_one_for_ordinary_unfinished_resumed_and_failed_runs() {
        let disk = SimDisk::new();
        let mut store = Store::open_simulated(&disk, StoreOptions::new()).unwrap();
        let c = Contract::new("summary");
        let pages: Vec<Page> = (0..5)
            .map(|i| page(i, (i < 4).then(|| format!("c{}", i + 1)).as_deref()))
            .collect();
        // Ordinary: verified, with labels and content.
        let mut rec = Reconciler::new(&c);
        let (mut w, _) = store.begin(&c, 1).unwrap();
        assert!(feed(&mut w, &mut rec, &pages));
        w.finish(&rec, 2).unwrap();
        let r = same(&store, RunId(1));
        assert_eq!(r.coverage_status, Status::Verified);
        assert!(r.content_root.is_some() && r.labels["scattered"].ranges_total > 32);
        assert!(r.labels["runs"].ranges_total > 1);
        // Unfinished (no stored root: folded from the partitions), then resumed to the end.
        let mut rec = Reconciler::new(&c);
        let (mut w, _) = store.begin(&c, 3).unwrap();
        assert!(!feed(&mut w, &mut rec, &pages[..2]));
        drop(w);
        assert_eq!(same(&store, RunId(2)).coverage_status, Status::Unknown);
        let (mut w, loaded) = store.resume(RunId(2), &Raise::default()).unwrap();
        let mut rec = loaded.reconciler;
        assert!(feed(&mut w, &mut rec, &pages[2..]));
        w.finish(&rec, 4).unwrap();
        let resumed = same(&store, RunId(2));
        assert_eq!(resumed.merkle_root, r.merkle_root);
        assert_eq!(resumed.labels, r.labels);
        // Failed: a cursor repeated.
        let mut rec = Reconciler::new(&c);
        let (mut w, _) = store.begin(&c, 5).unwrap();
        let looped = [page(0, Some("c1")), page(1, Some("c1"))];
        assert!(feed(&mut w, &mut rec, &looped));
        w.finish(&rec, 6).unwrap();
        assert_eq!(same(&store, RunId(3)).coverage_status, Status::Failed);
        // An empty run.
        let mut rec = Reconciler::new(&c);
        let (mut w, _) = store.begin(&c, 7).unwrap();
        assert!(feed(&mut w, &mut rec, &[Page::default()]));
        w.finish(&rec, 8).unwrap();
        let empty = same(&store, RunId(4));
        assert!(empty.content_root.is_none() && empty.labels.is_empty());
    }
}
