//! The README's Rust example, whole: the all-or-fail read of a collection.
//!
//! A program of your own needs, in its Cargo.toml:
//!
//! ```toml
//! [dependencies]
//! scanledger = { path = "../scanledger", default-features = false }
//! tokio = { version = "1", features = ["rt", "macros"] }
//! ```
//!
//! `cargo run --example readme`

use scanledger::{collect, Contract, SimConfig, SimSource};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let contract = Contract::new("customers");
    // Any `PageSource`: a replay file, an HTTP API, a SQL table, or this generator.
    let mut source = SimSource::new(SimConfig::default().with_records(150));
    match collect(&contract, &mut source).await {
        Ok(inventory) => println!(
            "verified: {} IDs, merkle root {}",
            inventory.len(),
            inventory.receipt().merkle_root
        ),
        Err(incomplete) => {
            for reason in &incomplete.reasons {
                println!("not the whole collection: {}", reason.detail);
            }
        }
    }
}
