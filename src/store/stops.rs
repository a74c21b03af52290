//! Why a run stopped on an error: the one record a run keeps of the error that ended its scan
//! before its end (a connection dropped, a page the server refused, a source rule that stopped
//! the collector), so `runs`, `receipt`, `report` and the MCP tools can say it beside
//! `interrupted` (docs/FORMAT.md §10, table `stops`).
//!
//! The table is optional: a store written before it existed has none, and reads as holding no
//! stop; the first stop written creates it; a build that does not know it leaves it alone. The
//! run record is not changed, so every other reader of the file is unaffected.
//!
//! Invariants: the message is made safe before it is stored (escaped control characters, at
//! most `STOP_MESSAGE_BYTES_MAX` bytes; the collector has already put a fingerprint in place of
//! any raw cursor); a stop is shown only while its run is interrupted and has observed exactly
//! the pages it had when it stopped, so a resume (which deletes it when it begins) or a later
//! write by any build supersedes it.

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::engine::Engine;
use super::error::{Failure, ReadError};
use super::{RunState, Snapshot, Store, WriteError};
use crate::receipt::{rfc3339, RunId};

/// Run to its stop record (version byte 1, then the postcard encoding of `StopV1`).
pub(crate) const STOPS: TableDefinition<u64, &[u8]> = TableDefinition::new("stops");

/// Bytes of a stop's message as stored and shown (longer ones are cut, with `…`).
pub const STOP_MESSAGE_BYTES_MAX: usize = 1024;
/// Bytes of an encoded stop record.
const STOP_RECORD_BYTES_MAX: usize = STOP_MESSAGE_BYTES_MAX + 64;
const STOP_V1: u8 = 1;

/// The error that stopped a run before its end, as the store keeps it with the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StopCause {
    /// The error in one sentence, its causes said once: control characters escaped, cursors
    /// only as fingerprints, at most `STOP_MESSAGE_BYTES_MAX` bytes.
    pub message: String,
    /// Pages the run had observed when the error came (at its request for the next one).
    pub pages_observed: u32,
    /// When, RFC 3339.
    pub at: String,
}

#[derive(Serialize, Deserialize)]
struct StopV1 {
    message: String,
    pages_observed: u32,
    at_ms: u64,
}

impl StopCause {
    /// A stop of `message` after `pages_observed` pages at `at_ms`, the message made safe to
    /// store and show: control characters and bidirectional overrides escaped, cut to
    /// `STOP_MESSAGE_BYTES_MAX` bytes on a character boundary. (A raw cursor is the caller's
    /// to replace: the collector puts the request's fingerprint in its place.)
    #[must_use]
    pub fn new(message: &str, pages_observed: u32, at_ms: u64) -> StopCause {
        let safe = crate::receipt::terminal_safe(message);
        StopCause {
            message: clip(&safe, STOP_MESSAGE_BYTES_MAX),
            pages_observed,
            at: rfc3339(at_ms),
        }
    }

    /// The one sentence every face says: `stopped on an error after N pages: MESSAGE`.
    #[must_use]
    pub fn sentence(&self) -> String {
        let pages = match self.pages_observed {
            1 => "1 page".to_owned(),
            n => format!("{n} pages"),
        };
        format!("stopped on an error after {pages}: {}", self.message)
    }
}

/// `s` cut to at most `max` bytes on a character boundary, `…` (3 bytes) marking a cut.
fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The stored form of a stop (its time in milliseconds).
pub(crate) fn encode(cause: &StopCause, at_ms: u64) -> Vec<u8> {
    let v = StopV1 {
        message: clip(&cause.message, STOP_MESSAGE_BYTES_MAX),
        pages_observed: cause.pages_observed,
        at_ms,
    };
    let mut out = vec![STOP_V1];
    // Plain data into a Vec: postcard fails only on a writer that runs out of room, and a
    // Vec grows; an empty record would read as damage, never as another stop.
    out.extend(postcard::to_allocvec(&v).unwrap_or_default());
    out
}

/// A stored stop, or `None` when it does not decode (checked length, version, bound).
fn decode(bytes: &[u8]) -> Option<StopCause> {
    if bytes.len() > STOP_RECORD_BYTES_MAX {
        return None;
    }
    let (&version, body) = bytes.split_first()?;
    if version != STOP_V1 {
        return None;
    }
    let v: StopV1 = postcard::from_bytes(body).ok()?;
    (v.message.len() <= STOP_MESSAGE_BYTES_MAX).then(|| StopCause {
        message: crate::receipt::terminal_safe(&v.message).into_owned(),
        pages_observed: v.pages_observed,
        at: rfc3339(v.at_ms),
    })
}

