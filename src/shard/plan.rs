//! A plan: one scan cut into shards of the key space, as one JSON file (docs/FORMAT.md §12).
//!
//! Pure: no IO, no clock (the caller gives the creation time and the nonce). A plan holds the
//! base contract (the one every shard shares), the source to scan, the snapshot the shards pin
//! to, and the shards' key ranges: disjoint, contiguous, aligned to partitions (2^16 IDs), from
//! 0 to the end of the ID space (the last range's `hi` is `KeyRange::END`: `u64::MAX`
//! included), so every ID lies in exactly one shard. Its digest is over its own canonical JSON
//! without the `plan_digest` key; each shard's contract names it.
//!
//! Invariants (checked by `Plan::from_json`, `Plan::new`, `split` and again by `merge`): at
//! least one shard, at most `SHARDS_MAX`; `shards[0].lo == 0`, `shards[k].hi ==
//! shards[k + 1].lo`, the last `hi` is `KeyRange::END`; every bound but the last is a multiple
//! of `PARTITION_WIDTH`.

use serde_json::{Map, Value};

use crate::contract::{Contract, KeyRange, ShardRef, SHARDS_MAX};
use crate::digest;
use crate::idset::PARTITION_WIDTH;

/// The `format` of a plan file this build writes and reads.
pub const PLAN_FORMAT: &str = "scanledger-plan/2";
/// The format of the plans of earlier builds, whose last shard ended before `u64::MAX`: refused
/// with a sentence that says so.
const PLAN_FORMAT_1: &str = "scanledger-plan/1";
/// Bytes of one plan file.
pub const PLAN_BYTES_MAX: u64 = 4 * 1024 * 1024;

const PLAN_KEYS: &[&str] = &[
    "format",
    "plan_digest",
    "contract_digest",
    "created_at",
    "nonce",
    "contract",
    "source",
    "snapshot_id",
    "snapshot_held",
    "split",
    "shards",
];

/// How the shards' bounds were chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// `histogram` (quantiles of PostgreSQL's `pg_stats` histogram of the key),
    /// `key_sample` (quantiles of a strided sample of a MySQL/MariaDB table's keys),
    /// `min_max` (equal widths between the source's smallest and largest key), `given`
    /// (`--key-space`) or `equal_width` (no statistics: the whole ID space).
    pub by: String,
    /// The first key of the span divided.
    pub lo: u64,
    /// The last key of the span divided (inclusive).
    pub last: u64,
}

/// A plan of shards.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The contract every shard shares (no key range, no shard reference).
    pub contract: Contract,
    /// The `--source` the shards scan, as given to `plan`.
    pub source: String,
    /// The snapshot every shard pins to; `None`: each shard pins its own, and the merged run
    /// concludes at most about the live collection.
    pub snapshot_id: Option<String>,
    /// A coordinator holds the snapshot open (`plan --hold-snapshot`).
    pub snapshot_held: bool,
    /// How the bounds were chosen.
    pub split: Split,
    /// The shards' key ranges, in order.
    pub shards: Vec<KeyRange>,
    /// When the plan was made, RFC 3339.
    pub created_at: String,
    /// 16 random bytes as hex: two plans made alike are still two plans.
    pub nonce: String,
}

