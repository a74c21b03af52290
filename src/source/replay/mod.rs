//! `replay:FILE`: a scripted source, JSON Lines, one response per line (docs/REFERENCE.md §4).
//!
//! Strict by design: a request the file has no line for is an error (exit 2), so a scenario
//! cannot pass by accident. Lines with the same key answer successive requests for it
//! (retries); the last one repeats.
//!
//! Streaming: opening the file reads it once, line by line (each line bounded by
//! [`REPLAY_LINE_BYTES_MAX`]), and keeps only an index: per line, a hash of its request key
//! and the line's offset and length (16 bytes a line). Only the key of a line is read then
//! (`key`; a line whose key cannot be read plainly is parsed in full, so a line without a
//! valid key fails at open, naming its line, column and field). A fetch reads and parses
//! just the line it needs, checking all of it: a line malformed past its key is refused when
//! it is first served, with the same error. Memory is one page (the line and its items) plus
//! the index, whatever the file's size.
//!
//! The index never trusts a hash alone: a fetched line's own key is compared with the
//! request, and a key with several lines has its lines' keys read once, the first time it is
//! asked for, so two keys with one hash are told apart exactly.
//!
//! Never: holds the file's text, expands a generator before its page is served, or reads
//! past the size the file had when opened.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{FetchError, PageRequest, PageSource};
use crate::contract::{Page, PAGE_SIZE_BYTES_MAX};
use crate::io_bound;
use crate::io_bound::FileError;
use crate::reconcile::Request;
use crate::source::SourceError;

mod index;
mod items;
mod key;
mod line;
#[cfg(test)]
mod tests;

use index::{index, Entry};
use line::{Answer, ErrorKind, Key, LineError, Mode, Parsed};

/// Bytes of a replay file.
pub(crate) const REPLAY_FILE_BYTES_MAX: u64 = 1 << 30;
/// Lines of a replay file.
pub(crate) const REPLAY_LINES_MAX: usize = 10_000_000;
/// Bytes of one replay line (without its line break): a page's bound plus 1 MiB, so a page
/// just past `PAGE_SIZE_BYTES_MAX` still reaches the reconciler, which reports it (R16).
pub(crate) const REPLAY_LINE_BYTES_MAX: usize = PAGE_SIZE_BYTES_MAX as usize + (1 << 20);

// Offsets and lengths are kept as u32 in the index.
const _: () = assert!(REPLAY_FILE_BYTES_MAX <= u32::MAX as u64);
const _: () = assert!(REPLAY_LINE_BYTES_MAX as u64 <= REPLAY_FILE_BYTES_MAX);

/// Bytes of the buffer the indexing pass reads through.
const INDEX_READ_BUFFER_BYTES: usize = 256 * 1024;
/// Line buffers larger than this are released after a fetch, so one huge page does not pin
/// its memory for the rest of the scan.
const LINE_BUFFER_KEPT_BYTES: usize = 1 << 20;

/// How the lines of one key hash serve successive requests, once a key with several lines
/// has been asked for.
#[derive(Debug)]
enum Served {
    /// Every line has the same key: the next line to serve (the last repeats).
    OneKey { next: usize },
    /// Two keys share the hash: per key, its lines and the next one to serve.
    Collision(Vec<(Key, Vec<Entry>, usize)>),
}

/// The hash of request keys: keyed at random per source, so a file cannot be crafted to
/// collide (collisions are resolved exactly anyway, at the cost of re-reading lines).
#[derive(Debug)]
enum KeyHasher {
    Random(RandomState),
    /// Every key hashes alike: the tests of the collision path.
    #[cfg(test)]
    Constant,
}

impl KeyHasher {
    fn hash(&self, key: KeyRef<'_>) -> u64 {
        match self {
            KeyHasher::Random(state) => state.hash_one(key),
            #[cfg(test)]
            KeyHasher::Constant => 0,
        }
    }
}

/// Where the lines come from.
#[derive(Debug)]
enum Backing {
    /// A regular file, read by offsets; its size when opened.
    File { file: File, len_bytes: u64 },
    /// Text given in memory (`ReplaySource::parse`).
    Bytes(Vec<u8>),
}

