//! Signed and full-range integer keys are ordinary: PostgreSQL and
//! MySQL signed keys with negative values scan, verify and diff under `id_codec: "signed"`,
//! printed in their original form; unsigned keys up to 2^64-1 under `int`; a key a codec cannot
//! hold fails clearly, naming the codec that can.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::{pg, pg_source, scan, Dropped};
use crate::postgres::Env;

/// Verifies `receipt` (written to a file) against the store: the exit code.
fn verify(env: &Env, receipt: &Value) -> i32 {
    let file = crate::util::write(env.dir.path(), "r.json", &receipt.to_string());
    let (code, _, err) = env.json(&["verify", &file]);
    assert_eq!(code, 0, "verify: {err}");
    code
}

/// Regression: a PostgreSQL `bigint` key with negative values could not be scanned at all
/// (every negative key was `invalid_page`), so the table had no verified inventory. Under
/// `signed` every key from -2^63 to 2^63-1 is an ID, in key order, printed as it is; the run
/// verifies, its receipt verifies, and a diff names a deleted negative key as it is. Under
/// `int` the first negative key is still `invalid_page` (failed), and the message names the
/// fix. `integer` and `smallint` keys likewise.
#[test]
fn postgres_signed_keys_scan_verify_and_diff_under_the_signed_codec() {
    let Some(pg) = pg() else { return };
    let mut d = Dropped::new(|s| pg.exec(s));
    let big = d.name("TABLE", "signed_big");
    let small = d.name("TABLE", "signed_small");
    let int4 = d.name("TABLE", "signed_int");
    pg.exec(&format!(
        "CREATE TABLE {big} (k bigint PRIMARY KEY);
         INSERT INTO {big} VALUES (-9223372036854775808), (-70000), (-5), (-1), (0), (3), (65536), (9223372036854775807);
         INSERT INTO {big} SELECT g FROM generate_series(-1000, -900) g;
         CREATE TABLE {small} (k smallint PRIMARY KEY);
         INSERT INTO {small} VALUES (-32768), (-1), (0), (32767);
         CREATE TABLE {int4} (k integer PRIMARY KEY);
         INSERT INTO {int4} VALUES (-2147483648), (-7), (7), (2147483647);"
    ));
    for (t, page_size) in [(&big, 7), (&small, 1), (&int4, 3)] {
        let want: BTreeSet<String> = pg
            .column(&format!("SELECT k FROM {t}"))
            .into_iter()
            .collect();
        let env = Env::new();
        let src = pg_source(&env, "s.json", t, "k");
        let (code, r, err) = scan(&env, &src, page_size, "signed");
        assert_eq!(code, 0, "{t}: {err}");
        assert_eq!(r["coverage_status"], "verified");
        assert_eq!(env.export("run-1"), want, "{t}");
        verify(&env, &r);

        // Under `int`, a negative key is an invalid ID, and the message says what to use.
        let (code, r, _) = scan(&env, &src, page_size, "int");
        assert_eq!(code, 4, "{t}: {r}");
        let detail = r["violations"][0]["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("\"id_codec\": \"signed\""), "{detail}");
    }

    // A diff of two runs names the deleted key in its original form.
    let env = Env::new();
    let src = pg_source(&env, "s.json", &big, "k");
    assert_eq!(scan(&env, &src, 50, "signed").0, 0);
    pg.exec(&format!("DELETE FROM {big} WHERE k IN (-5, -950)"));
    assert_eq!(scan(&env, &src, 50, "signed").0, 0);
    let (code, diff, err) = env.json(&["diff", "run-1", "run-2"]);
    assert!(code == 0 || code == 4, "{err}");
    assert_eq!(diff["removed_count"], 2, "{diff}");
    assert_eq!(
        diff["removed_ranges"],
        json!(["-950..-950", "-5..-5"]),
        "{diff}"
    );
}

