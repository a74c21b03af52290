//! The re-read of `diff --reread`: an all-or-fail read (`collect`) of a narrowed source that
//! also keeps each record's content digest, so the records of a few partitions can be compared
//! one by one.
//!
//! The read is an ordinary verified collection under the run's own contract (budgets,
//! retries, snapshot policy); only its answer differs: the content digest of every ID, never the
//! rows. Its pages are tapped as they pass; a first-page request (a restart under a fresh
//! snapshot) forgets what was tapped before, so the answer is that of one traversal.
//!
//! `reread_streamed` is the bounded form `--reread` uses: the pages' (key, row digest,
//! encoded values) go through a `KeySender` to the one-pass comparator as they are read,
//! and what stays is the read's IDs (a roaring bitmap) and one 64-byte content accumulator per
//! partition, whatever the number of rows.

use std::collections::BTreeMap;

use crate::content::ContentAcc;
use crate::contract::{Contract, Page, RawId};
use crate::digest::Hash;
use crate::idset::partition_of;
use crate::reconcile::Request;
use crate::source::{AnySource, FetchError, PageRequest, PageSource};

use super::keys::{KeySender, KeyTap};
use super::{collect, IncompleteRead, Inventory};

/// What a re-read found: each `int` ID's content digest (`None` when the source gave none).
#[derive(Debug)]
#[non_exhaustive]
pub struct Reread {
    /// The verified read (its receipt; its IDs).
    pub inventory: Inventory,
    /// Content digest by ID, for every ID of the inventory.
    pub contents: BTreeMap<u64, Option<Hash>>,
}

/// A source whose pages are remembered (ID and content digest) on their way to the collector.
struct Tap<'a, S> {
    inner: &'a mut S,
    seen: BTreeMap<u64, Option<Hash>>,
}

impl<S: PageSource + Send> PageSource for Tap<'_, S> {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if req.request == Request::First {
            self.seen.clear();
        }
        let page = self.inner.fetch(req).await?;
        for item in &page.items {
            if let RawId::Int(id) = item.id {
                self.seen.insert(id, item.content);
            }
        }
        Ok(page)
    }
}

/// Reads `source` whole under `contract` (an `int`-codec contract), keeping every record's
/// content digest. The answer is given only for a verified read.
///
/// ```
/// use scanledger::{reread_contents, Contract, SimConfig, SimSource};
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// let mut s = SimSource::new(SimConfig::default().with_records(10));
/// let r = rt.block_on(reread_contents(&Contract::new("s"), &mut s)).unwrap();
/// assert_eq!(r.contents.len(), 10);
/// ```
///
/// # Errors
/// `IncompleteRead` for every outcome but `verified`.
pub async fn reread_contents<S: PageSource + Send>(
    contract: &Contract,
    source: &mut S,
) -> Result<Reread, IncompleteRead> {
    let mut tap = Tap {
        inner: source,
        seen: BTreeMap::new(),
    };
    let inventory = collect(contract, &mut tap).await?;
    let mut contents = BTreeMap::new();
    for id in inventory.id_set().iter() {
        contents.insert(id, tap.seen.get(&id).copied().flatten());
    }
    Ok(Reread {
        inventory,
        contents,
    })
}

/// Re-reads the key ranges `ranges` of the SQL source `spec` (`postgres:` or `mysql:`) whole
/// under `contract`, keeping every record's content digest, on a runtime of its own: it blocks
/// the calling thread (from async code, call it through `spawn_blocking`).
///
/// # Errors
/// `Err` when the source cannot be opened (`Error::Source`) or the runtime cannot start
/// (`Error::Io`); `Ok(Err(..))` when the read did not verify.
pub fn reread_key_ranges(
    spec: &str,
    ranges: &[(u64, u64)],
    contract: &Contract,
) -> Result<Result<Reread, IncompleteRead>, crate::Error> {
    let mut source = crate::source::AnySource::open_key_ranges(spec, ranges)?;
    let rt = runtime()?;
    let read = rt.block_on(reread_contents(contract, &mut source));
    rt.block_on(source.close());
    Ok(read)
}

/// What a streamed re-read of one side keeps: never its rows.
#[derive(Debug)]
#[non_exhaustive]
pub struct StreamedReread {
    /// The verified read (its receipt; its IDs).
    pub inventory: Inventory,
    /// The content accumulator of each partition read, as a run stores it; `None` when a
    /// record came without a content digest.
    pub accumulators: Option<BTreeMap<u64, ContentAcc>>,
    /// The read began again under a fresh snapshot after its first pages: the keys it had
    /// sent were compared already, so the comparison is not of one traversal.
    pub restarted: bool,
}

/// A source whose pages go to a comparator, their contents folded into per-partition
/// accumulators on the way.
struct StreamTap<'a, S> {
    inner: KeyTap<'a, S>,
    accs: BTreeMap<u64, ContentAcc>,
    without_digest: bool,
    pages: u64,
    restarted: bool,
}

impl<S: PageSource + Send> PageSource for StreamTap<'_, S> {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if req.request == Request::First && self.pages > 0 {
            self.restarted = true;
            self.accs.clear();
            self.without_digest = false;
        }
        let page = self.inner.fetch(req).await?;
        self.pages = self.pages.saturating_add(1);
        for item in &page.items {
            if let RawId::Int(id) = item.id {
                match &item.content {
                    Some(c) => self
                        .accs
                        .entry(partition_of(id))
                        .or_default()
                        .add(&crate::content::entry(&id.to_le_bytes(), c)),
                    None => self.without_digest = true,
                }
            }
        }
        Ok(page)
    }
}

/// Re-reads `source` (a SQL source narrowed to a re-read's key ranges) whole under `contract`,
/// its pages' keys, row digests and encoded values sent through `keys` to a comparator as
/// they are read, on a runtime of its own (it blocks the calling thread). Bounded: what it
/// holds is a page or two, the IDs read and one accumulator per partition. `keys` ends
/// `verified` only for a verified read.
///
/// # Errors
/// `Err` when the runtime cannot start (`Error::Io`); `Ok(Err(..))` when the read did not
/// verify.
pub fn reread_streamed(
    mut source: AnySource,
    contract: &Contract,
    mut keys: KeySender,
) -> Result<Result<StreamedReread, IncompleteRead>, crate::Error> {
    let rt = runtime()?;
    let (read, accs, restarted) = {
        let mut tap = StreamTap {
            inner: KeyTap::new(&mut source, &mut keys),
            accs: BTreeMap::new(),
            without_digest: false,
            pages: 0,
            restarted: false,
        };
        let read = rt.block_on(collect(contract, &mut tap));
        let accs = (!tap.without_digest).then_some(tap.accs);
        (read, accs, tap.restarted)
    };
    rt.block_on(source.close());
    keys.finish(read.is_ok() && !restarted);
    Ok(read.map(|inventory| StreamedReread {
        inventory,
        accumulators: accs,
        restarted,
    }))
}

/// The single-threaded runtime a blocking re-read of one side runs its source on.
fn runtime() -> Result<tokio::runtime::Runtime, crate::Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| crate::Error::Io {
            path: std::path::PathBuf::from("<async runtime>"),
            source,
        })
}