/// A replay source: an index of a JSON Lines file, read a line at a time.
#[derive(Debug)]
pub struct ReplaySource {
    path: PathBuf,
    backing: Backing,
    /// Sorted by (key hash, offset): a key's lines are contiguous and in file order.
    entries: Vec<Entry>,
    hasher: KeyHasher,
    /// Keys with several lines that were asked for.
    served: HashMap<u64, Served>,
    /// The line being parsed, reused between fetches.
    buf: Vec<u8>,
    /// A shard's key range and the codec its IDs are read with: items outside it are dropped.
    key_range: Option<(crate::contract::KeyRange, crate::codec::IdCodec)>,
}

/// A request key without copying it, hashed like the `Key` it equals.
#[derive(Hash)]
enum KeyRef<'a> {
    Cursor(Option<&'a str>),
    After(&'a str),
}

impl Key {
    fn as_ref(&self) -> KeyRef<'_> {
        match self {
            Key::Cursor(c) => KeyRef::Cursor(c.as_deref()),
            Key::After(a) => KeyRef::After(a),
        }
    }
}

fn key_of(request: &Request) -> KeyRef<'_> {
    match request {
        Request::First => KeyRef::Cursor(None),
        Request::Cursor(c) => KeyRef::Cursor(Some(c)),
        Request::After(k) => KeyRef::After(k),
    }
}

fn same_key(key: &Key, request: &Request) -> bool {
    match (key, request) {
        (Key::Cursor(None), Request::First) => true,
        (Key::Cursor(Some(c)), Request::Cursor(r)) => c == r,
        (Key::After(a), Request::After(r)) => a == r,
        _ => false,
    }
}

fn unanswered(path: &Path, request: &Request) -> SourceError {
    SourceError::Unanswered {
        path: path.to_owned(),
        request: request.describe(),
    }
}

fn replay_error(path: &Path, line: usize, problem: String) -> SourceError {
    SourceError::Replay {
        path: path.to_owned(),
        line,
        column: None,
        problem,
    }
}

fn json_error(path: &Path, line: usize, e: LineError) -> SourceError {
    SourceError::Replay {
        path: path.to_owned(),
        line,
        column: Some(e.column),
        problem: e.problem,
    }
}

/// A line without a trailing `\r` (a CRLF file): the line's size on the wire.
fn without_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

impl ReplaySource {
    /// Opens a replay file: reads it once to index every line by its request key. A line
    /// is checked in full when it is served.
    ///
    /// The file must be a regular file (it is read again by offsets; a pipe or a device is
    /// refused) of at most 1 GiB.
    ///
    /// # Errors
    /// `SourceError::File` when unreadable, not a regular file or too large;
    /// `SourceError::Replay` naming line, column and field, for a line whose request key is
    /// missing or malformed, or that is past the bounds.
    pub fn open(path: &Path) -> Result<ReplaySource, SourceError> {
        let (file, len_bytes) = io_bound::open_regular(
            path,
            REPLAY_FILE_BYTES_MAX,
            "a replay file is read again by offsets",
        )?;
        let hasher = KeyHasher::Random(RandomState::new());
        let reader = BufReader::with_capacity(INDEX_READ_BUFFER_BYTES, (&file).take(len_bytes));
        let entries = index(path, reader, &hasher, REPLAY_LINE_BYTES_MAX)?;
        Ok(ReplaySource::new(
            path,
            Backing::File { file, len_bytes },
            entries,
            hasher,
        ))
    }

    /// Parses replay text held in memory; `path` only names the file in errors.
    ///
    /// # Errors
    /// `SourceError::Replay` naming line, column and field.
    pub fn parse(path: &Path, text: &str) -> Result<ReplaySource, SourceError> {
        ReplaySource::parse_with(
            path,
            text,
            KeyHasher::Random(RandomState::new()),
            REPLAY_LINE_BYTES_MAX,
        )
    }

    fn parse_with(
        path: &Path,
        text: &str,
        hasher: KeyHasher,
        line_bytes_max: usize,
    ) -> Result<ReplaySource, SourceError> {
        let entries = index(path, text.as_bytes(), &hasher, line_bytes_max)?;
        Ok(ReplaySource::new(
            path,
            Backing::Bytes(text.as_bytes().to_vec()),
            entries,
            hasher,
        ))
    }

    fn new(
        path: &Path,
        backing: Backing,
        mut entries: Vec<Entry>,
        hasher: KeyHasher,
    ) -> ReplaySource {
        entries.sort_unstable_by_key(|e| (e.key_hash, e.offset));
        ReplaySource {
            path: path.to_owned(),
            backing,
            entries,
            hasher,
            served: HashMap::new(),
            buf: Vec::new(),
            key_range: None,
        }
    }