/// MySQL: signed `BIGINT` and `INT` keys with negative values under `signed`; `BIGINT
/// UNSIGNED` keys up to 2^64-1 under `int`; and `signed` on `BIGINT UNSIGNED` holding a key past
/// 2^63-1 fails, naming `int` (the codec is checked key by key: an unsigned column whose keys
/// fit is fine under `signed`).
#[cfg(feature = "mysql")]
#[test]
fn mysql_signed_and_unsigned_keys_take_the_codec_that_holds_them() {
    let Some(db) = crate::mysql::db() else { return };
    let mut d = Dropped::new(|s| db.exec(s));
    let signed = d.name("TABLE", "my_signed");
    let int4 = d.name("TABLE", "my_int");
    let unsigned = d.name("TABLE", "my_unsigned");
    db.exec(&format!(
        "CREATE TABLE {signed} (k BIGINT PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {signed} VALUES (-9223372036854775808), (-5), (-1), (0), (9223372036854775807);\n\
         CREATE TABLE {int4} (k INT PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {int4} VALUES (-2147483648), (-3), (2147483647);\n\
         CREATE TABLE {unsigned} (k BIGINT UNSIGNED PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {unsigned} VALUES (0), (9223372036854775807), (9223372036854775808), (18446744073709551615)"
    ));
    for (t, codec, want) in [
        (
            &signed,
            "signed",
            &[
                "-9223372036854775808",
                "-5",
                "-1",
                "0",
                "9223372036854775807",
            ][..],
        ),
        (&int4, "signed", &["-2147483648", "-3", "2147483647"][..]),
        (
            &unsigned,
            "int",
            &[
                "0",
                "9223372036854775807",
                "9223372036854775808",
                "18446744073709551615",
            ][..],
        ),
    ] {
        for page_size in [1, 2, 10] {
            let env = Env::new();
            let src = super::my_source(&env, "s.json", t, "k");
            let (code, r, err) = scan(&env, &src, page_size, codec);
            assert_eq!(code, 0, "{t} {codec}: {err}");
            let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(env.export("run-1"), want, "{t}");
            verify(&env, &r);
        }
    }
    let env = Env::new();
    let src = super::my_source(&env, "s.json", &unsigned, "k");
    let (code, r, _) = scan(&env, &src, 10, "signed");
    assert_eq!(code, 4, "{r}");
    let detail = r["violations"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("9223372036854775808") && detail.contains("\"id_codec\": \"int\""),
        "{detail}"
    );
}

/// Negative JSON integers from a replay file reach the codec (they were kept as another type
/// and refused whatever the codec): under `signed` they are IDs, printed as they are.
#[test]
fn replay_negative_ids_scan_under_the_signed_codec() {
    let env = Env::new();
    let replay = crate::util::write(
        env.dir.path(),
        "r.jsonl",
        "{\"cursor\": null, \"items\": [-5, 3, -9223372036854775808], \"next\": \"c2\"}\n\
         {\"cursor\": \"c2\", \"items\": [9223372036854775807, -1], \"next\": null}\n",
    );
    let (code, r, err) = scan(&env, &format!("replay:{replay}"), 3, "signed");
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 5);
    assert_eq!(
        env.export("run-1"),
        [
            "-9223372036854775808",
            "-5",
            "-1",
            "3",
            "9223372036854775807"
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect::<BTreeSet<_>>()
    );
    verify(&env, &r);

    // The independent verifier reads `signed` exports by docs/FORMAT.md's rule.
    let receipt = crate::util::write(env.dir.path(), "receipt.json", &r.to_string());
    for format in ["text", "jsonl"] {
        let (code, exported, err) =
            crate::util::run(&["--store", &env.store, "export", "run-1", "--format", format]);
        assert_eq!(code, 0, "{err}");
        let ids = crate::util::write(env.dir.path(), "ids", &exported);
        let (code, out, err) =
            crate::evidence::python_verifier(&[&receipt, &ids, "--format", format]);
        assert_eq!(code, 0, "{format}: {out}{err}");
        let more = crate::util::write(env.dir.path(), "more", &format!("{exported}-6\n"));
        let (code, out, err) =
            crate::evidence::python_verifier(&[&receipt, &more, "--format", format]);
        assert_eq!(code, 4, "an ID more is a mismatch: {out}{err}");
    }
}
