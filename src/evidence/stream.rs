//! Differences of two ID sets partition by partition, in bounded memory: the walk loads
//! `WALK_CHUNK` partitions of each side at a time, and the ranges it finds are counted (exact
//! totals, the first few kept) or handed on as they are found, never gathered.
//!
//! Owns: `RangeTally` (ascending ranges to a capped list with exact totals; also fed key by key
//! by a streaming comparison of two ordered key streams), `Coalesce` (adjacent ranges of two
//! partitions made one), `Sides` (where the two sides' partitions come from: two stored runs,
//! or a diff already in memory) and `render_each` (ranges to their original form, a chunk of
//! dictionary lookups at a time).
//! Never: a list of every range or every ID of a run in memory.
//! Invariants: ranges are emitted ascending and disjoint; with `merge` off (string IDs, whose
//! numbers follow the dictionary, not the strings) every range is one ID.

use roaring::RoaringBitmap;

use super::diff::Diff;
use super::Renderer;
use crate::idset::PARTITION_BITS;
use crate::receipt::RunId;
use crate::store::{ReadError, RunHeader, Snapshot};

/// Partitions of each side loaded per store read (each at most 8 KiB as a bitmap).
pub(crate) const WALK_CHUNK: usize = 64;
/// Ranges rendered per dictionary lookup when every range is written.
const RENDER_CHUNK: usize = 4096;

/// Ranges handed on as they complete: adjacent ranges (the end of one partition and the start
/// of the next) are joined first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Coalesce {
    pending: Option<(u64, u64)>,
    merge: bool,
}

impl Coalesce {
    /// `merge` off: every ID is its own range (string IDs).
    pub(crate) fn new(merge: bool) -> Coalesce {
        Coalesce {
            pending: None,
            merge,
        }
    }

    /// Takes the next range (ascending, disjoint from the ones before).
    pub(crate) fn push<E>(
        &mut self,
        lo: u64,
        hi: u64,
        out: &mut impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        debug_assert!(lo <= hi);
        debug_assert!(
            self.pending.is_none_or(|(_, h)| h < lo),
            "ranges not ascending"
        );
        if !self.merge {
            // Only bitmap ranges come here unmerged: at most one partition, 65,536 IDs.
            for id in lo..=hi {
                out(id, id)?;
            }
            return Ok(());
        }
        match &mut self.pending {
            Some((_, h)) if h.checked_add(1) == Some(lo) => *h = hi,
            pending => {
                if let Some((a, b)) = pending.replace((lo, hi)) {
                    out(a, b)?;
                }
            }
        }
        Ok(())
    }

    /// The ranges of one partition's bitmap (low 16 bits of partition `p`).
    pub(crate) fn push_bitmap<E>(
        &mut self,
        p: u64,
        bitmap: &RoaringBitmap,
        out: &mut impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let base = p << PARTITION_BITS;
        let mut run: Option<(u32, u32)> = None;
        for low in bitmap {
            run = match run {
                Some((a, b)) if b + 1 == low => Some((a, low)),
                Some((a, b)) => {
                    self.push(base | u64::from(a), base | u64::from(b), out)?;
                    Some((low, low))
                }
                None => Some((low, low)),
            };
        }
        if let Some((a, b)) = run {
            self.push(base | u64::from(a), base | u64::from(b), out)?;
        }
        Ok(())
    }

    /// Hands on the last range.
    pub(crate) fn finish<E>(
        &mut self,
        out: &mut impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        match self.pending.take() {
            Some((a, b)) => out(a, b),
            None => Ok(()),
        }
    }
}

/// Ascending ranges counted: the first `cap` kept, the totals exact.
#[derive(Debug, Clone)]
pub struct RangeTally {
    coalesce: Coalesce,
    cap: usize,
    shown: Vec<(u64, u64)>,
    ranges_total: u64,
    ids_total: u128,
}

impl RangeTally {
    /// A tally keeping the first `cap` ranges; with `merge` off every ID counts as one range.
    ///
    /// ```
    /// use scanledger::RangeTally;
    /// let mut t = RangeTally::new(2, true);
    /// for id in [1, 2, 3, 7, 9] {
    ///     t.push(id, id);
    /// }
    /// let done = t.finish();
    /// assert_eq!(done.shown, vec![(1, 3), (7, 7)]);
    /// assert_eq!((done.ranges_total, done.ids_total), (3, 5));
    /// ```
    #[must_use]
    pub fn new(cap: usize, merge: bool) -> RangeTally {
        RangeTally {
            coalesce: Coalesce::new(merge),
            cap,
            shown: Vec::new(),
            ranges_total: 0,
            ids_total: 0,
        }
    }

