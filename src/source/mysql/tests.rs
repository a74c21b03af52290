#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::Path;

use mysql_async::Value;

use super::error::{classify, Class};
use super::probe::{self as sql, ColumnInfo, Kind};
use super::{value, MyDialect, MysqlConfig};
use crate::content::{record_hash, ContentValue};
use crate::contract::RawId;
use crate::error::SourceError;
use crate::source::sql::dialect::{Catalogue, UniqueOrder};
use crate::source::sql::key::{id_text, Key, KeyType, Param};

#[track_caller]
fn parse(text: &str) -> Result<MysqlConfig, String> {
    MysqlConfig::parse(Path::new("cfg.json"), text, |name| {
        (name == "MY_DSN").then(|| "mysql://u:hunter2-canary@db.example:3307/shop".to_owned())
    })
    .map_err(|e| match e {
        SourceError::ConfigFile { error, .. } => error.to_string(),
        other => panic!("{other:?}"),
    })
}

#[track_caller]
fn check_refused(text: &str, needle: &str) {
    let problem = parse(text).unwrap_err();
    assert!(problem.contains(needle), "{text}: {problem}");
    assert!(!problem.contains("hunter2"), "{problem}");
}

#[test]
fn config_keys_are_parsed_strictly_and_named_in_errors() {
    let c = parse(
        r#"{"dsn_env": "MY_DSN", "table": "customers", "key": "id", "where": "active = 1",
            "labels": {"needs_migration": "schema_version < 3", "vip": "tier = 'gold'"},
            "content": ["email", "schema_version"], "pause_ms": 5}"#,
    )
    .unwrap();
    assert_eq!(c.sql.table.schema.as_deref(), Some("shop"));
    assert_eq!(c.sql.table.name, "customers");
    assert_eq!(c.sql.labels[0].0, "needs_migration");
    assert_eq!(c.sql.labels[1].0, "vip");
    assert_eq!(c.sql.content, ["email", "schema_version"]);
    assert_eq!(c.sql.pause, std::time::Duration::from_millis(5));
    let c =
        parse(r#"{"dsn": "mysql://root@127.0.0.1/test", "table": "other.t", "key": "k"}"#).unwrap();
    assert_eq!(
        (c.sql.table.schema.as_deref(), c.sql.table.name.as_str()),
        (Some("other"), "t")
    );

    let base = r#""dsn": "mysql://root@h/db", "table": "t", "key": "id""#;
    check_refused(
        &format!("{{{base}, \"colour\": 1}}"),
        "unknown key \"colour\"",
    );
    check_refused(r#"{"table": "t", "key": "id"}"#, "\"dsn\"");
    check_refused(
        r#"{"dsn": "mysql://h/db", "dsn_env": "MY_DSN", "table": "t", "key": "id"}"#,
        "not both",
    );
    check_refused(
        r#"{"dsn_env": "NOPE", "table": "t", "key": "id"}"#,
        "\"NOPE\" is not set",
    );
    check_refused(
        r#"{"dsn": "mysql://h/db", "key": "id"}"#,
        "missing required key \"table\"",
    );
    check_refused(
        r#"{"dsn": "mysql://h/db", "table": "t"}"#,
        "missing required key \"key\"",
    );
    check_refused(
        r#"{"dsn": "mysql://h", "table": "t", "key": "id"}"#,
        "name the schema",
    );
    check_refused(
        &format!("{{{base}, \"where\": \"  \"}}"),
        "key \"where\": is empty",
    );
    check_refused(
        &format!("{{{base}, \"labels\": [\"a\"]}}"),
        "key \"labels\": must be an object",
    );
    check_refused(
        &format!("{{{base}, \"labels\": {{\"a\": 1}}}}"),
        "key \"labels.a\": must be an SQL predicate",
    );
    check_refused(
        &format!("{{{base}, \"content\": \"email\"}}"),
        "key \"content\": must be an array",
    );
    check_refused(
        &format!("{{{base}, \"content\": [\"Email\", \"email\"]}}"),
        "named twice",
    );
    check_refused(
        &format!("{{{base}, \"pause_ms\": 60001}}"),
        "key \"pause_ms\": must be an integer",
    );
    check_refused(
        &format!("{{{base}, \"prefetch\": \"no\"}}"),
        "key \"prefetch\": must be true or false",
    );
    check_refused(
        &format!("{{{base}, \"key\": \"id\"}}"),
        "duplicate key \"key\"",
    );
    check_refused(
        r#"{"dsn": "postgres://u:hunter2@h/db", "table": "t", "key": "id"}"#,
        "must start with mysql://",
    );
    check_refused(
        r#"{"dsn": "mysql://u:hunter2@h/db?nonsense=1", "table": "t", "key": "id"}"#,
        "unknown DSN parameter",
    );
    let too_many: Vec<String> = (0..17).map(|i| format!("\"l{i}\": \"1\"")).collect();
    check_refused(
        &format!("{{{base}, \"labels\": {{{}}}}}", too_many.join(",")),
        "at most 16 labels",
    );
}

#[test]
fn debug_never_shows_the_password() {
    let c = parse(r#"{"dsn_env": "MY_DSN", "table": "t", "key": "id"}"#).unwrap();
    let debug = format!("{c:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(
        debug.contains("mysql://u:<redacted>@db.example:3307/shop"),
        "{debug}"
    );
    let source = super::MysqlSource::new(c);
    assert!(!format!("{source:?}").contains("hunter2"));
}

#[test]
fn identifiers_are_quoted_so_they_cannot_escape() {
    assert_eq!(sql::quote("id"), "`id`");
    assert_eq!(sql::quote("a`b"), "`a``b`");
    assert_eq!(
        sql::quote("x` ; DROP TABLE t; --"),
        "`x`` ; DROP TABLE t; --`"
    );
}

#[test]
fn the_plan_selects_key_labels_and_content_in_order() {
    // The core's statements in MySQL's syntax: the flag "equal to the previous page's last
    // key", the key, each label, each content column; the operator's SQL parenthesised with
    // newlines; a page after a key reads from that key on (`>=`), so an equal key is seen.
    let c = parse(
        r#"{"dsn": "mysql://h/db", "table": "t", "key": "id", "where": "a = 1 -- note",
            "labels": {"l": "b > 2"}, "content": ["x", "j"]}"#,
    )
    .unwrap();
    let cat = Catalogue {
        type_name: Some("bigint(20)".into()),
        key_type: Some(KeyType::signed(64)),
        nullable: false,
        unique: vec![UniqueOrder {
            name: "PRIMARY".into(),
            collation: None,
            exact: true,
            primary: true,
        }],
        uncovered: vec![],
        content: vec!["`x`".into(), Kind::Cast.select("`j`")],
    };
    let (key_type, order) =
        crate::source::sql::plan::decide::<MyDialect>(&cat, "id", None).unwrap();
    let p = crate::source::sql::plan::plan::<MyDialect>(&c.sql, &cat, key_type, order, None);
    assert_eq!(
        p.after.text,
        "SELECT `id` = ?, `id`, CASE WHEN (\nb > 2\n) THEN 1 ELSE 0 END, `x`, \
         CAST(`j` AS CHAR CHARACTER SET utf8mb4) FROM `db`.`t` WHERE (\na = 1 -- note\n) \
         AND `id` >= ? ORDER BY `id` LIMIT ?"
    );
    assert!(p
        .first
        .text
        .ends_with("WHERE (\na = 1 -- note\n) ORDER BY `id` LIMIT ?"));
    assert_eq!(
        p.count.text,
        "SELECT CAST(count(*) AS CHAR) FROM `db`.`t` WHERE (\na = 1 -- note\n)"
    );
    let text = |t: &str| ColumnInfo {
        name: "id".into(),
        data_type: t.into(),
        column_type: t.into(),
        nullable: false,
        charset: Some("utf8mb4".into()),
    };
    assert_eq!(sql::key_type(&text("varchar")), Some(KeyType::Text));
    for bad in ["decimal", "datetime", "text", "blob", "double"] {
        let cat = Catalogue {
            type_name: Some(bad.into()),
            key_type: sql::key_type(&text(bad)),
            ..cat.clone()
        };
        let e = crate::source::sql::plan::decide::<MyDialect>(&cat, "id", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("integer type or CHAR/VARCHAR"), "{bad}: {e}");
    }
}

#[test]
fn column_types_map_to_content_kinds() {
    for (t, cs, want) in [
        ("tinyint", None, Kind::Int),
        ("bigint", None, Kind::Int),
        ("year", None, Kind::Int),
        ("decimal", None, Kind::Decimal),
        ("float", None, Kind::Float32),
        ("double", None, Kind::Float64),
        ("bit", None, Kind::Bit),
        ("varchar", Some("utf8mb4"), Kind::Text),
        ("enum", Some("latin1"), Kind::Text),
        ("char", Some("binary"), Kind::Bytes),
        ("varbinary", None, Kind::Bytes),
        ("longblob", None, Kind::Bytes),
        ("date", None, Kind::Date),
        ("datetime", None, Kind::Timestamp),
        ("TIMESTAMP", None, Kind::Timestamp),
        ("time", None, Kind::Cast),
        ("json", None, Kind::Cast),
        ("uuid", None, Kind::Cast),
    ] {
        assert_eq!(Kind::of(t, cs), want, "{t}");
    }
}

#[test]
fn keys_become_ids_and_cursor_texts() {
    let int = KeyType::unsigned(64);
    let id = |ty, v: &Value| value::key_of(ty, v).map(Key::into_raw_id);
    assert_eq!(
        id(int, &Value::UInt(u64::MAX)).unwrap(),
        RawId::Int(u64::MAX)
    );
    assert_eq!(
        id(KeyType::signed(64), &Value::Int(-3)).unwrap(),
        RawId::Neg(-3),
        "a negative key reaches the codec as one (`signed` takes it, `int` refuses it)"
    );
    assert_eq!(
        id(KeyType::Text, &Value::Bytes(b"c-1".to_vec())).unwrap(),
        RawId::Str("c-1".into())
    );
    assert!(value::key_of(int, &Value::NULL).is_err());
    // The cursor text of a key reads back as the same key, and binds as the same value.
    for (ty, v) in [
        (int, Value::UInt(42)),
        (KeyType::Text, Value::Bytes("é x".as_bytes().to_vec())),
    ] {
        let key = value::key_of(ty, &v).unwrap();
        let text = id_text(&key.clone().into_raw_id());
        let back = Key::from_text(ty, &text).unwrap();
        assert_eq!(back, key);
        assert_eq!(
            value::key_of(ty, &value::param(&back.param())).unwrap(),
            key
        );
    }
    assert!(value::key_of(KeyType::Text, &Value::Bytes(vec![0xff])).is_err());
    assert_eq!(value::param(&Param::Int(7)), Value::Int(7));
    assert_eq!(value::param(&Param::Int(-7)), Value::Int(-7));
    assert_eq!(
        value::param(&Param::Int(i128::from(u64::MAX))),
        Value::UInt(u64::MAX)
    );
    assert_eq!(Key::from_text(int, "7x"), None);
    assert_eq!(
        value::param(&Param::Text("é".into())),
        Value::Bytes("é".as_bytes().to_vec())
    );
}

#[test]
fn utc_micros_matches_known_instants() {
    assert_eq!(value::utc_micros(1970, 1, 1, 0, 0, 0, 0), Some(0));
    assert_eq!(
        value::utc_micros(2024, 2, 29, 12, 30, 15, 250_000),
        Some(1_709_209_815_250_000)
    );
    assert_eq!(
        value::utc_micros(1969, 12, 31, 23, 59, 59, 999_999),
        Some(-1)
    );
    assert_eq!(
        value::utc_micros(9999, 12, 31, 23, 59, 59, 999_999),
        Some(253_402_300_799_999_999)
    );
    assert_eq!(value::utc_micros(2023, 2, 29, 0, 0, 0, 0), None);
    assert_eq!(value::utc_micros(0, 0, 0, 0, 0, 0, 0), None);
}

fn hash(kinds: &[Kind], names: &[String], row: &[Value]) -> Result<[u8; 32], String> {
    value::content_hash(
        kinds,
        names,
        |i| &row[i],
        &mut crate::content::RecordHasher::new(),
    )
}

#[test]
fn content_hashes_follow_the_shared_mapping() {
    let names = vec![
        "a".to_owned(),
        "b".to_owned(),
        "c".to_owned(),
        "d".to_owned(),
    ];
    let kinds = [Kind::Decimal, Kind::Timestamp, Kind::Int, Kind::Float32];
    let row = [
        Value::Bytes(b"1.50".to_vec()),
        Value::Date(2024, 1, 2, 3, 4, 5, 6),
        Value::Int(1),
        Value::Float(1.1),
    ];
    let want = record_hash(&[
        ContentValue::Decimal("1.5"),
        ContentValue::TimestampMicros(value::utc_micros(2024, 1, 2, 3, 4, 5, 6).unwrap()),
        ContentValue::Bool(true),
        ContentValue::Decimal("1.1"),
    ])
    .unwrap();
    assert_eq!(hash(&kinds, &names, &row).unwrap(), want);

    // A zero date hashes as its text: it differs from every real date and from NULL.
    let zero = hash(&[Kind::Date], &names, &[Value::Date(0, 0, 0, 0, 0, 0, 0)]).unwrap();
    assert_eq!(
        zero,
        record_hash(&[ContentValue::Text("0000-00-00")]).unwrap()
    );
    let null = hash(&[Kind::Date], &names, &[Value::NULL]).unwrap();
    assert_eq!(null, record_hash(&[ContentValue::Null]).unwrap());

    let bits = hash(&[Kind::Bit], &names, &[Value::Bytes(vec![1, 0])]).unwrap();
    assert_eq!(bits, record_hash(&[ContentValue::Int(256)]).unwrap());
    let e = hash(&[Kind::Decimal], &names, &[Value::Bytes(b"abc".to_vec())]).unwrap_err();
    assert!(e.contains("\"a\""), "{e}");
}

#[test]
fn errors_are_classified_for_the_collector() {
    let server = |code: u16| {
        mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: format!("message {code}"),
            state: "HY000".into(),
        })
    };
    for code in [1044, 1045, 1142, 1143] {
        assert_eq!(classify(&server(code)), Class::Forbidden, "{code}");
    }
    for code in [1213, 1927, 1053] {
        assert_eq!(classify(&server(code)), Class::Lost, "{code}");
    }
    for code in [1205, 1040, 9999] {
        assert_eq!(classify(&server(code)), Class::Retry, "{code}");
    }
    assert_eq!(classify(&server(1969)), Class::Timeout);
    for (code, what) in [
        (1146, "unknown table"),
        (1054, "unknown column"),
        (1064, "not valid SQL"),
    ] {
        match classify(&server(code)) {
            Class::Fatal(m) => assert!(m.contains(what) && m.contains(&code.to_string()), "{m}"),
            other => panic!("{code}: {other:?}"),
        }
    }
    let io = mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::other("reset")));
    assert_eq!(classify(&io), Class::Lost);
}

/// A synchronized snapshot's ID names its coordinator's connection and user lock; any other
/// ID, or one whose fields are missing or malformed, names none (and cannot be joined).
#[test]
fn a_synchronized_snapshot_id_names_the_coordinator_and_its_lock() {
    let id = "mysql-sync:db:3306;server_id=1;conn=2573;lock=scanledger:42ee;at=2026-12-02T07:35:59Z;no binlog position";
    assert_eq!(super::sync::parse(id), Some((2573, "scanledger:42ee")));
    for other in [
        "mysql:db:3306;server_id=1;conn=7;at=x;binlog=f:1",
        "mysql-sync:db:3306;server_id=1;lock=scanledger:1",
        "mysql-sync:db:3306;conn=-1;lock=scanledger:1",
        "mysql-sync:db:3306;conn=99999999999999999999;lock=x",
        "mysql-sync:db:3306;conn=7",
        "00000006-00000092-1",
    ] {
        assert_eq!(super::sync::parse(other), None, "{other}");
    }
}