    /// Serves only the items whose ID (read with the contract's codec) is in `range`: a
    /// shard of a recorded collection.
    #[must_use]
    pub fn with_key_range(mut self, contract: &crate::contract::Contract) -> ReplaySource {
        self.key_range = contract.scope.key_range.map(|r| {
            (
                r,
                crate::codec::IdCodec::new(contract.id_codec, contract.id_prefix.clone()),
            )
        });
        self
    }

    /// Fuzzing support: one line (without its line break) parsed as the indexing pass does
    /// (validated, nothing kept) and as a fetch does (the page, generators expanded; `None`
    /// for a failure answer). The two must agree on every input.
    #[doc(hidden)]
    pub fn parse_line_both_ways(line: &[u8]) -> (Result<(), String>, Result<Option<Page>, String>) {
        let validated = line::parse(line, Mode::Validate)
            .map(|_| ())
            .map_err(|e| e.problem);
        let collected = line::parse(line, Mode::Collect)
            .map(|parsed| page_of(parsed, 0).ok())
            .map_err(|e| e.problem);
        (validated, collected)
    }

    /// Fuzzing support: whether the key the indexing pass reads from a line without parsing
    /// it is the key the full parse gives, for every line the full parse accepts.
    #[doc(hidden)]
    #[must_use]
    pub fn key_scan_agrees(line: &[u8]) -> bool {
        match (key::scan(line), line::parse(line, Mode::Validate)) {
            (Some(scanned), Ok(parsed)) => scanned == parsed.key,
            _ => true,
        }
    }

    /// Lines indexed (non-blank lines of the file).
    #[must_use]
    pub fn lines(&self) -> usize {
        self.entries.len()
    }

    /// The answer the file gives to `request`, without waiting the line's `delay_ms`
    /// ([`PageSource::fetch`] waits it out first): the page, or the failure the line names.
    ///
    /// # Errors
    /// The line's failure (`Timeout`, `ServerError`, `ExpiredCursor`, `Forbidden`), or
    /// `Fatal` when no line answers the request or the file cannot be read as indexed.
    pub fn answer(&mut self, request: &Request) -> Result<Page, FetchError> {
        let (parsed, len) = self.take_line(request).map_err(FetchError::Fatal)?;
        page_of(parsed, len)
    }

    /// Finds, reads and parses the line that answers `request`, and counts it served.
    fn take_line(&mut self, request: &Request) -> Result<(Parsed, u32), SourceError> {
        let key_hash = self.hasher.hash(key_of(request));
        let start = self.entries.partition_point(|e| e.key_hash < key_hash);
        let end = self.entries.partition_point(|e| e.key_hash <= key_hash);
        let entry = match end - start {
            0 => return Err(unanswered(&self.path, request)),
            1 => self.entries[start],
            _ => {
                if !self.served.contains_key(&key_hash) {
                    let served = self.resolve(start, end)?;
                    self.served.insert(key_hash, served);
                }
                let group = &self.entries[start..end];
                let served = self.served.get_mut(&key_hash);
                let (lines, next) = match served {
                    Some(Served::OneKey { next }) => (group, next),
                    Some(Served::Collision(keys)) => {
                        match keys.iter_mut().find(|(k, _, _)| same_key(k, request)) {
                            Some((_, lines, next)) => (lines.as_slice(), next),
                            None => return Err(unanswered(&self.path, request)),
                        }
                    }
                    None => return Err(unanswered(&self.path, request)),
                };
                // Lines answer successive requests; the last one repeats.
                let idx = (*next).min(lines.len() - 1);
                *next = next.saturating_add(1);
                lines[idx]
            }
        };
        let parsed = self.parse_at(entry, Mode::Collect)?;
        self.release_buffer();
        if !same_key(&parsed.key, request) {
            // Only a hash in common with a key that has lines: this request has none.
            return Err(unanswered(&self.path, request));
        }
        Ok((parsed, entry.len))
    }

