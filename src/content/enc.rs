//! The encoder of a record's content: the canonical bytes gathered in one reused buffer and
//! hashed by one SHA-256 call, instead of three small updates per value (those small updates,
//! not the compression, were most of the cost of hashing a short row). Pure.
//!
//! Where each value's encoding begins in the buffer is kept too, so a page can keep its
//! records' values (`contract::PageColumns`, for naming which columns of a changed row
//! differ) without a second encoding.

use sha2::{Digest, Sha256};

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

    /// The record's values as encoded (after the domain and the count), and where each
    /// begins in them.
    pub(crate) fn values(&self) -> (&[u8], impl Iterator<Item = usize> + '_) {
        let first = self.starts.first().copied().unwrap_or(self.buf.len());
        let values = self.buf.get(first..).unwrap_or_default();
        (
            values,
            self.starts.iter().map(move |s| s.saturating_sub(first)),
        )
    }
}
