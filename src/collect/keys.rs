//! The key streams of `migration verify`'s one-pass comparison: each side's pages are tapped on
//! their way to its collector (`KeyTap`), their (key, row digest) pairs sent through a bounded
//! channel (`KeySender`), and one comparator (`KeyComparator`) merges the two ascending streams
//! as they come, naming every missing, extra and changed key (`StreamedKeys`).
//!
//! Bounded: a channel holds `KEY_PAGES_AHEAD` pages, so the faster side waits for the slower
//! one (its send blocks its own thread between two pages, never the other side's); the
//! comparator holds one page of each side. What it keeps is exact counts, the partitions that
//! differ, and the changed keys as an `IdSet` (a roaring bitmap, never larger than the ID set
//! each side's reconciler holds anyway), with which content columns differ for the first
//! `CHANGED_COLUMNS_MAX` of them (the records' encoded values, `Page::columns`, which a tap asks
//! its source to keep).
//!
//! The same comparator merges the two re-reads of `--reread` (`collect::reread_streamed`).
//!
//! Honest: a stream is whole only when its side's run read every page from the first request
//! to a verified end in this process, once (no restart after a page, no continuation of a run
//! begun before), with `int` keys, strictly ascending. Anything else makes the result
//! `incomplete`, with why, and the verdict then does not use it. The findings are never the
//! verdict: `evidence::migration` checks them against the stored evidence.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::contract::{Page, PageColumns, RawId};
use crate::digest::Hash;
use crate::idset::{partition_of, IdSet};
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest, PageSource};

/// Pages a side may run ahead of the comparator.
pub const KEY_PAGES_AHEAD: usize = 2;

/// Changed keys whose differing columns are kept (`StreamedKeys::changed_columns`): as many
/// as a verdict names.
pub const CHANGED_COLUMNS_MAX: usize = 100;

/// One record of a stream: its `int` key and its content digest.
#[derive(Debug)]
struct KeyDigest {
    id: u64,
    content: Option<Hash>,
}

/// What a side sends.
enum Msg {
    /// One page's keys, in the page's order, and their records' encoded values when the
    /// source kept them (record `i` is key `i`'s).
    Keys(Vec<KeyDigest>, Option<Box<PageColumns>>),
    /// The stream cannot be whole, and why.
    Broken(String),
    /// The side's run ended verified after its last page.
    End,
}

/// One side's end of a stream. Sends never fail: once the comparator is gone, nothing is sent.
#[derive(Debug)]
pub struct KeySender {
    tx: Option<SyncSender<Msg>>,
    /// A first page was requested (the stream starts at the beginning).
    started: bool,
    /// Pages sent.
    pages: u64,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Keys(v, _) => write!(f, "Keys({})", v.len()),
            Msg::Broken(w) => write!(f, "Broken({w})"),
            Msg::End => write!(f, "End"),
        }
    }
}

impl KeySender {
    fn send(&mut self, m: Msg) {
        if let Some(tx) = &self.tx {
            // Blocks while the comparator is a page or two behind: the faster side waits.
            if tx.send(m).is_err() {
                self.tx = None;
            }
        }
    }

    /// The stream cannot be whole: says why, and sends nothing more.
    pub fn broken(&mut self, why: impl Into<String>) {
        self.send(Msg::Broken(why.into()));
        self.tx = None;
    }

    /// The side's run ended: `verified` when it read its collection to a verified end.
    pub fn finish(mut self, verified: bool) {
        if verified {
            self.send(Msg::End);
        } else {
            self.broken("its scan did not end verified");
        }
    }

