//! `sim:KEY=VALUE,...`: a deterministic in-process source for demos, benches and simulations.
//!
//! `records=N` IDs (default 1000), from `start=S` (default 1), `ids=dense` (consecutive) or
//! `ids=random` (a fixed permutation of a space five times larger, so 20% dense), pages of the
//! request's size, snapshot `snapshot=NAME` (default `sim-SEED`), `label_every=K` to label
//! every K-th ID `needs_migration`, `delay_ms=N` per page, and injected faults on a 1-based
//! page index: `timeout_at=P` (first attempt times out), `fail_at=P` (every attempt fails),
//! `expire_at=P` (the cursor expires once), `dup_at=P` (the page repeats an earlier ID).
//! `count=false` hides the server-side count. Under a contract's `key_range` only IDs in the
//! range are served (dense: the range's window of positions; random: every position, filtered),
//! and `stray_at=P` makes page P carry one ID just outside the range (a source that ignored it).
//!
//! `faults` (tests) is the whole-system simulation's source: a collection that changes with
//! its snapshot and a seeded schedule of every fault a real source shows.

#[cfg(test)]
pub(crate) mod faults;

use std::collections::HashSet;
use std::time::Duration;

use super::{FetchError, PageRequest, PageSource};
use crate::contract::{Item, KeyRange, Page, RawId};
use crate::reconcile::Request;
use crate::source::SourceError;

/// Records one simulated collection may hold.
pub(crate) const SIM_RECORDS_MAX: u64 = 1 << 36;

/// The parameters of a simulated collection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimConfig {
    /// Records in the collection.
    pub records: u64,
    /// The first ID.
    pub start: u64,
    /// IDs consecutive (false) or a fixed permutation of a five-times larger space (true).
    pub random: bool,
    /// Seed of the permutation and the default snapshot name.
    pub seed: u64,
    /// Snapshot name echoed on every page.
    pub snapshot: Option<String>,
    /// Label every K-th ID `needs_migration`.
    pub label_every: Option<u64>,
    /// Wait per page.
    pub delay_ms: u64,
    /// Page whose first attempt times out.
    pub timeout_at: Option<u32>,
    /// Page whose every attempt fails with a server error.
    pub fail_at: Option<u32>,
    /// Page whose cursor expires once.
    pub expire_at: Option<u32>,
    /// Page that repeats an earlier ID.
    pub dup_at: Option<u32>,
    /// Whether the source offers a server-side count.
    pub count: bool,
    /// Page that carries one ID outside the contract's key range.
    pub stray_at: Option<u32>,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            records: 1000,
            start: 1,
            random: false,
            seed: 1,
            snapshot: None,
            label_every: None,
            delay_ms: 0,
            timeout_at: None,
            fail_at: None,
            expire_at: None,
            dup_at: None,
            count: true,
            stray_at: None,
        }
    }
}

impl SimConfig {
    /// A collection of `records` records, otherwise the defaults.
    #[must_use]
    pub fn with_records(mut self, records: u64) -> SimConfig {
        self.records = records;
        self
    }

    /// The same collection whose page `page` fails on every attempt.
    #[must_use]
    pub fn with_fail_at(mut self, page: u32) -> SimConfig {
        self.fail_at = Some(page);
        self
    }