    /// Reads the keys of several lines sharing a hash, once, to tell their keys apart.
    fn resolve(&mut self, start: usize, end: usize) -> Result<Served, SourceError> {
        let mut keys: Vec<(Key, Vec<Entry>, usize)> = Vec::new();
        for i in start..end {
            let entry = self.entries[i];
            let key = self.parse_at(entry, Mode::Validate)?.key;
            match keys.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, lines, _)) => lines.push(entry),
                None => keys.push((key, vec![entry], 0)),
            }
        }
        self.release_buffer();
        Ok(if keys.len() == 1 {
            Served::OneKey { next: 0 }
        } else {
            Served::Collision(keys)
        })
    }

    /// Reads the line of `entry` into the buffer and parses it.
    fn parse_at(&mut self, entry: Entry, mode: Mode) -> Result<Parsed, SourceError> {
        let len = entry.len as usize;
        match &self.backing {
            Backing::File { file, len_bytes } => {
                let changed = |now_bytes| FileError::Changed {
                    path: self.path.clone(),
                    was_bytes: *len_bytes,
                    now_bytes,
                };
                let io = |source| FileError::Io {
                    path: self.path.clone(),
                    source,
                };
                let now_bytes = file.metadata().map_err(io)?.len();
                if now_bytes != *len_bytes {
                    return Err(changed(now_bytes).into());
                }
                let mut f = file;
                f.seek(SeekFrom::Start(u64::from(entry.offset)))
                    .map_err(io)?;
                self.buf.clear();
                self.buf.reserve(len);
                let read = f.take(u64::from(entry.len)).read_to_end(&mut self.buf);
                if read.map_err(io)? != len {
                    return Err(changed(now_bytes).into());
                }
            }
            Backing::Bytes(bytes) => {
                let start = entry.offset as usize;
                self.buf.clear();
                self.buf
                    .extend_from_slice(bytes.get(start..start + len).unwrap_or_default());
            }
        }
        line::parse(without_cr(&self.buf), mode).map_err(|e| {
            let line_no = self.line_number(entry.offset);
            json_error(&self.path, line_no, e)
        })
    }

    /// The 1-based line number of the line starting at `offset`, for errors only: it counts
    /// the line breaks before it (0 when the file cannot be read again).
    fn line_number(&self, offset: u32) -> usize {
        let count = |reader: &mut dyn BufRead| -> std::io::Result<usize> {
            let mut breaks = 0usize;
            loop {
                let chunk = reader.fill_buf()?;
                if chunk.is_empty() {
                    return Ok(breaks.saturating_add(1));
                }
                breaks = breaks.saturating_add(chunk.iter().filter(|b| **b == b'\n').count());
                let n = chunk.len();
                reader.consume(n);
            }
        };
        let counted = match &self.backing {
            Backing::File { file, .. } => {
                let mut f = file;
                f.seek(SeekFrom::Start(0))
                    .and_then(|_| count(&mut BufReader::new(f.take(u64::from(offset)))))
            }
            Backing::Bytes(bytes) => count(&mut bytes.get(..offset as usize).unwrap_or_default()),
        };
        counted.unwrap_or(0)
    }

    fn release_buffer(&mut self) {
        if self.buf.capacity() > LINE_BUFFER_KEPT_BYTES {
            self.buf = Vec::new();
        }
    }
}

/// The page (or failure) of a parsed line; `len` is the line's size on the wire.
fn page_of(parsed: Parsed, len: u32) -> Result<Page, FetchError> {
    match parsed.answer {
        Answer::Page(p) => Ok(Page {
            items: p.items.into_items(),
            next: p.next,
            complete: p.complete,
            snapshot: p.snapshot,
            query: p.query,
            truncated: p.truncated,
            size_bytes: u64::from(len),
            columns: None,
            total: None,
        }),
        Answer::Error(ErrorKind::Timeout) => Err(FetchError::Timeout),
        Answer::Error(ErrorKind::ServerError) => Err(FetchError::ServerError),
        Answer::Error(ErrorKind::ExpiredCursor) => Err(FetchError::ExpiredCursor),
        Answer::Error(ErrorKind::Forbidden) => Err(FetchError::Forbidden),
    }
}

impl PageSource for ReplaySource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let (parsed, len) = self.take_line(&req.request).map_err(FetchError::Fatal)?;
        if parsed.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(parsed.delay_ms)).await;
        }
        let mut page = page_of(parsed, len)?;
        if let Some((range, codec)) = &mut self.key_range {
            // An ID the codec refuses stays, for the reconciler to report (R16).
            page.items
                .retain(|item| codec.encode(&item.id).map_or(true, |id| range.contains(id)));
        }
        Ok(page)
    }
}
