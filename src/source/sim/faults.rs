//! A seeded, faulty source for the whole-system simulation (`store/simulation.rs`): a small
//! collection whose members are a function of its snapshot version, served in pages whose
//! every fetch may meet a fault drawn from the seed. The model (`truth`) knows the true
//! collection of every version, so the simulation can tell a right verdict from a wrong one.
//!
//! Faults: timeouts, transient server errors, expired cursors, snapshot changes (the
//! collection changes, the old snapshot's cursors expire), duplicated pages (the page repeats
//! the one before), skipped pages (the cursor jumps a page), loops (the cursor points back),
//! truncation (`truncated: true`), revoked access. Every page echoes the collection's total,
//! so a skipped page shows as a count that does not match.

use std::collections::BTreeMap;

use crate::contract::{Item, Page, RawId};
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest, PageSource};

/// The kinds of injected fault, in the order of [`FaultStats`].
pub(crate) const KINDS: [&str; 9] = [
    "timeout",
    "transient",
    "expired_cursor",
    "snapshot_change",
    "duplicate_page",
    "skipped_page",
    "loop",
    "truncated",
    "revoked",
];

/// How many faults of each kind were injected.
pub(crate) type FaultStats = [u64; 9];

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub(crate) struct Mix(pub(crate) u64);

impl Mix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// True with probability `per_mille` / 1000.
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// The true collection at snapshot `version` of a collection of `records` at version 0: each
/// change adds one ID past the end and removes the ID `version`.
pub(crate) fn truth(records: u64, version: u64) -> Vec<u64> {
    (1..=records.saturating_add(version))
        .filter(|id| version == 0 || *id != version)
        .collect()
}

/// The faulty source. Its state (the snapshot version, revoked access) lives outside any
/// store, as a real server's does, so it survives the simulated kills.
#[derive(Debug)]
pub(crate) struct FaultySource {
    rng: Mix,
    pub(crate) records: u64,
    /// The current snapshot version.
    pub(crate) version: u64,
    /// Per mille of fetches that meet each kind of fault.
    rates: [u64; 9],
    /// Access is revoked for good.
    revoked: bool,
    pub(crate) stats: FaultStats,
    /// Pages served, by snapshot version.
    pub(crate) served: BTreeMap<u64, u64>,
    /// The snapshot changes (once) at this fetch, counted from 1, whatever the rates.
    pub(crate) change_at_fetch: Option<u64>,
    fetches: u64,
}

impl FaultySource {
    /// A collection of `records` IDs whose fetches meet faults at `rates` (per mille).
    pub(crate) fn new(seed: u64, records: u64, rates: [u64; 9]) -> FaultySource {
        FaultySource {
            rng: Mix(seed ^ 0x5eed_fa17),
            records,
            version: 0,
            rates,
            revoked: false,
            stats: [0; 9],
            served: BTreeMap::new(),
            change_at_fetch: None,
            fetches: 0,
        }
    }

    fn snapshot_name(version: u64) -> String {
        format!("snap-v{version}")
    }

    fn fault(&mut self, kind: usize) -> bool {
        if self.rng.chance(self.rates[kind]) {
            self.stats[kind] += 1;
            true
        } else {
            false
        }
    }
}

/// Parses `v{version}-o{offset}`.
fn parse_cursor(c: &str) -> Option<(u64, u64)> {
    let (v, o) = c.strip_prefix('v')?.split_once("-o")?;
    Some((v.parse().ok()?, o.parse().ok()?))
}

impl PageSource for FaultySource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if self.revoked {
            return Err(FetchError::Forbidden);
        }
        let (version, offset) = match &req.request {
            Request::First => (self.version, 0),
            Request::Cursor(c) => parse_cursor(c).ok_or(FetchError::ServerError)?,
            Request::After(_) => return Err(FetchError::ServerError),
        };
        if self.fault(8) {
            self.revoked = true;
            return Err(FetchError::Forbidden);
        }
        if self.fault(0) {
            return Err(FetchError::Timeout);
        }
        if self.fault(1) {
            return Err(FetchError::ServerError);
        }
        let continuing = matches!(req.request, Request::Cursor(_));
        if continuing && self.fault(2) {
            return Err(FetchError::ExpiredCursor);
        }
        self.fetches += 1;
        if self.change_at_fetch == Some(self.fetches) {
            self.stats[3] += 1;
            self.version += 1;
        } else if self.fault(3) {
            // The collection changes: the old snapshot (and every cursor into it) is gone.
            self.version += 1;
        }
        if version != self.version {
            return Err(FetchError::ExpiredCursor);
        }
        let ids = truth(self.records, version);
        let size = u64::from(req.page_size.max(1));
        let len = ids.len() as u64;
        let start = offset.min(len);
        let end = start.saturating_add(size).min(len);
        let mut page_ids: Vec<u64> = ids[start as usize..end as usize].to_vec();
        if start > 0 && self.fault(4) {
            // The page repeats the last ID of the page before.
            page_ids.insert(0, ids[start as usize - 1]);
        }
        let mut next_at = end;
        if end < len && self.fault(5) {
            next_at = end.saturating_add(size).min(len);
        }
        if start > 0 && self.fault(6) {
            next_at = start.saturating_sub(size);
        }
        let truncated = self.fault(7);
        *self.served.entry(version).or_insert(0) += 1;
        let done = next_at >= len;
        Ok(Page {
            size_bytes: page_ids.len() as u64 * 8,
            items: page_ids
                .into_iter()
                .map(|id| Item {
                    id: RawId::Int(id),
                    labels: Vec::new(),
                    content: None,
                })
                .collect(),
            next: (!done).then(|| format!("v{version}-o{next_at}")),
            complete: Some(done),
            snapshot: Some(Self::snapshot_name(version)),
            query: None,
            truncated,
            total: Some(len),
        })
    }
}
