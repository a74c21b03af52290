//! Shard cuts from the key's distribution (a server's statistics, or a dialect's sample of the
//! keys): keys that divide a table's rows into parts of about equal counts, so that `plan`
//! gives a skewed table shards of similar sizes.
//!
//! Never decides what a shard covers: a plan's shards
//! cover every ID whatever the cuts are (`shard::split_at`), so statistics that are stale or
//! wrong cost balance, never coverage. Pure: the dialects read the statistics.

/// Cuts from statistics, and which statistics they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quantiles {
    /// How they were found, as the plan's `split.by` says it (`histogram`, `key_sample`).
    pub(crate) by: &'static str,
    /// `n - 1` keys, ascending.
    pub(crate) keys: Vec<i128>,
}

/// The `n - 1` keys that cut an equi-depth histogram's `bounds` (ascending; each bucket
/// between two bounds holds about the same number of rows, as PostgreSQL's
/// `histogram_bounds` do) into `n` parts of equal counts, interpolating within a bucket.
/// Bounds outside `lo..=hi` are dropped; `None` when fewer than two remain.
pub(crate) fn equi_depth(bounds: &[i128], lo: i128, hi: i128, n: u32) -> Option<Vec<i128>> {
    let b: Vec<i128> = bounds
        .iter()
        .copied()
        .filter(|k| (lo..=hi).contains(k))
        .collect();
    if b.len() < 2 || n == 0 || !b.windows(2).all(|w| w[0] <= w[1]) {
        return None;
    }
    let buckets = i128::try_from(b.len() - 1).ok()?;
    let n = i128::from(n);
    let mut keys = Vec::new();
    for i in 1..n {
        // i * buckets / n in whole buckets and a remainder: no overflow (i, n <= 4096,
        // buckets <= the statistics' size, a bucket's width below 2^65).
        let at = i.checked_mul(buckets)?;
        let (j, rem) = (at / n, at % n);
        let j = usize::try_from(j).ok()?;
        let key = match (b.get(j), b.get(j + 1)) {
            (Some(x), Some(y)) => x + (y - x) * rem / n,
            (Some(x), None) => *x,
            _ => return None,
        };
        keys.push(key);
    }
    Some(keys)
}

/// Parses PostgreSQL's text form of an integer array (`{1,5,9}`).
pub(crate) fn pg_int_array(text: &str) -> Option<Vec<i128>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|v| v.trim().trim_matches('"').parse().ok())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn equi_depth_cuts_interpolate_within_buckets() {
        // Four buckets of equal counts: 0..10, 10..20, 20..1000, 1000..1004.
        let b = [0, 10, 20, 1000, 1004];
        assert_eq!(equi_depth(&b, 0, 2000, 2), Some(vec![20]));
        assert_eq!(equi_depth(&b, 0, 2000, 4), Some(vec![10, 20, 1000]));
        assert_eq!(
            equi_depth(&b, 0, 2000, 8),
            Some(vec![5, 10, 15, 20, 510, 1000, 1002])
        );
        assert_eq!(equi_depth(&b, 0, 2000, 1), Some(vec![]));
        // Bounds outside the span are dropped; too few left is no answer.
        assert_eq!(equi_depth(&b, 15, 999, 2), None);
        assert_eq!(equi_depth(&[5, 3], 0, 9, 2), None);
        // The extremes of the key space do not overflow.
        let wide = [i128::from(i64::MIN), i128::from(u64::MAX)];
        let cuts = equi_depth(&wide, i128::MIN, i128::MAX, 4096).unwrap();
        assert_eq!(cuts.len(), 4095);
        assert!(cuts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn pg_arrays_parse_and_junk_does_not() {
        assert_eq!(pg_int_array("{1,5,-9}"), Some(vec![1, 5, -9]));
        assert_eq!(pg_int_array("{}"), Some(vec![]));
        assert_eq!(pg_int_array("{1,x}"), None);
        assert_eq!(pg_int_array("1,2"), None);
    }
}
