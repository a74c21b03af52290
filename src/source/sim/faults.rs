//! A seeded, faulty source for the whole-system simulation (`store/tests/simulation.rs`): a small
//! collection whose members are a function of its snapshot version, served in pages whose
//! every fetch may meet a fault drawn from the seed. The model (`truth`) knows the true
//! collection of every version, so the simulation can tell a right verdict from a wrong one.
//!
//! Faults: timeouts, transient server errors, expired cursors, snapshot changes (the
//! collection changes, the old snapshot's cursors expire), duplicated pages (the page repeats
//! the one before), skipped pages (the cursor jumps a page), loops (the cursor points back),
//! truncation (`truncated: true`), revoked access. Every page echoes the collection's total,
//! so a skipped page shows as a count that does not match.
//!
//! The collection's members are numbered from 1 (`truth`); `Keys` lays them out in the key
//! space: dense from 1, spread over the whole u64 space with 0 and 2^64 - 1 among them, or
//! `signed` keys with -2^63, -1, 0 and 2^63 - 1 among them. Under a key range (a shard) only the
//! members whose ID is in it are served, and the total is theirs.

use std::collections::BTreeMap;

use crate::contract::{IdCodecKind, Item, KeyRange, Page, RawId};
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

/// Where the members of a collection lie in the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    /// Member `n` is the ID `n`.
    Dense,
    /// Members 1 and 2 are the IDs 0 and 2^64 - 1; the others spread over the space.
    Spread,
    /// `signed` keys: members 1 to 4 are -2^63, 2^63 - 1, 0 and -1; the others alternate in sign.
    Signed,
}

impl Keys {
    /// The codec a contract reads these keys with.
    pub(crate) fn codec(self) -> IdCodecKind {
        match self {
            Keys::Signed => IdCodecKind::Signed,
            Keys::Dense | Keys::Spread => IdCodecKind::Int,
        }
    }

    /// The key of member `n` (from 1) as the source serves it.
    pub(crate) fn raw(self, n: u64) -> RawId {
        // An odd multiplier is a bijection of u64: distinct members, distinct IDs.
        const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
        match self {
            Keys::Dense => RawId::Int(n),
            Keys::Spread => RawId::Int(match n {
                1 => 0,
                2 => u64::MAX,
                _ => n.wrapping_mul(SPREAD),
            }),
            Keys::Signed => {
                let key: i64 = match n {
                    1 => i64::MIN,
                    2 => i64::MAX,
                    3 => 0,
                    4 => -1,
                    // Members are few (a simulation's): n * 1_000_003 fits.
                    _ => {
                        let k = i64::try_from(n).unwrap_or(0).saturating_mul(1_000_003);
                        if n.is_multiple_of(2) {
                            k
                        } else {
                            -k
                        }
                    }
                };
                match u64::try_from(key) {
                    Ok(k) => RawId::Int(k),
                    Err(_) => RawId::Neg(key),
                }
            }
        }
    }

    /// The ID of member `n` under `codec()`.
    pub(crate) fn id(self, n: u64) -> u64 {
        match self.raw(n) {
            RawId::Int(k) if self == Keys::Signed => k ^ (1 << 63),
            RawId::Int(k) => k,
            RawId::Neg(k) => crate::codec::signed_id(k),
            _ => 0,
        }
    }
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
    /// The key layout.
    pub(crate) keys: Keys,
    /// Serve only the members whose ID is in this range (a shard).
    pub(crate) range: Option<KeyRange>,
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
            keys: Keys::Dense,
            range: None,
        }
    }

    /// The members served at `version`: the collection's, in the range when there is one.
    fn members(&self, version: u64) -> Vec<u64> {
        let mut all = truth(self.records, version);
        if let Some(r) = self.range {
            all.retain(|n| r.contains(self.keys.id(*n)));
        }
        all
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
        let ids = self.members(version);
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
            columns: None,
            items: page_ids
                .into_iter()
                .map(|n| Item {
                    id: self.keys.raw(n),
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
