//! Per-leaf content accumulators: what a run keeps of its records' contents, never the rows.
//!
//! Each record with a content digest adds `e = H(0x03 || key || content)` to the accumulator of
//! its leaf, where `key` is the ID's `u64le` for the `int` and `prefixed` codecs and the
//! string's digest for `string` (so two stores that interned differently agree), and the leaf
//! is the ID's partition, or the string's bucket (docs/FORMAT.md §4b). An accumulator is 64
//! bytes: the sum of the `e`s modulo 2^256 (little-endian) and their XOR. Both are independent
//! of order, so two runs over the same records agree whatever their pages, and a leaf whose
//! accumulators differ holds a record whose content differs (or an ID one side lacks). Pure.

use sha2::{Digest, Sha256};

use crate::digest::{self, Hash};

/// Bytes of one leaf's accumulator.
pub const CONTENT_ACC_LEN: usize = 64;

/// One leaf's accumulator: sum (mod 2^256, little-endian) then XOR of the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentAcc(pub [u8; CONTENT_ACC_LEN]);

impl Default for ContentAcc {
    fn default() -> ContentAcc {
        ContentAcc([0; CONTENT_ACC_LEN])
    }
}

/// The `i`-th little-endian 64-bit limb of `bytes`.
fn limb(bytes: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(8 * i..8 * i + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

impl ContentAcc {
    /// Adds one record's entry: the sum in four 64-bit limbs with carry (the same bytes as a
    /// byte-by-byte sum; the sum is modulo 2^256 by definition, so the last carry is dropped).
    pub fn add(&mut self, entry: &Hash) {
        let mut carry = 0u128;
        for i in 0..4 {
            let s = u128::from(limb(&self.0, i)) + u128::from(limb(entry, i)) + carry;
            let low = u64::try_from(s & u128::from(u64::MAX)).unwrap_or(0);
            self.0[8 * i..8 * i + 8].copy_from_slice(&low.to_le_bytes());
            carry = s >> 64;
        }
        for (i, b) in entry.iter().enumerate() {
            self.0[32 + i] ^= b;
        }
    }
}

/// A record's entry: `H(0x03 || key || content)`.
#[must_use]
pub fn entry(key: &[u8], content: &Hash) -> Hash {
    // One update of the whole message (keys are 8 or 32 bytes) instead of three.
    let mut buf = [0u8; 1 + 32 + 32];
    let n = 1 + key.len() + content.len();
    if let Some(dst) = buf.get_mut(..n) {
        dst[0] = 0x03;
        dst[1..1 + key.len()].copy_from_slice(key);
        dst[1 + key.len()..].copy_from_slice(content);
        return Sha256::digest(dst).into();
    }
    let mut h = Sha256::new();
    h.update([0x03]);
    h.update(key);
    h.update(content);
    h.finalize().into()
}

/// The leaf of a content accumulator: `H(0x02 || u64le leaf || accumulator)`.
#[must_use]
pub fn leaf_hash(leaf: u64, acc: &ContentAcc) -> Hash {
    let mut h = Sha256::new();
    h.update([0x02]);
    h.update(leaf.to_le_bytes());
    h.update(acc.0);
    h.finalize().into()
}

/// The content root of a run: the RFC 6962 tree over its non-empty leaves, ascending.
#[must_use]
pub fn root<'a>(leaves: impl IntoIterator<Item = (u64, &'a ContentAcc)>) -> Hash {
    let hashes: Vec<Hash> = leaves.into_iter().map(|(l, a)| leaf_hash(l, a)).collect();
    digest::merkle_root_of_leaves(hashes.iter())
}