    fn take(&mut self) -> impl FnMut(u64, u64) -> Result<(), std::convert::Infallible> + '_ {
        |a, b| {
            if self.shown.len() < self.cap {
                self.shown.push((a, b));
            }
            self.ranges_total += 1;
            self.ids_total += u128::from(b - a) + 1;
            Ok(())
        }
    }

    /// Counts the IDs `lo..=hi`, which lie above every ID counted before.
    pub fn push(&mut self, lo: u64, hi: u64) {
        let mut c = self.coalesce;
        let _ = c.push(lo, hi, &mut self.take());
        self.coalesce = c;
    }

    /// Counts one partition's IDs (a bitmap of their low 16 bits).
    pub fn push_bitmap(&mut self, p: u64, bitmap: &RoaringBitmap) {
        let mut c = self.coalesce;
        let _ = c.push_bitmap(p, bitmap, &mut self.take());
        self.coalesce = c;
    }

    /// The tally.
    #[must_use]
    pub fn finish(mut self) -> Tally {
        let mut c = self.coalesce;
        let _ = c.finish(&mut self.take());
        Tally {
            shown: self.shown,
            ranges_total: self.ranges_total,
            ids_total: self.ids_total,
        }
    }
}

/// A finished `RangeTally`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tally {
    /// The first ranges, ascending, inclusive.
    pub shown: Vec<(u64, u64)>,
    /// Ranges in all.
    pub ranges_total: u64,
    /// IDs in all (u128: a gap may span the whole u64 space).
    pub ids_total: u128,
}

impl Tally {
    /// The number of IDs, saturated to u64 (a set of stored IDs always fits).
    #[must_use]
    pub fn count(&self) -> u64 {
        u64::try_from(self.ids_total).unwrap_or(u64::MAX)
    }
}

/// One side of a stored comparison: a run read through its store's snapshot.
#[derive(Clone, Copy)]
pub(crate) struct Stored<'a, 's> {
    pub snap: &'a Snapshot<'s>,
    pub run: RunId,
}

/// Where the two sides' partitions come from.
pub(crate) enum Sides<'a, 's> {
    /// Two stored runs and the partitions whose leaves differ (ascending).
    Stored {
        old: Stored<'a, 's>,
        new: Stored<'a, 's>,
        partitions: Vec<u64>,
    },
    /// A diff already made (string IDs across scopes, compared by their bytes).
    Memory(Diff),
}

/// One partition of a walk: what the new side added and the old side lost.
pub(crate) struct Step<'b> {
    pub partition: u64,
    pub added: &'b RoaringBitmap,
    pub removed: &'b RoaringBitmap,
}

impl Sides<'_, '_> {
    /// Calls `f` on every partition where the sides differ, ascending, loading at most
    /// `WALK_CHUNK` partitions of each side at a time; returns the bitmaps it read.
    pub(crate) fn walk<E: From<ReadError>>(
        &self,
        mut f: impl FnMut(Step<'_>) -> Result<(), E>,
    ) -> Result<u64, E> {
        let empty = RoaringBitmap::new();
        let mut loaded = 0u64;
        match self {
            Sides::Memory(d) => {
                for &p in &d.partitions_differing {
                    let added = d.added.partition(p).unwrap_or(&empty);
                    let removed = d.removed.partition(p).unwrap_or(&empty);
                    f(Step {
                        partition: p,
                        added,
                        removed,
                    })?;
                }
            }
            Sides::Stored {
                old,
                new,
                partitions,
            } => {
                for chunk in partitions.chunks(WALK_CHUNK) {
                    let a = old.snap.partitions_of(old.run, chunk)?;
                    let b = new.snap.partitions_of(new.run, chunk)?;
                    for ((p, o), (_, n)) in a.iter().zip(&b) {
                        loaded += u64::from(o.is_some()) + u64::from(n.is_some());
                        let (o, n) = (o.as_ref().unwrap_or(&empty), n.as_ref().unwrap_or(&empty));
                        let (added, removed) = (n - o, o - n);
                        if added.is_empty() && removed.is_empty() {
                            continue;
                        }
                        f(Step {
                            partition: *p,
                            added: &added,
                            removed: &removed,
                        })?;
                    }
                }
            }
        }
        Ok(loaded)
    }
}

/// Calls `f` on every non-empty partition of `run` from `first` to `last` (partition
/// indexes), ascending, loading at most `WALK_CHUNK` partitions at a time and hopping over
/// empty stretches of the ID space.
pub(crate) fn walk_run<E: From<ReadError>>(
    snap: &Snapshot<'_>,
    run: RunId,
    first: u64,
    last: u64,
    mut f: impl FnMut(u64, &RoaringBitmap) -> Result<(), E>,
) -> Result<(), E> {
    let mut from = first;
    // Each turn takes at least one partition of the run: bounded by its partitions.
    while from <= last {
        let Some(&first_id) = snap.ids_from(run, from << PARTITION_BITS, 1)?.first() else {
            return Ok(());
        };
        let p = crate::idset::partition_of(first_id);
        if p > last {
            return Ok(());
        }
        let end = p.saturating_add(WALK_CHUNK as u64 - 1).min(last);
        for (q, b) in snap.partitions_between(run, p, end)?.partitions() {
            f(q, b)?;
        }
        match end.checked_add(1) {
            Some(n) => from = n,
            None => return Ok(()),
        }
    }
    Ok(())
}

/// Renders ascending ranges of a run's IDs as `"FIRST..LAST"` and hands each on, looking up
/// string IDs `RENDER_CHUNK` ranges at a time: the caller feeds `push` and calls `finish`.
pub(crate) struct RenderEach<'a, 's, F> {
    snap: &'a Snapshot<'s>,
    header: &'a RunHeader,
    buffer: Vec<(u64, u64)>,
    emit: F,
}

/// Why rendering and handing on a range stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The writer the ranges go to failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl<'a, 's, F: FnMut(&str) -> std::io::Result<()>> RenderEach<'a, 's, F> {
    pub(crate) fn new(snap: &'a Snapshot<'s>, header: &'a RunHeader, emit: F) -> Self {
        RenderEach {
            snap,
            header,
            buffer: Vec::with_capacity(RENDER_CHUNK),
            emit,
        }
    }