/// A plan file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Not strict JSON.
    #[error("not a plan: {0}")]
    Json(#[from] crate::json::JsonError),
    /// A key is missing, unknown or of the wrong shape.
    #[error("not a plan: key {key:?}: {problem}")]
    Invalid {
        /// The key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// The base contract is not a valid contract.
    #[error("the plan's contract: {0}")]
    Contract(#[from] crate::error::ContractError),
    /// The recorded digest is not the plan's own: the file was edited.
    #[error("the plan's digest {recorded} is not its content's ({computed}): the file was edited after it was made")]
    Digest {
        /// What the file says.
        recorded: String,
        /// What its content gives.
        computed: String,
    },
    /// The shards do not cover the key space as a plan must.
    #[error("the plan's shards: {0}")]
    Shards(ShardsError),
    /// The contract cannot be planned ([`check_plannable`]).
    #[error(transparent)]
    Unplannable(#[from] Unplannable),
}

/// A contract `plan` cannot shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unplannable {
    /// It has a key range or a shard reference already: a plan makes them.
    #[error("a contract to plan has no key_range and no shard (plan makes them)")]
    Scoped,
    /// The string codec's IDs are interned per store: no key order to cut.
    #[error("the string codec cannot be sharded: its IDs are interned per store, so they have no key order to cut")]
    StringCodec,
}

impl Unplannable {
    /// The contract key the refusal is about.
    #[must_use]
    pub fn field(self) -> &'static str {
        match self {
            Unplannable::Scoped => "key_range",
            Unplannable::StringCodec => "id_codec",
        }
    }
}

/// Whether `plan` can shard `contract`: none of the scope a plan makes (a key range, a shard
/// reference), and a codec with a key order.
///
/// # Errors
/// [`Unplannable`] saying which.
pub fn check_plannable(contract: &Contract) -> Result<(), Unplannable> {
    if contract.scope.key_range.is_some() || contract.scope.shard.is_some() {
        return Err(Unplannable::Scoped);
    }
    if contract.id_codec == crate::contract::IdCodecKind::String {
        return Err(Unplannable::StringCodec);
    }
    Ok(())
}

fn bad(key: &str, problem: impl Into<String>) -> PlanError {
    PlanError::Invalid {
        key: key.to_owned(),
        problem: problem.into(),
    }
}

/// Shards that cannot cut the key space, or that do not cover it as a plan's must: every ID in
/// exactly one shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardsError {
    /// A number of shards out of range, asked for (`--shards`).
    #[error("--shards: from 1 to {SHARDS_MAX}")]
    Count,
    /// `lo > last`.
    #[error("the key space {lo}..{last} is empty")]
    EmptySpace {
        /// The first ID.
        lo: u64,
        /// The last ID.
        last: u64,
    },
    /// More shards than the key space has partitions for.
    #[error("too many shards for the key space")]
    TooMany,
    /// A bound past the ID space.
    #[error("the key space overflows")]
    Overflow,
    /// A list of shards out of range.
    #[error("from 1 to {SHARDS_MAX} shards")]
    Listed,
    /// A sub-plan's shards that do not cover the key range of the shard it divides.
    #[error("{0}")]
    Within(String),
    /// The IDs from 0 are in no shard.
    #[error("the IDs 0 to {to} are in no shard: the first shard must begin at 0")]
    Start {
        /// The last ID in none.
        to: u64,
    },
    /// The IDs up to the end are in no shard.
    #[error(
        "the IDs {from} to {} are in no shard: the last shard must run to the end ({})",
        u64::MAX,
        KeyRange::END
    )]
    End {
        /// The first ID in none.
        from: u64,
    },
    /// IDs between two shards are in neither.
    #[error("the IDs {from} to {to} are in no shard: shard {k} ends before them, shard {} begins after", k + 1)]
    Gap {
        /// The shard before the gap.
        k: usize,
        /// The first ID in none.
        from: u64,
        /// The last ID in none.
        to: u64,
    },
    /// IDs in two shards.
    #[error("the IDs {from} to {to} are in shards {k} and {} both", k + 1)]
    Overlap {
        /// The first of the two shards.
        k: usize,
        /// The first ID in both.
        from: u64,
        /// The last ID in both.
        to: u64,
    },
    /// A shard that does not begin at a partition boundary.
    #[error(
        "shard {k} begins at {lo}, not at a partition boundary (a multiple of {PARTITION_WIDTH})"
    )]
    Unaligned {
        /// The shard.
        k: usize,
        /// Where it begins.
        lo: u64,
    },
}