    /// Parses `KEY=VALUE,...`.
    ///
    /// # Errors
    /// `SourceError::Sim` naming the key.
    pub fn parse(params: &str) -> Result<SimConfig, SourceError> {
        const SIM_KEYS: &[&str] = &[
            "records",
            "start",
            "seed",
            "ids",
            "snapshot",
            "label_every",
            "delay_ms",
            "timeout_at",
            "fail_at",
            "expire_at",
            "dup_at",
            "stray_at",
            "count",
        ];
        let mut c = SimConfig::default();
        for kv in params.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| SourceError::Sim {
                problem: format!("{kv:?} is not KEY=VALUE"),
            })?;
            let num = || -> Result<u64, SourceError> {
                v.parse().map_err(|_| SourceError::Sim {
                    problem: format!("{k}: {v:?} is not a non-negative integer"),
                })
            };
            let page = || -> Result<Option<u32>, SourceError> {
                v.parse().map(Some).map_err(|_| SourceError::Sim {
                    problem: format!("{k}: {v:?} is not a page index"),
                })
            };
            match k {
                "records" => c.records = num()?,
                "start" => c.start = num()?,
                "seed" => c.seed = num()?,
                "ids" => {
                    c.random = match v {
                        "dense" => false,
                        "random" => true,
                        _ => {
                            return Err(SourceError::Sim {
                                problem: format!("ids: {v:?} is not dense or random"),
                            })
                        }
                    }
                }
                "snapshot" => c.snapshot = Some(v.to_owned()),
                "label_every" => c.label_every = Some(num()?.max(1)),
                "delay_ms" => c.delay_ms = num()?.min(60_000),
                "timeout_at" => c.timeout_at = page()?,
                "fail_at" => c.fail_at = page()?,
                "expire_at" => c.expire_at = page()?,
                "dup_at" => c.dup_at = page()?,
                "stray_at" => c.stray_at = page()?,
                "count" => c.count = v == "true",
                _ => {
                    // Worded as every config's unknown key (the strict config layer's words).
                    let meant = crate::json::closest(k, SIM_KEYS)
                        .map(|m| format!("; did you mean {m:?}?"))
                        .unwrap_or_default();
                    return Err(SourceError::Sim {
                        problem: format!("unknown key {k:?}{meant}"),
                    });
                }
            }
        }
        if c.records > SIM_RECORDS_MAX {
            return Err(SourceError::Sim {
                problem: format!("records: more than {SIM_RECORDS_MAX}"),
            });
        }
        // The last ID: start + records - 1 (dense), below start + 5 * records (random); dense
        // IDs may reach 2^64 - 1 itself.
        let past_last = if c.random {
            c.records.saturating_mul(5)
        } else {
            c.records.saturating_sub(1)
        };
        if c.start.checked_add(past_last).is_none() {
            return Err(SourceError::Sim {
                problem: "start + records overflows the ID space".to_owned(),
            });
        }
        Ok(c)
    }
}

