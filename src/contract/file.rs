//! The contract file (docs/REFERENCE.md §3): its keys declared as serde types and read through
//! the strict config layer (`json::from_str`), then the bounds serde cannot state checked by
//! hand, each error naming the key (and, from a text, its line and column).
//! Pure: no IO.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    Contract, EndSignal, ExpiredPolicy, IdCodecKind, KeyRange, Limits, Mode, ShardRef,
    SnapshotPolicy, CONTRACT_BYTES_MAX, DEADLINE_SECONDS_MAX, FETCH_ATTEMPTS_MAX,
    ITEMS_PER_PAGE_MAX, PAGES_PER_RUN_MAX, PAGE_TIMEOUT_MS_MAX, PREFIX_LEN_MAX, SHARDS_MAX,
};
use crate::json::{self, ConfigError, Numbers};

/// A contract that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// A key or value the contract format does not allow, or malformed JSON: placed at its
    /// line and column when read from a text, with the key or value meant for a misspelt one.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The contract text is over `CONTRACT_BYTES_MAX`.
    #[error("contract is {len_bytes} bytes, more than the bound of {max_bytes}")]
    TooLarge {
        /// Its size.
        len_bytes: usize,
        /// The bound.
        max_bytes: usize,
    },
}

/// The contract file's keys, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a contract (a JSON object)")]
struct ContractFile {
    source: String,
    tenant: Option<String>,
    query: Option<Value>,
    order: Option<Value>,
    snapshot_id: Option<String>,
    expected_count: Option<u64>,
    expected_partitions: Option<Map<String, Value>>,
    page_size: Option<u64>,
    limits: Option<LimitsFile>,
    end_signal: Option<EndSignal>,
    id_codec: Option<IdCodecKind>,
    id_prefix: Option<String>,
    mode: Option<Value>,
    on_expired_cursor: Option<ExpiredPolicy>,
    on_snapshot_change: Option<SnapshotPolicy>,
    key_range: Option<KeyRangeFile>,
    shard: Option<ShardFile>,
}

/// `limits`: every budget optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_pages: Option<u64>,
    max_records: Option<u64>,
    max_bytes: Option<u64>,
    deadline_seconds: Option<u64>,
    page_timeout_ms: Option<u64>,
    retries: Option<u64>,
}

/// `key_range`: `{"lo": LO, "hi": HI}`, half-open.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRangeFile {
    lo: u64,
    hi: u64,
}

/// `shard`: `{"plan": DIGEST, "index": K, "count": N}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFile {
    plan: String,
    index: u64,
    count: u64,
}

impl Contract {
    /// Parses and validates a contract from its JSON text (the keys: docs/REFERENCE.md §3).
    ///
    /// ```
    /// let c = scanledger::Contract::from_json(r#"{"source": "s", "id_codec": "prefixed"}"#).unwrap();
    /// assert_eq!(c.id_codec, scanledger::IdCodecKind::Prefixed);
    /// let e = scanledger::Contract::from_json("{\"source\": \"s\",\n \"pagesize\": 3}").unwrap_err();
    /// assert_eq!(e.to_string(), "unknown key \"pagesize\"; did you mean \"page_size\"?");
    /// ```
    ///
    /// # Errors
    /// `ContractError` naming the key and the problem, placed at its line and column:
    /// malformed JSON, unknown keys, wrong types, values out of bounds.
    pub fn from_json(text: &str) -> Result<Contract, ContractError> {
        if text.len() > CONTRACT_BYTES_MAX {
            return Err(ContractError::TooLarge {
                len_bytes: text.len(),
                max_bytes: CONTRACT_BYTES_MAX,
            });
        }
        // Strict: a duplicate key or an inexact number (a float, an integer past 64 bits) is
        // refused, so the query that reaches the digest is exactly the one written.
        let file: ContractFile = json::from_str(text, Numbers::Integers)?;
        file.into_contract()
            .map_err(|e| ContractError::Config(e.placed(text)))
    }

