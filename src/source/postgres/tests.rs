#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::Path;

use serde_json::json;

use super::connect::{parse_identifier, PgConnect};
use super::value::civil_from_days;
use super::PgDialect;
use crate::source::sql::config::{from_object, SqlConfig};
use crate::source::sql::key::{id_text, Key, KeyType};

type PgConfig = (SqlConfig, PgConnect);

#[track_caller]
fn check_config(value: serde_json::Value, expected: Result<(), &str>) -> Option<PgConfig> {
    let got = from_object::<PgDialect>(Path::new("pg.json"), value.as_object().unwrap(), |name| {
        (name == "PG_DSN").then(|| "postgresql://u:hunter2canary@127.0.0.1/test".to_owned())
    });
    match (got, expected) {
        (Ok(c), Ok(())) => Some(c),
        (Err(e), Err(want)) => {
            let shown = e.to_string();
            assert!(shown.contains(want), "{shown:?} lacks {want:?}");
            assert!(!shown.contains("hunter2canary"), "{shown}");
            None
        }
        (Ok(c), Err(want)) => panic!("accepted {c:?}, expected an error with {want:?}"),
        (Err(e), Ok(())) => panic!("refused: {e}"),
    }
}

#[test]
fn config_is_strict_and_names_the_key() {
    let base = json!({"dsn": "host=127.0.0.1 dbname=test", "table": "t", "key": "id"});
    check_config(base.clone(), Ok(()));
    let with = |k: &str, v: serde_json::Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    check_config(with("tabel", json!("t")), Err("unknown key \"tabel\""));
    check_config(
        json!({"table": "t", "key": "id"}),
        Err("missing required key \"dsn\""),
    );
    check_config(with("dsn_env", json!("PG_DSN")), Err("not both"));
    check_config(
        json!({"dsn_env": "NOPE_UNSET", "table": "t", "key": "id"}),
        Err("key \"dsn_env\": the environment variable \"NOPE_UNSET\" is not set"),
    );
    check_config(
        with("key", json!("a.b")),
        Err("key \"key\": expected one column"),
    );
    check_config(
        with("table", json!("a.b.c")),
        Err("key \"table\": expected"),
    );
    check_config(
        with("table", json!("1t")),
        Err("key \"table\": \"1t\" is not an identifier"),
    );
    check_config(
        with("labels", json!({"x": 3})),
        Err("key \"labels.x\": must be an SQL predicate"),
    );
    check_config(
        with("labels", json!({"x": " "})),
        Err("key \"labels.x\": is empty"),
    );
    check_config(
        with("content", json!(["a", 1])),
        Err("key \"content[1]\": must be a string"),
    );
    check_config(with("page_delay_ms", json!(-1)), Err("page_delay_ms"));
    check_config(
        with("dsn", json!("sslmode=verify-full host=x")),
        Err("invalid value for option `sslmode`"),
    );
    check_config(
        with("dsn", json!("host=x bogus=1")),
        Err("unknown option `bogus`"),
    );
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..17).map(|i| (format!("l{i}"), json!("true"))).collect();
    check_config(with("labels", json!(labels)), Err("at most 16 labels"));
}

