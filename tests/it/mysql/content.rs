//! Content digests: the same rows in a MariaDB table and a PostgreSQL table hash the same.
//!
//! The MariaDB side is read through the source (`MysqlSource`, keyset pages, the binary
//! protocol). The PostgreSQL side is read with `psql` and hashed directly with
//! `content::record_hash` over the typed values the shared mapping prescribes (integers,
//! NUMERIC by its text, timestamps as UTC microseconds, booleans, dates, text, bytes, floats),
//! so this test does not depend on the PostgreSQL source. Values that differ only in
//! representation (DECIMAL `1.50` against NUMERIC `1.5`, a TIMESTAMP written in `+02:00`
//! against a timestamptz written in `-05:00`) must hash equal; values that really differ must
//! not.

use std::collections::BTreeMap;
use std::process::Command;

use scanledger::content::{record_hash, ContentValue as V};
use scanledger::MysqlSource;
use scanledger::{PageRequest, PageSource, RawId, Request};

use super::{db, Env};

const COLUMNS: &str =
    r#"["amount", "ts", "dt", "email", "active", "d", "note", "ratio", "bin", "big", "t"]"#;

fn psql(sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            "5432",
            "-d",
            "test",
            "-U",
            "postgres",
        ])
        .args(["-X", "-q", "-At", "-F", "|", "-P", "null=<NULL>"])
        .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn postgres_available() -> bool {
    match psql("SELECT 1") {
        Ok(_) => true,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "PostgreSQL is required under CI and is not reachable at 127.0.0.1:5432: {why}"
            );
            eprintln!("\n*** SKIPPED: no PostgreSQL at 127.0.0.1:5432 ({why}) ***\n");
            false
        }
    }
}

/// Hashes of the PostgreSQL rows by ID, computed as the shared mapping prescribes.
fn postgres_hashes(table: &str) -> BTreeMap<u64, [u8; 32]> {
    let out = psql(&format!(
        "SELECT id, amount::text, (extract(epoch FROM ts) * 1000000)::bigint, \
         (extract(epoch FROM dt) * 1000000)::bigint, email, active::int, d::text, note, \
         ratio::text, encode(bin, 'hex'), big, t::text FROM {table} ORDER BY id"
    ))
    .unwrap();
    let mut hashes = BTreeMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        assert_eq!(f.len(), 12, "{line}");
        let bin: Option<Vec<u8>> = (f[9] != "<NULL>").then(|| {
            (0..f[9].len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&f[9][i..i + 2], 16).unwrap())
                .collect()
        });
        let text = |i: usize| {
            if f[i] == "<NULL>" {
                V::Null
            } else {
                V::Text(f[i])
            }
        };
        let micros = |i: usize| {
            if f[i] == "<NULL>" {
                V::Null
            } else {
                V::TimestampMicros(f[i].parse().unwrap())
            }
        };
        let values = [
            if f[1] == "<NULL>" {
                V::Null
            } else {
                V::Decimal(f[1])
            },
            micros(2),
            micros(3),
            text(4),
            if f[5] == "<NULL>" {
                V::Null
            } else {
                V::Bool(f[5] == "1")
            },
            V::Date {
                year: f[6][0..4].parse().unwrap(),
                month: f[6][5..7].parse().unwrap(),
                day: f[6][8..10].parse().unwrap(),
            },
            text(7),
            V::Float(f[8].parse().unwrap()),
            bin.as_deref().map_or(V::Null, V::Bytes),
            V::Int(f[10].parse().unwrap()),
            text(11),
        ];
        hashes.insert(f[0].parse().unwrap(), record_hash(&values).unwrap());
    }
    hashes
}

