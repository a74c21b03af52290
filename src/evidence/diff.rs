//! Diff: from two runs' Merkle leaves and partitions to what was added and removed.
//!
//! Pure: no IO, no clock. The store supplies the data; this module decides what little of it
//! is needed. Equal leaves mean equal partitions (a leaf hashes the partition's index, count
//! and canonical ID list), so only the partitions whose leaves differ are ever loaded, and two
//! equal runs diff in time independent of their size.
//! Invariants: `added` and `removed` are disjoint; `added` is disjoint from `old` and inside
//! `new`; `removed` is inside `old` and disjoint from `new`; `partitions_differing` is
//! ascending and holds exactly the partitions where `added` or `removed` is non-empty.

use roaring::RoaringBitmap;

use crate::codec::IdCodec;
use crate::contract::IdCodecKind;
use crate::digest::Hash;
use crate::idset::{IdSet, PARTITION_BITS};
use crate::receipt::{RunId, RANGES_SHOWN_MAX};

/// What decides whether two runs' IDs can be compared: IDs are comparable only within one
/// (source, tenant) under one codec (the `string` codec's interner is kept per scope, and
/// a `prefixed` ID's number means nothing under another prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comparable<'a> {
    /// The run.
    pub run: RunId,
    /// Its scope's source.
    pub source: &'a str,
    /// Its scope's tenant.
    pub tenant: Option<&'a str>,
    /// Its ID codec.
    pub codec: IdCodecKind,
    /// The `prefixed` codec's prefix, if known (a run with no IDs may not have learned one).
    pub prefix: Option<&'a str>,
}

/// Why two runs cannot be diffed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotComparable {
    /// Another source or tenant.
    #[error("cannot compare {old} ({old_scope}) with {new} ({new_scope}): diff and missing take two runs of the same (source, tenant)")]
    OtherScope {
        /// The old run.
        old: RunId,
        /// Its `source/tenant`.
        old_scope: String,
        /// The new run.
        new: RunId,
        /// Its `source/tenant`.
        new_scope: String,
    },
    /// Another ID codec.
    #[error(
        "cannot compare {old} with {new}: their IDs use the {old_codec} and {new_codec} codecs"
    )]
    OtherCodec {
        /// The old run.
        old: RunId,
        /// Its codec.
        old_codec: &'static str,
        /// The new run.
        new: RunId,
        /// Its codec.
        new_codec: &'static str,
    },
    /// Prefixed IDs under other prefixes.
    #[error("cannot compare {old} with {new}: their IDs have the prefixes {old_prefix:?} and {new_prefix:?}")]
    OtherPrefix {
        /// The old run.
        old: RunId,
        /// Its prefix.
        old_prefix: String,
        /// The new run.
        new: RunId,
        /// Its prefix.
        new_prefix: String,
    },
}

fn codec_name(k: IdCodecKind) -> &'static str {
    k.name()
}

fn scope_name(c: &Comparable<'_>) -> String {
    format!("{}/{}", c.source, c.tenant.unwrap_or("-"))
}