    /// Sends a page's keys, taking its records' encoded values (the collector needs none).
    fn page(&mut self, req: &Request, page: &mut Page) {
        if self.tx.is_none() {
            return;
        }
        // Sized once: collecting through `Option` would grow the vector page after page.
        let mut keys = Some(Vec::with_capacity(page.items.len()));
        for item in &mut page.items {
            let id = match item.id {
                RawId::Int(id) => Some(id),
                _ => None,
            };
            match (id, keys.as_mut()) {
                (Some(id), Some(k)) => k.push(KeyDigest {
                    id,
                    content: item.content,
                }),
                _ => {
                    keys = None;
                    break;
                }
            }
        }
        match keys {
            Some(keys) => {
                self.pages = self.pages.saturating_add(1);
                let columns = page.columns.take();
                self.send(Msg::Keys(keys, columns));
            }
            None => self.broken(format!(
                "a key of its page after {req:?} is not a non-negative integer"
            )),
        }
    }
}

/// A source whose pages are streamed, (key, digest) by (key, digest), to a comparator.
pub struct KeyTap<'a, S> {
    inner: &'a mut S,
    out: &'a mut KeySender,
}

impl<'a, S: PageSource> KeyTap<'a, S> {
    /// Taps `inner`'s pages into `out`, asking `inner` to keep its records' encoded values (so
    /// a changed key's differing columns can be named).
    pub fn new(inner: &'a mut S, out: &'a mut KeySender) -> KeyTap<'a, S> {
        inner.digest_columns();
        KeyTap { inner, out }
    }
}

impl<S: PageSource + Send> PageSource for KeyTap<'_, S> {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let first = req.request == Request::First;
        if first && self.out.pages > 0 {
            self.out
                .broken("it restarted under a fresh snapshot after its first pages");
        }
        let mut page = self.inner.fetch(req).await?;
        // A continuation of a run begun before may still be refused (an expired snapshot) and
        // restart from the first key: only a page it answers breaks the stream.
        if first {
            self.out.started = true;
        } else if !self.out.started {
            self.out
                .broken("it continued a run begun before: the keys before its last commit were not streamed");
        }
        self.out.page(&req.request, &mut page);
        Ok(page)
    }

    fn count(&mut self) -> impl std::future::Future<Output = Option<u64>> + Send {
        self.inner.count()
    }
}

/// What a one-pass comparison of two key streams found.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StreamedKeys {
    /// Why the streams were not compared whole (then nothing else here is evidence).
    pub incomplete: Option<String>,
    /// Keys streamed from the `--from` side.
    pub from_keys: u64,
    /// Keys streamed from the `--to` side.
    pub to_keys: u64,
    /// Keys only in `--from`.
    pub missing: u64,
    /// Keys only in `--to`.
    pub extra: u64,
    /// Keys on both sides whose content digests differ.
    pub changed: IdSet,
    /// Keys on both sides of which one side has no content digest.
    pub uncompared: u64,
    /// The partitions holding a missing, extra or changed key, ascending.
    pub differing: Vec<u64>,
    /// The first `CHANGED_COLUMNS_MAX` changed keys, ascending, each with a bit for every
    /// content column (in the configs' order, bit 0 the first) whose encoded values differ:
    /// `None` when the sources kept no values, or none of them differs.
    pub changed_columns: Vec<(u64, Option<u64>)>,
}

/// The content columns whose encoded values differ, as bits (at most 64 columns); `None` when
/// they cannot say (a side that kept no values, other counts, or no column differing).
fn differing_columns(
    a: Option<(&PageColumns, usize)>,
    b: Option<(&PageColumns, usize)>,
) -> Option<u64> {
    let ((a, i), (b, j)) = (a?, b?);
    a.differing(i, b, j)
}

impl StreamedKeys {
    fn differs(&mut self, id: u64) {
        let p = partition_of(id);
        if self.differing.last() != Some(&p) {
            self.differing.push(p);
        }
    }

    /// A key only in `--from`.
    fn missing(&mut self, id: u64) {
        self.missing += 1;
        self.differs(id);
    }

    /// A key only in `--to`.
    fn extra(&mut self, id: u64) {
        self.extra += 1;
        self.differs(id);
    }