    pub(crate) fn push(&mut self, lo: u64, hi: u64) -> Result<(), EmitError> {
        self.buffer.push((lo, hi));
        if self.buffer.len() >= RENDER_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), EmitError> {
        let ends = self.buffer.iter().flat_map(|(a, b)| [*a, *b]);
        let r = Renderer::for_ids(self.snap, self.header, ends)?;
        for s in r.ranges(&self.buffer) {
            (self.emit)(&s)?;
        }
        self.buffer.clear();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<(), EmitError> {
        self.flush()
    }
}

/// Renders a few ranges of a run (a capped list) as `"FIRST..LAST"` strings.
pub(crate) fn render_shown(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ranges: &[(u64, u64)],
) -> Result<Vec<String>, ReadError> {
    let r = Renderer::for_ids(snap, header, ranges.iter().flat_map(|(a, b)| [*a, *b]))?;
    Ok(r.ranges(ranges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idset::IdSet;

    fn tally(set: &IdSet, cap: usize, merge: bool) -> Tally {
        let mut t = RangeTally::new(cap, merge);
        for (p, b) in set.partitions() {
            t.push_bitmap(p, b);
        }
        t.finish()
    }

    #[test]
    fn a_tally_of_partitions_is_the_sets_ranges() {
        // Ranges that cross partition boundaries are joined; the shown list is capped.
        let set: IdSet = (65_530..65_540).chain([5, 6, 200_000]).collect();
        let all: Vec<(u64, u64)> = set.ranges().collect();
        let t = tally(&set, 2, true);
        assert_eq!(t.shown, all[..2]);
        assert_eq!(t.ranges_total, all.len() as u64);
        assert_eq!(t.ids_total, u128::from(set.len()));
        let full: IdSet = [u64::MAX - 1, u64::MAX].into_iter().collect();
        assert_eq!(tally(&full, 9, true).shown, vec![(u64::MAX - 1, u64::MAX)]);
        // Unmerged, every ID is its own range.
        let t = tally(&set, 100, false);
        assert_eq!(t.ranges_total, set.len());
        assert!(t.shown.iter().all(|(a, b)| a == b));
    }

    #[test]
    fn a_walk_in_memory_gives_each_differing_partition() {
        let old: IdSet = [1, 2, 70_000].into_iter().collect();
        let new: IdSet = [2, 3, 70_000, 140_000].into_iter().collect();
        let sides = Sides::Memory(crate::evidence::diff::between(&old, &new));
        let mut seen = Vec::new();
        sides
            .walk(|s| -> Result<(), ReadError> {
                seen.push((s.partition, s.added.len(), s.removed.len()));
                Ok(())
            })
            .unwrap_or_default();
        assert_eq!(seen, vec![(0, 1, 1), (2, 1, 0)]);
    }
}