    /// Validates a contract already parsed as JSON (strictly: `json::parse`).
    ///
    /// # Errors
    /// As [`Contract::from_json`], without positions.
    pub fn from_value(value: &Value) -> Result<Contract, ContractError> {
        let file: ContractFile = json::from_value(value)?;
        Ok(file.into_contract()?)
    }
}

impl ContractFile {
    fn into_contract(self) -> Result<Contract, ConfigError> {
        if self.source.is_empty() {
            return Err(ConfigError::invalid("source", "must not be empty"));
        }
        let mut c = Contract::new(&self.source);
        c.scope.tenant = self.tenant;
        c.scope.query = self.query.unwrap_or(Value::Null);
        c.scope.order = self.order.unwrap_or(Value::Null);
        c.snapshot_id = self.snapshot_id;
        c.expected_count = self.expected_count;
        if let Some(parts) = self.expected_partitions {
            c.expected_partitions = Some(expected_partitions(parts)?);
        }
        if let Some(n) = self.page_size {
            if n == 0 {
                return Err(ConfigError::invalid("page_size", "must be at least 1"));
            }
            let n = at_most("page_size", n, u64::from(ITEMS_PER_PAGE_MAX))?;
            c.page_size = u32::try_from(n).unwrap_or(ITEMS_PER_PAGE_MAX);
        }
        if let Some(l) = self.limits {
            c.limits = l.into_limits()?;
        }
        c.end_signal = self.end_signal.unwrap_or(c.end_signal);
        c.id_codec = self.id_codec.unwrap_or(c.id_codec);
        if let Some(p) = &self.id_prefix {
            if p.len() > PREFIX_LEN_MAX {
                return Err(ConfigError::invalid("id_prefix", "too long"));
            }
            if p.ends_with(|ch: char| ch.is_ascii_digit()) {
                return Err(ConfigError::invalid(
                    "id_prefix",
                    "must not end with a digit",
                ));
            }
        }
        c.id_prefix = self.id_prefix;
        if let Some(v) = self.mode.filter(|v| !v.is_null()) {
            c.mode = mode(&v)?;
        }
        c.on_expired_cursor = self.on_expired_cursor.unwrap_or(c.on_expired_cursor);
        c.on_snapshot_change = self.on_snapshot_change.unwrap_or(c.on_snapshot_change);
        if let Some(r) = self.key_range {
            c.scope.key_range = Some(KeyRange::new(r.lo, r.hi).ok_or_else(|| {
                ConfigError::invalid(
                    "key_range",
                    format!(
                        "lo ({}) must be below hi ({}): the range is half-open",
                        r.lo, r.hi
                    ),
                )
            })?);
            if c.id_codec == IdCodecKind::String {
                // Interned IDs are given in order of first sight, per store: a range of them
                // names different strings in every shard's store.
                return Err(ConfigError::invalid(
                    "key_range",
                    "the string codec has no key order to slice (its IDs are interned per store); shard by a numeric key",
                ));
            }
        }
        if let Some(s) = self.shard {
            c.scope.shard = Some(s.into_shard()?);
        }
        Ok(c)
    }
}

impl LimitsFile {
    fn into_limits(self) -> Result<Limits, ConfigError> {
        // A zero budget could never let a traversal reach its end: refused, for every budget.
        // (`retries: 0` is allowed: no retry.)
        for (key, v) in [
            ("max_pages", self.max_pages),
            ("max_records", self.max_records),
            ("max_bytes", self.max_bytes),
            ("deadline_seconds", self.deadline_seconds),
            ("page_timeout_ms", self.page_timeout_ms),
        ] {
            if v == Some(0) {
                return Err(ConfigError::invalid(
                    &format!("limits.{key}"),
                    "must be at least 1",
                ));
            }
        }
        let bounded = |key: &str, v: Option<u64>, max: u64| {
            v.map(|n| at_most(&format!("limits.{key}"), n, max))
                .transpose()
        };
        Ok(Limits {
            max_pages: bounded("max_pages", self.max_pages, u64::from(PAGES_PER_RUN_MAX))?
                .map(|n| u32::try_from(n).unwrap_or(PAGES_PER_RUN_MAX)),
            max_records: self.max_records,
            max_bytes: self.max_bytes,
            deadline_seconds: bounded(
                "deadline_seconds",
                self.deadline_seconds,
                DEADLINE_SECONDS_MAX,
            )?,
            page_timeout_ms: bounded("page_timeout_ms", self.page_timeout_ms, PAGE_TIMEOUT_MS_MAX)?,
            retries: bounded("retries", self.retries, u64::from(FETCH_ATTEMPTS_MAX - 1))?
                .map(|n| u32::try_from(n).unwrap_or(0)),
        })
    }
}