    /// A key on both sides (`columns`: which of its columns differ, asked only if it changed).
    fn both(
        &mut self,
        id: u64,
        a: Option<Hash>,
        b: Option<Hash>,
        columns: impl FnOnce() -> Option<u64>,
    ) {
        match (a, b) {
            (Some(x), Some(y)) if x != y => {
                self.changed.insert(id);
                self.differs(id);
                if self.changed_columns.len() < CHANGED_COLUMNS_MAX {
                    self.changed_columns.push((id, columns()));
                }
            }
            (Some(_), None) | (None, Some(_)) => self.uncompared += 1,
            _ => {}
        }
    }
}

/// One side, as the comparator reads it.
struct SideIn {
    rx: Receiver<Msg>,
    name: &'static str,
    page: Vec<KeyDigest>,
    /// The page's records' encoded values, when its source kept them.
    columns: Option<Box<PageColumns>>,
    at: usize,
    last: Option<u64>,
    ended: bool,
    keys: u64,
}

impl SideIn {
    /// The next key and its content digest, waiting for the side's next page; `None` at its
    /// end.
    fn head(&mut self) -> Result<Option<(u64, Option<Hash>)>, String> {
        // Each turn takes one message of a bounded stream.
        loop {
            if let Some(k) = self.page.get(self.at) {
                return Ok(Some((k.id, k.content)));
            }
            if self.ended {
                return Ok(None);
            }
            match self.rx.recv() {
                Ok(Msg::Keys(v, c)) => {
                    self.page = v;
                    self.columns = c;
                    self.at = 0;
                }
                Ok(Msg::End) => self.ended = true,
                Ok(Msg::Broken(why)) => return Err(format!("{}: {why}", self.name)),
                Err(_) => return Err(format!("{}: its scan stopped", self.name)),
            }
        }
    }

    /// The page's encoded values and the head key's record in them.
    fn columns(&self) -> Option<(&PageColumns, usize)> {
        self.columns.as_deref().map(|c| (c, self.at))
    }

    /// Takes the head key, which must lie above every key before it.
    fn advance(&mut self, id: u64) -> Result<(), String> {
        if self.last.is_some_and(|l| l >= id) {
            return Err(format!(
                "{}: its keys did not come in strictly ascending order",
                self.name
            ));
        }
        self.last = Some(id);
        self.at += 1;
        self.keys += 1;
        Ok(())
    }
}

/// The comparator of two key streams: `run` merges them as their pages come.
pub struct KeyComparator {
    from: SideIn,
    to: SideIn,
}

/// A comparison's two senders (`--from`, `--to`) and its comparator.
#[must_use]
pub fn key_streams() -> (KeySender, KeySender, KeyComparator) {
    let side = |name| {
        let (tx, rx) = sync_channel(KEY_PAGES_AHEAD);
        let sender = KeySender {
            tx: Some(tx),
            started: false,
            pages: 0,
        };
        let side = SideIn {
            rx,
            name,
            page: Vec::new(),
            columns: None,
            at: 0,
            last: None,
            ended: false,
            keys: 0,
        };
        (sender, side)
    };
    let (a, from) = side("--from");
    let (b, to) = side("--to");
    (a, b, KeyComparator { from, to })
}

impl KeyComparator {
    /// Merges the two streams to their ends (blocking: run it on a thread of its own).
    #[must_use]
    pub fn run(mut self) -> StreamedKeys {
        let mut found = StreamedKeys::default();
        if let Err(why) = self.merge(&mut found) {
            // The receivers go with `self`: the sides send nothing more.
            return StreamedKeys {
                incomplete: Some(why),
                ..StreamedKeys::default()
            };
        }
        found.from_keys = self.from.keys;
        found.to_keys = self.to.keys;
        found
    }

