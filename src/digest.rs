//! Digests: the query digest, cursor hashes and the cursor chain, the Merkle tree over partitions.
//!
//! Pure: no IO, no clock. Every algorithm here is specified in `docs/FORMAT.md` so that another
//! program can recompute it; `tests/vectors/` pins the outputs and `contrib/verify_receipt.py`
//! recomputes the Merkle root independently.

use roaring::RoaringBitmap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::contract::Scope;
use crate::idset::IdSet;

/// A SHA-256 output.
pub type Hash = [u8; 32];

/// Domain tag of the cursor chain's first link.
pub const CHAIN_DOMAIN: &[u8] = b"scanledger:cursor-chain:v1";
/// Array-form bound of a leaf body: up to this many IDs a partition is a sorted u16 list.
pub const LEAF_ARRAY_MAX: u64 = 4096;
/// Depth bound of the Merkle fold: partitions are indexed by u48, so 49 levels suffice.
const MERKLE_DEPTH_MAX: usize = 64;

/// SHA-256 of bytes.
#[must_use]
pub fn sha256(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Lower-case hex of bytes.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// `sha256:` + hex, the printed form of every digest.
#[must_use]
pub fn display(h: &Hash) -> String {
    format!("sha256:{}", hex(h))
}

/// Parses the printed form back; `None` when it is not `sha256:` + 64 hex digits.
#[must_use]
pub fn parse_display(s: &str) -> Option<Hash> {
    let hexpart = s.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    ::hex::decode_to_slice(hexpart, &mut out).ok()?;
    Some(out)
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no insignificant white space,
/// strings escaped as `serde_json` escapes them (`"`, `\`, control characters; nothing else).
#[must_use]
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    // Recursion depth is bounded by serde_json's own nesting limit (128) on parse.
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(child) = m.get(*k) {
                    write_canonical(child, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, child) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(child, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The scope as the canonical JSON object that `query_digest` hashes:
/// `{"order":…,"query":…,"source":…,"tenant":…}`, absent values as `null`; a shard's scope
/// adds `"key_range":{"hi":…,"lo":…}` and `"shard":{"count":…,"index":…,"plan":…}` (only
/// when present, so an unsharded scope digests as it always did).
#[must_use]
pub fn scope_json(scope: &Scope) -> String {
    let mut v = serde_json::json!({
        "source": scope.source,
        "tenant": scope.tenant,
        "query": scope.query,
        "order": scope.order,
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(r) = &scope.key_range {
            obj.insert("key_range".to_owned(), r.to_value());
        }
        if let Some(s) = &scope.shard {
            obj.insert("shard".to_owned(), s.to_value());
        }
    }
    canonical_json(&v)
}

/// The digest of a contract without its shard (`Contract::base`): `sha256:` + hex SHA-256 of
/// the canonical JSON of the contract file it would be. Every shard of a plan has the same
/// one; the plan records it and `merge` checks it.
#[must_use]
pub fn contract_digest(contract: &crate::contract::Contract) -> String {
    display(&sha256(
        canonical_json(&contract.base().to_value()).as_bytes(),
    ))
}

/// `sha256:` + hex SHA-256 of the scope's canonical JSON.
///
/// ```
/// let c = scanledger::Contract::new("customers");
/// let d = scanledger::digest::query_digest(&c.scope);
/// assert!(d.starts_with("sha256:"));
/// assert_eq!(d.len(), 7 + 64);
/// ```
#[must_use]
pub fn query_digest(scope: &Scope) -> String {
    display(&sha256(scope_json(scope).as_bytes()))
}

/// The hash of a cursor as page records keep it: `H(0x01 || cursor)`, or `H(0x00)` for none.
#[must_use]
pub fn cursor_hash(cursor: Option<&str>) -> Hash {
    let mut h = Sha256::new();
    match cursor {
        None => h.update([0u8]),
        Some(c) => {
            h.update([1u8]);
            h.update(c.as_bytes());
        }
    }
    h.finalize().into()
}

/// A short, non-reversible name for a cursor, safe for error messages and logs.
#[must_use]
pub fn cursor_fingerprint(cursor: Option<&str>) -> String {
    match cursor {
        None => "the first page (no cursor)".to_owned(),
        Some(c) => format!("cursor #{}", &hex(&cursor_hash(Some(c)))[..12]),
    }
}

fn put_str(h: &mut Sha256, s: &str) {
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    h.update(len.to_le_bytes());
    h.update(s.as_bytes());
}

/// The first link of the cursor chain:
/// `H(domain || u32le len || query_digest || u8 has_snapshot || u32le len || snapshot_id)`.
#[must_use]
pub fn chain_start(query_digest: &str, snapshot_id: Option<&str>) -> Hash {
    let mut h = Sha256::new();
    h.update(CHAIN_DOMAIN);
    put_str(&mut h, query_digest);
    match snapshot_id {
        None => h.update([0u8]),
        Some(s) => {
            h.update([1u8]);
            put_str(&mut h, s);
        }
    }
    h.finalize().into()
}

/// The next link: `H(prev || cursor_hash)`.
#[must_use]
pub fn chain_next(prev: &Hash, cursor_hash: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(cursor_hash);
    h.finalize().into()
}

/// The cursor chain over a run's page log: `c0 = chain_start(query_digest, snapshot_id)`,
/// `ci = chain_next(c(i-1), cursor_hash_i)`. What `verify`, the crash tests and a reviewer's
/// own script recompute.
///
/// ```
/// use scanledger::digest;
/// let hashes = [digest::cursor_hash(Some("c2")), digest::cursor_hash(None)];
/// let c = digest::chain_of("sha256:00", Some("snap"), &hashes);
/// let mut by_hand = digest::chain_start("sha256:00", Some("snap"));
/// for h in &hashes {
///     by_hand = digest::chain_next(&by_hand, h);
/// }
/// assert_eq!(c, by_hand);
/// ```
#[must_use]
pub fn chain_of<'a>(
    query_digest: &str,
    snapshot_id: Option<&str>,
    cursor_hashes: impl IntoIterator<Item = &'a Hash>,
) -> Hash {
    let mut c = chain_start(query_digest, snapshot_id);
    for h in cursor_hashes {
        c = chain_next(&c, h);
    }
    c
}

/// Writes a partition's canonical leaf body into `out` (cleared first): up to 4096 IDs, their
/// low 16 bits as sorted u16 little-endian; above, the 8192-byte bitmap (bit `j` of byte
/// `j / 8`, least significant first). The layout is the same whatever container roaring chose.
pub fn leaf_body(bitmap: &RoaringBitmap, out: &mut Vec<u8>) {
    out.clear();
    if bitmap.is_empty() {
        return;
    }
    // A one-container bitmap in roaring's portable format without run containers is a 16-byte
    // header followed by exactly the canonical body (sorted u16s, or the 8192-byte bitmap),
    // so serialize and drop the header. Run containers (bitmaps loaded from the store are
    // run-optimized) are first expanded to the array or bitmap form roaring would choose.
    if write_canonical_container(bitmap, out) {
        return;
    }
    let mut expanded = bitmap.clone();
    expanded.remove_run_compression();
    if write_canonical_container(&expanded, out) {
        return;
    }
    // Not reached for partition bitmaps; kept as the definition the fast paths must match.
    out.clear();
    let n = bitmap.len();
    if n <= LEAF_ARRAY_MAX {
        for v in bitmap {
            // Partition bitmaps hold values below 2^16 (IdSet invariant).
            out.extend_from_slice(&(v as u16).to_le_bytes());
        }
        return;
    }
    let mut words = [0u64; 1024];
    for v in bitmap {
        words[(v >> 6) as usize] |= 1u64 << (v & 63);
    }
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// Serializes `bitmap` into `out` and keeps the body when it is already the canonical form
/// for its cardinality; false (with `out` in an unspecified state) otherwise.
fn write_canonical_container(bitmap: &RoaringBitmap, out: &mut Vec<u8>) -> bool {
    const HEADER_LEN: usize = 16;
    const NO_RUN_COOKIE: [u8; 4] = 12346u32.to_le_bytes();
    out.clear();
    if bitmap.serialize_into(&mut *out).is_err()
        || out.len() < HEADER_LEN
        || out[..4] != NO_RUN_COOKIE
    {
        return false;
    }
    let n = bitmap.len();
    let want = if n <= LEAF_ARRAY_MAX { n * 2 } else { 8192 };
    if (out.len() - HEADER_LEN) as u64 != want {
        return false;
    }
    out.drain(..HEADER_LEN);
    true
}

/// A leaf hash: `H(0x00 || u64le partition || u32le count || body)` (RFC 6962 leaf prefix).
#[must_use]
pub fn leaf_hash(partition: u64, bitmap: &RoaringBitmap, scratch: &mut Vec<u8>) -> Hash {
    leaf_body(bitmap, scratch);
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(partition.to_le_bytes());
    // A partition holds at most 2^16 IDs, so the count fits a u32.
    h.update(
        u32::try_from(bitmap.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    h.update(&scratch[..]);
    h.finalize().into()
}

/// An inner node: `H(0x01 || left || right)`.
#[must_use]
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The leaf hashes of a set, one per non-empty partition, ascending.
#[must_use]
pub fn leaves(set: &IdSet) -> Vec<(u64, Hash)> {
    let mut scratch = Vec::with_capacity(8192);
    set.partitions()
        .map(|(p, b)| (p, leaf_hash(p, b, &mut scratch)))
        .collect()
}

/// The RFC 6962 Merkle tree hash of leaf hashes in order; `H("")` for none. Iterative: a
/// stack of subtree roots merged like a binary counter, then folded right to left, which
/// yields the same tree as RFC 6962's split at the largest power of two below `n`.
#[must_use]
pub fn merkle_root_of_leaves<'a>(leaves: impl IntoIterator<Item = &'a Hash>) -> Hash {
    let mut fold = MerkleFold::new();
    for leaf in leaves {
        fold.push(leaf);
    }
    fold.root()
}

/// [`merkle_root_of_leaves`] fed one leaf at a time, in order: what a reader that streams a
/// set's partitions keeps (at most 64 subtree roots, whatever the number of leaves).
#[derive(Debug, Clone, Default)]
pub struct MerkleFold {
    /// (height, hash); heights strictly decrease from bottom to top of the stack.
    stack: Vec<(u32, Hash)>,
}

impl MerkleFold {
    /// No leaf yet.
    #[must_use]
    pub fn new() -> MerkleFold {
        MerkleFold {
            stack: Vec::with_capacity(MERKLE_DEPTH_MAX),
        }
    }

    /// The next leaf.
    pub fn push(&mut self, leaf: &Hash) {
        let mut cur = (0u32, *leaf);
        while let Some(&(height, top)) = self.stack.last() {
            if height != cur.0 {
                break;
            }
            self.stack.pop();
            cur = (height + 1, node_hash(&top, &cur.1));
        }
        assert!(
            self.stack.len() < MERKLE_DEPTH_MAX,
            "merkle stack deeper than 2^64 leaves"
        );
        self.stack.push(cur);
    }

    /// The root of the leaves pushed; `H("")` for none.
    #[must_use]
    pub fn root(mut self) -> Hash {
        let mut acc = match self.stack.pop() {
            Some((_, h)) => h,
            None => return sha256(b""),
        };
        while let Some((_, left)) = self.stack.pop() {
            acc = node_hash(&left, &acc);
        }
        acc
    }
}

/// The Merkle root of an ID set: a function of the set alone.
///
/// ```
/// use scanledger::{digest, IdSet};
/// let a: IdSet = [3, 1, 70_000].into_iter().collect();
/// let b: IdSet = [70_000, 3, 1].into_iter().collect();
/// assert_eq!(digest::merkle_root(&a), digest::merkle_root(&b));
/// ```
#[must_use]
pub fn merkle_root(set: &IdSet) -> Hash {
    let leaves = leaves(set);
    merkle_root_of_leaves(leaves.iter().map(|(_, h)| h))
}

/// Domain tag of a string ID's digest.
pub const STRING_ID_DOMAIN: &[u8] = b"scanledger:string-id:v1";

/// The digest of a string ID: `H("scanledger:string-id:v1" || UTF-8 bytes)`. The Merkle tree
/// of a `string`-codec run is built over these, so its root is a function of the set of
/// original strings alone, whatever IDs an interner gave them.
#[must_use]
pub fn string_id_digest(s: &str) -> Hash {
    let mut h = Sha256::new();
    h.update(STRING_ID_DOMAIN);
    h.update(s.as_bytes());
    h.finalize().into()
}

/// The bucket of a string ID's digest: its first two bytes, big-endian (0 to 65535). Buckets
/// are the leaves of a `string`-codec run's Merkle tree.
#[must_use]
pub fn string_bucket(d: &Hash) -> u64 {
    u64::from(u16::from_be_bytes([d[0], d[1]]))
}

/// The leaves of a set of string-ID digests, one per non-empty bucket, ascending: leaf =
/// `H(0x00 || u64le bucket || u64le count || the bucket's digests, ascending)`. Sorts
/// `digests` in place; the caller gives each string once.
#[must_use]
pub fn string_leaves(digests: &mut [Hash]) -> Vec<(u64, Hash)> {
    digests.sort_unstable();
    let mut out = Vec::new();
    for group in digests.chunk_by(|a, b| a[..2] == b[..2]) {
        let bucket = string_bucket(&group[0]);
        let mut h = Sha256::new();
        h.update([0u8]);
        h.update(bucket.to_le_bytes());
        h.update((group.len() as u64).to_le_bytes());
        for d in group {
            h.update(d);
        }
        out.push((bucket, h.finalize().into()));
    }
    out
}

/// The Merkle root of a set of strings given by their digests (see `string_leaves`), and the
/// number of leaves.
///
/// ```
/// use scanledger::digest::{string_id_digest, string_root};
/// let mut a = vec![string_id_digest("b"), string_id_digest("a")];
/// let mut b = vec![string_id_digest("a"), string_id_digest("b")];
/// assert_eq!(string_root(&mut a), string_root(&mut b));
/// ```
#[must_use]
pub fn string_root(digests: &mut [Hash]) -> (Hash, u64) {
    let leaves = string_leaves(digests);
    (
        merkle_root_of_leaves(leaves.iter().map(|(_, h)| h)),
        leaves.len() as u64,
    )
}
