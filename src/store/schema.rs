//! The tables of a store file and its format record (specified in docs/FORMAT.md §10).
//!
//! `meta` holds the magic, the format version, the next run ID and the page-token key, all
//! written in the transaction that creates the store, so that creating a store is atomic and
//! no reader ever needs to write. Keys that hold text from a source (interned strings, the
//! scope) are byte strings, checked as UTF-8 by us after reading, never by the engine.

use redb::{TableDefinition, TableHandle};

use super::engine::Engine;
use super::error::{Failure, OpenError};

/// The on-disk format version this build writes. It also reads format 3, which kept the
/// per-run cursor keys in the `cursor_keys` table instead of the key file beside the store,
/// and format 2, which is format 3 without the page journal: a writer upgrades such a file in
/// place, in the transaction that checks it, and moves its keys to the key file when it opens
/// it (docs/FORMAT.md §10).
pub const FORMAT_VERSION: u32 = 4;
/// The oldest format this build reads.
pub(crate) const FORMAT_VERSION_OLDEST: u32 = 2;
/// The magic value of `meta["magic"]`.
pub(crate) const MAGIC: &[u8] = b"scanledger-store";

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(crate) const RUNS: TableDefinition<u64, &[u8]> = TableDefinition::new("runs");
pub(crate) const PAGES: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("pages");
pub(crate) const IDS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("ids");
pub(crate) const LABELS: TableDefinition<(u64, u32, u64), &[u8]> = TableDefinition::new("labels");
pub(crate) const LEAVES: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("leaves");
pub(crate) const CONTENT: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("content");
pub(crate) const CURSORS: TableDefinition<u64, &[u8]> = TableDefinition::new("cursors");
/// Formats 2 and 3 kept the per-run cursor keys here; format 4 keeps it empty (the keys are in
/// the key file beside the store, `keys.rs`), and a writer moves what an older file holds.
pub(crate) const CURSOR_KEYS: TableDefinition<u64, &[u8]> = TableDefinition::new("cursor_keys");
pub(crate) const INTERN: TableDefinition<(&[u8], &[u8]), u64> = TableDefinition::new("intern");
pub(crate) const INTERN_REV: TableDefinition<(&[u8], u64), &[u8]> =
    TableDefinition::new("intern_rev");

const TABLE_NAMES: [&str; 11] = [
    "meta",
    "runs",
    "pages",
    "ids",
    "labels",
    "leaves",
    "content",
    "cursors",
    "cursor_keys",
    "intern",
    "intern_rev",
];

pub(crate) const META_MAGIC: &str = "magic";
pub(crate) const META_VERSION: &str = "format_version";
pub(crate) const META_NEXT_RUN: &str = "next_run";
pub(crate) const META_TOKEN_KEY: &str = "page_token_key";
/// The stamp of the store's last commit (16 random bytes, rewritten by every commit): the
/// page journal whose header names it continues this state (docs/FORMAT.md §10a).
pub(crate) const META_JOURNAL_BASE: &str = "journal_base";
/// Bytes of the page-token key.
pub const TOKEN_KEY_LEN: usize = 32;

/// Creates the format in a fresh database, or checks an existing one, in one write
/// transaction: two processes creating the same store cannot both initialise it.
pub(crate) fn init_or_check(engine: &Engine) -> Result<(), OpenError> {
    let path = engine.path();
    let fail = |f: Failure| f.into_open(path);
    let Some(txn) = engine.begin_write().map_err(fail)? else {
        return check(engine);
    };
    let names: Vec<String> = engine
        .contain("list tables", || {
            txn.list_tables()
                .map(|t| t.map(|h| h.name().to_owned()).collect())
        })
        .map_err(fail)?;
    if names.iter().any(|n| n == "meta") {
        engine
            .contain("end a transaction", || txn.abort())
            .map_err(fail)?;
        let version = read_version(engine)?;
        if version < FORMAT_VERSION {
            upgrade(engine, version)?;
        }
        return check(engine);
    }
    if !names.is_empty() {
        return Err(OpenError::NotAStore {
            path: path.to_owned(),
            why: "a database without a scanledger format record",
        });
    }
    let mut key = [0u8; TOKEN_KEY_LEN];
    getrandom::fill(&mut key).map_err(|e| OpenError::Io {
        path: path.to_owned(),
        op: "draw the page-token key from the system's random source",
        source: Box::new(std::io::Error::other(e.to_string())),
    })?;
    let stamp = super::journal::fresh_stamp().map_err(fail)?;
    engine
        .contain("create the format", || -> Result<(), redb::Error> {
            {
                let mut meta = txn.open_table(META)?;
                meta.insert(META_MAGIC, MAGIC)?;
                meta.insert(META_VERSION, FORMAT_VERSION.to_le_bytes().as_slice())?;
                meta.insert(META_NEXT_RUN, 1u64.to_le_bytes().as_slice())?;
                meta.insert(META_TOKEN_KEY, key.as_slice())?;
                meta.insert(META_JOURNAL_BASE, stamp.as_slice())?;
            }
            // Every table exists from the start, so readers never meet a missing one.
            txn.open_table(RUNS)?;
            txn.open_table(PAGES)?;
            txn.open_table(IDS)?;
            txn.open_table(LABELS)?;
            txn.open_table(LEAVES)?;
            txn.open_table(CONTENT)?;
            txn.open_table(CURSORS)?;
            txn.open_table(CURSOR_KEYS)?;
            txn.open_table(INTERN)?;
            txn.open_table(INTERN_REV)?;
            Ok(())
        })
        .map_err(fail)?;
    engine
        .contain("commit the format", || txn.commit())
        .map_err(fail)
}

