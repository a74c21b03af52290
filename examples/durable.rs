//! The durable path: a scan recorded page by page in a store file, stopped by its page budget,
//! resumed to the end from the stored cursor, then its receipt read back and verified against
//! the store's evidence.
//!
//! `cargo run --example durable [STORE_FILE]` (default: a file in the temporary directory)

use scanledger::{
    resume, scan, verify_receipt, Contract, Raise, SimConfig, SimSource, Status, Store,
    StoreOptions,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join(format!("scanledger-example-{}.redb", std::process::id())),
        std::path::PathBuf::from,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    // Group commit: a durable checkpoint every 10 pages.
    let mut store = Store::open(&path, StoreOptions::new().checkpoint_every(10))?;
    let mut contract = Contract::new("customers");
    contract.limits.max_pages = Some(20);
    let source = || {
        SimSource::new({
            let mut config = SimConfig::default();
            config.records = 5_000;
            config.label_every = Some(100);
            config
        })
    };

    // 20 pages of 100 out of 50: stopped by the budget, `unknown`, resumable.
    let first = rt.block_on(scan(&contract, &mut source(), &mut store))?;
    let run = first.meta.run_id;
    println!(
        "{run}: {} after {} pages",
        first.receipt().coverage_status.as_str(),
        first.receipt().pages_observed
    );
    assert_eq!(first.receipt().coverage_status, Status::Unknown);

    // Raise the budget and continue from the stored cursor.
    let raise = Raise::default().with_max_pages(100);
    let done = rt.block_on(resume(&mut store, run, &raise, &mut source()))?;
    println!(
        "{run}: {} with {} unique IDs",
        done.receipt().coverage_status.as_str(),
        done.receipt().unique_ids_observed
    );

    // One read transaction: the receipt as stored, recomputed from the evidence.
    let snapshot = store.read()?;
    let receipt = snapshot.receipt(run)?;
    let mismatches = verify_receipt(&snapshot, &receipt)?;
    println!(
        "receipt of {run} verified against {}: {}",
        path.display(),
        if mismatches.is_empty() {
            "every field recomputes"
        } else {
            "MISMATCH"
        }
    );
    let migrate = snapshot.label_ids(run, "needs_migration")?;
    println!("label needs_migration: {} IDs", migrate.len());
    drop(snapshot);
    drop(store);
    if std::env::args().nth(1).is_none() {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