/// Cuts the key space into `n` shards whose bounds divide `[lo, last]` into equal widths,
/// each bound rounded down to a partition and at least one partition above the one before;
/// near the top of the space, where too few partitions lie above, the bounds move down
/// instead (the shards below the data are then empty). The last shard runs to the end.
///
/// ```
/// use scanledger::shard::split;
/// let s = split(0, 1_000_000, 4).unwrap();
/// assert_eq!(s.len(), 4);
/// assert_eq!(s[0].lo, 0);
/// assert_eq!(s[3].hi, u64::MAX);
/// assert!(s.windows(2).all(|w| w[0].hi == w[1].lo && w[1].lo % 65536 == 0));
/// // Keys in the last partition only: the shards below them are empty.
/// let top = split(u64::MAX - 10, u64::MAX, 3).unwrap();
/// assert!(top[2].contains(u64::MAX - 10) && top[2].contains(u64::MAX));
/// ```
///
/// # Errors
/// [`ShardsError::Count`] when `n` is 0 or above `SHARDS_MAX`, `EmptySpace` when `lo > last`.
pub fn split(lo: u64, last: u64, n: u32) -> Result<Vec<KeyRange>, ShardsError> {
    if n == 0 || n > SHARDS_MAX {
        return Err(ShardsError::Count);
    }
    if lo > last {
        return Err(ShardsError::EmptySpace { lo, last });
    }
    // In u128: no bound computed here can overflow (n <= SHARDS_MAX, far below 2^48), and
    // each cut lies within [lo, last].
    let span = u128::from(last) - u128::from(lo) + 1;
    let cuts: Vec<u64> = (1..u128::from(n))
        .map(|i| u64::try_from(u128::from(lo) + span * i / u128::from(n)).unwrap_or(last))
        .collect();
    split_at(&cuts)
}

/// Cuts the key space into `cuts.len() + 1` shards at `cuts` (ascending IDs, for example the
/// quantiles of the key's distribution a source's statistics give), under the same rules as
/// [`split`]: each cut rounded down to a partition and at least one partition above the one
/// before, moved down near the top of the space; the last shard runs to the end. Where the
/// cuts come from changes only how even the shards are, never which IDs they cover.
///
/// ```
/// use scanledger::shard::split_at;
/// let s = split_at(&[70_000, 70_001, 1 << 40]).unwrap();
/// assert_eq!(s.len(), 4);
/// assert_eq!((s[1].lo, s[2].lo, s[3].lo), (65_536, 131_072, 1 << 40));
/// ```
///
/// # Errors
/// [`ShardsError::Count`] when there are `SHARDS_MAX` cuts or more, `TooMany` when they are
/// too many for the key space.
pub fn split_at(cuts: &[u64]) -> Result<Vec<KeyRange>, ShardsError> {
    if cuts.len() >= SHARDS_MAX as usize {
        return Err(ShardsError::Count);
    }
    let width = u128::from(PARTITION_WIDTH);
    let mut bounds: Vec<u128> = Vec::with_capacity(cuts.len());
    let mut prev = 0u128;
    for cut in cuts {
        let candidate = u128::from(*cut) / width * width;
        prev = candidate.max(prev + width);
        bounds.push(prev);
    }
    // No bound above the last partition's first ID, each one partition below the next.
    let mut ceiling = u128::from(u64::MAX) / width * width;
    for b in bounds.iter_mut().rev() {
        *b = (*b).min(ceiling);
        ceiling = b.saturating_sub(width);
    }
    if bounds.first().is_some_and(|b| *b == 0) {
        return Err(ShardsError::TooMany);
    }
    let mut edges = Vec::with_capacity(bounds.len() + 2);
    edges.push(0u64);
    for b in bounds {
        edges.push(u64::try_from(b).map_err(|_| ShardsError::Overflow)?);
    }
    edges.push(KeyRange::END);
    Ok(edges
        .windows(2)
        .filter_map(|w| KeyRange::new(w[0], w[1]))
        .collect())
}

/// Checks the shards' invariants (module docs): every ID of the key space in exactly one
/// shard.
///
/// # Errors
/// [`ShardsError`] naming the IDs in no shard, or in two.
pub(crate) fn check_shards(shards: &[KeyRange]) -> Result<(), ShardsError> {
    let (Some(first), Some(last)) = (shards.first(), shards.last()) else {
        return Err(ShardsError::Listed);
    };
    if shards.len() > SHARDS_MAX as usize {
        return Err(ShardsError::Listed);
    }
    if first.lo != 0 {
        return Err(ShardsError::Start { to: first.lo - 1 });
    }
    if !last.to_end() {
        return Err(ShardsError::End { from: last.hi });
    }
    for (k, w) in shards.windows(2).enumerate() {
        if w[0].hi < w[1].lo {
            let (from, to) = (w[0].hi, w[1].lo - 1);
            return Err(ShardsError::Gap { k, from, to });
        }
        if w[0].hi > w[1].lo {
            let (from, to) = (w[1].lo, w[0].last().min(w[1].last()));
            return Err(ShardsError::Overlap { k, from, to });
        }
        if w[1].lo % PARTITION_WIDTH != 0 {
            return Err(ShardsError::Unaligned {
                k: k + 1,
                lo: w[1].lo,
            });
        }
    }
    Ok(())
}