#[test]
fn the_password_never_shows() {
    let c = check_config(
        json!({"dsn_env": "PG_DSN", "table": "t", "key": "id"}),
        Ok(()),
    )
    .unwrap();
    let shown = format!("{c:?}");
    assert!(!shown.contains("hunter2canary"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    // A malformed DSN: the parse error may not quote the text around the password.
    check_config(
        json!({"dsn": "host='127.0.0.1 password=hunter2canary", "table": "t", "key": "id"}),
        Err("key \"dsn\": not a connection string"),
    );
    check_config(
        json!({"dsn": "user=u password=hunter2canary port=x", "table": "t", "key": "id"}),
        Err("invalid value for option `port`"),
    );
}

#[test]
fn identifiers_follow_sql_rules() {
    let ok = |t: &str, want: &[&str]| assert_eq!(parse_identifier(t).unwrap(), want, "{t}");
    ok("Customers", &["customers"]);
    ok("public.t_1", &["public", "t_1"]);
    ok(r#""My.Schema"."Ta""ble""#, &["My.Schema", "Ta\"ble"]);
    for bad in [
        "",
        "a.",
        ".a",
        "a b",
        "\"unterminated",
        "\"\"",
        "a;drop",
        "a\"b\"",
    ] {
        assert!(parse_identifier(bad).is_err(), "{bad:?} accepted");
    }
    assert!(parse_identifier(&"a".repeat(64)).is_err());
    assert!(parse_identifier(&"a".repeat(63)).is_ok());
    let c = check_config(
        json!({"dsn": "host=x", "table": r#"s."we""ird""#, "key": "ID"}),
        Ok(()),
    )
    .unwrap();
    assert_eq!(
        SqlConfig::table_of::<PgDialect>(&c.0.table),
        r#""s"."we""ird""#
    );
    assert_eq!(c.0.key, "id");
}

#[test]
fn cursors_round_trip_every_key_exactly() {
    use crate::source::sql::dialect::Dialect;
    let cursor = |key: &Key| {
        format!(
            "{}{}",
            PgDialect::CURSOR_TAG,
            id_text(&key.clone().into_raw_id())
        )
    };
    let from_cursor = |ty: KeyType, c: &str| {
        c.strip_prefix(PgDialect::CURSOR_TAG)
            .and_then(|t| Key::from_text(ty, t))
    };
    for (ty, key) in [
        (KeyType::signed(64), Key::Int(-9_223_372_036_854_775_808)),
        (KeyType::signed(32), Key::Int(42)),
        (
            KeyType::Text,
            Key::Text("k1: spaces, ünïcode, \"quotes\"\n".to_owned()),
        ),
        (KeyType::Text, Key::Text(String::new())),
        (
            KeyType::Uuid,
            Key::Uuid(
                crate::source::sql::key::parse_uuid("0b7e6f2c-1c6a-4d7e-9f1a-2b3c4d5e6f70")
                    .unwrap(),
            ),
        ),
    ] {
        assert_eq!(from_cursor(ty, &cursor(&key)), Some(key));
    }
    assert_eq!(from_cursor(KeyType::signed(64), "k1:x"), None);
    assert_eq!(from_cursor(KeyType::Text, "other"), None);
    // Out of the column's range, or not the canonical decimal a cursor holds.
    assert_eq!(from_cursor(KeyType::signed(16), "k1:40000"), None);
    assert_eq!(from_cursor(KeyType::signed(16), "k1:+7"), None);
    assert_eq!(
        Key::from_text(KeyType::signed(16), "17"),
        Some(Key::Int(17))
    );
}

#[test]
fn days_map_to_calendar_dates() {
    assert_eq!(civil_from_days(0), Some((1970, 1, 1)));
    assert_eq!(civil_from_days(10_957), Some((2000, 1, 1)));
    assert_eq!(civil_from_days(11_016), Some((2000, 2, 29)));
    assert_eq!(civil_from_days(-1), Some((1969, 12, 31)));
    assert_eq!(civil_from_days(2_932_896), Some((9999, 12, 31)));
    assert_eq!(civil_from_days(-719_528), Some((0, 1, 1)));
    // Past the years any date can be hashed in.
    assert_eq!(civil_from_days(2_932_897), None);
    assert_eq!(civil_from_days(i64::MAX), None);
}

#[test]
fn uuids_print_as_postgresql_does() {
    let b = [
        0x0b, 0x7e, 0x6f, 0x2c, 0x1c, 0x6a, 0x4d, 0x7e, 0x9f, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f,
        0x70,
    ];
    assert_eq!(
        crate::source::sql::key::uuid_text(&b),
        "0b7e6f2c-1c6a-4d7e-9f1a-2b3c4d5e6f70"
    );
}

#[test]
fn duration_settings_read_as_show_prints_them() {
    for (text, want) in [
        ("0", None),
        ("250ms", Some(250)),
        ("5s", Some(5_000)),
        ("2min", Some(120_000)),
        ("1h", Some(3_600_000)),
        ("1d", Some(86_400_000)),
        ("1500", Some(1_500)),
        ("", None),
        ("5 weeks", None),
        ("99999999999999999999s", None),
    ] {
        assert_eq!(super::setting_ms(text), want, "{text:?}");
    }
}
