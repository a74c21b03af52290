//! The indexing pass of a replay file: read it once and keep, per non-blank line, its
//! request key's hash, its offset and its length.
//!
//! A line's key is read by [`key::scan`] without parsing the rest of the line; a line whose
//! key is not plain (or that has none) is parsed in full here ([`Mode::Validate`]), so a line
//! without a readable key is refused at open, naming it. Every other check of a line (its
//! items and other fields) is made when the line is served, by the fetch's own parse.
//!
//! Lines are found in the reader's buffer and read from it in place; only a line that spans
//! two fills of the buffer is copied. Each line is bounded while read (at most
//! `line_bytes_max` bytes are held past a line's start), and the reader is never read past
//! what it holds.

use std::io::{BufRead, ErrorKind};
use std::path::Path;

use super::key;
use super::line::{self, Mode};
use super::{json_error, replay_error, without_cr, KeyHasher, REPLAY_LINES_MAX};
use crate::io_bound::FileError;
use crate::source::SourceError;

/// One non-blank line of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// The hash of the line's request key (`KeyHasher`).
    pub(super) key_hash: u64,
    /// Where the line starts.
    pub(super) offset: u32,
    /// Its length without the line break (and without a `\r` before it).
    pub(super) len: u32,
}

/// Reads and indexes every line; entries in file order.
pub(super) fn index(
    path: &Path,
    mut reader: impl BufRead,
    hasher: &KeyHasher,
    line_bytes_max: usize,
) -> Result<Vec<Entry>, SourceError> {
    let io = |source| FileError::Io {
        path: path.to_owned(),
        source,
    };
    let mut indexer = Indexer {
        path,
        hasher,
        entries: Vec::new(),
        line_no: 0,
        offset: 0,
    };
    // The start of a line that spans two fills of the reader's buffer.
    let mut carry: Vec<u8> = Vec::new();
    let too_long = |line_no: usize| {
        replay_error(
            path,
            line_no + 1,
            format!("the line is longer than {line_bytes_max} bytes"),
        )
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e).into()),
        };
        if chunk.is_empty() {
            if !carry.is_empty() {
                indexer.line(&carry, carry.len())?;
            }
            break;
        }
        let filled = chunk.len();
        let mut rest = chunk;
        if !carry.is_empty() {
            // The rest of the line begun in an earlier fill.
            let Some(n) = memchr::memchr(b'\n', rest) else {
                if carry.len().saturating_add(filled) > line_bytes_max {
                    return Err(too_long(indexer.line_no));
                }
                carry.extend_from_slice(rest);
                reader.consume(filled);
                continue;
            };
            if carry.len().saturating_add(n) > line_bytes_max {
                return Err(too_long(indexer.line_no));
            }
            carry.extend_from_slice(&rest[..n]);
            indexer.line(&carry, carry.len() + 1)?;
            carry.clear();
            rest = &rest[n + 1..];
        }
        let mut start = 0;
        for n in memchr::memchr_iter(b'\n', rest) {
            let line = &rest[start..n];
            if line.len() > line_bytes_max {
                return Err(too_long(indexer.line_no));
            }
            indexer.line(line, line.len() + 1)?;
            start = n + 1;
        }
        let tail = &rest[start..];
        if tail.len() > line_bytes_max {
            return Err(too_long(indexer.line_no));
        }
        carry.extend_from_slice(tail);
        reader.consume(filled);
    }
    if indexer.entries.is_empty() {
        return Err(replay_error(path, 0, "the file has no lines".to_owned()));
    }
    Ok(indexer.entries)
}

/// The state of the pass: the entries so far and where the next line starts.
struct Indexer<'a> {
    path: &'a Path,
    hasher: &'a KeyHasher,
    entries: Vec<Entry>,
    /// Lines seen (blank ones included).
    line_no: usize,
    /// Where the next line starts.
    offset: u64,
}

impl Indexer<'_> {
    /// Indexes one line (without its `\n`) that took `consumed_bytes` of the file.
    fn line(&mut self, line: &[u8], consumed_bytes: usize) -> Result<(), SourceError> {
        self.line_no += 1;
        let (path, line_no) = (self.path, self.line_no);
        if line_no > REPLAY_LINES_MAX {
            return Err(replay_error(
                path,
                line_no,
                format!("more than {REPLAY_LINES_MAX} lines"),
            ));
        }
        let offset = self.offset;
        self.offset = offset.saturating_add(consumed_bytes as u64);
        let line = without_cr(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let key = match key::scan(line) {
            Some(key) => key,
            None => {
                line::parse(line, Mode::Validate)
                    .map_err(|e| json_error(path, line_no, e))?
                    .key
            }
        };
        // Both fit u32 (asserted at compile time): the reader stops at the file's size, at
        // most REPLAY_FILE_BYTES_MAX, and at REPLAY_LINE_BYTES_MAX per line.
        let too_large = || replay_error(path, line_no, "past the file's bound".to_owned());
        self.entries.push(Entry {
            key_hash: self.hasher.hash(key.as_ref()),
            offset: u32::try_from(offset).map_err(|_| too_large())?,
            len: u32::try_from(line.len()).map_err(|_| too_large())?,
        });
        Ok(())
    }
}
