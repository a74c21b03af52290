//! A receipt given to `verify` is untrusted input: `Receipt::from_json` either refuses it
//! or reads it, and `verify_receipt` then compares it with a real store's evidence, never
//! panicking, never allocating past the bounds. Inputs are raw bytes (mostly refused) or a
//! valid receipt of the seed store with bytes patched, so the comparison is reached often.
//! A receipt that reads and names a seed run is verified only if it is the seed's own.

#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::{Contract, Receipt, SimConfig, SimSource, Store, StoreOptions};
use scanledger_fuzz::Bounded;

#[derive(Arbitrary, Debug)]
enum Input<'a> {
    /// The receipt is these bytes.
    Raw(&'a [u8]),
    /// The seed receipt (pretty JSON) with bytes XORed at offsets (modulo its length).
    Patched(Bounded<(u32, u8), 16>),
}

struct Seed {
    _dir: tempfile::TempDir,
    store: Store,
    receipt: String,
}

fn seed() -> &'static Seed {
    static SEED: OnceLock<Seed> = OnceLock::new();
    SEED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seed.redb");
        let mut store = Store::open(&path, StoreOptions::new()).expect("seed store");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let mut source = SimSource::new({
            let mut config = SimConfig::default();
            config.records = 3_000;
            config.label_every = Some(5);
            config
        });
        let done = rt
            .block_on(scanledger::scan(
                &Contract::new("seed"),
                &mut source,
                &mut store,
            ))
            .expect("seed scan");
        let receipt = serde_json::to_string_pretty(&done.receipt()).expect("receipt json");
        drop(store);
        let store = Store::open_read(&path).expect("seed store reopens");
        Seed {
            _dir: dir,
            store,
            receipt,
        }
    })
}

fuzz_target!(|input: Input<'_>| {
    let seed = seed();
    let bytes = match input {
        Input::Raw(b) => b.to_vec(),
        Input::Patched(p) => {
            let mut b = seed.receipt.clone().into_bytes();
            for (at, x) in &p.0 {
                let i = *at as usize % b.len();
                b[i] ^= *x;
            }
            b
        }
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return;
    };
    let Ok(receipt) = Receipt::from_json(text) else {
        return;
    };
    let snap = seed.store.read().expect("read the seed store");
    if let Ok(mismatches) = scanledger::verify_receipt(&snap, &receipt) {
        if mismatches.is_empty() {
            // Verified: then it is the seed's own receipt, field for field.
            let own = Receipt::from_json(&seed.receipt).expect("the seed receipt reads");
            assert_eq!(receipt, own, "a changed receipt verified");
        }
    }
});
