//! `IdSet`: a set of u64 IDs split into fixed-width partitions, one roaring bitmap each.
//!
//! Partition `p` holds the IDs `p * 2^16 ..= p * 2^16 + 65535`; its bitmap stores the low
//! 16 bits, so every partition is exactly one roaring container. Partitions are the unit of
//! counting, of checkpointing (a page rewrites only the partitions it touched) and the leaves
//! of the Merkle tree. Pure: no IO.
//! Invariants: no empty partition is kept; `len` equals the sum of partition cardinalities;
//! every value in a partition bitmap is below `PARTITION_WIDTH`.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;

/// log2 of the partition width.
pub const PARTITION_BITS: u32 = 16;
/// IDs per partition (2^16).
pub const PARTITION_WIDTH: u64 = 1 << PARTITION_BITS;
const LOW_MASK: u64 = PARTITION_WIDTH - 1;

/// The partition an ID falls in.
#[inline]
#[must_use]
pub fn partition_of(id: u64) -> u64 {
    id >> PARTITION_BITS
}

#[inline]
fn low_of(id: u64) -> u32 {
    // The mask keeps 16 bits, so the value fits a u32.
    (id & LOW_MASK) as u32
}

/// A set of u64 IDs, partitioned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdSet {
    parts: BTreeMap<u64, RoaringBitmap>,
    len: u64,
}

impl IdSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> IdSet {
        IdSet::default()
    }

    /// Inserts an ID; false if it was already present.
    pub fn insert(&mut self, id: u64) -> bool {
        let added = self
            .parts
            .entry(partition_of(id))
            .or_default()
            .insert(low_of(id));
        self.len += u64::from(added);
        added
    }

    /// Whether the ID is present.
    #[must_use]
    pub fn contains(&self, id: u64) -> bool {
        self.parts
            .get(&partition_of(id))
            .is_some_and(|b| b.contains(low_of(id)))
    }

    /// Number of IDs.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The largest ID, if any.
    #[must_use]
    pub fn max(&self) -> Option<u64> {
        self.parts
            .iter()
            .next_back()
            .and_then(|(p, b)| b.max().map(|low| p << PARTITION_BITS | u64::from(low)))
    }

    /// Number of non-empty partitions.
    #[must_use]
    pub fn partition_count(&self) -> usize {
        self.parts.len()
    }

    /// The partitions in ascending order, each with the bitmap of its low 16 bits.
    pub fn partitions(&self) -> impl Iterator<Item = (u64, &RoaringBitmap)> + '_ {
        self.parts.iter().map(|(p, b)| (*p, b))
    }

    /// One partition's bitmap (low 16 bits), if non-empty.
    #[must_use]
    pub fn partition(&self, p: u64) -> Option<&RoaringBitmap> {
        self.parts.get(&p)
    }

    /// Replaces a partition wholesale (used when loading from the store).
    ///
    /// # Panics
    /// If the bitmap holds a value at or above the partition width: the caller validates
    /// decoded bitmaps first, so this is a bug, not bad input.
    pub fn set_partition(&mut self, p: u64, bitmap: RoaringBitmap) {
        assert!(
            bitmap.max().is_none_or(|m| u64::from(m) < PARTITION_WIDTH),
            "partition bitmap holds a value outside the partition"
        );
        if let Some(old) = self.parts.remove(&p) {
            self.len -= old.len();
        }
        if !bitmap.is_empty() {
            self.len += bitmap.len();
            self.parts.insert(p, bitmap);
        }
    }

    /// All IDs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.parts.iter().flat_map(|(p, b)| {
            let base = p << PARTITION_BITS;
            b.iter().map(move |low| base | u64::from(low))
        })
    }

    /// Maximal runs of consecutive IDs, as inclusive `(first, last)` pairs, ascending.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut it = self.iter().peekable();
        std::iter::from_fn(move || {
            let first = it.next()?;
            let mut last = first;
            while let Some(&n) = it.peek() {
                if n != last + 1 {
                    break;
                }
                last = n;
                it.next();
            }
            Some((first, last))
        })
    }

    /// The IDs of `self` not in `other`.
    #[must_use]
    pub fn difference(&self, other: &IdSet) -> IdSet {
        let mut out = IdSet::new();
        for (p, b) in &self.parts {
            let d = match other.parts.get(p) {
                Some(o) => b - o,
                None => b.clone(),
            };
            out.set_partition(*p, d);
        }
        out
    }

    /// Checks one partition's invariants (kept only when not empty, every bit within the
    /// partition's width): what changing that partition can break.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_partition(&self, p: u64) {
        if let Some(b) = self.parts.get(&p) {
            assert!(!b.is_empty(), "empty partition {p} kept");
            assert!(b.max().is_some_and(|m| u64::from(m) < PARTITION_WIDTH));
        }
    }

    /// Checks the invariants; for tests and fuzzing.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_invariants(&self) {
        let mut sum = 0;
        for b in self.parts.values() {
            assert!(!b.is_empty(), "empty partition kept");
            assert!(b.max().is_some_and(|m| u64::from(m) < PARTITION_WIDTH));
            sum += b.len();
        }
        assert_eq!(sum, self.len, "len differs from the partition sum");
    }
}

impl FromIterator<u64> for IdSet {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> IdSet {
        let mut s = IdSet::new();
        for id in iter {
            s.insert(id);
        }
        s
    }
}