/// The simulated source.
#[derive(Debug)]
pub struct SimSource {
    cfg: SimConfig,
    space: u64,
    stride: u64,
    timed_out: HashSet<u32>,
    expired: HashSet<u32>,
    key_range: Option<KeyRange>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl SimSource {
    /// A source over the configured collection.
    #[must_use]
    pub fn new(cfg: SimConfig) -> SimSource {
        let space = cfg.records.saturating_mul(5).max(1);
        // A stride coprime with the space makes i -> i * stride mod space a permutation.
        let mut stride = (space / 8 * 5 + cfg.seed % 997) | 1;
        // Bounded: among any 2 * space consecutive numbers one is coprime (1 at worst).
        for _ in 0..space.min(1 << 20) {
            if gcd(stride, space) == 1 {
                break;
            }
            stride += 1;
        }
        if gcd(stride, space) != 1 {
            stride = 1;
        }
        SimSource {
            cfg,
            space,
            stride,
            timed_out: HashSet::new(),
            expired: HashSet::new(),
            key_range: None,
        }
    }

    /// Serves only the IDs in `range` (a shard's contract).
    #[must_use]
    pub fn with_key_range(mut self, range: Option<KeyRange>) -> SimSource {
        self.key_range = range;
        self
    }

    /// The positions the source walks: all of them, or for dense IDs under a key range the
    /// window of positions whose IDs are in the range.
    fn window(&self) -> (u64, u64) {
        match self.key_range {
            Some(r) if !self.cfg.random => {
                let lo = r.lo.saturating_sub(self.cfg.start).min(self.cfg.records);
                // One past the last position in the range (the range's last ID included).
                let hi = r
                    .last()
                    .checked_sub(self.cfg.start)
                    .map_or(0, |p| p.saturating_add(1))
                    .min(self.cfg.records);
                (lo, hi.max(lo))
            }
            _ => (0, self.cfg.records),
        }
    }

    /// The ID at position `i` of the collection.
    #[must_use]
    pub fn id_at(&self, i: u64) -> u64 {
        if self.cfg.random {
            let x = u128::from(i) * u128::from(self.stride) % u128::from(self.space);
            // x < space, which is a u64.
            self.cfg.start + x as u64
        } else {
            self.cfg.start + i
        }
    }

    /// The smallest and largest ID the collection can hold; `None` when it is empty.
    #[must_use]
    pub fn key_bounds(&self) -> Option<(u64, u64)> {
        if self.cfg.records == 0 {
            return None;
        }
        let n = if self.cfg.random {
            self.space
        } else {
            self.cfg.records
        };
        // `parse` checked that start + n - 1 fits.
        Some((self.cfg.start, self.cfg.start.saturating_add(n - 1)))
    }

    fn snapshot(&self) -> String {
        self.cfg
            .snapshot
            .clone()
            .unwrap_or_else(|| format!("sim-{}", self.cfg.seed))
    }
}

impl PageSource for SimSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let (window_lo, window_hi) = self.window();
        let offset = match &req.request {
            Request::First => window_lo,
            Request::Cursor(c) => c
                .strip_prefix("sim-offset-")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or(FetchError::ServerError)?,
            Request::After(k) if !self.cfg.random => k
                .parse::<u64>()
                .ok()
                .and_then(|k| k.checked_sub(self.cfg.start))
                // A key at the top of the u64 space (from another source, on a resume with
                // --source) has nothing after it: past the end, never a wrap to 0.
                .map_or(0, |p| p.saturating_add(1)),
            Request::After(_) => return Err(FetchError::ServerError),
        };
        let size = u64::from(req.page_size.max(1));
        let page_idx = u32::try_from((offset.saturating_sub(window_lo) / size).saturating_add(1))
            .unwrap_or(u32::MAX);
        if self.cfg.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.cfg.delay_ms)).await;
        }
        if self.cfg.fail_at == Some(page_idx) {
            return Err(FetchError::ServerError);
        }
        if self.cfg.timeout_at == Some(page_idx) && self.timed_out.insert(page_idx) {
            return Err(FetchError::Timeout);
        }
        if self.cfg.expire_at == Some(page_idx)
            && matches!(req.request, Request::Cursor(_))
            && self.expired.insert(page_idx)
        {
            return Err(FetchError::ExpiredCursor);
        }
        let end = offset.saturating_add(size).min(window_hi);
        let range = self.key_range;
        let mut items: Vec<Item> = (offset.min(end)..end)
            .filter(|i| range.is_none_or(|r| r.contains(self.id_at(*i))))
            .map(|i| {
                let id = self.id_at(i);
                let labels = match self.cfg.label_every {
                    Some(k) if i % k == k - 1 => vec!["needs_migration".to_owned()],
                    _ => Vec::new(),
                };
                Item {
                    id: RawId::Int(id),
                    labels,
                    content: None,
                }
            })
            .collect();
        if self.cfg.dup_at == Some(page_idx) && offset > 0 {
            if let Some(first) = items.first_mut() {
                first.id = RawId::Int(self.id_at(offset - 1));
            }
        }
        if let (Some(r), true) = (range, self.cfg.stray_at == Some(page_idx)) {
            let stray = if r.lo > 0 {
                r.lo - 1
            } else {
                r.last().saturating_add(1)
            };
            items.push(Item::int(stray));
        }
        let next = (end < window_hi).then(|| format!("sim-offset-{end}"));
        Ok(Page {
            size_bytes: items.len() as u64 * 12,
            columns: None,
            items,
            next,
            complete: Some(end >= window_hi),
            snapshot: Some(self.snapshot()),
            query: None,
            truncated: false,
            total: None,
        })
    }

    async fn count(&mut self) -> Option<u64> {
        // Under a key range of random IDs the count would need a walk: none is offered.
        match self.key_range {
            None => self.cfg.count.then_some(self.cfg.records),
            Some(_) if self.cfg.random => None,
            Some(_) => {
                let (lo, hi) = self.window();
                self.cfg.count.then_some(hi - lo)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn fetch(source: &mut SimSource, request: Request, page_size: u32) -> Result<Page, FetchError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(source.fetch(&PageRequest {
            request,
            page_size,
            snapshot: None,
            query: serde_json::Value::Null,
        }))
    }

    #[test]
    fn requests_at_the_top_of_the_id_space_do_not_wrap() {
        // A resume may hand the sim a key or a cursor another source produced: `p + 1` and
        // `offset / size + 1` once overflowed there (a panic, or a wrap to the first page).
        let mut s = SimSource::new(SimConfig {
            records: 10,
            start: 0,
            ..SimConfig::default()
        });
        let page = fetch(&mut s, Request::After(u64::MAX.to_string()), 5).unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.complete, Some(true));
        let page = fetch(
            &mut s,
            Request::Cursor(format!("sim-offset-{}", u64::MAX)),
            1,
        )
        .unwrap();
        assert!(page.items.is_empty());
        let page = fetch(&mut s, Request::After("4".to_owned()), 5).unwrap();
        assert_eq!(
            page.items.first().map(|i| i.id.clone()),
            Some(RawId::Int(5))
        );
    }
}
