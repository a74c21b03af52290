//! The store's own record formats (docs/FORMAT.md §10), independent of the core's types: a
//! change to the reconciler never changes the file format by accident.
//!
//! The run record is a version byte and the postcard encoding of `RunRecordV1`, whose enums are
//! written as fixed `u8` codes; a run `merge` wrote has version 2, `RunRecordV1` followed by
//! its plan and shards (`MergeV2`), so every other run's record keeps its version-1 bytes. Page records are fixed-width little-endian; bitmaps are
//! roaring's portable format; the raw request a resume needs is encrypted (XChaCha20 under a
//! per-run key kept in the key file beside the store, `keys.rs`), so no raw cursor is ever
//! written to the file in clear, and erasing the key erases every copy of the request.
//! Every decoder checks lengths and bounds before allocating and returns `None` on anything
//! malformed; the caller names the table and the run.

use chacha20::cipher::{KeyIvInit, StreamCipher};
use chacha20::XChaCha20;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use crate::contract::CURSOR_LEN_MAX;
use crate::digest::{self, Hash};
use crate::idset::PARTITION_WIDTH;
use crate::receipt::{MergedFrom, RunId, ShardEntry, ShardFinding, ShardRange};
use crate::reconcile::{Limit, PageLog, Progress, Request, Status, Violation, ViolationKind};

/// Bytes of one encoded page record.
pub(crate) const PAGE_RECORD_LEN: usize = 32 + 4 + 8 + 8;
/// Bytes of a serialized partition bitmap: one container, at most 8 KiB of data plus headers.
pub(crate) const BITMAP_BYTES_MAX: usize = 16 * 1024;
/// Bytes of an encoded run record.
pub(crate) const RUN_RECORD_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Version byte of `RunRecordV1`.
const RUN_RECORD_V1: u8 = 1;
/// Version byte of a merged run's record: `RunRecordV1`, then `MergeV2`.
const RUN_RECORD_V2: u8 = 2;
/// Version byte of an encrypted request.
const REQUEST_V1: u8 = 1;
/// Bytes of a per-run cursor key.
pub(crate) const CURSOR_KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;

/// A run's lifecycle state as stored (`interrupted` is `Running` with no live writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredState {
    Running,
    Finished,
    Superseded,
}

/// What the RUNS table keeps per run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunRecord {
    /// The effective contract (mode and budgets as a resume left them), as JSON.
    pub(crate) contract_json: String,
    pub(crate) state: StoredState,
    pub(crate) started_at_ms: u64,
    pub(crate) finished_at_ms: Option<u64>,
    pub(crate) restarts: u32,
    pub(crate) restarted_from: Option<u64>,
    pub(crate) superseded_by: Option<u64>,
    pub(crate) server_count: Option<u64>,
    /// The `--source` argument the run was started with, so `resume` can default to it.
    pub(crate) source_spec: Option<String>,
    /// The core's progress, with `next` reduced to its kind (the request itself is in
    /// CURSORS): `next` here is `None` or `Some(Request::First)` only.
    pub(crate) progress: Progress,
    /// 0 nothing to request, 1 the first page, 2 a cursor, 3 an after-key.
    pub(crate) next_kind: u8,
    pub(crate) unique_ids: u64,
    pub(crate) partitions: u64,
    pub(crate) merkle_root: Option<Hash>,
    pub(crate) status: Status,
    /// A merged run's plan and shards; `None` for every other run.
    pub(crate) merged: Option<MergeRecord>,
}

/// A merged run's plan and shards as the store keeps them: digests as bytes, runs as numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MergeRecord {
    plan_digest: Hash,
    shards: Vec<ShardRecord>,
}

/// One shard of a merged run's plan, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ShardRecord {
    lo: u64,
    hi: u64,
    /// `FINDINGS` code.
    finding: u8,
    store: Option<String>,
    run: Option<u64>,
    /// 0 none, else 1 + a `STATUSES` code.
    status: u8,
    unique_ids: u64,
    merkle_root: Option<Hash>,
}

#[derive(Serialize, Deserialize)]
struct MergeV2 {
    plan_digest: Hash,
    shards: Vec<ShardRecord>,
}

impl MergeRecord {
    /// The stored form of a merged run's list, checked as a plan's (every run `run-N`, every
    /// digest `sha256:` + 64 hex digits, the ranges a cover of the key space).
    #[cfg(test)]
    pub(crate) fn of(m: &MergedFrom) -> Result<MergeRecord, String> {
        MergeRecord::of_cover(m, None)
    }

