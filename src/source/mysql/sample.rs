//! Shard cuts for MySQL/MariaDB from one read of the key column in key order, keeping a
//! bounded, evenly strided sample of its keys.
//!
//! The servers' own statistics do not serve: MariaDB keeps no histogram of a column with a
//! unique index, MySQL's need an explicit `ANALYZE TABLE ... UPDATE HISTOGRAM`, and InnoDB's
//! row estimates of key ranges are about twice the rows and capped at half the table (measured
//! on MariaDB 10.11), so cuts placed by them come out uneven. The read is of the key alone
//! (no content), once; memory holds at most `SAMPLE_MAX` keys whatever the table's size: when
//! it is full every second key is dropped and the stride doubles, so each cut is within one
//! stride of its exact quantile. A cut placed badly would cost balance, never coverage
//! (`shard::split_at`).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use crate::source::sql::quantiles::Quantiles;

/// Keys the sample keeps at most.
pub(crate) const SAMPLE_MAX: usize = 65_536;

/// A key column's value as an integer.
fn int(v: &Value) -> Option<i128> {
    match v {
        Value::Int(n) => Some(i128::from(*n)),
        Value::UInt(n) => Some(i128::from(*n)),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Every `stride`-th key of an ascending stream, in at most `SAMPLE_MAX` keys.
#[derive(Debug)]
struct Sample {
    kept: Vec<i128>,
    stride: u64,
    seen: u64,
}

impl Sample {
    fn push(&mut self, key: i128) {
        if self.seen.is_multiple_of(self.stride) {
            self.kept.push(key);
            if self.kept.len() >= SAMPLE_MAX {
                let halved: Vec<i128> = self.kept.iter().step_by(2).copied().collect();
                self.kept = halved;
                self.stride = self.stride.saturating_mul(2);
            }
        }
        self.seen = self.seen.saturating_add(1);
    }

    /// The `n - 1` keys at the quantiles `i / n`; `None` with fewer rows than twice `n`.
    fn cuts(&self, n: u32) -> Option<Vec<i128>> {
        if self.seen < u64::from(n).saturating_mul(2) {
            return None;
        }
        (1..u64::from(n))
            .map(|i| {
                let row = u128::from(self.seen) * u128::from(i) / u128::from(n);
                let at = usize::try_from(row / u128::from(self.stride)).ok()?;
                self.kept.get(at).copied()
            })
            .collect()
    }
}

/// The `n - 1` keys cutting the rows with keys in `lo..=hi` into parts of about equal counts
/// (each within one stride of exact); `None` for too few rows.
pub(super) async fn cuts(
    conn: &mut Conn,
    table: &str,
    key: &str,
    lo: i128,
    hi: i128,
    n: u32,
) -> Result<Option<Quantiles>, mysql_async::Error> {
    // The bounds are integers this code computed, so they are written into the statement.
    let sql =
        format!("SELECT {key} FROM {table} WHERE {key} >= {lo} AND {key} <= {hi} ORDER BY {key}");
    let mut sample = Sample {
        kept: Vec::new(),
        stride: 1,
        seen: 0,
    };
    let mut bad = false;
    let mut result = conn.query_iter(sql).await?;
    result
        .for_each(|row| match row.as_ref(0).and_then(int) {
            Some(k) => sample.push(k),
            None => bad = true,
        })
        .await?;
    if bad {
        return Ok(None);
    }
    Ok(sample.cuts(n).map(|keys| Quantiles {
        by: "key_sample",
        keys,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn the_sample_stays_bounded_and_its_cuts_near_exact() {
        let mut s = Sample {
            kept: Vec::new(),
            stride: 1,
            seen: 0,
        };
        let rows: i128 = 1_000_000;
        for i in 1..=rows {
            s.push(i * i);
        }
        assert!(s.kept.len() < SAMPLE_MAX);
        assert_eq!(s.stride, 16);
        let cuts = s.cuts(8).unwrap();
        for (i, c) in cuts.iter().enumerate() {
            let exact = rows * (i as i128 + 1) / 8;
            let row = (1..=rows).position(|k| k * k == *c).unwrap() as i128;
            assert!(
                (row - exact).abs() <= 32,
                "cut {i}: row {row}, exact {exact}"
            );
        }
        let few = Sample {
            kept: vec![1, 2, 3],
            stride: 1,
            seen: 3,
        };
        assert_eq!(few.cuts(2), None);
    }
}