impl ShardFile {
    fn into_shard(self) -> Result<ShardRef, ConfigError> {
        // The printed form of a digest (`digest::parse_display` reads it), checked here without
        // importing `digest`, which imports the contract: the core's arrows point one way.
        let hex = self.plan.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || ::hex::decode(hex).is_err() {
            return Err(ConfigError::invalid(
                "shard.plan",
                "must be a digest, sha256: and 64 hex digits",
            ));
        }
        let count = at_most("shard.count", self.count, u64::from(SHARDS_MAX))?;
        let index = at_most("shard.index", self.index, u64::from(SHARDS_MAX))?;
        if count == 0 || index >= count {
            return Err(ConfigError::invalid(
                "shard",
                format!("index {index} is not below count {count}"),
            ));
        }
        // Both are at most SHARDS_MAX, checked above.
        Ok(ShardRef {
            plan: self.plan,
            index: u32::try_from(index).unwrap_or(SHARDS_MAX),
            count: u32::try_from(count).unwrap_or(SHARDS_MAX),
        })
    }
}

/// `n`, or an error naming `key` when it is past `max`.
fn at_most(key: &str, n: u64, max: u64) -> Result<u64, ConfigError> {
    if n > max {
        return Err(ConfigError::invalid(
            key,
            format!("{n} exceeds the bound {max}"),
        ));
    }
    Ok(n)
}

/// `expected_partitions`: decimal partition index to count, sorted by index.
fn expected_partitions(parts: Map<String, Value>) -> Result<Vec<(u64, u64)>, ConfigError> {
    let bad = |problem: String| ConfigError::invalid("expected_partitions", problem);
    let mut out = Vec::with_capacity(parts.len().min(1 << 20));
    for (k, n) in parts {
        let idx: u64 = k
            .parse()
            .map_err(|_| bad(format!("key {k:?} is not a decimal partition index")))?;
        let n = n.as_u64().ok_or_else(|| {
            bad(format!(
                "count of partition {k} is not a non-negative integer"
            ))
        })?;
        if n > crate::idset::PARTITION_WIDTH {
            return Err(bad(format!(
                "count of partition {k} exceeds the partition width"
            )));
        }
        out.push((idx, n));
    }
    out.sort_unstable();
    Ok(out)
}

