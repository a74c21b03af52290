//! Helpers shared by the fuzz targets: bounded collections and the canonical leaf body that
//! `digest::leaf_body` must produce whatever container roaring chose.
//!
//! Run a target:   cargo +nightly fuzz run reconcile_ops -- -max_total_time=60
//! Smoke them all: fuzz/smoke.sh 10

use arbitrary::{Arbitrary, Result, Unstructured};

/// A `Vec` of at most `N` elements (redb's `BoundedUSize` idea): keeps every input small
/// enough that one run of a target stays in the microseconds, and the limits in the names.
#[derive(Debug, Clone)]
pub struct Bounded<T, const N: usize>(pub Vec<T>);

impl<'a, T: Arbitrary<'a>, const N: usize> Arbitrary<'a> for Bounded<T, N> {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let mut v = Vec::new();
        // One continuation byte per element, so the fuzzer can grow and shrink the list
        // without shifting every later field.
        for item in u.arbitrary_iter::<T>()?.take(N) {
            v.push(item?);
        }
        Ok(Bounded(v))
    }
}

/// The canonical leaf body of a partition (docs/FORMAT.md), computed from the values alone:
/// up to 4096 IDs their low 16 bits as sorted u16 LE, above that the 8192-byte bitmap.
pub fn canonical_leaf_body(sorted_lows: &[u16]) -> Vec<u8> {
    if sorted_lows.len() as u64 <= scanledger::digest::LEAF_ARRAY_MAX {
        return sorted_lows.iter().flat_map(|v| v.to_le_bytes()).collect();
    }
    let mut out = vec![0u8; 8192];
    for v in sorted_lows {
        out[usize::from(*v / 8)] |= 1 << (v % 8);
    }
    out
}