impl IdSet {
    /// Inserts IDs, pushing onto `dups` every one already present (including repeats within
    /// `ids`), in the order of `ids`, and onto `touched` every partition that changed.
    ///
    /// A page in ascending order (keyset and dense sources) goes straight in, one partition
    /// lookup per run of IDs that share it. A page in any other order is grouped by partition
    /// first (a sorted copy), so every partition is found and updated once per page, in order,
    /// whatever the collection's size: random orders would otherwise touch a partition per ID
    /// and pay a cache miss for each.
    pub fn insert_many(&mut self, ids: &[u64], dups: &mut Vec<u64>, touched: &mut Vec<u64>) {
        if ids.windows(2).all(|w| w[0] <= w[1]) {
            self.insert_sorted(ids, dups, touched);
            return;
        }
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        let mut found = Vec::new();
        self.insert_sorted(&sorted, &mut found, touched);
        if found.is_empty() {
            return;
        }
        // Some were repeats: report them in the page's own order. An ID is a repeat at its
        // k-th occurrence in the page when it was present before (k >= 1) or k >= 2.
        let mut before: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        for id in &found {
            *before.entry(*id).or_default() += 1;
        }
        // `found` holds each repeated value (occurrences - 1) times, plus once more when it was
        // present before the page: count the page's own occurrences to tell which.
        let mut in_page: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        for id in ids {
            if before.contains_key(id) {
                *in_page.entry(*id).or_default() += 1;
            }
        }
        let mut seen: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
        for id in ids {
            let Some(&total_found) = before.get(id) else {
                continue;
            };
            let occurrences = in_page.get(id).copied().unwrap_or(0);
            let was_present = total_found >= occurrences;
            let k = seen.entry(*id).or_default();
            *k += 1;
            if was_present || *k >= 2 {
                dups.push(*id);
            }
        }
    }

    fn insert_sorted(&mut self, ids: &[u64], dups: &mut Vec<u64>, touched: &mut Vec<u64>) {
        let mut i = 0;
        while i < ids.len() {
            let p = partition_of(ids[i]);
            let bitmap = self.parts.entry(p).or_default();
            let start = i;
            while i < ids.len() && partition_of(ids[i]) == p {
                i += 1;
            }
            let run = &ids[start..i];
            let (lo, hi) = (low_of(run[0]), low_of(run[run.len() - 1]));
            // Consecutive IDs past the partition's largest (a dense page): none is present,
            // none repeats, and they go in as one range rather than one membership test each.
            let consecutive = run.windows(2).all(|w| w[1].checked_sub(w[0]) == Some(1));
            let added = if consecutive && bitmap.max().is_none_or(|max| max < lo) {
                bitmap.insert_range(lo..=hi)
            } else {
                let mut added = 0u64;
                for id in run {
                    if bitmap.insert(low_of(*id)) {
                        added += 1;
                    } else {
                        dups.push(*id);
                    }
                }
                added
            };
            if added > 0 {
                self.len += added;
                if touched.last() != Some(&p) {
                    touched.push(p);
                }
                // A full partition is one run: 8 KiB as a bitmap, a few bytes as a run. Dense
                // collections fill their partitions one after another, so memory stays flat.
                if bitmap.len() == PARTITION_WIDTH {
                    bitmap.optimize();
                }
            } else if bitmap.is_empty() {
                self.parts.remove(&p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages through `insert_many` against a plain set: the same members, count, duplicates
    /// (in page order) and touched partitions.
    #[test]
    fn consecutive_runs_go_in_as_ranges_with_the_same_duplicates_as_one_by_one() {
        let w = PARTITION_WIDTH;
        let pages: Vec<Vec<u64>> = vec![
            (1..=1000).collect(),
            (1001..=2000).collect(),
            // Consecutive, but below the partition's largest: some present.
            (1500..=2500).collect(),
            // Consecutive across a partition boundary.
            (w - 10..w + 10).collect(),
            // Consecutive past the largest after a gap, then one repeated inside a run.
            (5000..5010).collect(),
            vec![6000, 6001, 6001, 6002],
            // Descending, and a consecutive run into a partition holding larger IDs.
            (7000..7005).rev().collect(),
            vec![3 * w + 100],
            (3 * w + 1..3 * w + 50).collect(),
            vec![u64::MAX - 2, u64::MAX - 1, u64::MAX],
            vec![u64::MAX],
        ];
        let mut set = IdSet::default();
        let mut model = std::collections::BTreeSet::new();
        for page in &pages {
            let (mut dups, mut touched) = (Vec::new(), Vec::new());
            set.insert_many(page, &mut dups, &mut touched);
            let mut want_dups = Vec::new();
            let mut want_touched = std::collections::BTreeSet::new();
            for id in page {
                if model.insert(*id) {
                    want_touched.insert(partition_of(*id));
                } else {
                    want_dups.push(*id);
                }
            }
            assert_eq!(dups, want_dups, "{page:?}");
            let touched: std::collections::BTreeSet<u64> = touched.into_iter().collect();
            assert_eq!(touched, want_touched, "{page:?}");
            assert_eq!(set.len(), model.len() as u64);
        }
        let members: Vec<u64> = set.iter().collect();
        assert_eq!(members, model.into_iter().collect::<Vec<_>>());
    }
}