impl Plan {
    /// Whether the plan's snapshot was synchronized by a MySQL/MariaDB read lock: each shard
    /// held its own snapshot of one state and none outlives its shard, so a shard cannot
    /// rejoin it after a merge that is not verified (a new plan is needed).
    #[must_use]
    pub fn synchronized(&self) -> bool {
        self.snapshot_id
            .as_deref()
            .is_some_and(|s| s.starts_with(crate::source::SYNC_SNAPSHOT_PREFIX))
    }

    /// The digest of the base contract, which every shard's contract shares.
    #[must_use]
    pub fn contract_digest(&self) -> String {
        digest::contract_digest(&self.contract)
    }

    /// The plan's JSON without `plan_digest`: what the digest is over.
    fn body(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("format".into(), Value::from(self.format()));
        m.insert(
            "contract_digest".into(),
            Value::from(self.contract_digest()),
        );
        m.insert("created_at".into(), Value::from(self.created_at.clone()));
        m.insert("nonce".into(), Value::from(self.nonce.clone()));
        m.insert("contract".into(), self.contract_value());
        m.insert("source".into(), Value::from(self.source.clone()));
        m.insert(
            "snapshot_id".into(),
            self.snapshot_id.clone().map_or(Value::Null, Value::from),
        );
        m.insert("snapshot_held".into(), Value::from(self.snapshot_held));
        m.insert(
            "split".into(),
            serde_json::json!({"by": self.split.by, "lo": self.split.lo, "last": self.split.last}),
        );
        m.insert(
            "shards".into(),
            Value::Array(
                self.shards
                    .iter()
                    .enumerate()
                    .map(|(k, r)| {
                        serde_json::json!({
                            "index": k,
                            "key_range": r.to_value(),
                            "contract": format!("shard-{k}.json"),
                        })
                    })
                    .collect(),
            ),
        );
        m
    }

    /// `sha256:` + hex SHA-256 of the plan's canonical JSON without `plan_digest`.
    #[must_use]
    pub fn digest(&self) -> String {
        digest::display(&digest::sha256(
            digest::canonical_json(&Value::Object(self.body())).as_bytes(),
        ))
    }

