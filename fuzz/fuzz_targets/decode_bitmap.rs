//! A partition bitmap as the store decodes it: roaring's checked `deserialize_from` on
//! arbitrary bytes (capped as the store caps them), then the store's validation, then
//! `IdSet::set_partition`. Requires `Err`, or a bitmap that passes `check_invariants`,
//! round-trips through serialization and hashes to the canonical leaf whatever container
//! roaring chose (array, bitmap or run).
//!
//! The store's own decoder (`store::codec::decode_bitmap`) is `pub(crate)`; this replicates
//! its checks, and `decode_store` reaches the real one through corrupted store files.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use roaring::RoaringBitmap;
use scanledger::PARTITION_WIDTH;
use scanledger::{digest, IdSet};
use scanledger_fuzz::{canonical_leaf_body, Bounded};

/// The store's cap on one serialized partition bitmap.
const BITMAP_BYTES_MAX: usize = 16 * 1024;

#[derive(Arbitrary, Debug)]
enum Bytes<'a> {
    /// The value is these bytes.
    Raw(&'a [u8]),
    /// A valid serialization (array, bitmap or run container), then damaged: random bytes
    /// rarely get past roaring's header, these reach its container decoders.
    Damaged {
        values: Bounded<u16, 600>,
        /// (first, length): runs, so containers can be dense or run-compressed.
        runs: Bounded<(u16, u16), 4>,
        optimize: bool,
        patches: Bounded<(u16, u8), 4>,
        truncate_to: Option<u16>,
    },
}

fn bytes_of(input: &Bytes<'_>) -> Vec<u8> {
    let (values, runs, optimize, patches, truncate_to) = match input {
        Bytes::Raw(b) => return b.to_vec(),
        Bytes::Damaged {
            values,
            runs,
            optimize,
            patches,
            truncate_to,
        } => (values, runs, optimize, patches, truncate_to),
    };
    let mut b: RoaringBitmap = values.0.iter().map(|v| u32::from(*v)).collect();
    for (first, len) in &runs.0 {
        let first = u32::from(*first);
        b.insert_range(first..(first + u32::from(*len)).min(1 << 16));
    }
    if *optimize {
        b.optimize();
    }
    let mut out = Vec::new();
    b.serialize_into(&mut out).expect("serializing into a Vec");
    if let Some(n) = truncate_to {
        out.truncate(usize::from(*n));
    }
    if !out.is_empty() {
        for (at, x) in &patches.0 {
            let i = usize::from(*at) % out.len();
            out[i] ^= x;
        }
    }
    out
}

fuzz_target!(|input: (u16, Bytes<'_>)| {
    let (partition, bytes) = input;
    let bytes = bytes_of(&bytes);
    let bytes = &bytes[..];
    if bytes.len() > BITMAP_BYTES_MAX {
        return;
    }
    let Ok(b) = RoaringBitmap::deserialize_from(bytes) else {
        return;
    };
    if b.is_empty() || b.max().is_some_and(|m| u64::from(m) >= PARTITION_WIDTH) {
        return;
    }
    let p = u64::from(partition);
    let mut set = IdSet::new();
    set.set_partition(p, b.clone());
    set.check_invariants();
    assert_eq!(set.len(), b.len());

    let mut ser = Vec::new();
    b.serialize_into(&mut ser).expect("serializing into a Vec");
    let again = RoaringBitmap::deserialize_from(&ser[..]).expect("own serialization decodes");
    assert_eq!(again, b, "round trip changed the bitmap");

    let lows: Vec<u16> = b.iter().map(|v| v as u16).collect();
    let mut body = Vec::new();
    digest::leaf_body(&b, &mut body);
    assert_eq!(
        body,
        canonical_leaf_body(&lows),
        "leaf body is not canonical"
    );

    // The same values inserted one by one give the same leaf and root.
    let plain: IdSet = lows
        .iter()
        .map(|v| (p << scanledger::PARTITION_BITS) | u64::from(*v))
        .collect();
    assert_eq!(digest::merkle_root(&plain), digest::merkle_root(&set));
});
