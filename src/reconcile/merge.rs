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

use super::{cursor_key, IdSet, PageLog, Progress, Reconciler, ViolationKind};
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
        self.absorb_shard_progress(shard.progress(), name);
        self.unite(shard);
        let none = digest::cursor_hash(None);
        for page in pages {
            self.absorb_page(page);
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

    /// What [`Reconciler::absorb_shard`] takes from a shard's progress alone: its findings
    /// (on the merged page numbering: after the pages absorbed so far, each detail prefixed
    /// with `name`), dropped findings, limits, terminal page, splice, prefix, bytes and echoed
    /// total, and its label names (added to the merge's, in order of first sight). A streamed
    /// merge calls it, then [`Reconciler::absorb_page`] for each of the shard's pages, and
    /// unites the sets outside (the store's merged writer); returns, per label of the shard,
    /// its index among the merge's labels.
    pub fn absorb_shard_progress(&mut self, p: &Progress, name: &str) -> Vec<u32> {
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
        p.label_names
            .iter()
            .map(|name| {
                let at = match self.progress.label_names.iter().position(|n| n == name) {
                    Some(at) => at,
                    None => {
                        self.progress.label_names.push(name.clone());
                        self.labels.push(IdSet::new());
                        self.labels.len() - 1
                    }
                };
                // Labels per run are bounded by LABELS_PER_RUN_MAX.
                u32::try_from(at).unwrap_or(u32::MAX)
            })
            .collect()
    }

    /// Counts one absorbed page of a shard (after [`Reconciler::absorb_shard_progress`]).
    pub fn absorb_page(&mut self, page: &PageLog) {
        let q = &mut self.progress;
        q.pages_observed = q.pages_observed.saturating_add(1);
        q.records_observed = q.records_observed.saturating_add(u64::from(page.n_items));
    }

    /// Unites `shard`'s ID and label sets and content with the merge's. Partitions of
    /// disjoint ranges never overlap; if they did (a range not on a partition boundary), the
    /// overlap would count as duplicates, never be lost.
    fn unite(&mut self, shard: &Reconciler) {
        unite_sets(&mut self.ids, &shard.ids);
        for (name, set) in shard.progress.label_names.iter().zip(&shard.labels) {
            // Named by `absorb_shard_progress` before.
            if let Some(at) = self.progress.label_names.iter().position(|n| n == name) {
                unite_sets(&mut self.labels[at], set);
            }
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
        let chain = digest::chain_of(
            &self.query_digest,
            pinned_snapshot.as_deref(),
            pages.iter().map(|p| &p.cursor_hash),
        );
        let mut check = PartitionCheck::new(self.settings.expected_partitions.as_deref());
        for (p, b) in self.ids.partitions() {
            check.see(p, b.len());
        }
        self.end(pinned_snapshot, complete, chain, self.ids.len(), check);
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// [`Reconciler::merge_end`] of a streamed merge, whose union the store holds: `chain` is
    /// [`digest::chain_of`] over every absorbed page (see [`Reconciler::merge_chain_start`]),
    /// `unique` the union's size, and `partitions` saw every partition of the union with its
    /// count, in order. The duplicates are the items the union does not hold.
    pub fn merge_end_streamed(
        &mut self,
        pinned_snapshot: Option<String>,
        complete: bool,
        chain: digest::Hash,
        unique: u64,
        partitions: PartitionCheck,
    ) {
        self.progress.duplicate_ids = self.progress.records_observed.saturating_sub(unique);
        self.end(pinned_snapshot, complete, chain, unique, partitions);
        if cfg!(debug_assertions) {
            self.check_progress_of(unique);
        }
    }

    /// Where a streamed merge's chain starts, for a merge pinned to `pinned_snapshot`: each
    /// absorbed page's cursor hash follows with [`digest::chain_next`].
    #[must_use]
    pub fn merge_chain_start(&self, pinned_snapshot: Option<&str>) -> digest::Hash {
        digest::chain_start(&self.query_digest, pinned_snapshot)
    }

    /// The expected partition counts a streamed merge's union is held against.
    #[must_use]
    pub fn merge_partition_check(&self) -> PartitionCheck {
        PartitionCheck::new(self.settings.expected_partitions.as_deref())
    }

    fn end(
        &mut self,
        pinned_snapshot: Option<String>,
        complete: bool,
        chain: digest::Hash,
        unique: u64,
        partitions: PartitionCheck,
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
        self.progress.chain = chain;
        let complete = self.progress.terminal_observed;
        if let Some(expected) = self.settings.expected_count {
            if complete && unique != expected {
                let detail =
                    format!("the shards hold {unique} unique IDs, the contract expects {expected}");
                self.record(ViolationKind::CountMismatch, 0, detail);
            }
        }
        if complete {
            if let Some(detail) = partitions.finish() {
                self.record(ViolationKind::PartitionMismatch, 0, detail);
            }
        }
        self.codec.set_prefix(self.progress.id_prefix.clone());
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

/// The partitions whose count in a merge's union differs from the contract's
/// `expected_partitions` (an unlisted partition is expected empty), as R11 words them: fed
/// the union's partitions in order ([`PartitionCheck::see`]), it keeps the contract's list
/// and at most 16 differences shown, whatever the number of partitions.
#[derive(Debug)]
pub struct PartitionCheck {
    /// The contract's (partition, count), with the count seen so far.
    expected: Option<Vec<(u64, u64, u64)>>,
    /// Differences of unlisted partitions: the first shown, and how many.
    unlisted: Vec<String>,
    unlisted_total: usize,
}

/// Differences a partition check shows.
const SHOWN_MAX: usize = 16;

impl PartitionCheck {
    fn new(expected: Option<&[(u64, u64)]>) -> PartitionCheck {
        PartitionCheck {
            expected: expected.map(|e| e.iter().map(|(p, n)| (*p, *n, 0)).collect()),
            unlisted: Vec::new(),
            unlisted_total: 0,
        }
    }

    /// Partition `p` of the union holds `count` IDs.
    pub fn see(&mut self, p: u64, count: u64) {
        let Some(expected) = &mut self.expected else {
            return;
        };
        match expected.binary_search_by_key(&p, |(q, _, _)| *q) {
            Ok(i) => {
                // Every entry of `p` (a list read from a file may name one twice).
                let first = expected[..i]
                    .iter()
                    .rposition(|e| e.0 != p)
                    .map_or(0, |j| j + 1);
                for e in expected[first..].iter_mut().take_while(|e| e.0 == p) {
                    e.2 = count;
                }
            }
            Err(_) => {
                self.unlisted_total += 1;
                if self.unlisted.len() < SHOWN_MAX {
                    self.unlisted
                        .push(format!("partition {p} (expected 0, observed {count})"));
                }
            }
        }
    }

    /// The finding's detail; `None` when all agree (or the contract lists none).
    fn finish(self) -> Option<String> {
        let expected = self.expected?;
        let mut differing = Vec::new();
        let mut total = 0usize;
        for (p, want, seen) in expected {
            if seen != want {
                total += 1;
                if differing.len() < SHOWN_MAX {
                    differing.push(format!("partition {p} (expected {want}, observed {seen})"));
                }
            }
        }
        total += self.unlisted_total;
        let room = SHOWN_MAX - differing.len();
        differing.extend(self.unlisted.into_iter().take(room));
        (total > 0).then(|| {
            format!(
                "{total} partitions of the shards' union differ from the contract's counts: {}",
                differing.join(", ")
            )
        })
    }
}
