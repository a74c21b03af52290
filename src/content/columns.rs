//! A page's content values as encoded, kept for naming which columns of a changed record
//! differ: the bytes each record's values were hashed from, in one buffer per page. Pure.
//!
//! A record whose content digests differ between two sides is rare; hashing every value of
//! every row on the chance that it is one cost more than the row digest itself. Keeping the
//! encoded bytes costs one copy of them, and the values of the few changed records are
//! compared byte for byte (the encoding is canonical, so equal values are equal bytes).

use super::RecordHasher;

/// Encoded content values of a page's records, in the page's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageColumns {
    bytes: Vec<u8>,
    /// Per record, where each value begins in `bytes`, then where the record ends.
    bounds: Vec<usize>,
    /// Where each record's bounds begin in `bounds`.
    records: Vec<usize>,
}

impl PageColumns {
    /// No records yet.
    #[must_use]
    pub fn new() -> PageColumns {
        PageColumns::default()
    }

    /// Adds the record `hasher` encoded last, as the page's next.
    pub fn push(&mut self, hasher: &RecordHasher) {
        self.records.push(self.bounds.len());
        let base = self.bytes.len();
        let (values, starts) = hasher.values();
        self.bytes.extend_from_slice(values);
        self.bounds.extend(starts.map(|s| base.saturating_add(s)));
        self.bounds.push(self.bytes.len());
    }

    /// Records held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// No records held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The encoded values of record `i`, in order.
    #[must_use]
    pub fn record(&self, i: usize) -> Option<Vec<&[u8]>> {
        let from = *self.records.get(i)?;
        let to = self
            .records
            .get(i.saturating_add(1))
            .copied()
            .unwrap_or(self.bounds.len());
        let bounds = self.bounds.get(from..to)?;
        bounds
            .windows(2)
            .map(|w| self.bytes.get(w[0]..w[1]))
            .collect()
    }

    /// Which values of record `i` here and record `j` of `other` differ, as a bit mask (bit
    /// `k` for value `k`); `None` when either is absent, they have other numbers of values or
    /// more than 64, or none differs.
    #[must_use]
    pub fn differing(&self, i: usize, other: &PageColumns, j: usize) -> Option<u64> {
        let (a, b) = (self.record(i)?, other.record(j)?);
        if a.len() != b.len() || a.len() > 64 {
            return None;
        }
        let mask = a
            .iter()
            .zip(&b)
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .fold(0u64, |m, (k, _)| m | (1u64 << k));
        (mask != 0).then_some(mask)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::content::ContentValue as V;

    fn page(rows: &[&[V<'_>]]) -> PageColumns {
        let mut h = RecordHasher::new();
        let mut p = PageColumns::new();
        for r in rows {
            h.hash(r).unwrap();
            p.push(&h);
        }
        p
    }

    #[test]
    fn records_keep_their_values_and_differ_by_value() {
        let a = page(&[
            &[V::Text("a"), V::Decimal("1.50"), V::Null],
            &[V::Text("b"), V::Int(2), V::Null],
        ]);
        let b = page(&[
            &[V::Text("a"), V::Decimal("1.5"), V::Null],
            &[V::Text("c"), V::Int(3), V::Null],
        ]);
        assert_eq!(a.len(), 2);
        assert_eq!(a.record(0).unwrap().len(), 3);
        assert!(a.record(2).is_none());
        // The canonical encoding makes 1.50 and 1.5 the same bytes.
        assert_eq!(a.differing(0, &b, 0), None);
        assert_eq!(a.differing(1, &b, 1), Some(0b011));
        assert_eq!(a.differing(0, &b, 1), Some(0b011));
        assert_eq!(a.differing(0, &b, 5), None);
        let short = page(&[&[V::Text("a")]]);
        assert_eq!(a.differing(0, &short, 0), None);
        assert!(PageColumns::new().is_empty());
    }
}