/// Whether two runs' IDs can be compared.
///
/// # Errors
/// `NotComparable` naming both runs and what differs.
pub fn comparable(old: &Comparable<'_>, new: &Comparable<'_>) -> Result<(), NotComparable> {
    if old.source != new.source || old.tenant != new.tenant {
        return Err(NotComparable::OtherScope {
            old: old.run,
            old_scope: scope_name(old),
            new: new.run,
            new_scope: scope_name(new),
        });
    }
    if old.codec != new.codec {
        return Err(NotComparable::OtherCodec {
            old: old.run,
            old_codec: codec_name(old.codec),
            new: new.run,
            new_codec: codec_name(new.codec),
        });
    }
    if old.codec == IdCodecKind::Prefixed {
        if let (Some(a), Some(b)) = (old.prefix, new.prefix) {
            if a != b {
                return Err(NotComparable::OtherPrefix {
                    old: old.run,
                    old_prefix: a.to_owned(),
                    new: new.run,
                    new_prefix: b.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// What changed from an `old` ID set to a `new` one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// IDs in `new` and not in `old`.
    pub added: IdSet,
    /// IDs in `old` and not in `new`.
    pub removed: IdSet,
    /// Partitions whose IDs differ, ascending.
    pub partitions_differing: Vec<u64>,
}

impl Diff {
    /// Whether the two sets are equal.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.partitions_differing.is_empty()
    }

    /// The number of IDs added.
    #[must_use]
    pub fn added_count(&self) -> u64 {
        self.added.len()
    }

    /// The number of IDs removed.
    #[must_use]
    pub fn removed_count(&self) -> u64 {
        self.removed.len()
    }

    /// `old` with the diff applied: `(old - removed) ∪ added`, which is `new`.
    ///
    /// ```
    /// use scanledger::{diff, IdSet};
    /// let old: IdSet = [1, 2, 3].into_iter().collect();
    /// let new: IdSet = [2, 3, 70_000].into_iter().collect();
    /// let d = diff::between(&old, &new);
    /// assert_eq!(d.apply(&old), new);
    /// ```
    #[must_use]
    pub fn apply(&self, old: &IdSet) -> IdSet {
        let mut out = old.clone();
        for p in &self.partitions_differing {
            let mut b = out.partition(*p).cloned().unwrap_or_default();
            if let Some(r) = self.removed.partition(*p) {
                b -= r;
            }
            if let Some(a) = self.added.partition(*p) {
                b |= a;
            }
            out.set_partition(*p, b);
        }
        out
    }

    /// Checks the invariants against the two sets; for tests and fuzzing.
    ///
    /// # Panics
    /// If an invariant does not hold.
    pub fn check_invariants(&self, old: &IdSet, new: &IdSet) {
        self.added.check_invariants();
        self.removed.check_invariants();
        assert!(self.added.difference(new).is_empty(), "added outside new");
        assert_eq!(
            self.added.difference(old),
            self.added,
            "added intersects old"
        );
        assert!(
            self.removed.difference(old).is_empty(),
            "removed outside old"
        );
        assert_eq!(
            self.removed.difference(new),
            self.removed,
            "removed intersects new"
        );
        assert!(
            self.partitions_differing.windows(2).all(|w| w[0] < w[1]),
            "partitions not ascending"
        );
        let mut touched: Vec<u64> = self
            .added
            .partitions()
            .chain(self.removed.partitions())
            .map(|(p, _)| p)
            .collect();
        touched.sort_unstable();
        touched.dedup();
        assert_eq!(touched, self.partitions_differing, "partition list is off");
    }
}

/// The partitions whose leaves differ: present on one side only, or with other hashes.
/// Both lists must be ascending by partition (as `digest::leaves` and the store give them).
///
/// ```
/// use scanledger::{diff, digest, IdSet};
/// let old: IdSet = [1, 70_000].into_iter().collect();
/// let new: IdSet = [1, 70_001, 140_000].into_iter().collect();
/// let d = diff::differing_partitions(&digest::leaves(&old), &digest::leaves(&new));
/// assert_eq!(d, vec![1, 2]);
/// ```
#[must_use]
pub fn differing_partitions(old: &[(u64, Hash)], new: &[(u64, Hash)]) -> Vec<u64> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    // Each step advances i or j or both, so the loop ends after at most len + len steps.
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(&(po, ho)), Some(&(pn, hn))) => {
                if po == pn {
                    if ho != hn {
                        out.push(po);
                    }
                    i += 1;
                    j += 1;
                } else if po < pn {
                    out.push(po);
                    i += 1;
                } else {
                    out.push(pn);
                    j += 1;
                }
            }
            (Some(&(po, _)), None) => {
                out.push(po);
                i += 1;
            }
            (None, Some(&(pn, _))) => {
                out.push(pn);
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// Builds the diff from the partitions that may differ, each with its `old` and `new` bitmap
/// (low 16 bits; `None` for an empty partition). A partition listed but equal on both sides
/// contributes nothing, so a caller may pass a superset of the differing partitions.
#[must_use]
pub fn of_partitions<'a>(
    parts: impl IntoIterator<Item = (u64, Option<&'a RoaringBitmap>, Option<&'a RoaringBitmap>)>,
) -> Diff {
    let mut d = Diff::default();
    for (p, old, new) in parts {
        let (added, removed) = match (old, new) {
            (None, None) => continue,
            (Some(o), None) => (RoaringBitmap::new(), o.clone()),
            (None, Some(n)) => (n.clone(), RoaringBitmap::new()),
            (Some(o), Some(n)) => (n - o, o - n),
        };
        if added.is_empty() && removed.is_empty() {
            continue;
        }
        d.added.set_partition(p, added);
        d.removed.set_partition(p, removed);
        d.partitions_differing.push(p);
    }
    d.partitions_differing.sort_unstable();
    d.partitions_differing.dedup();
    d
}

/// The diff of two in-memory sets, comparing partition bitmaps directly.
///
/// ```
/// use scanledger::{diff, IdSet};
/// let old: IdSet = (1..=100).collect();
/// let new: IdSet = (51..=150).collect();
/// let d = diff::between(&old, &new);
/// assert_eq!((d.added_count(), d.removed_count()), (50, 50));
/// assert!(diff::between(&old, &old).is_empty());
/// ```
#[must_use]
pub fn between(old: &IdSet, new: &IdSet) -> Diff {
    let mut indexes: Vec<u64> = old
        .partitions()
        .chain(new.partitions())
        .map(|(p, _)| p)
        .collect();
    indexes.sort_unstable();
    indexes.dedup();
    of_partitions(
        indexes
            .into_iter()
            .map(|p| (p, old.partition(p), new.partition(p))),
    )
}

/// Inclusive ID ranges in u64 form, the first `RANGES_SHOWN_MAX` kept, with totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeList {
    /// The first ranges, ascending, as inclusive `(first, last)`.
    pub shown: Vec<(u64, u64)>,
    /// How many ranges there are in all.
    pub ranges_total: u64,
    /// How many IDs they hold in all (u128: a range may span the whole u64 space).
    pub ids_total: u128,
}

impl RangeList {
    fn push(&mut self, first: u64, last: u64) {
        debug_assert!(first <= last);
        if self.shown.len() < RANGES_SHOWN_MAX {
            self.shown.push((first, last));
        }
        self.ranges_total += 1;
        self.ids_total += u128::from(last - first) + 1;
    }

    /// The ranges of a set.
    ///
    /// ```
    /// use scanledger::{diff::RangeList, IdSet};
    /// let s: IdSet = [1, 2, 3, 7].into_iter().collect();
    /// let r = RangeList::of(&s);
    /// assert_eq!(r.shown, vec![(1, 3), (7, 7)]);
    /// assert_eq!((r.ranges_total, r.ids_total), (2, 4));
    /// ```
    #[must_use]
    pub fn of(set: &IdSet) -> RangeList {
        let mut out = RangeList::default();
        for (first, last) in set.ranges() {
            out.push(first, last);
        }
        out
    }

    /// The ranges of `lo..=hi` that `set` lacks (its gaps inside the interval).
    ///
    /// ```
    /// use scanledger::{diff::RangeList, IdSet};
    /// let s: IdSet = [3, 4, 8].into_iter().collect();
    /// let r = RangeList::gaps(&s, 1, 10);
    /// assert_eq!(r.shown, vec![(1, 2), (5, 7), (9, 10)]);
    /// assert_eq!(r.ids_total, 7);
    /// ```
    #[must_use]
    pub fn gaps(set: &IdSet, lo: u64, hi: u64) -> RangeList {
        let mut out = RangeList::default();
        if lo > hi {
            return out;
        }
        // `next` is the first ID not yet accounted for; None once past u64::MAX.
        let mut next = Some(lo);
        let first_part = lo >> PARTITION_BITS;
        let last_part = hi >> PARTITION_BITS;
        'parts: for (p, b) in set.partitions() {
            if p < first_part {
                continue;
            }
            if p > last_part {
                break;
            }
            let base = p << PARTITION_BITS;
            for low in b {
                let id = base | u64::from(low);
                if id < lo {
                    continue;
                }
                if id > hi {
                    break 'parts;
                }
                if let Some(n) = next {
                    if id > n {
                        out.push(n, id - 1);
                    }
                }
                next = id.checked_add(1);
            }
        }
        if let Some(n) = next {
            if n <= hi {
                out.push(n, hi);
            }
        }
        out
    }

    /// The ranges rendered by a codec as `"FIRST..LAST"` strings.
    #[must_use]
    pub fn render(&self, codec: &IdCodec) -> Vec<String> {
        self.shown
            .iter()
            .map(|(first, last)| format!("{}..{}", codec.render(*first), codec.render(*last)))
            .collect()
    }
}

#[cfg(test)]
mod tests;