/// Writes `run`'s stop in `txn` (creating the table in a store that had none).
pub(crate) fn put(
    engine: &Engine,
    txn: &WriteTransaction,
    run: RunId,
    bytes: &[u8],
) -> Result<(), Failure> {
    engine.contain(
        "record why the run stopped",
        || -> Result<(), redb::Error> {
            txn.open_table(STOPS)?.insert(run.0, bytes)?;
            Ok(())
        },
    )
}

/// Deletes `run`'s stop in `txn`; a store without the table has none to delete.
pub(crate) fn remove(engine: &Engine, txn: &WriteTransaction, run: RunId) -> Result<(), Failure> {
    engine.contain("delete a run's stop", || -> Result<(), redb::Error> {
        if has_table(txn.list_tables()?) {
            txn.open_table(STOPS)?.remove(run.0)?;
        }
        Ok(())
    })
}

fn has_table<H: TableHandle>(mut names: impl Iterator<Item = H>) -> bool {
    names.any(|h| h.name() == STOPS.name())
}

impl Snapshot<'_> {
    /// The stops recorded for `run` (every run's when `None`), by run.
    pub(crate) fn stops(&self, run: Option<RunId>) -> Result<BTreeMap<u64, StopCause>, ReadError> {
        let (engine, txn) = self.parts();
        let fail = |f: Failure| f.into_read(engine.path());
        let mut out = BTreeMap::new();
        for (r, stop) in read(engine, txn, run).map_err(fail)? {
            let stop = stop.ok_or_else(|| {
                fail(Failure::damaged(format!(
                    "table stops, {}: the record does not decode",
                    RunId(r)
                )))
            })?;
            out.insert(r, stop);
        }
        Ok(out)
    }
}

impl Store {
    /// Deletes `run`'s stop, in a transaction of its own (a resume, before its first write).
    pub(super) fn clear_stop(&self, run: RunId) -> Result<(), WriteError> {
        let txn = self.write_txn()?;
        if let Err(f) = remove(&self.engine, &txn, run) {
            return Err(self.poison(f));
        }
        self.commit(txn)
    }
}

/// The stop a run shows: its recorded one while the run is interrupted with exactly the pages
/// it had when it stopped.
pub(crate) fn shown(stop: Option<&StopCause>, state: RunState, pages: u32) -> Option<StopCause> {
    stop.filter(|s| state == RunState::Interrupted && s.pages_observed == pages)
        .cloned()
}

/// The raw stops of `run` (all of them when `None`) in the store `txn` reads.
fn read(
    engine: &Engine,
    txn: &ReadTransaction,
    run: Option<RunId>,
) -> Result<BTreeMap<u64, Option<StopCause>>, Failure> {
    let raw = engine.contain("read the stops", || -> Result<_, redb::Error> {
        let mut out = Vec::new();
        if !has_table(txn.list_tables()?) {
            return Ok(out);
        }
        let table = txn.open_table(STOPS)?;
        match run {
            Some(r) => {
                if let Some(v) = table.get(r.0)? {
                    out.push((r.0, v.value().to_vec()));
                }
            }
            None => {
                for entry in table.iter()? {
                    let (k, v) = entry?;
                    out.push((k.value(), v.value().to_vec()));
                }
            }
        }
        Ok(out)
    })?;
    Ok(raw.into_iter().map(|(k, v)| (k, decode(&v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_made_safe_and_bounded_and_round_trips() {
        let long = format!("\u{1b}[2Jboom {}", "é".repeat(2000));
        let c = StopCause::new(&long, 3, 1_000);
        assert!(c.message.starts_with("\\u{1b}[2Jboom "), "{}", c.message);
        assert!(c.message.len() <= STOP_MESSAGE_BYTES_MAX && c.message.ends_with('…'));
        assert_eq!(decode(&encode(&c, 1_000)), Some(c.clone()));
        assert_eq!(
            c.sentence().split(':').next(),
            Some("stopped on an error after 3 pages")
        );
        let mut bad = encode(&c, 1_000);
        bad[0] = 9;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&vec![STOP_V1; STOP_RECORD_BYTES_MAX + 1]), None);
    }
}