    /// The plan file's JSON (pretty), `plan_digest` included.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut m = self.body();
        m.insert("plan_digest".into(), Value::from(self.digest()));
        // A `Value` always serializes (its keys are strings), so this never yields "".
        serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default()
    }

    /// The contract of shard `index`: the base contract with the shard's key range and a
    /// reference to this plan, expecting only what belongs to its range: no whole-collection
    /// `expected_count` (the merge checks it on the union), and of `expected_partitions` only
    /// the partitions in its range (every partition lies in exactly one shard, the bounds being
    /// partition-aligned); `None` past the last shard.
    #[must_use]
    pub fn shard_contract(&self, index: u32) -> Option<Contract> {
        let range = *self.shards.get(index as usize)?;
        let mut c = self.contract.base();
        c.expected_count = None;
        if let Some(parts) = &mut c.expected_partitions {
            parts.retain(|(p, _)| {
                p.checked_mul(PARTITION_WIDTH)
                    .is_some_and(|first| range.contains(first))
            });
        }
        c.scope.key_range = Some(range);
        c.scope.shard = Some(ShardRef {
            plan: self.digest(),
            index,
            // Bounded by SHARDS_MAX on every path that makes a plan.
            count: u32::try_from(self.shards.len()).unwrap_or(SHARDS_MAX),
        });
        Some(c)
    }

    /// Reads a plan file strictly: every key known and present, the digest its content's, the
    /// shards a cover of the key space.
    ///
    /// # Errors
    /// `PlanError` naming what is wrong.
    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        let v = crate::json::parse(text, crate::json::Numbers::Integers)?;
        let obj = v
            .as_object()
            .ok_or_else(|| bad("", "a plan is a JSON object"))?;
        for k in obj.keys() {
            if !PLAN_KEYS.contains(&k.as_str()) {
                return Err(bad(k, "not a key of a plan"));
            }
        }
        for k in PLAN_KEYS {
            if !obj.contains_key(*k) {
                return Err(bad(k, "missing"));
            }
        }
        let text_of = |key: &str| -> Result<String, PlanError> {
            obj.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| bad(key, "must be a string"))
        };
        let format = text_of("format")?;
        if format == PLAN_FORMAT_1 {
            return Err(bad(
                "format",
                format!("{PLAN_FORMAT_1:?} is a plan of an earlier build, whose last shard left out the ID 2^64-1; make the plan again with this build ({PLAN_FORMAT:?}), and scan its shards afresh"),
            ));
        }
        let contract = Contract::from_value(obj.get("contract").unwrap_or(&Value::Null))?;
        super::within::check_format(&format, &contract)
            .map_err(|(key, problem)| bad(key, problem))?;
        let snapshot_id = match obj.get("snapshot_id") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) => None,
            _ => return Err(bad("snapshot_id", "must be a string or null")),
        };
        let snapshot_held = obj
            .get("snapshot_held")
            .and_then(Value::as_bool)
            .ok_or_else(|| bad("snapshot_held", "must be true or false"))?;
        let split_v = obj
            .get("split")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("split", "must be an object"))?;
        let split = Split {
            by: split_v
                .get("by")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("split.by", "must be a string"))?
                .to_owned(),
            lo: split_v
                .get("lo")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("split.lo", "must be a non-negative integer"))?,
            last: split_v
                .get("last")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("split.last", "must be a non-negative integer"))?,
        };
        let shards_v = obj
            .get("shards")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("shards", "must be an array"))?;
        if shards_v.len() > SHARDS_MAX as usize {
            return Err(bad("shards", format!("more than {SHARDS_MAX}")));
        }
        let mut shards = Vec::with_capacity(shards_v.len());
        for (k, s) in shards_v.iter().enumerate() {
            let key = format!("shards[{k}]");
            if s.get("index").and_then(Value::as_u64) != Some(k as u64) {
                return Err(bad(&key, format!("index must be {k}")));
            }
            let r = s
                .get("key_range")
                .ok_or_else(|| bad(&key, "key_range is missing"))?;
            let (Some(lo), Some(hi)) = (
                r.get("lo").and_then(Value::as_u64),
                r.get("hi").and_then(Value::as_u64),
            ) else {
                return Err(bad(&key, "key_range must be {\"lo\": LO, \"hi\": HI}"));
            };
            shards.push(KeyRange::new(lo, hi).ok_or_else(|| bad(&key, "lo must be below hi"))?);
        }
        let plan = Plan {
            contract,
            source: text_of("source")?,
            snapshot_id,
            snapshot_held,
            split,
            shards,
            created_at: text_of("created_at")?,
            nonce: text_of("nonce")?,
        };
        plan.check_cover().map_err(PlanError::Shards)?;
        let recorded = text_of("plan_digest")?;
        let computed = plan.digest();
        if recorded != computed {
            return Err(PlanError::Digest { recorded, computed });
        }
        let recorded_contract = text_of("contract_digest")?;
        if recorded_contract != plan.contract_digest() {
            return Err(bad(
                "contract_digest",
                "is not the digest of the plan's contract",
            ));
        }
        Ok(plan)
    }

    /// A plan of `shards` over `contract` (its key range and shard reference dropped), with
    /// the snapshot pinned into the base contract when there is one.
    ///
    /// # Errors
    /// [`PlanError::Unplannable`] for a contract [`check_plannable`] refuses,
    /// [`PlanError::Shards`] when the shards break the invariants.
    #[allow(clippy::too_many_arguments)] // Each is one field of the plan file.
    pub fn new(
        contract: &Contract,
        source: &str,
        snapshot_id: Option<String>,
        snapshot_held: bool,
        split: Split,
        shards: Vec<KeyRange>,
        created_at: String,
        nonce: String,
    ) -> Result<Plan, PlanError> {
        check_plannable(contract)?;
        check_shards(&shards).map_err(PlanError::Shards)?;
        let mut base = contract.base();
        if snapshot_id.is_some() {
            base.snapshot_id.clone_from(&snapshot_id);
        }
        Ok(Plan {
            contract: base,
            source: source.to_owned(),
            snapshot_id,
            snapshot_held,
            split,
            shards,
            created_at,
            nonce,
        })
    }
}