    /// [`MergeRecord::of`] for the run of a sub-plan: its ranges a cover of `cover`, the
    /// key range of the outer plan's shard it divides, when given.
    pub(crate) fn of_cover(
        m: &MergedFrom,
        cover: Option<crate::contract::KeyRange>,
    ) -> Result<MergeRecord, String> {
        crate::receipt::check_shape(&m.shards)
            .and(crate::receipt::check_cover_of(&m.shards, cover))
            .map_err(|e| e.to_string())?;
        let digest_of = |what: &str, s: &str| {
            digest::parse_display(s).ok_or_else(|| format!("{what} {s:?} is not a sha256: digest"))
        };
        let mut shards = Vec::with_capacity(m.shards.len());
        for s in &m.shards {
            let run = match &s.run_id {
                Some(r) => Some(
                    r.parse::<RunId>()
                        .map_err(|e| format!("shard {}: {e}", s.index))?
                        .0,
                ),
                None => None,
            };
            let merkle_root = match &s.merkle_root {
                Some(r) => Some(digest_of(&format!("shard {}'s merkle_root", s.index), r)?),
                None => None,
            };
            shards.push(ShardRecord {
                lo: s.key_range.lo,
                hi: s.key_range.hi,
                finding: code_of(&FINDINGS, &s.finding),
                store: s.store.clone(),
                run,
                status: s
                    .coverage_status
                    .map_or(0, |st| code_of(&STATUSES, &st) + 1),
                unique_ids: s.unique_ids_observed,
                merkle_root,
            });
        }
        Ok(MergeRecord {
            plan_digest: digest_of("plan_digest", &m.plan_digest)?,
            shards,
        })
    }

