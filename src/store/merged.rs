//! A merged run streamed into a store, and the bounded reads that feed it.
//!
//! `merge` reads each shard's run in batches ([`Snapshot::id_batch`], `label_batch`,
//! `page_batch`, `content_batch`) and hands them to a [`MergedWriter`], which writes them into
//! one write transaction as they come: a partition already written (IDs of two shards in one
//! partition, which a plan's ranges never make but a shard holding IDs outside its range can)
//! is read back and united. [`MergedWriter::seal`] then walks the merged partitions once in
//! order for the leaves, the root and the counts, and [`MergedWriter::finish`] writes the run
//! record and commits. Nothing of the run is visible before that one commit; the writer keeps
//! one batch at a time, and redb spills the transaction's dirty pages past its cache to the
//! file, so memory does not grow with the run.

use redb::{ReadableTable, WriteTransaction};
use roaring::RoaringBitmap;

use super::error::{Failure, ReadError, WriteError};
use super::records::{self, MergeRecord, RunRecord, StoredState};
use super::schema::{CONTENT, IDS, LABELS, LEAVES, PAGES, RUNS};
use super::snapshot::Snapshot;
use super::writer::{allocate_run, NewRun};
use super::Store;
use crate::content::{ContentAcc, CONTENT_ACC_LEN};
use crate::contract::Contract;
use crate::digest::{self, Hash, MerkleFold};
use crate::idset::PARTITION_BITS;
use crate::receipt::RunId;
use crate::reconcile::{PageLog, PartitionCheck, Reconciler};

/// Partitions (or label partitions) read or sealed in one batch: at most 8 KiB each.
pub(crate) const PARTITION_BATCH: usize = 64;
/// Page records (52 bytes each) or content accumulators read in one batch.
pub(crate) const RECORD_BATCH: usize = 4096;

