//! Which content columns of a changed row differ, and `--reread` over large differing
//! partitions, against the real servers (the tables of `migration.rs`: 100,000 rows in MariaDB
//! and PostgreSQL, content `amount`, `ts`, `email`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::{json, Value};

use crate::migration::{one_command, pair, servers, ROWS};

/// A row where only `email` changed and one where `amount` and `email` did: the re-read and the
/// one-pass comparison name the same columns, in the configs' order, and with a renamed column
/// paired by `--content email=mail` both sides' names.
#[test]
fn a_changed_row_names_the_columns_that_differ() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "cols");
    pg.exec(&format!(
        "UPDATE {t} SET email = 'changed@example.com' WHERE id = 7; \
         UPDATE {t} SET amount = amount + 1, email = 'both@example.com' WHERE id = 70007",
        t = p.pg.name
    ));
    p.scan_both(ROWS);
    let named = json!([
        {"id": 7, "columns": ["email"], "to_columns": null},
        {"id": 70007, "columns": ["amount", "email"], "to_columns": null},
    ]);
    let (code, v, err) = p.verify(&["--content", "--reread"]);
    assert_eq!(code, 4, "{err} {v}");
    assert_eq!(v["changed_ids"], json!([7, 70007]), "{v}");
    assert_eq!(v["changed_columns"], named, "{v}");
    assert_eq!(v["content"]["reread"]["changed_columns"], named, "{v}");
    let (_, text, _) = p.verify_text(&["--content", "--reread"]);
    assert!(
        text.contains("\n  changed  7 (email), 70007 (amount, email)\n"),
        "{text}"
    );
    // The one-command form names them as it compares the rows, without a re-read.
    let (code, one, err) = one_command(&p, "one.redb", &["--content"]);
    assert_eq!(code, 4, "{err} {one}");
    assert_eq!(one["stream"]["compared"], true, "{one}");
    assert_eq!(one["content"]["reread"], Value::Null, "{one}");
    assert_eq!(one["changed_columns"], named, "{one}");
    // A column the migration renamed: the `--from` names, and the `--to` names beside them.
    pg.exec(&format!(
        "ALTER TABLE {} RENAME COLUMN email TO mail",
        p.pg.name
    ));
    let from = format!("mysql://root@127.0.0.1:3306/test?table={}&key=id", p.my);
    let to = format!(
        "postgres://postgres@127.0.0.1:5432/test?table={}&key=id",
        p.pg.name
    );
    let args = [
        "migration",
        "verify",
        "--from",
        &from,
        "--to",
        &to,
        "--content",
        "amount,ts,email=mail",
        "--reread",
    ];
    let (code, v, err) = p.sl("renamed.redb", &args);
    assert_eq!(code, 4, "{err} {v}");
    let renamed = json!([
        {"id": 7, "columns": ["email"], "to_columns": ["mail"]},
        {"id": 70007, "columns": ["amount", "email"], "to_columns": ["amount", "mail"]},
    ]);
    assert_eq!(v["stream"]["compared"], true, "{v}");
    assert_eq!(v["changed_columns"], renamed, "{v}");
    assert_eq!(v["content"]["reread"]["changed_columns"], renamed, "{v}");
    let store = p.path("renamed.redb");
    let mut text_args = vec!["--store", store.as_str()];
    text_args.extend_from_slice(&args);
    let (code, text, err) = crate::util::run(&text_args);
    assert_eq!(code, 4, "{err}");
    assert!(
        text.contains("\n  changed  7 (email=mail), 70007 (amount, email=mail)\n"),
        "{text}"
    );
}

/// Every 7th row changed: both partitions differ throughout (65,535 and 34,465 rows, 14 and 7
/// pages a side), and the re-read, which merges the two sides' pages as they come, names
/// exactly the 14,285 changed keys.
#[test]
fn a_reread_of_large_differing_partitions_names_every_changed_key() {
    let Some((db, pg)) = servers() else { return };
    let p = pair(&db, &pg, "large");
    pg.exec(&format!(
        "UPDATE {} SET email = 'changed@example.com' WHERE id % 7 = 0",
        p.pg.name
    ));
    p.scan_both(ROWS);
    let changed: Vec<u64> = (1..=ROWS).filter(|i| i % 7 == 0).collect();
    let (code, v, err) = p.verify(&["--content", "--reread", "--all"]);
    assert_eq!(code, 4, "{err}");
    let rr = &v["content"]["reread"];
    assert_eq!(rr["partitions"], json!([0, 1]));
    assert_eq!(rr["exact"], true);
    assert_eq!(v["changed_count"], json!(changed.len()));
    assert_eq!(v["changed_ids"], json!(changed));
    // Columns are known for the first 100 changed rows.
    let cols = v["changed_columns"].as_array().unwrap();
    assert_eq!(cols.len(), 100);
    assert!(cols.iter().all(|c| c["columns"] == json!(["email"])));
    assert_eq!(cols[99]["id"], json!(changed[99]));
}
