//! Opens a damaged redb 4.6 file as scanledger does and touches every table: redb panics
//! (`range end index ... out of range`) in `table_tree_base.rs` instead of returning
//! `StorageError::Corrupted`.
use redb::{ReadableDatabase, TableHandle};
fn main() {
    let path = std::env::args().nth(1).expect("a redb file");
    let db = redb::Database::open(&path).expect("open");
    let txn = db.begin_write().expect("begin_write");
    let names: Vec<String> = txn
        .list_tables()
        .expect("list_tables")
        .map(|t| t.name().to_owned())
        .collect();
    println!("tables: {names:?}");
    for name in names {
        let def: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new(&name);
        println!("open_untyped({name})");
        let _ = txn.open_table(def).map(|_| ());
    }
    let rtxn = db.begin_read().expect("begin_read");
    let _ = rtxn;
}
