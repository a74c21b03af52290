//! `plan` cuts a skewed table into shards of similar row counts from the key's distribution:
//! PostgreSQL's `pg_stats` histogram (after ANALYZE), a strided sample of a MySQL/MariaDB
//! table's keys. The keys are the squares 1, 4, 9, ... (dense at the bottom of the
//! key space, sparse at the top), where equal widths put a third of the rows in the first of
//! 8 shards and a sixteenth in the last.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

const ROWS: u64 = 200_000;
const SHARDS: u32 = 8;

/// The shards' `[lo, hi)` ranges of a plan (`hi` = None: to the end).
fn ranges(plan: &Value) -> Vec<(u64, Option<u64>)> {
    plan["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let r = &s["key_range"];
            (r["lo"].as_u64().unwrap(), r["hi"].as_u64())
        })
        .collect()
}

/// The largest shard's rows over the smallest's, from each shard's count.
fn spread(counts: &[u64]) -> f64 {
    let max = *counts.iter().max().unwrap() as f64;
    let min = *counts.iter().min().unwrap() as f64;
    max / min.max(1.0)
}

/// What equal widths between the smallest and largest key would give, for the message.
fn equal_width_counts() -> Vec<u64> {
    let shards = scanledger::shard::split(1, ROWS * ROWS, SHARDS).unwrap();
    shards
        .iter()
        .map(|s| (1..=ROWS).filter(|i| s.contains(i * i)).count() as u64)
        .collect()
}

fn count_sql(table: &str, lo: u64, hi: Option<u64>) -> String {
    match hi {
        Some(hi) => format!("SELECT count(*) FROM {table} WHERE id >= {lo} AND id < {hi}"),
        None => format!("SELECT count(*) FROM {table} WHERE id >= {lo}"),
    }
}

#[cfg(feature = "postgres")]
#[test]
fn a_skewed_postgres_table_gets_shards_of_similar_sizes_from_its_histogram() {
    use crate::postgres::{Env, Pg};
    let Some(pg) = Pg::server() else { return };
    let t = pg.table(
        "skew",
        &format!(
            "CREATE TABLE $T (id bigint PRIMARY KEY, v int NOT NULL); \
             INSERT INTO $T SELECT g::bigint * g, g % 7 FROM generate_series(1, {ROWS}) g; \
             ANALYZE $T;"
        ),
    );
    let env = Env::new();
    let source = env.source("t", &t.name, "id", json!({}));
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 5000}));
    let dir = env.dir.path().join("plan").to_string_lossy().into_owned();
    let n = SHARDS.to_string();
    let (code, plan, err) = env.json(&[
        "plan",
        "--contract",
        &contract,
        "--source",
        &source,
        "--shards",
        &n,
        "--out",
        &dir,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["split"]["by"], "histogram", "{}", plan["split"]);
    let counts: Vec<u64> = ranges(&plan)
        .iter()
        .map(|(lo, hi)| pg.column(&count_sql(&t.name, *lo, *hi))[0].parse().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), ROWS);
    let even = equal_width_counts();
    eprintln!("shard rows {counts:?}; equal widths: {even:?}");
    assert!(
        spread(&counts) <= 1.5,
        "shard rows {counts:?} (spread {:.2}); equal widths would give {even:?} ({:.2})",
        spread(&counts),
        spread(&even)
    );
    assert!(spread(&even) > 3.0, "the table is not skewed: {even:?}");
}

#[cfg(feature = "mysql")]
#[test]
fn a_skewed_mariadb_table_gets_shards_of_similar_sizes_from_a_key_sample() {
    use crate::mysql::{db, Env};
    let Some(db) = db() else { return };
    let t = db.table("skew");
    db.exec(&format!(
        "CREATE TABLE {t} (id BIGINT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;\n\
         INSERT INTO {t} SELECT seq * seq, seq % 7 FROM seq_1_to_{ROWS}"
    ));
    let env = Env::new();
    let source = env.source("t.json", &t, "id", "");
    let contract = env.file(
        "c.json",
        &json!({"source": t, "page_size": 5000}).to_string(),
    );
    let dir = env.dir.path().join("plan").to_string_lossy().into_owned();
    let n = SHARDS.to_string();
    let (code, plan, err) = env.json(&[
        "plan",
        "--contract",
        &contract,
        "--source",
        &source,
        "--shards",
        &n,
        "--out",
        &dir,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["split"]["by"], "key_sample", "{}", plan["split"]);
    let counts: Vec<u64> = ranges(&plan)
        .iter()
        .map(|(lo, hi)| {
            db.column(&count_sql(&t, *lo, *hi))
                .into_iter()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), ROWS);
    let even = equal_width_counts();
    eprintln!("shard rows {counts:?}; equal widths: {even:?}");
    assert!(
        spread(&counts) <= 1.5,
        "shard rows {counts:?} (spread {:.2}); equal widths would give {even:?} ({:.2})",
        spread(&counts),
        spread(&even)
    );
}
