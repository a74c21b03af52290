//! The all-or-fail read: `collect` returns an `Inventory` (every ID, in its original form)
//! only for a verified run, and an `IncompleteRead` (the receipt and the reasons) otherwise.
//! Nothing collected before a failure is ever handed out as the collection.
//!
//! `cargo run --example collect`

use scanledger::{collect, Contract, IdCodecKind, RawId, SimConfig, SimSource};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let mut contract = Contract::new("customers");
    contract.id_codec = IdCodecKind::Int;
    contract.expected_count = Some(2_500);

    // A source that answers every page: the inventory, with the receipt that proves it.
    let mut healthy = SimSource::new(SimConfig::default().with_records(2_500));
    let inventory = rt
        .block_on(collect(&contract, &mut healthy))
        .map_err(|e| e.to_string())?;
    let first: Vec<RawId> = inventory.ids().take(3).collect();
    println!(
        "verified: {} IDs (first {first:?}), merkle root {}",
        inventory.len(),
        inventory.receipt().merkle_root
    );

    // A source whose second page fails on every retry: no inventory, only the reasons.
    let mut broken = SimSource::new(SimConfig::default().with_records(2_500).with_fail_at(2));
    match rt.block_on(collect(&contract, &mut broken)) {
        Ok(_) => return Err("a failed page must never give an inventory".into()),
        Err(incomplete) => {
            for v in &incomplete.reasons {
                println!(
                    "incomplete: {} on page {}: {}",
                    v.kind.as_str(),
                    v.page,
                    v.detail
                );
            }
        }
    }
    Ok(())
}
