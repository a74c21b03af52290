//! Uniting shard runs into one run: the reconciler's own API for a merge of a plan's shards.
//!
//! A merge starts from [`Reconciler::merge_start`], absorbs each shard's run in shard order
//! ([`Reconciler::absorb_shard`]: its findings, ID and label sets, content, counts and page
//! log), records the merge's own findings ([`Reconciler::merge_finding`]) and ends with
//! [`Reconciler::merge_end`] (the snapshot, the chain, the duplicates and the contract's
//! counts). Pure: what the shards are, and whether each was taken, the caller decides.
//!
//! Invariants kept after every step (checked in debug builds): records = unique + duplicates;
//! every label set within the ID set; at most `VIOLATIONS_KEPT_MAX` findings kept, the
//! dropped ones counted with the worst status they force; the merged status and conclusion
//! never better than any absorbed shard's (its findings are carried, a shard without its
//! terminal page leaves the merge without one, a spliced shard splices the merge).

use super::{cursor_key, IdSet, PageLog, Reconciler, ViolationKind};
use crate::contract::Contract;
use crate::digest;

impl Reconciler {
    /// The state a merge starts from: finished, nothing to request, no ID, and the terminal
    /// page counted as seen until a shard without one is absorbed.
    #[must_use]
    pub fn merge_start(contract: &Contract) -> Reconciler {
        let mut r = Reconciler::new(contract);
        r.progress.next = None;
        r.progress.finished = true;
        r.progress.terminal_observed = true;
        r
    }

    /// Records a finding of the merge itself (a shard missing, in conflict, out of range).
    pub fn merge_finding(&mut self, kind: ViolationKind, page: u32, detail: String) {
        self.record(kind, page, detail);
    }

    /// Absorbs one shard's run: its findings (on the merged page numbering, each detail
    /// prefixed with `name`), its dropped findings and limits, its ID and label sets (united),
    /// its content, counts and page log (`pages`, appended after the pages already absorbed).
    /// A shard without its terminal page, or unfinished, leaves the merge without one; a
    /// spliced or unconfirmed high-water shard splices the merge.
    pub fn absorb_shard(&mut self, shard: &Reconciler, name: &str, pages: &[PageLog]) {
        let p = shard.progress();
        let offset = self.progress.pages_observed;
        for v in &p.violations {
            self.record(
                v.kind,
                v.page.saturating_add(offset),
                format!("{name}: {}", v.detail),
            );
        }
        let q = &mut self.progress;
        q.violations_dropped = q.violations_dropped.saturating_add(p.violations_dropped);
        q.violations_dropped_worst = q.violations_dropped_worst.max(p.violations_dropped_worst);
        for l in &p.limits_hit {
            if !q.limits_hit.contains(l) {
                q.limits_hit.push(*l);
            }
        }
        if !p.terminal_observed || !p.finished {
            q.terminal_observed = false;
        }
        if p.spliced || p.high_water_unconfirmed {
            q.spliced = true;
            q.high_water_used = true;
        }
        if q.id_prefix.is_none() {
            q.id_prefix.clone_from(&p.id_prefix);
        }
        q.bytes_observed = q.bytes_observed.saturating_add(p.bytes_observed);
        if let Some(t) = p.echoed_total {
            q.echoed_total = Some(q.echoed_total.unwrap_or(0).saturating_add(t));
        }
        self.unite(shard);
        let none = digest::cursor_hash(None);
        for page in pages {
            let q = &mut self.progress;
            q.pages_observed = q.pages_observed.saturating_add(1);
            q.records_observed = q.records_observed.saturating_add(u64::from(page.n_items));
            if page.cursor_hash != none {
                self.seen_cursors.insert(cursor_key(&page.cursor_hash));
            }
        }
        // A union smaller than the items counts the rest as duplicates.
        self.progress.duplicate_ids = self
            .progress
            .records_observed
            .saturating_sub(self.ids.len());
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// Unites `shard`'s ID and label sets and content with the merge's. Partitions of
    /// disjoint ranges never overlap; if they did (a range not on a partition boundary), the
    /// overlap would count as duplicates, never be lost.
    fn unite(&mut self, shard: &Reconciler) {
        unite_sets(&mut self.ids, &shard.ids);
        for (name, set) in shard.progress.label_names.iter().zip(&shard.labels) {
            let at = match self.progress.label_names.iter().position(|n| n == name) {
                Some(at) => at,
                None => {
                    self.progress.label_names.push(name.clone());
                    self.labels.push(IdSet::new());
                    self.labels.len() - 1
                }
            };
            unite_sets(&mut self.labels[at], set);
        }
        for (leaf, acc) in &shard.content {
            self.content.insert(*leaf, *acc);
        }
    }

    /// Ends a merge: the run is pinned to `pinned_snapshot` (the plan's, or the one every
    /// shard pinned), its chain is recomputed over `pages` (every absorbed page, in order);
    /// duplicates are a finding; when every shard was taken and reached its end (`complete`)
    /// the union is held against the contract's expected count and partition counts.
    pub fn merge_end(
        &mut self,
        pinned_snapshot: Option<String>,
        complete: bool,
        pages: &[PageLog],
    ) {
        let q = &mut self.progress;
        q.serving_snapshot.clone_from(&pinned_snapshot);
        q.pinned_snapshot = pinned_snapshot;
        q.terminal_observed = q.terminal_observed && complete;
        let duplicates = q.duplicate_ids;
        if duplicates > 0 {
            self.record(
                ViolationKind::DuplicateId,
                0,
                format!("{duplicates} items of the shards repeat an ID already seen"),
            );
        }
        self.progress.chain = digest::chain_of(
            &self.query_digest,
            self.progress.pinned_snapshot.as_deref(),
            pages.iter().map(|p| &p.cursor_hash),
        );
        let complete = self.progress.terminal_observed;
        if let Some(expected) = self.settings.expected_count {
            if complete && self.ids.len() != expected {
                let detail = format!(
                    "the shards hold {} unique IDs, the contract expects {expected}",
                    self.ids.len()
                );
                self.record(ViolationKind::CountMismatch, 0, detail);
            }
        }
        if complete {
            if let Some(detail) =
                partition_differences(self.settings.expected_partitions.as_deref(), &self.ids)
            {
                self.record(ViolationKind::PartitionMismatch, 0, detail);
            }
        }
        self.codec.set_prefix(self.progress.id_prefix.clone());
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }
}

/// Adds every ID of `from` to `into`, partition by partition.
fn unite_sets(into: &mut IdSet, from: &IdSet) {
    for (part, bitmap) in from.partitions() {
        let merged = match into.partition(part) {
            Some(have) => have | bitmap,
            None => bitmap.clone(),
        };
        into.set_partition(part, merged);
    }
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