/// Rewrites a format 2 or 3 store as format 4, in one transaction: the version, and for format 2
/// a first commit stamp (format 2 had no page journal). A format 3 file keeps its stamp, so a
/// journal its killed writer left still folds; its keys move to the key file when the writer
/// opens the store (`Store::writer`).
fn upgrade(engine: &Engine, from: u32) -> Result<(), OpenError> {
    let path = engine.path();
    let fail = |f: Failure| f.into_open(path);
    let Some(txn) = engine.begin_write().map_err(fail)? else {
        return Ok(());
    };
    let stamp = super::journal::fresh_stamp().map_err(fail)?;
    engine
        .contain("upgrade the format", || -> Result<(), redb::Error> {
            let mut meta = txn.open_table(META)?;
            meta.insert(META_VERSION, FORMAT_VERSION.to_le_bytes().as_slice())?;
            if from < 3 {
                meta.insert(META_JOURNAL_BASE, stamp.as_slice())?;
            }
            Ok(())
        })
        .map_err(fail)?;
    engine
        .contain("commit the upgraded format", || txn.commit())
        .map_err(fail)?;
    tracing::info!(store = %path.display(), "upgraded the store from format {from} to format {FORMAT_VERSION}");
    Ok(())
}

/// Checks the format record of an existing store through a read transaction.
pub(crate) fn check(engine: &Engine) -> Result<(), OpenError> {
    read_version(engine).map(|_| ())
}

/// Checks the format record of an existing store; returns its version (one this build reads).
fn read_version(engine: &Engine) -> Result<u32, OpenError> {
    let path = engine.path();
    let fail = |f: Failure| f.into_open(path);
    let not_ours = || OpenError::NotAStore {
        path: path.to_owned(),
        why: "a database without a scanledger format record",
    };
    let txn = engine.begin_read().map_err(fail)?;
    let names: Vec<String> = engine
        .contain("list tables", || {
            txn.list_tables()
                .map(|t| t.map(|h| h.name().to_owned()).collect())
        })
        .map_err(fail)?;
    if !names.iter().any(|n| n == "meta") {
        return Err(not_ours());
    }
    let (magic, version) = engine
        .contain("read the format record", || -> Result<_, redb::Error> {
            let meta = txn.open_table(META)?;
            let magic = meta.get(META_MAGIC)?.map(|v| v.value().to_vec());
            let version = meta.get(META_VERSION)?.map(|v| v.value().to_vec());
            Ok((magic, version))
        })
        .map_err(fail)?;
    if magic.as_deref() != Some(MAGIC) {
        return Err(not_ours());
    }
    let version = version
        .and_then(|v| <[u8; 4]>::try_from(v.as_slice()).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| OpenError::Damaged {
            path: path.to_owned(),
            what: "meta: format_version is missing or not 4 bytes".to_owned(),
            source: None,
        })?;
    if version > FORMAT_VERSION {
        return Err(OpenError::NewerFormat {
            path: path.to_owned(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version < FORMAT_VERSION_OLDEST {
        return Err(OpenError::OlderFormat {
            path: path.to_owned(),
            found: version,
        });
    }
    if let Some(missing) = TABLE_NAMES.iter().find(|t| !names.iter().any(|n| n == *t)) {
        return Err(OpenError::Damaged {
            path: path.to_owned(),
            what: format!("table {missing} is missing"),
            source: None,
        });
    }
    Ok(version)
}
