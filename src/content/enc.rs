//! The encoder of a record's content: the canonical bytes gathered in one reused buffer and
//! hashed by one SHA-256 call, instead of three small updates per value (those small updates,
//! not the compression, were most of the cost of hashing a short row). Pure.
//!
//! Where each value's encoding begins in the buffer is kept too, so a record's per-column
//! digests (`column_digests`: 64 bits a value, for naming which columns of a changed row
//! differ) cost no second encoding, only a short hash of each value's bytes when asked.

use sha2::{Digest, Sha256};
use twox_hash::XxHash3_64;

/// A record's encoding, built in a buffer kept from record to record.
#[derive(Debug, Default)]
pub struct RecordHasher {
    buf: Vec<u8>,
    /// Values the record was begun with, and given so far (checked in debug builds).
    expected: usize,
    given: usize,
    /// Where each value given so far begins in `buf`.
    starts: Vec<usize>,
}

/// Bytes a hasher keeps between records; a longer record's buffer is released after it.
const KEEP_MAX: usize = 64 * 1024;

impl RecordHasher {
    /// A hasher with an empty buffer.
    #[must_use]
    pub fn new() -> RecordHasher {
        RecordHasher {
            buf: Vec::with_capacity(256),
            expected: 0,
            given: 0,
            starts: Vec::new(),
        }
    }

    /// Starts a record.
    pub(super) fn begin(&mut self, values: usize) {
        self.expected = values;
        self.given = 0;
        if self.buf.capacity() > KEEP_MAX {
            self.buf = Vec::with_capacity(256);
        }
        self.buf.clear();
        self.starts.clear();
    }

    /// Counts one value, whose encoding begins here.
    pub(super) fn count(&mut self) {
        self.given = self.given.saturating_add(1);
        self.starts.push(self.buf.len());
    }

    /// Appends `bytes` to the record.
    pub(super) fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The digest of the record.
    pub(super) fn finish(&self) -> [u8; 32] {
        debug_assert_eq!(self.given, self.expected, "a record's values, as begun");
        Sha256::digest(&self.buf).into()
    }

    /// A 64-bit digest of each value of the record, in order: the same value encodes, and so
    /// hashes, alike on every source. Not a content digest (64 bits of XXH3, seed 0, not
    /// collision-resistant): only for telling which values of two records whose content
    /// digests differ differ.
    pub(super) fn value_digests(&self) -> Box<[u64]> {
        let ends = self.starts.iter().skip(1).copied().chain([self.buf.len()]);
        self.starts
            .iter()
            .zip(ends)
            .map(|(&a, b)| XxHash3_64::oneshot(self.buf.get(a..b).unwrap_or_default()))
            .collect()
    }
}
