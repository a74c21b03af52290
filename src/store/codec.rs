//! Value encodings of the store: fixed-width little-endian records, postcard for the run
//! record, roaring's portable format for bitmaps. Every decoder checks lengths and bounds
//! before allocating and returns `None` on anything malformed; the caller names table and run.

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use crate::collect::PageLog;
use crate::digest::Hash;
use crate::idset::PARTITION_WIDTH;
use crate::reconcile::{Progress, Request};

/// Bytes of one encoded page record.
pub(crate) const PAGE_RECORD_LEN: usize = 32 + 4 + 8 + 8;
/// Bytes of a serialized partition bitmap: one container, at most 8 KiB of data plus headers.
pub(crate) const BITMAP_BYTES_MAX: usize = 16 * 1024;
/// Bytes of an encoded run record.
pub(crate) const RUN_RECORD_BYTES_MAX: usize = 4 * 1024 * 1024;

/// A run's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RunState {
    /// Being written, or interrupted by a crash.
    Running,
    /// Stopped; resumable if its stop was transient.
    Finished,
    /// Replaced by a restart.
    Superseded,
}

impl RunState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Finished => "finished",
            RunState::Superseded => "superseded",
        }
    }
}

/// What the RUNS table keeps per run. `progress.next` is always `None` here: the request to
/// continue from (it may hold a raw cursor) lives only in the CURSORS table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub(crate) contract_json: String,
    pub(crate) state: RunState,
    pub(crate) started_at_ms: u64,
    pub(crate) finished_at_ms: Option<u64>,
    pub(crate) restarts: u32,
    pub(crate) restarted_from: Option<u64>,
    pub(crate) superseded_by: Option<u64>,
    pub(crate) server_count: Option<u64>,
    pub(crate) progress: Progress,
    /// 0 nothing to request, 1 the first page, 2 a cursor, 3 an after-key.
    pub(crate) next_kind: u8,
    pub(crate) unique_ids: u64,
    pub(crate) partitions: u64,
    pub(crate) merkle_root: Option<Hash>,
    pub(crate) status: crate::reconcile::Status,
    /// The `--source` argument the run was started with (a file path or `sim:` parameters,
    /// never a secret), so `resume` can default to it.
    pub(crate) source_spec: Option<String>,
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
    // Serializing plain data into a Vec cannot fail.
    postcard::to_allocvec(r).unwrap_or_default()
}

pub(crate) fn decode_run(bytes: &[u8]) -> Option<RunRecord> {
    if bytes.len() > RUN_RECORD_BYTES_MAX {
        return None;
    }
    postcard::from_bytes(bytes).ok()
}

pub(crate) fn encode_request(r: &Request) -> Vec<u8> {
    postcard::to_allocvec(r).unwrap_or_default()
}

pub(crate) fn decode_request(bytes: &[u8]) -> Option<Request> {
    if bytes.len() > crate::contract::CURSOR_LEN_MAX + 64 {
        return None;
    }
    postcard::from_bytes(bytes).ok()
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
    let mut cursor_hash = [0u8; 32];
    cursor_hash.copy_from_slice(&bytes[..32]);
    Some(PageLog {
        page_idx,
        cursor_hash,
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
