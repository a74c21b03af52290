//! The key-order property of the SQL sources: whatever the keys
//! (text with case and accent pairs and trailing spaces, negative and extreme integers,
//! uuids), the collations (the column's and its unique index's, among those the server
//! offers) and the page size, a scan either verifies exactly the keys `SELECT key FROM t`
//! returns, or refuses before it reads a row. A skipped row, a row read twice, or a failure
//! after reading (the page check catching an order the catalogue should have refused) all
//! break it.
//!
//! In-process through the library (`collect` over `AnySource`), against the real PostgreSQL
//! and MariaDB; a bounded number of cases, so it runs in seconds inside `cargo test`.

use std::collections::BTreeSet;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use scanledger::{AnySource, Contract, RawId};

use crate::postgres::Env;

/// Cases per server.
const CASES: u32 = 24;

/// Short strings from pieces that collations treat differently: case and accent pairs,
/// `ß`/`ss`, trailing spaces, a tab.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("a"),
        Just("A"),
        Just("á"),
        Just("Á"),
        Just("b"),
        Just("ß"),
        Just("s"),
        Just("S"),
        Just("é"),
        Just("e"),
        Just(" "),
        Just("\t"),
    ];
    vec(piece, 1..4)
        .prop_map(|p| p.concat())
        // An empty key is no `string` ID; a key of only spaces is one under PAD SPACE.
        .prop_filter("a key has a visible first character", |s| {
            s.starts_with(|c: char| !c.is_whitespace())
        })
}

/// Integers near the ends of every integer type, and anywhere.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MIN + 1),
        Just(i64::from(i32::MIN)),
        Just(i64::from(i16::MIN)),
        Just(-1i64),
        Just(0i64),
        Just(1i64),
        Just(i64::from(i16::MAX)),
        Just(i64::from(i32::MAX)),
        Just(i64::MAX),
        -1000i64..1000,
        any::<i64>(),
    ]
}

/// The keys of a case.
#[derive(Debug, Clone)]
enum Keys {
    Text(Vec<String>),
    Int(Vec<i64>),
    Uuid(Vec<[u8; 16]>),
}

fn keys() -> impl Strategy<Value = Keys> {
    prop_oneof![
        vec(text(), 0..30).prop_map(Keys::Text),
        vec(int(), 0..30).prop_map(Keys::Int),
        vec(any::<[u8; 16]>(), 0..20).prop_map(Keys::Uuid),
    ]
}

/// What a scan said.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Verified, with these IDs.
    Verified(BTreeSet<String>),
    /// Refused before reading (the message).
    Refused(String),
    /// Anything else: a failed or unknown read, or a refusal after pages were read.
    Other(String),
}

fn id_text(id: RawId) -> String {
    match id {
        RawId::Int(n) => n.to_string(),
        RawId::Neg(n) => n.to_string(),
        RawId::Str(s) | RawId::Other(s) => s,
    }
}

/// Scans `spec` in pages of `page_size` under `codec`, in process.
fn outcome(spec: &str, page_size: u32, codec: &str) -> Outcome {
    let contract = Contract::from_json(&format!(
        r#"{{"source": "prop", "page_size": {page_size}, "id_codec": "{codec}"}}"#
    ))
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut source = AnySource::open_for(spec, &contract).unwrap();
    match rt.block_on(scanledger::collect(&contract, &mut source)) {
        Ok(inventory) => Outcome::Verified(inventory.ids().map(id_text).collect()),
        Err(e) if e.receipt.is_none() => Outcome::Refused(
            e.error
                .map(|e| format!("{e}: {}", scanledger::mapping::chain_text(&e)))
                .unwrap_or_default(),
        ),
        Err(e) => Outcome::Other(format!("{e:?}")),
    }
}

/// The property: verified with exactly `want`, or refused before reading for a reason that
/// belongs to the key order (`refusable`).
fn check(got: Outcome, want: &BTreeSet<String>, refusable: bool) -> Result<(), TestCaseError> {
    match got {
        Outcome::Verified(ids) => {
            prop_assert_eq!(&ids, want);
        }
        Outcome::Refused(why) => {
            prop_assert!(
                refusable,
                "refused a key the catalogue proves unique: {}",
                why
            );
            prop_assert!(why.contains("key:"), "refused for another reason: {}", why);
        }
        Outcome::Other(what) => prop_assert!(false, "neither verified nor refused: {}", what),
    }
    Ok(())
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 32,
        ..Config::default()
    })
}