/// Hashes of the MariaDB rows by ID, read through the source in pages of two.
fn mysql_hashes(env: &Env, table: &str) -> BTreeMap<u64, [u8; 32]> {
    let spec = env.source("my.json", table, "id", &format!(r#""content": {COLUMNS}"#));
    let mut source = MysqlSource::open(spec.strip_prefix("mysql:").unwrap().as_ref()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut req = PageRequest {
        request: Request::First,
        page_size: 2,
        snapshot: None,
        query: serde_json::Value::Null,
    };
    let mut hashes = BTreeMap::new();
    for _ in 0..100 {
        let page = rt.block_on(source.fetch(&req)).unwrap();
        for item in &page.items {
            let RawId::Int(id) = item.id else {
                panic!("{:?}", item.id)
            };
            hashes.insert(id, item.content.expect("a content digest per item"));
        }
        match page.next {
            Some(c) => {
                req.request = Request::Cursor(c);
                req.snapshot = page.snapshot;
            }
            None => return hashes,
        }
    }
    panic!("more than 100 pages");
}

#[test]
fn the_same_rows_hash_equal_in_mariadb_and_postgres() {
    let Some(db) = db() else { return };
    if !postgres_available() {
        return;
    }
    let t = db.table("content");
    // Rows 1, 2 and 5 are the same values in both databases, written differently; rows 3 and
    // 4 really differ (a cent, a microsecond).
    db.exec(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, amount DECIMAL(10,2), ts TIMESTAMP(6) NULL, \
         dt DATETIME(6), email VARCHAR(64), active TINYINT(1), d DATE, note TEXT NULL, \
         ratio DOUBLE, bin VARBINARY(16), big BIGINT, t TIME) ENGINE=InnoDB;\n\
         SET time_zone = '+02:00';\n\
         INSERT INTO {t} VALUES \
         (1, 1.50, '2024-03-10 12:00:00.500000', '2024-03-10 10:00:00.5', 'a@example.com', 1, \
          '2024-02-29', 'first', 0.1, X'00ff', 9007199254740993, '12:34:56'),\n\
         (2, 7, '2000-01-01 02:00:00', '1999-12-31 23:59:59.999999', 'b@example.com', 0, \
          '1970-01-01', NULL, -2.5e-7, X'', -5, '00:00:00'),\n\
         (3, 2.50, '2024-03-10 12:00:00', '2024-03-10 10:00:00', 'c@example.com', 1, \
          '2024-01-01', 'x', 1, X'01', 1, '01:00:00'),\n\
         (4, 3, '2024-03-10 12:00:00.000001', '2024-03-10 10:00:00', 'd@example.com', 1, \
          '2024-01-01', 'x', 1, X'01', 1, '01:00:00'),\n\
         (5, -0.00, NULL, '2024-03-10 10:00:00', 'Émile@exämple.com', NULL, '2024-12-31', '', \
          1e300, NULL, 0, '23:59:59')"
    ));
    let pg = t.clone();
    psql(&format!("DROP TABLE IF EXISTS {pg}")).unwrap();
    psql(&format!(
        "CREATE TABLE {pg} (id int PRIMARY KEY, amount numeric, ts timestamptz, dt timestamp, \
         email text, active boolean, d date, note text, ratio double precision, bin bytea, \
         big bigint, t time);\n\
         INSERT INTO {pg} VALUES \
         (1, 1.5, '2024-03-10 05:00:00.5-05', '2024-03-10 10:00:00.500', 'a@example.com', true, \
          '2024-02-29', 'first', 0.1, '\\x00ff', 9007199254740993, '12:34:56'),\n\
         (2, 7.000, '2000-01-01 00:00:00+00', '1999-12-31 23:59:59.999999', 'b@example.com', \
          false, '1970-01-01', NULL, -0.00000025, '\\x', -5, '00:00:00'),\n\
         (3, 2.51, '2024-03-10 10:00:00+00', '2024-03-10 10:00:00', 'c@example.com', true, \
          '2024-01-01', 'x', 1, '\\x01', 1, '01:00:00'),\n\
         (4, 3, '2024-03-10 10:00:00+00', '2024-03-10 10:00:00', 'd@example.com', true, \
          '2024-01-01', 'x', 1, '\\x01', 1, '01:00:00'),\n\
         (5, 0, NULL, '2024-03-10 10:00:00', 'Émile@exämple.com', NULL, '2024-12-31', '', \
          1e300, NULL, 0, '23:59:59')"
    ))
    .unwrap();
    let env = Env::new();
    let result = std::panic::catch_unwind(|| {
        let my = mysql_hashes(&env, &t);
        let pg = postgres_hashes(&pg);
        (my, pg)
    });
    let _ = psql(&format!("DROP TABLE IF EXISTS {pg}"));
    let (my, pg) = result.unwrap();
    assert_eq!(my.keys().collect::<Vec<_>>(), [&1, &2, &3, &4, &5]);
    assert_eq!(pg.keys().collect::<Vec<_>>(), [&1, &2, &3, &4, &5]);
    for id in [1, 2, 5] {
        assert_eq!(my[&id], pg[&id], "row {id} holds the same values");
    }
    for id in [3, 4] {
        assert_ne!(my[&id], pg[&id], "row {id} differs");
    }
}