    fn merge(&mut self, found: &mut StreamedKeys) -> Result<(), String> {
        // Each turn takes at least one key of the two bounded streams.
        loop {
            let a = self.from.head()?;
            let b = self.to.head()?;
            match (a, b) {
                (None, None) => return Ok(()),
                (Some((k, _)), None) => {
                    found.missing(k);
                    self.from.advance(k)?;
                }
                (None, Some((k, _))) => {
                    found.extra(k);
                    self.to.advance(k)?;
                }
                (Some((ka, da)), Some((kb, db))) => {
                    if ka < kb {
                        found.missing(ka);
                        self.from.advance(ka)?;
                    } else if kb < ka {
                        found.extra(kb);
                        self.to.advance(kb)?;
                    } else {
                        let (from, to) = (&self.from, &self.to);
                        found.both(ka, da, db, || {
                            differing_columns(from.columns(), to.columns())
                        });
                        self.from.advance(ka)?;
                        self.to.advance(kb)?;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn keys(ids: &[(u64, u8)]) -> Msg {
        Msg::Keys(
            ids.iter()
                .map(|&(id, d)| KeyDigest {
                    id,
                    content: Some([d; 32]),
                })
                .collect(),
            None,
        )
    }

    /// Keys whose records' values are `values` (two columns each), with content digest `d`.
    fn cols(ids: &[(u64, u8, [i128; 2])]) -> Msg {
        use crate::content::{ContentValue as V, RecordHasher};
        let mut h = RecordHasher::new();
        let mut c = PageColumns::new();
        let mut keys = Vec::new();
        for &(id, d, [x, y]) in ids {
            h.hash(&[V::Int(x), V::Int(y)]).unwrap();
            let (values, starts) = h.values();
            c.push(values, starts);
            keys.push(KeyDigest {
                id,
                content: Some([d; 32]),
            });
        }
        Msg::Keys(keys, Some(Box::new(c)))
    }

    #[test]
    fn a_changed_key_names_its_differing_columns() {
        let (mut a, mut b, cmp) = key_streams();
        let t = std::thread::spawn(move || cmp.run());
        a.send(cols(&[(1, 0, [0, 1]), (2, 0, [0, 1]), (3, 0, [0, 1])]));
        // Key 1: the first column differs; key 2: both; key 3: a row digest differs with
        // equal values (unknown).
        b.send(cols(&[(1, 7, [5, 1]), (2, 8, [5, 6]), (3, 9, [0, 1])]));
        a.finish(true);
        b.finish(true);
        let s = t.join().unwrap_or_default();
        assert_eq!(
            s.changed_columns,
            vec![(1, Some(0b01)), (2, Some(0b11)), (3, None)]
        );
        assert_eq!(differing_columns(None, None), None);
    }

    #[test]
    fn two_streams_merge_into_missing_extra_and_changed_keys() {
        let (mut a, mut b, cmp) = key_streams();
        let t = std::thread::spawn(move || cmp.run());
        a.send(keys(&[(1, 0), (2, 0), (3, 0)]));
        b.send(keys(&[(2, 0), (3, 9)]));
        a.send(keys(&[(70_000, 0)]));
        b.send(keys(&[(4, 0), (70_000, 0), (140_000, 1)]));
        a.finish(true);
        b.finish(true);
        let s = t.join().unwrap_or_default();
        assert_eq!(s.incomplete, None);
        assert_eq!((s.from_keys, s.to_keys), (4, 5));
        assert_eq!((s.missing, s.extra), (1, 2));
        assert_eq!(s.changed.iter().collect::<Vec<_>>(), vec![3]);
        assert_eq!(s.differing, vec![0, 2]);
    }

    #[test]
    fn a_broken_unfinished_or_unordered_stream_is_incomplete() {
        for case in 0..3 {
            let (mut a, mut b, cmp) = key_streams();
            let t = std::thread::spawn(move || cmp.run());
            match case {
                0 => {
                    a.send(keys(&[(1, 0)]));
                    a.broken("restarted");
                }
                1 => {
                    a.send(keys(&[(1, 0)]));
                    a.finish(false);
                }
                _ => {
                    a.send(keys(&[(5, 0), (4, 0)]));
                    a.finish(true);
                }
            }
            b.send(keys(&[(1, 0), (4, 0), (5, 0)]));
            b.finish(true);
            let s = t.join().unwrap_or_default();
            assert!(s.incomplete.is_some(), "case {case}: {s:?}");
            assert!(s.changed.is_empty() && s.missing == 0);
        }
    }
}
