//! The re-read of `diff --reread`: an all-or-fail read (`collect`) of a narrowed source that
//! also keeps each record's content digest, so the records of a few partitions can be compared
//! one by one.
//!
//! The read is an ordinary verified collection under the run's own contract (budgets,
//! retries, snapshot policy); only its answer differs: the content digest of every ID, never the
//! rows. Its pages are tapped as they pass; a first-page request (a restart under a fresh
//! snapshot) forgets what was tapped before, so the answer is that of one traversal.

use std::collections::BTreeMap;

use crate::contract::{Contract, Page, RawId};
use crate::digest::Hash;
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest, PageSource};

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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| crate::Error::Io {
            path: std::path::PathBuf::from("<async runtime>"),
            source,
        })?;
    let read = rt.block_on(reread_contents(contract, &mut source));
    rt.block_on(source.close());
    Ok(read)
}