    /// The receipt's form.
    pub(crate) fn to_receipt(&self) -> MergedFrom {
        MergedFrom {
            plan_digest: digest::display(&self.plan_digest),
            shards: self
                .shards
                .iter()
                .enumerate()
                .map(|(k, s)| ShardEntry {
                    // At most SHARDS_MAX entries, checked when decoded.
                    index: u32::try_from(k).unwrap_or(u32::MAX),
                    key_range: ShardRange { lo: s.lo, hi: s.hi },
                    // Codes checked when decoded.
                    finding: from_code(&FINDINGS, s.finding).unwrap_or(ShardFinding::Missing),
                    store: s.store.clone(),
                    run_id: s.run.map(|r| RunId(r).to_string()),
                    coverage_status: s
                        .status
                        .checked_sub(1)
                        .and_then(|c| from_code(&STATUSES, c)),
                    unique_ids_observed: s.unique_ids,
                    merkle_root: s.merkle_root.as_ref().map(digest::display),
                })
                .collect(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct RunRecordV1 {
    contract_json: String,
    state: u8,
    started_at_ms: u64,
    finished_at_ms: Option<u64>,
    restarts: u32,
    restarted_from: Option<u64>,
    superseded_by: Option<u64>,
    server_count: Option<u64>,
    source_spec: Option<String>,
    pages_observed: u32,
    records_observed: u64,
    bytes_observed: u64,
    duplicate_ids: u64,
    chain: Hash,
    next_kind: u8,
    pinned_snapshot: Option<String>,
    serving_snapshot: Option<String>,
    /// Bit 0 terminal observed, 1 finished, 2 high water used, 3 high water unconfirmed,
    /// 4 spliced.
    flags: u8,
    violations: Vec<(u8, u32, String)>,
    violations_dropped: u64,
    violations_dropped_worst: u8,
    limits_hit: Vec<u8>,
    label_names: Vec<String>,
    last_key: Option<u64>,
    id_prefix: Option<String>,
    echoed_total: Option<u64>,
    unique_ids: u64,
    partitions: u64,
    merkle_root: Option<Hash>,
    status: u8,
}

/// The fixed codes of the core's enums on disk (FORMAT.md §10). Adding a kind appends a code.
const KINDS: [ViolationKind; 17] = [
    ViolationKind::RepeatedCursor,
    ViolationKind::DuplicateId,
    ViolationKind::SnapshotChanged,
    ViolationKind::QueryChanged,
    ViolationKind::ContradictoryCompletion,
    ViolationKind::MissingCompletionEvidence,
    ViolationKind::TruncatedPage,
    ViolationKind::CountMismatch,
    ViolationKind::PartitionMismatch,
    ViolationKind::LimitReached,
    ViolationKind::PageFailed,
    ViolationKind::AccessDenied,
    ViolationKind::ExpiredCursor,
    ViolationKind::InvalidPage,
    ViolationKind::ShardMissing,
    ViolationKind::ShardConflict,
    ViolationKind::ShardMismatch,
];
const LIMITS: [Limit; 6] = [
    Limit::MaxPages,
    Limit::MaxRecords,
    Limit::MaxBytes,
    Limit::Deadline,
    Limit::Sample,
    Limit::Interrupted,
];
const STATUSES: [Status; 3] = [Status::Verified, Status::Unknown, Status::Failed];
const FINDINGS: [ShardFinding; 4] = [
    ShardFinding::Merged,
    ShardFinding::Unfinished,
    ShardFinding::Missing,
    ShardFinding::Conflict,
];

fn code_of<T: PartialEq>(table: &[T], v: &T) -> u8 {
    // Every table has fewer than 256 entries and lists every variant.
    table
        .iter()
        .position(|x| x == v)
        .map_or(u8::MAX, |i| i as u8)
}

fn from_code<T: Copy>(table: &[T], c: u8) -> Option<T> {
    table.get(usize::from(c)).copied()
}

pub(crate) fn next_kind(req: Option<&Request>) -> u8 {
    match req {
        None => 0,
        Some(Request::First) => 1,
        Some(Request::Cursor(_)) => 2,
        Some(Request::After(_)) => 3,
    }
}

pub(crate) fn encode_run(r: &RunRecord) -> Vec<u8> {
    let p = &r.progress;
    let flags = u8::from(p.terminal_observed)
        | u8::from(p.finished) << 1
        | u8::from(p.high_water_used) << 2
        | u8::from(p.high_water_unconfirmed) << 3
        | u8::from(p.spliced) << 4;
    let v1 = RunRecordV1 {
        contract_json: r.contract_json.clone(),
        state: match r.state {
            StoredState::Running => 0,
            StoredState::Finished => 1,
            StoredState::Superseded => 2,
        },
        started_at_ms: r.started_at_ms,
        finished_at_ms: r.finished_at_ms,
        restarts: r.restarts,
        restarted_from: r.restarted_from,
        superseded_by: r.superseded_by,
        server_count: r.server_count,
        source_spec: r.source_spec.clone(),
        pages_observed: p.pages_observed,
        records_observed: p.records_observed,
        bytes_observed: p.bytes_observed,
        duplicate_ids: p.duplicate_ids,
        chain: p.chain,
        next_kind: r.next_kind,
        pinned_snapshot: p.pinned_snapshot.clone(),
        serving_snapshot: p.serving_snapshot.clone(),
        flags,
        violations: p
            .violations
            .iter()
            .map(|v| (code_of(&KINDS, &v.kind), v.page, v.detail.clone()))
            .collect(),
        violations_dropped: p.violations_dropped,
        violations_dropped_worst: p
            .violations_dropped_worst
            .map_or(0, |s| code_of(&STATUSES, &s) + 1),
        limits_hit: p.limits_hit.iter().map(|l| code_of(&LIMITS, l)).collect(),
        label_names: p.label_names.clone(),
        last_key: p.last_key,
        id_prefix: p.id_prefix.clone(),
        echoed_total: p.echoed_total,
        unique_ids: r.unique_ids,
        partitions: r.partitions,
        merkle_root: r.merkle_root,
        status: code_of(&STATUSES, &r.status),
    };
    // Serializing plain data into a Vec cannot fail.
    let mut out = match &r.merged {
        None => vec![RUN_RECORD_V1],
        Some(_) => vec![RUN_RECORD_V2],
    };
    out.extend(postcard::to_allocvec(&v1).unwrap_or_default());
    if let Some(m) = &r.merged {
        let v2 = MergeV2 {
            plan_digest: m.plan_digest,
            shards: m.shards.clone(),
        };
        out.extend(postcard::to_allocvec(&v2).unwrap_or_default());
    }
    out
}

pub(crate) fn decode_run(bytes: &[u8]) -> Option<RunRecord> {
    if bytes.len() > RUN_RECORD_BYTES_MAX {
        return None;
    }
    let (&version, body) = bytes.split_first()?;
    let (v, merged): (RunRecordV1, _) = match version {
        RUN_RECORD_V1 => (postcard::from_bytes(body).ok()?, None),
        RUN_RECORD_V2 => {
            let (v, rest): (RunRecordV1, _) = postcard::take_from_bytes(body).ok()?;
            let merge = decode_merge(rest, &v.contract_json)?;
            (v, Some(merge))
        }
        _ => return None,
    };
    let mut violations = Vec::with_capacity(v.violations.len());
    for (kind, page, detail) in v.violations {
        violations.push(Violation {
            kind: from_code(&KINDS, kind)?,
            page,
            detail,
        });
    }
    let limits_hit = v
        .limits_hit
        .iter()
        .map(|c| from_code(&LIMITS, *c))
        .collect::<Option<Vec<_>>>()?;
    let violations_dropped_worst = match v.violations_dropped_worst {
        0 => None,
        c => Some(from_code(&STATUSES, c - 1)?),
    };
    if v.flags >> 5 != 0 || v.next_kind > 3 {
        return None;
    }
    let flag = |bit: u8| v.flags >> bit & 1 == 1;
    let progress = Progress {
        pages_observed: v.pages_observed,
        records_observed: v.records_observed,
        bytes_observed: v.bytes_observed,
        duplicate_ids: v.duplicate_ids,
        chain: v.chain,
        next: (v.next_kind == 1).then_some(Request::First),
        pinned_snapshot: v.pinned_snapshot,
        serving_snapshot: v.serving_snapshot,
        terminal_observed: flag(0),
        finished: flag(1),
        high_water_used: flag(2),
        high_water_unconfirmed: flag(3),
        spliced: flag(4),
        violations,
        violations_dropped: v.violations_dropped,
        violations_dropped_worst,
        limits_hit,
        label_names: v.label_names,
        last_key: v.last_key,
        id_prefix: v.id_prefix,
        echoed_total: v.echoed_total,
    };
    Some(RunRecord {
        contract_json: v.contract_json,
        state: match v.state {
            0 => StoredState::Running,
            1 => StoredState::Finished,
            2 => StoredState::Superseded,
            _ => return None,
        },
        started_at_ms: v.started_at_ms,
        finished_at_ms: v.finished_at_ms,
        restarts: v.restarts,
        restarted_from: v.restarted_from,
        superseded_by: v.superseded_by,
        server_count: v.server_count,
        source_spec: v.source_spec,
        progress,
        next_kind: v.next_kind,
        unique_ids: v.unique_ids,
        partitions: v.partitions,
        merkle_root: v.merkle_root,
        status: from_code(&STATUSES, v.status)?,
        merged,
    })
}

/// A merged run's plan and shards after its version-1 fields: every code known, the ranges a
/// plan's, nothing after them.
fn decode_merge(bytes: &[u8], contract_json: &str) -> Option<MergeRecord> {
    let (m, rest): (MergeV2, _) = postcard::take_from_bytes(bytes).ok()?;
    if !rest.is_empty() || m.shards.len() > crate::contract::SHARDS_MAX as usize {
        return None;
    }
    for s in &m.shards {
        from_code(&FINDINGS, s.finding)?;
        if s.status > 0 {
            from_code(&STATUSES, s.status - 1)?;
        }
    }
    let record = MergeRecord {
        plan_digest: m.plan_digest,
        shards: m.shards,
    };
    // The whole key space, or the key range of the run's contract (the run of a sub-plan,
    // which divides one shard of another plan).
    let list = record.to_receipt().shards;
    let whole = crate::receipt::check_cover_of(&list, None);
    if whole.is_err() {
        let contract = crate::contract::Contract::from_json(contract_json).ok()?;
        let cover = contract.scope.key_range?;
        crate::receipt::check_cover_of(&list, Some(cover)).ok()?;
    }
    Some(record)
}

/// The request to continue from, encrypted: version byte, 24-byte nonce, then XChaCha20 of
/// (kind byte, text) under the run's cursor key.
pub(crate) fn seal_request(req: &Request, key: &[u8; CURSOR_KEY_LEN]) -> Option<Vec<u8>> {
    let (kind, text) = match req {
        Request::First => return None,
        Request::Cursor(c) => (2u8, c.as_str()),
        Request::After(k) => (3u8, k.as_str()),
    };
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).ok()?;
    let mut body = Vec::with_capacity(1 + text.len());
    body.push(kind);
    body.extend_from_slice(text.as_bytes());
    XChaCha20::new(key.into(), (&nonce).into()).apply_keystream(&mut body);
    let mut out = Vec::with_capacity(1 + NONCE_LEN + body.len());
    out.push(REQUEST_V1);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&body);
    Some(out)
}

/// Whether `bytes` have the shape of a sealed request (version, nonce, a kind byte, a text
/// within bounds), without its key.
pub(crate) fn sealed_well_formed(bytes: &[u8]) -> bool {
    bytes.len() <= 1 + NONCE_LEN + 1 + CURSOR_LEN_MAX
        && bytes.len() > 1 + NONCE_LEN
        && bytes.first() == Some(&REQUEST_V1)
}

pub(crate) fn open_request(bytes: &[u8], key: &[u8; CURSOR_KEY_LEN]) -> Option<Request> {
    if bytes.len() > 1 + NONCE_LEN + 1 + CURSOR_LEN_MAX {
        return None;
    }
    let (&version, rest) = bytes.split_first()?;
    if version != REQUEST_V1 || rest.len() < NONCE_LEN + 1 {
        return None;
    }
    let (nonce, body) = rest.split_at(NONCE_LEN);
    let nonce: [u8; NONCE_LEN] = nonce.try_into().ok()?;
    let mut body = body.to_vec();
    XChaCha20::new(key.into(), (&nonce).into()).apply_keystream(&mut body);
    let (&kind, text) = body.split_first()?;
    let text = String::from_utf8(text.to_vec()).ok()?;
    match kind {
        2 if !text.is_empty() => Some(Request::Cursor(text)),
        3 => Some(Request::After(text)),
        _ => None,
    }
}

pub(crate) fn encode_page(p: &PageLog) -> [u8; PAGE_RECORD_LEN] {
    let mut out = [0u8; PAGE_RECORD_LEN];
    out[..32].copy_from_slice(&p.cursor_hash);
    out[32..36].copy_from_slice(&p.n_items.to_le_bytes());
    out[36..44].copy_from_slice(&p.size_bytes.to_le_bytes());
    out[44..52].copy_from_slice(&p.at_ms.to_le_bytes());
    out
}

pub(crate) fn decode_page(page_idx: u32, bytes: &[u8]) -> Option<PageLog> {
    if bytes.len() != PAGE_RECORD_LEN {
        return None;
    }
    Some(PageLog {
        page_idx,
        cursor_hash: bytes[..32].try_into().ok()?,
        n_items: u32::from_le_bytes(bytes[32..36].try_into().ok()?),
        size_bytes: u64::from_le_bytes(bytes[36..44].try_into().ok()?),
        at_ms: u64::from_le_bytes(bytes[44..52].try_into().ok()?),
    })
}

pub(crate) fn encode_bitmap(b: &RoaringBitmap) -> Vec<u8> {
    debug_assert!(b.max().is_none_or(|m| u64::from(m) < PARTITION_WIDTH));
    // Run-optimized before writing: a full partition is then a few bytes instead of 8 KiB
    // (which redb would round up to a 16 KiB page), the main term of the store's size.
    let mut b = b.clone();
    b.optimize();
    let mut out = Vec::with_capacity(b.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = b.serialize_into(&mut out);
    out
}

/// Decodes a partition bitmap with roaring's checked decoder, then checks that it is a
/// non-empty partition (every value below the partition width).
pub(crate) fn decode_bitmap(bytes: &[u8]) -> Option<RoaringBitmap> {
    if bytes.len() > BITMAP_BYTES_MAX {
        return None;
    }
    let b = RoaringBitmap::deserialize_from(bytes).ok()?;
    if b.is_empty() || b.max().is_some_and(|m| u64::from(m) >= PARTITION_WIDTH) {
        return None;
    }
    Some(b)
}

/// An interned string as INTERN_REV keeps it: its string-ID digest, then its bytes, so that a
/// damaged string is detected when read (FORMAT.md "String IDs").
pub(crate) fn encode_interned(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + s.len());
    out.extend_from_slice(&digest::string_id_digest(s));
    out.extend_from_slice(s.as_bytes());
    out
}

/// The string and its digest, when the bytes are UTF-8 and match the digest kept with them.
pub(crate) fn decode_interned(bytes: &[u8]) -> Option<(String, Hash)> {
    if bytes.len() < 32 || bytes.len() > 32 + crate::contract::ID_LEN_MAX {
        return None;
    }
    let (d, s) = bytes.split_at(32);
    let s = std::str::from_utf8(s).ok()?;
    let d: Hash = d.try_into().ok()?;
    (digest::string_id_digest(s) == d).then(|| (s.to_owned(), d))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn sealed_requests_round_trip_and_hide_the_cursor() {
        let key = [7u8; CURSOR_KEY_LEN];
        for req in [
            Request::Cursor("SECRET-CURSOR-canary".into()),
            Request::After("customer-42".into()),
        ] {
            let sealed = seal_request(&req, &key).unwrap();
            assert!(!sealed.windows(6).any(|w| w == b"SECRET" || w == b"custom"));
            assert_eq!(open_request(&sealed, &key), Some(req.clone()));
            // Another key does not give the request back.
            assert_ne!(
                open_request(&sealed, &[8u8; CURSOR_KEY_LEN]),
                Some(req.clone())
            );
        }
        assert_eq!(seal_request(&Request::First, &key), None);
    }

    fn record(merged: Option<MergeRecord>) -> RunRecord {
        let contract = crate::contract::Contract::new("customers");
        RunRecord {
            contract_json: contract.to_value().to_string(),
            state: StoredState::Finished,
            started_at_ms: 1,
            finished_at_ms: Some(2),
            restarts: 0,
            restarted_from: None,
            superseded_by: None,
            server_count: None,
            source_spec: None,
            progress: Progress {
                next: None,
                ..crate::reconcile::Reconciler::new(&contract)
                    .progress()
                    .clone()
            },
            next_kind: 0,
            unique_ids: 0,
            partitions: 0,
            merkle_root: None,
            status: Status::Unknown,
            merged,
        }
    }

    fn merge_record() -> MergeRecord {
        let shard = |lo, hi, finding, run: Option<u64>| ShardRecord {
            lo,
            hi,
            finding,
            store: run.map(|_| "shard.redb".to_owned()),
            run,
            status: u8::from(run.is_some()),
            unique_ids: 3,
            merkle_root: run.map(|_| [9u8; 32]),
        };
        MergeRecord {
            plan_digest: [5u8; 32],
            shards: vec![
                shard(0, PARTITION_WIDTH, 0, Some(4)),
                shard(PARTITION_WIDTH, u64::MAX, 2, None),
            ],
        }
    }

    #[test]
    fn a_merged_runs_record_is_version_2_and_every_other_keeps_version_1() {
        let plain = encode_run(&record(None));
        assert_eq!(plain[0], RUN_RECORD_V1);
        assert_eq!(decode_run(&plain), Some(record(None)));
        let merged = encode_run(&record(Some(merge_record())));
        assert_eq!(merged[0], RUN_RECORD_V2);
        // Version 2 is the version-1 body followed by the plan and shards.
        assert_eq!(merged[1..plain.len()], plain[1..]);
        let back = decode_run(&merged).unwrap();
        assert_eq!(back, record(Some(merge_record())));
        let m = back.merged.unwrap().to_receipt();
        assert_eq!(m.plan_digest, digest::display(&[5u8; 32]));
        assert_eq!(m.shards[0].run_id.as_deref(), Some("run-4"));
        assert_eq!(m.shards[0].coverage_status, Some(Status::Verified));
        assert_eq!(m.shards[1].finding, ShardFinding::Missing);
        assert_eq!(m.shards[1].coverage_status, None);
        assert_eq!(MergeRecord::of(&m), Ok(merge_record()));

        // Damage is refused, never guessed at: a byte after the list, an unknown code, ranges
        // that are not a plan's, a version-1 record cut short of its body.
        let mut trailing = merged.clone();
        trailing.push(0);
        assert_eq!(decode_run(&trailing), None);
        for damage in [
            |m: &mut MergeRecord| m.shards[1].finding = 4,
            |m: &mut MergeRecord| m.shards[0].status = 4,
            |m: &mut MergeRecord| m.shards[1].lo = 1,
            |m: &mut MergeRecord| m.shards[1].hi = u64::MAX - 1,
        ] {
            let mut bad = merge_record();
            damage(&mut bad);
            assert_eq!(decode_run(&encode_run(&record(Some(bad)))), None);
        }
        assert_eq!(decode_run(&merged[..plain.len()]), None);
    }

    #[test]
    fn interned_strings_detect_damage() {
        let mut v = encode_interned("customer-7");
        assert_eq!(decode_interned(&v).unwrap().0, "customer-7");
        let last = v.len() - 1;
        v[last] ^= 1;
        assert_eq!(decode_interned(&v), None);
    }
}