impl Snapshot<'_> {
    /// Up to `n_max` partitions of a run's ID set from partition `from` on, ascending.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub(crate) fn id_batch(
        &self,
        run: RunId,
        from: u64,
        n_max: usize,
    ) -> Result<Vec<(u64, RoaringBitmap)>, ReadError> {
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain("read ID bitmaps", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(IDS)?;
                let mut out = Vec::new();
                for entry in t.range((run.0, from)..=(run.0, u64::MAX))?.take(n_max) {
                    let (k, v) = entry?;
                    out.push((k.value().1, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        raw.into_iter()
            .map(|(p, bytes)| {
                self.check_partition("ids", run, p)?;
                Ok((p, self.bitmap("ids", run, &bytes)?))
            })
            .collect()
    }

    /// Up to `n_max` label partitions of a run from (label, partition) `from` on, in order.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub(crate) fn label_batch(
        &self,
        run: RunId,
        from: (u32, u64),
        n_max: usize,
    ) -> Result<Vec<(u32, u64, RoaringBitmap)>, ReadError> {
        let raw: Vec<(u32, u64, Vec<u8>)> = self
            .engine
            .contain("read label bitmaps", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(LABELS)?;
                let mut out = Vec::new();
                let range = (run.0, from.0, from.1)..=(run.0, u32::MAX, u64::MAX);
                for entry in t.range(range)?.take(n_max) {
                    let (k, v) = entry?;
                    let (_, label, p) = k.value();
                    out.push((label, p, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        raw.into_iter()
            .map(|(l, p, bytes)| {
                self.check_partition("labels", run, p)?;
                Ok((l, p, self.bitmap("labels", run, &bytes)?))
            })
            .collect()
    }

    /// Up to `n_max` records of a run's page log from page `from` (1-based) on, in order.
    ///
    /// # Errors
    /// `ReadError` when unreadable or damaged (a record of the wrong length, a gap).
    pub(crate) fn page_batch(
        &self,
        run: RunId,
        from: u32,
        n_max: usize,
    ) -> Result<Vec<PageLog>, ReadError> {
        let raw: Vec<(u32, Vec<u8>)> = self
            .engine
            .contain("read the page log", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(PAGES)?;
                let mut out = Vec::new();
                for entry in t.range((run.0, from)..=(run.0, u32::MAX))?.take(n_max) {
                    let (k, v) = entry?;
                    out.push((k.value().1, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        let mut want = from;
        let mut out = Vec::with_capacity(raw.len());
        for (idx, bytes) in raw {
            if idx != want {
                return Err(self.damaged("pages", Some(run), "the page log has a gap"));
            }
            want = want.saturating_add(1);
            out.push(records::decode_page(idx, &bytes).ok_or_else(|| {
                self.damaged("pages", Some(run), "a page record has the wrong length")
            })?);
        }
        Ok(out)
    }

    /// Up to `n_max` content accumulators of a run from leaf `from` on, ascending.
    ///
    /// # Errors
    /// `ReadError` when unreadable or an accumulator has the wrong length.
    pub(crate) fn content_batch(
        &self,
        run: RunId,
        from: u64,
        n_max: usize,
    ) -> Result<Vec<(u64, ContentAcc)>, ReadError> {
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain(
                "read the content accumulators",
                || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(CONTENT)?;
                    let mut out = Vec::new();
                    for entry in t.range((run.0, from)..=(run.0, u64::MAX))?.take(n_max) {
                        let (k, v) = entry?;
                        out.push((k.value().1, v.value().to_vec()));
                    }
                    Ok(out)
                },
            )
            .map_err(|f| self.fail(f))?;
        raw.into_iter()
            .map(|(leaf, bytes)| {
                let acc = <[u8; CONTENT_ACC_LEN]>::try_from(bytes.as_slice()).map_err(|_| {
                    self.damaged("content", Some(run), "an accumulator is not 64 bytes")
                })?;
                Ok((leaf, ContentAcc(acc)))
            })
            .collect()
    }

    /// A run's progress and counts as its record keeps them (no set is read): what a streamed
    /// merge takes of a shard before its batches.
    ///
    /// # Errors
    /// `ReadError` when unreadable, unknown or damaged.
    pub(crate) fn run_record(&self, run: RunId) -> Result<StoredRun, ReadError> {
        let rec = self.record(run)?;
        self.check_record(run, &rec)?;
        Ok(StoredRun {
            unique_ids: rec.unique_ids,
            root: rec.merkle_root,
            started_at_ms: rec.started_at_ms,
            progress: rec.progress,
        })
    }

    /// What `load` checks of a run's record alone.
    pub(super) fn check_record(&self, run: RunId, rec: &RunRecord) -> Result<(), ReadError> {
        let p = &rec.progress;
        if p.records_observed != rec.unique_ids.saturating_add(p.duplicate_ids) {
            return Err(self.damaged(
                "runs",
                Some(run),
                "records observed differ from unique plus duplicate IDs",
            ));
        }
        if p.terminal_observed && rec.next_kind != 0 {
            return Err(self.damaged(
                "runs",
                Some(run),
                "a run that saw its terminal page still has a request",
            ));
        }
        Ok(())
    }
}

/// What a run's record keeps, as [`Snapshot::run_record`] reads it.
#[derive(Debug, Clone)]
pub(crate) struct StoredRun {
    /// Its progress (`next` reduced to its kind).
    pub(crate) progress: crate::reconcile::Progress,
    /// Its unique IDs, as recorded.
    pub(crate) unique_ids: u64,
    /// Its Merkle root, recorded when it finished.
    pub(crate) root: Option<Hash>,
    /// When it started (ms since the epoch).
    pub(crate) started_at_ms: u64,
}

/// What [`MergedWriter::seal`] found in the merged run: its size, partitions and root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SealedUnion {
    /// Unique IDs.
    pub(crate) unique_ids: u64,
    /// Non-empty partitions.
    pub(crate) partitions: u64,
    /// The Merkle root over the partitions.
    pub(crate) root: Hash,
}

/// A merged run being written: one write transaction, committed by [`MergedWriter::finish`];
/// dropped before, it writes nothing.
pub(crate) struct MergedWriter<'s> {
    store: &'s mut Store,
    txn: WriteTransaction,
    run: RunId,
    new: NewRun,
    /// Pages written so far.
    pages: u32,
}

impl std::fmt::Debug for MergedWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergedWriter")
            .field("run", &self.run)
            .field("pages", &self.pages)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Begins a merged run of `contract`, streamed in batches and committed whole by
    /// [`MergedWriter::finish`] (what `Store::write_merged` writes from a run in memory).
    ///
    /// # Errors
    /// `WriteError` when the run cannot be begun.
    pub(crate) fn begin_merged(
        &mut self,
        contract: &Contract,
        started_at_ms: u64,
    ) -> Result<MergedWriter<'_>, WriteError> {
        // A dropped writer's acknowledged pages are committed before anything else is.
        self.settle()?;
        let new = NewRun {
            contract: contract.clone(),
            started_at_ms,
            restarted_from: None,
            restarts: 0,
            source_spec: self.source_spec.clone(),
        };
        let txn = self.write_txn()?;
        let run = match allocate_run(self, &txn, &new) {
            Ok(run) => run,
            Err(f) => return Err(self.poison(f)),
        };
        Ok(MergedWriter {
            store: self,
            txn,
            run,
            new,
            pages: 0,
        })
    }
}

impl MergedWriter<'_> {
    fn contain<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&WriteTransaction) -> Result<T, redb::Error>,
    ) -> Result<T, WriteError> {
        let txn = &self.txn;
        self.store
            .engine
            .contain(op, || f(txn))
            .map_err(|f| self.store.poison(f))
    }

    /// Appends pages to the merged page log, numbered after those written (their own
    /// `page_idx` is ignored).
    ///
    /// # Errors
    /// `WriteError` when they cannot be written.
    pub(crate) fn append_pages(&mut self, pages: &[PageLog]) -> Result<(), WriteError> {
        let mut rows = Vec::with_capacity(pages.len());
        for p in pages {
            self.pages = self.pages.checked_add(1).ok_or_else(|| {
                self.store
                    .poison(Failure::damaged("the merged page log passes 2^32 pages"))
            })?;
            rows.push((self.pages, records::encode_page(p)));
        }
        let run = self.run.0;
        self.contain("write the merged page log", |txn| {
            let mut t = txn.open_table(PAGES)?;
            for (idx, bytes) in &rows {
                t.insert((run, *idx), bytes.as_slice())?;
            }
            Ok(())
        })
    }

    /// Unites ID partitions into the merged run's; returns how many IDs were new.
    ///
    /// # Errors
    /// `WriteError` when they cannot be written (or a merged partition read back is damaged).
    pub(crate) fn unite_ids(&mut self, batch: &[(u64, RoaringBitmap)]) -> Result<u64, WriteError> {
        let run = self.run.0;
        let olds = self.contain("read merged ID bitmaps", |txn| {
            let t = txn.open_table(IDS)?;
            let mut out = Vec::with_capacity(batch.len());
            for (p, _) in batch {
                out.push(t.get((run, *p))?.map(|v| v.value().to_vec()));
            }
            Ok(out)
        })?;
        let mut added = 0u64;
        let mut rows = Vec::with_capacity(batch.len());
        for ((p, b), old) in batch.iter().zip(olds) {
            let (merged, had) = self.united(old.as_deref(), b)?;
            added += merged.len() - had;
            rows.push((*p, records::encode_bitmap(&merged)));
        }
        self.contain("write merged ID bitmaps", |txn| {
            let mut t = txn.open_table(IDS)?;
            for (p, bytes) in &rows {
                t.insert((run, *p), bytes.as_slice())?;
            }
            Ok(())
        })?;
        Ok(added)
    }

    /// Unites label partitions (label index of the merged run, partition, bitmap) into the
    /// merged run's. Debug builds check each lies within the merged IDs.
    ///
    /// # Errors
    /// `WriteError` when they cannot be written.
    pub(crate) fn unite_labels(
        &mut self,
        batch: &[(u32, u64, RoaringBitmap)],
    ) -> Result<(), WriteError> {
        let run = self.run.0;
        let olds = self.contain("read merged label bitmaps", |txn| {
            let t = txn.open_table(LABELS)?;
            let ids = txn.open_table(IDS)?;
            let mut out = Vec::with_capacity(batch.len());
            for (l, p, _) in batch {
                let within = if cfg!(debug_assertions) {
                    ids.get((run, *p))?.map(|v| v.value().to_vec())
                } else {
                    None
                };
                out.push((t.get((run, *l, *p))?.map(|v| v.value().to_vec()), within));
            }
            Ok(out)
        })?;
        let mut rows = Vec::with_capacity(batch.len());
        for ((l, p, b), (old, within)) in batch.iter().zip(olds) {
            let (merged, _) = self.united(old.as_deref(), b)?;
            if cfg!(debug_assertions) {
                let ids = within.as_deref().and_then(records::decode_bitmap);
                assert!(
                    ids.is_some_and(|ids| merged.is_subset(&ids)),
                    "a merged label holds an unseen ID in partition {p}"
                );
            }
            rows.push((*l, *p, records::encode_bitmap(&merged)));
        }
        self.contain("write merged label bitmaps", |txn| {
            let mut t = txn.open_table(LABELS)?;
            for (l, p, bytes) in &rows {
                t.insert((run, *l, *p), bytes.as_slice())?;
            }
            Ok(())
        })
    }

    /// Sets content accumulators of the merged run (a later shard's replaces an earlier's).
    ///
    /// # Errors
    /// `WriteError` when they cannot be written.
    pub(crate) fn set_content(&mut self, batch: &[(u64, ContentAcc)]) -> Result<(), WriteError> {
        let run = self.run.0;
        self.contain("write merged content accumulators", |txn| {
            let mut t = txn.open_table(CONTENT)?;
            for (leaf, acc) in batch {
                t.insert((run, *leaf), acc.0.as_slice())?;
            }
            Ok(())
        })
    }

    /// `old` (a stored bitmap, if any) united with `b`, and how many IDs `old` held.
    fn united(
        &self,
        old: Option<&[u8]>,
        b: &RoaringBitmap,
    ) -> Result<(RoaringBitmap, u64), WriteError> {
        match old {
            None => Ok((b.clone(), 0)),
            Some(bytes) => {
                let mut have = records::decode_bitmap(bytes).ok_or_else(|| {
                    self.store.poison(Failure::damaged(
                        "a merged partition written in this transaction does not decode",
                    ))
                })?;
                let had = have.len();
                have |= b;
                Ok((have, had))
            }
        }
    }

    /// Walks the merged partitions once, in order: writes their leaves, shows each
    /// (partition, count) to `check`, and returns the union's size, partitions and root.
    ///
    /// # Errors
    /// `WriteError` when they cannot be read or written.
    pub(crate) fn seal(&mut self, check: &mut PartitionCheck) -> Result<SealedUnion, WriteError> {
        let run = self.run.0;
        let mut fold = MerkleFold::new();
        let mut scratch = Vec::with_capacity(8192);
        let mut sealed = SealedUnion {
            unique_ids: 0,
            partitions: 0,
            root: [0; 32],
        };
        let mut from = Some(0u64);
        while let Some(first) = from {
            let raw = self.contain("read merged ID bitmaps", |txn| {
                let t = txn.open_table(IDS)?;
                let mut out = Vec::new();
                for entry in t
                    .range((run, first)..=(run, u64::MAX))?
                    .take(PARTITION_BATCH)
                {
                    let (k, v) = entry?;
                    out.push((k.value().1, v.value().to_vec()));
                }
                Ok(out)
            })?;
            from = match raw.last() {
                Some((p, _)) if raw.len() == PARTITION_BATCH => p.checked_add(1),
                _ => None,
            };
            let mut leaves = Vec::with_capacity(raw.len());
            for (p, bytes) in raw {
                let (b, _) = self.united(Some(&bytes), &RoaringBitmap::new())?;
                if cfg!(debug_assertions) {
                    assert!(
                        p <= u64::MAX >> PARTITION_BITS,
                        "a partition past the ID space"
                    );
                    assert!(!b.is_empty(), "an empty merged partition");
                }
                let leaf = digest::leaf_hash(p, &b, &mut scratch);
                fold.push(&leaf);
                check.see(p, b.len());
                sealed.unique_ids += b.len();
                sealed.partitions += 1;
                leaves.push((p, leaf));
            }
            self.contain("write the merged leaves", |txn| {
                let mut t = txn.open_table(LEAVES)?;
                for (p, h) in &leaves {
                    t.insert((run, *p), h.as_slice())?;
                }
                Ok(())
            })?;
        }
        sealed.root = fold.root();
        Ok(sealed)
    }

    /// Writes the run record, finished, started at `started_at_ms`, as of `rec` (progress and status; its sets are the
    /// ones written here, `union` as [`MergedWriter::seal`] found them), and commits the run.
    ///
    /// # Errors
    /// `InvalidRun`, with nothing written, when the shard list is not a plan's; `WriteError`
    /// when the run cannot be recorded.
    pub(crate) fn finish(
        mut self,
        started_at_ms: u64,
        rec: &Reconciler,
        union: &SealedUnion,
        shards: &crate::receipt::MergedFrom,
        finished_at_ms: u64,
    ) -> Result<RunId, WriteError> {
        let cover = self.new.contract.scope.key_range;
        let merged =
            MergeRecord::of_cover(shards, cover).map_err(|what| WriteError::InvalidRun {
                path: self.store.path().to_owned(),
                what,
            })?;
        self.new.started_at_ms = started_at_ms;
        let mut progress = rec.progress().clone();
        progress.next = None;
        let record = RunRecord {
            contract_json: self.new.contract.to_value().to_string(),
            state: StoredState::Finished,
            started_at_ms: self.new.started_at_ms,
            finished_at_ms: Some(finished_at_ms),
            restarts: 0,
            restarted_from: None,
            superseded_by: None,
            server_count: None,
            source_spec: self.new.source_spec.clone(),
            next_kind: 0,
            progress,
            unique_ids: union.unique_ids,
            partitions: union.partitions,
            merkle_root: Some(union.root),
            status: rec.status(),
            merged: Some(merged),
        };
        let bytes = records::encode_run(&record);
        let run = self.run;
        self.contain("write the merged run record", |txn| {
            txn.open_table(RUNS)?.insert(run.0, bytes.as_slice())?;
            Ok(())
        })?;
        self.store.commit(self.txn)?;
        Ok(run)
    }
}
