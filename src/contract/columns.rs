//! A page's content values as encoded, kept for naming which columns of a changed record
//! differ: the bytes each record's values were hashed from, in one buffer per page. Pure.
//!
//! A record whose content digests differ between two sides is rare; hashing every value of
//! every row on the chance that it is one cost more than the row digest itself. Keeping the
//! encoded bytes costs one copy of them, and the values of the few changed records are
//! compared byte for byte (the encoding is canonical, so equal values are equal bytes).

/// Encoded content values of a page's records, in the page's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageColumns {
    bytes: Vec<u8>,
    /// Per record, where each value begins in `bytes`, then where the record ends.
    bounds: Vec<u32>,
    /// Where each record's bounds begin in `bounds`.
    records: Vec<u32>,
    /// A record did not fit the 32-bit offsets: the page keeps no values.
    overflowed: bool,
}

/// Bytes a value is expected to take, for sizing a page's buffer at once: a buffer grown by
/// doubling left its smaller copies to the allocator, which kept them resident a while.
const VALUE_BYTES_GUESS: usize = 20;
/// The most elements each of a page's buffers is sized for before its first record.
const RESERVE_MAX: usize = 4 << 20;

impl PageColumns {
    /// No records yet.
    #[must_use]
    pub fn new() -> PageColumns {
        PageColumns::default()
    }

    /// No records yet, with room for `records` records of `values` values each.
    #[must_use]
    pub fn with_capacity(records: usize, values: usize) -> PageColumns {
        let bounds = records.saturating_mul(values.saturating_add(1));
        let bytes = records
            .saturating_mul(values)
            .saturating_mul(VALUE_BYTES_GUESS)
            .min(RESERVE_MAX);
        PageColumns {
            bytes: Vec::with_capacity(bytes),
            bounds: Vec::with_capacity(bounds.min(RESERVE_MAX)),
            records: Vec::with_capacity(records.min(RESERVE_MAX)),
            overflowed: false,
        }
    }

    /// Adds a record as the page's next: its values as encoded (`content::RecordHasher`
    /// gives them), and where each begins in `values`.
    pub fn push(&mut self, values: &[u8], starts: impl Iterator<Item = usize>) {
        let offset = |n: usize| u32::try_from(n).ok();
        let base = self.bytes.len();
        let end = base.saturating_add(values.len());
        let (Some(record), Some(_)) = (offset(self.bounds.len()), offset(end)) else {
            self.overflowed = true;
            return;
        };
        self.records.push(record);
        self.bytes.extend_from_slice(values);
        // Each start lies below `end`, which fits.
        self.bounds
            .extend(starts.map(|s| offset(base.saturating_add(s)).unwrap_or(u32::MAX)));
        self.bounds.push(offset(end).unwrap_or(u32::MAX));
    }

    /// Records held; none once a record did not fit.
    #[must_use]
    pub fn len(&self) -> usize {
        if self.overflowed {
            0
        } else {
            self.records.len()
        }
    }

    /// No records held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoded values of record `i`, in order.
    #[must_use]
    pub fn record(&self, i: usize) -> Option<Vec<&[u8]>> {
        if self.overflowed {
            return None;
        }
        let at = |n: u32| usize::try_from(n).ok();
        let from = at(*self.records.get(i)?)?;
        let to = match self.records.get(i.saturating_add(1)) {
            Some(n) => at(*n)?,
            None => self.bounds.len(),
        };
        let bounds = self.bounds.get(from..to)?;
        bounds
            .windows(2)
            .map(|w| self.bytes.get(at(w[0])?..at(w[1])?))
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

    /// A page of records, each its values' bytes.
    fn page(rows: &[&[&[u8]]]) -> PageColumns {
        let mut p = PageColumns::new();
        for r in rows {
            let mut starts = Vec::new();
            let mut bytes = Vec::new();
            for v in *r {
                starts.push(bytes.len());
                bytes.extend_from_slice(v);
            }
            p.push(&bytes, starts.into_iter());
        }
        p
    }

    #[test]
    fn records_keep_their_values_and_differ_by_value() {
        let a = page(&[&[b"a", b"1.5", b""], &[b"b", b"2", b""]]);
        let b = page(&[&[b"a", b"1.5", b""], &[b"c", b"3", b""]]);
        assert_eq!(a.len(), 2);
        assert_eq!(a.record(0).unwrap(), [&b"a"[..], b"1.5", b""]);
        assert!(a.record(2).is_none());
        assert_eq!(a.differing(0, &b, 0), None);
        assert_eq!(a.differing(1, &b, 1), Some(0b011));
        assert_eq!(a.differing(0, &b, 1), Some(0b011));
        assert_eq!(a.differing(0, &b, 5), None);
        let short = page(&[&[b"a"]]);
        assert_eq!(a.differing(0, &short, 0), None);
        assert!(PageColumns::new().is_empty());
        let sized = PageColumns::with_capacity(1000, 5);
        assert!(sized.is_empty() && sized.record(0).is_none());
    }
}