/// `mode`: `"all"`, `"count"` or `{"sample": N}` with `N >= 1`.
fn mode(v: &Value) -> Result<Mode, ConfigError> {
    match v {
        Value::String(s) if s == "all" => Ok(Mode::All),
        Value::String(s) if s == "count" => Ok(Mode::Count),
        Value::Object(o) if o.len() == 1 && o.contains_key("sample") => {
            let n = o
                .get("sample")
                .and_then(Value::as_u64)
                .filter(|n| *n >= 1)
                .ok_or_else(|| ConfigError::invalid("mode.sample", "must be a positive integer"))?;
            Ok(Mode::Sample(n))
        }
        _ => Err(ConfigError::invalid(
            "mode",
            "must be \"all\", \"count\" or {\"sample\": N}",
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn problem(e: &ContractError) -> String {
        match e {
            ContractError::Config(c) => c.message(),
            other => other.to_string(),
        }
    }

    #[test]
    fn queries_that_would_digest_inexactly_are_refused() {
        // Two queries differing only past 2^64 once read as one f64 and shared a digest.
        for text in [
            r#"{"source": "s", "query": {"id": {"gt": 100000000000000000000}}}"#,
            r#"{"source": "s", "query": {"score": 0.5}}"#,
            r#"{"source": "s", "query": {"n": -0}}"#,
        ] {
            let e = Contract::from_json(text).unwrap_err();
            assert!(
                problem(&e).starts_with("malformed JSON") && problem(&e).contains("exactly"),
                "{text}: {e:?}"
            );
        }
        for key in [
            "max_pages",
            "max_records",
            "max_bytes",
            "deadline_seconds",
            "page_timeout_ms",
        ] {
            let text = format!(r#"{{"source": "s", "limits": {{"{key}": 0}}}}"#);
            let e = Contract::from_json(&text).unwrap_err();
            assert!(
                matches!(&e, ContractError::Config(c) if c.field() == format!("limits.{key}") && c.position() == Some((1, 28))),
                "{key}: {e:?}"
            );
        }
        assert!(Contract::from_json(r#"{"source": "s", "limits": {"retries": 0}}"#).is_ok());
        let e =
            Contract::from_json(r#"{"source": "s", "page_size": 5, "page_size": 9}"#).unwrap_err();
        assert!(problem(&e).contains("duplicate key \"page_size\""), "{e:?}");
        assert!(Contract::from_json(r#"{"source": "s", "query": {"id": {"gt": -5}}}"#).is_ok());
    }

    #[test]
    fn unknown_keys_suggest_the_key_meant() {
        let check = |text: &str, want: Option<&str>| match Contract::from_json(text) {
            Err(ContractError::Config(c)) => {
                assert_eq!(c.did_you_mean(), want, "{text}");
                assert!(c.message().starts_with("unknown key"), "{text}: {c}");
            }
            other => panic!("{text}: {other:?}"),
        };
        check(r#"{"source": "s", "page_sise": 5}"#, Some("page_size"));
        check(r#"{"source": "s", "pagesize": 5}"#, Some("page_size"));
        check(
            r#"{"source": "s", "limits": {"max_page": 5}}"#,
            Some("limits.max_pages"),
        );
        check(r#"{"source": "s", "colour": "red"}"#, None);
        let e = Contract::from_json(r#"{"source": "s", "tenat": "a"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"unknown key "tenat"; did you mean "tenant"?"#
        );
    }

    #[test]
    fn values_are_checked_with_the_words_of_the_contract() {
        for (text, want) in [
            (r#"{"source": ""}"#, "key \"source\": must not be empty"),
            (r#"{"source": 5}"#, "key \"source\": must be a string, not an integer"),
            (r#"{}"#, "missing required key \"source\""),
            (r#"[]"#, "must be a contract (a JSON object), not an array"),
            (r#"{"source": "s", "page_size": 100001}"#, "key \"page_size\": 100001 exceeds the bound 100000"),
            (r#"{"source": "s", "end_signal": "complete"}"#, "key \"end_signal\": must be one of \"cursor_absent\", \"complete_flag\", \"both\", \"total\" or \"empty_page\""),
            (r#"{"source": "s", "end_signal": "bth"}"#, "key \"end_signal\": must be one of \"cursor_absent\", \"complete_flag\", \"both\", \"total\" or \"empty_page\"; did you mean \"both\"?"),
            (r#"{"source": "s", "mode": {"sample": 0}}"#, "key \"mode.sample\": must be a positive integer"),
            (r#"{"source": "s", "key_range": {"lo": 5}}"#, "missing required key \"key_range.hi\""),
            (r#"{"source": "s", "key_range": {"lo": 5, "hi": 5}}"#, "key \"key_range\": lo (5) must be below hi (5): the range is half-open"),
            (r#"{"source": "s", "shard": {"plan": "x", "index": 0, "count": 1}}"#, "key \"shard.plan\": must be a digest, sha256: and 64 hex digits"),
            (r#"{"source": "s", "limits": [1]}"#, "key \"limits\": must be an object, not an array"),
        ] {
            let e = Contract::from_json(text).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
        let c = Contract::from_json(
            r#"{"source": "s", "tenant": null, "mode": {"sample": 3}, "limits": {"retries": 1}, "expected_partitions": {"2": 5, "1": 3}}"#,
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Sample(3));
        assert_eq!(c.expected_partitions, Some(vec![(1, 3), (2, 5)]));
        assert_eq!(Contract::from_value(&c.to_value()).unwrap(), c);
    }
}