/// PostgreSQL: the column's collation and the unique index's (the same, another, none, or a
/// parent whose child holds a key too).
#[test]
fn postgres_scans_verify_select_key_or_refuse_before_reading() {
    let Some(pg) = super::pg() else { return };
    pg.exec(
        "CREATE COLLATION IF NOT EXISTS sqlcore_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
         CREATE COLLATION IF NOT EXISTS sqlcore_ai (provider = icu, locale = 'und-u-ks-level1', deterministic = false)",
    );
    let collations = [
        "\"default\"",
        "\"C\"",
        "sqlcore_ci",
        "sqlcore_ai",
        "\"und-x-icu\"",
    ];
    let mut d = super::Dropped::new(|s| pg.exec(s));
    let t = d.name("TABLE", "prop_pg");
    let child = d.name("TABLE", "prop_pg_child");
    let env = Env::new();
    let spec = super::pg_source(&env, "s.json", &t, "k");
    let case = (
        keys(),
        0..collations.len(),
        0..collations.len(),
        0u8..8,
        1u32..6,
    );
    runner()
        .run(&case, |(keys, column, index, shape, page_size)| {
            pg.exec(&format!("DROP TABLE IF EXISTS {child}; DROP TABLE IF EXISTS {t}"));
            let (ty, values, codec) = match &keys {
                Keys::Text(v) => (
                    format!("text COLLATE {}", collations[column]),
                    v.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>(),
                    "string",
                ),
                Keys::Int(v) => (
                    "bigint".to_owned(),
                    v.iter().map(ToString::to_string).collect(),
                    "signed",
                ),
                Keys::Uuid(v) => (
                    "uuid".to_owned(),
                    v.iter()
                        .map(|b| format!("'{}'::uuid", hex::encode(b)))
                        .collect(),
                    "string",
                ),
            };
            // 0-3: a primary key; 4-5: a unique index under another collation; 6: no unique
            // index; 7: a parent with an inheritance child.
            let index = match (shape, &keys) {
                (0..=3, _) => format!("CREATE UNIQUE INDEX ON {t} (k)"),
                (4 | 5, Keys::Text(_)) => {
                    format!("CREATE UNIQUE INDEX ON {t} (k COLLATE {})", collations[index])
                }
                (4 | 5, _) | (7, _) => format!("CREATE UNIQUE INDEX ON {t} (k)"),
                _ => "SELECT 1".to_owned(),
            };
            pg.exec(&format!("CREATE TABLE {t} (k {ty} NOT NULL); {index}"));
            if !values.is_empty() {
                pg.exec(&format!(
                    "INSERT INTO {t} VALUES ({}) ON CONFLICT DO NOTHING",
                    values.join("), (")
                ));
            }
            if shape == 7 {
                pg.exec(&format!(
                    "CREATE TABLE {child} () INHERITS ({t}); INSERT INTO {child} SELECT k FROM {t} LIMIT 1"
                ));
            }
            let want: BTreeSet<String> = pg
                .column(&format!("SELECT k::text FROM {t}"))
                .into_iter()
                .collect();
            check(outcome(&spec, page_size, codec), &want, shape >= 6)
        })
        .unwrap();
}

/// MariaDB: the key's collation (case-insensitive, PAD SPACE, NO PAD, Unicode), a signed or
/// unsigned integer, with or without a unique index.
#[cfg(feature = "mysql")]
#[test]
fn mariadb_scans_verify_select_key_or_refuse_before_reading() {
    let Some(db) = crate::mysql::db() else { return };
    let collations = [
        "utf8mb4_general_ci",
        "utf8mb4_bin",
        "utf8mb4_nopad_bin",
        "utf8mb4_unicode_ci",
        "utf8mb4_unicode_520_nopad_ci",
    ];
    let mut d = super::Dropped::new(|s| db.exec(s));
    let t = d.name("TABLE", "prop_my");
    let env = Env::new();
    let spec = super::my_source(&env, "s.json", &t, "k");
    let case = (keys(), 0..collations.len(), 0u8..6, 1u32..6);
    runner()
        .run(&case, |(keys, collation, shape, page_size)| {
            let (ty, values, codec) = match &keys {
                Keys::Text(v) => (
                    format!("VARCHAR(16) CHARACTER SET utf8mb4 COLLATE {}", collations[collation]),
                    v.iter()
                        .map(|s| format!("'{}'", s.replace('\t', "\\t")))
                        .collect::<Vec<_>>(),
                    "string",
                ),
                Keys::Int(v) if shape % 2 == 0 => (
                    "BIGINT UNSIGNED".to_owned(),
                    v.iter().map(|n| n.unsigned_abs().to_string()).collect(),
                    "int",
                ),
                Keys::Int(v) => (
                    "BIGINT".to_owned(),
                    v.iter().map(ToString::to_string).collect(),
                    "signed",
                ),
                Keys::Uuid(v) => (
                    "CHAR(32) CHARACTER SET ascii".to_owned(),
                    v.iter().map(|b| format!("'{}'", hex::encode(b))).collect(),
                    "string",
                ),
            };
            // 0-4: a primary key; 5: a plain index only.
            let index = if shape == 5 { "INDEX (k)" } else { "PRIMARY KEY (k)" };
            db.exec(&format!(
                "DROP TABLE IF EXISTS {t};\nCREATE TABLE {t} (k {ty} NOT NULL, {index}) ENGINE=InnoDB"
            ));
            if !values.is_empty() {
                db.exec(&format!(
                    "INSERT IGNORE INTO {t} VALUES ({})",
                    values.join("), (")
                ));
            }
            let want = db.column(&format!("SELECT CAST(k AS CHAR) FROM {t}"));
            check(outcome(&spec, page_size, codec), &want, shape == 5)
        })
        .unwrap();
}
