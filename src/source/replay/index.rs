//! The indexing pass of a replay file: read it once, validate every line, keep per line only
//! its key's hash, offset and length.
//!
//! Lines are read in batches of about [`BATCH_BYTES`] (each line bounded while read), and a
//! batch is validated on up to [`INDEX_THREADS_MAX`] threads, each taking a contiguous run of
//! its lines: the result, entries and the first error in file order, is the one a single
//! thread would give. Memory: one batch (plus at most one line past it) and the entries.
//! Never keeps a parsed line, and never reads past what the reader holds.

use std::io::BufRead;
use std::num::NonZeroUsize;
use std::path::Path;

use super::line::{self, Mode};
use super::{json_error, replay_error, without_cr, KeyHasher, REPLAY_LINES_MAX};
use crate::error::{FileError, SourceError};
use crate::io_bound::{self, LineRead};

/// Bytes of lines read before a batch is validated.
const BATCH_BYTES: usize = 4 << 20;
/// Threads that validate one batch; more would only contend for the same memory bandwidth.
const INDEX_THREADS_MAX: usize = 4;
/// Batches smaller than this are validated on the calling thread (a thread costs more).
const PARALLEL_BYTES_MIN: usize = 256 * 1024;

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

/// A line of a batch: where it is in the file and in the batch's text.
#[derive(Debug, Clone, Copy)]
struct Span {
    line_no: usize,
    offset: u64,
    start: usize,
    len: usize,
}

/// Reads, validates and indexes every line; entries in file order.
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
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(INDEX_THREADS_MAX);
    let mut entries = Vec::new();
    let mut text = Vec::new();
    let mut spans = Vec::new();
    let mut offset = 0u64;
    let mut line_no = 0usize;
    loop {
        let start = text.len();
        let read = io_bound::read_line(&mut reader, &mut text, line_bytes_max).map_err(io)?;
        let consumed_bytes = match read {
            LineRead::End => break,
            LineRead::TooLong => {
                return Err(replay_error(
                    path,
                    line_no + 1,
                    format!("the line is longer than {line_bytes_max} bytes"),
                ))
            }
            LineRead::Line { consumed_bytes } => consumed_bytes,
        };
        line_no += 1;
        if line_no > REPLAY_LINES_MAX {
            return Err(replay_error(
                path,
                line_no,
                format!("more than {REPLAY_LINES_MAX} lines"),
            ));
        }
        spans.push(Span {
            line_no,
            offset,
            start,
            len: text.len() - start,
        });
        offset = offset.saturating_add(consumed_bytes as u64);
        if text.len() >= BATCH_BYTES {
            entries.extend(validate_batch(path, &text, &spans, hasher, threads)?);
            text.clear();
            spans.clear();
        }
    }
    entries.extend(validate_batch(path, &text, &spans, hasher, threads)?);
    if entries.is_empty() {
        return Err(replay_error(path, 0, "the file has no lines".to_owned()));
    }
    Ok(entries)
}

/// Validates the lines of a batch, on several threads when it is large enough.
fn validate_batch(
    path: &Path,
    text: &[u8],
    spans: &[Span],
    hasher: &KeyHasher,
    threads: usize,
) -> Result<Vec<Entry>, SourceError> {
    if threads <= 1 || text.len() < PARALLEL_BYTES_MIN {
        return validate(path, text, spans, hasher);
    }
    // Contiguous runs of lines of about equal bytes, one per thread.
    let share = text.len().div_ceil(threads);
    let mut parts = Vec::with_capacity(threads);
    let mut rest = spans;
    while !rest.is_empty() {
        let first = rest[0].start;
        let n = rest
            .iter()
            .position(|s| s.start >= first + share)
            .unwrap_or(rest.len())
            .max(1);
        let (part, tail) = rest.split_at(n);
        parts.push(part);
        rest = tail;
    }
    let results: Vec<Result<Vec<Entry>, SourceError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts[1..]
            .iter()
            .map(|part| scope.spawn(move || validate(path, text, part, hasher)))
            .collect();
        let mut results = vec![validate(path, text, parts[0], hasher)];
        for h in handles {
            // A panic while validating is a bug, not bad input: let it continue as one.
            results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        results
    });
    let mut entries = Vec::with_capacity(spans.len());
    for r in results {
        // The parts are in file order and each stops at its first bad line, so the first
        // error here is the first bad line of the batch.
        entries.extend(r?);
    }
    Ok(entries)
}

/// Validates lines in order, stopping at the first bad one.
fn validate(
    path: &Path,
    text: &[u8],
    spans: &[Span],
    hasher: &KeyHasher,
) -> Result<Vec<Entry>, SourceError> {
    let mut entries = Vec::with_capacity(spans.len());
    for span in spans {
        let line = without_cr(&text[span.start..span.start + span.len]);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed =
            line::parse(line, Mode::Validate).map_err(|e| json_error(path, span.line_no, e))?;
        // Both fit u32 (asserted at compile time): the reader stops at the file's size, at
        // most REPLAY_FILE_BYTES_MAX, and at REPLAY_LINE_BYTES_MAX per line.
        let too_large = || replay_error(path, span.line_no, "past the file's bound".to_owned());
        entries.push(Entry {
            key_hash: hasher.hash(parsed.key.as_ref()),
            offset: u32::try_from(span.offset).map_err(|_| too_large())?,
            len: u32::try_from(line.len()).map_err(|_| too_large())?,
        });
    }
    Ok(entries)
}
