//! Scans through the binary: verified coverage in one snapshot, labels, count mode, string keys,
//! a snapshot that really holds while another connection writes, and the configurations the
//! source refuses.

use serde_json::json;

use super::{db, root_of_1_to, Env};

#[test]
fn a_table_scans_verified_in_one_snapshot_with_labels() {
    let Some(db) = db() else { return };
    let t = db.table("verified");
    db.numbered(&t, 1000);
    let env = Env::new();
    let src = env.source(
        "my.json",
        &t,
        "id",
        r#""labels": {"grp0": "grp = 0", "first_ten": "id <= 10"}"#,
    );
    let c = env.file("c.json", r#"{"source": "customers", "page_size": 100}"#);
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(r["unique_ids_observed"], 1000);
    // 1000 rows in pages of 100: the tenth page finds no 101st row, so it is the last.
    assert_eq!(r["pages_observed"], 10);
    assert_eq!(r["terminal_cursor_observed"], true);
    assert_eq!(r["labels"]["grp0"]["count"], 142);
    assert_eq!(r["labels"]["first_ten"]["count"], 10);
    assert_eq!(r["labels"]["first_ten"]["ranges"], json!(["1..10"]));
    assert_eq!(
        r["merkle_root"],
        root_of_1_to(1000),
        "the ID set is exactly 1..=1000"
    );
    let snap = r["snapshot_id"].as_str().unwrap();
    assert!(
        snap.starts_with("mariadb:") || snap.starts_with("mysql:"),
        "{snap}"
    );
    assert!(snap.contains(";conn=") && snap.contains(";at="), "{snap}");
    assert!(
        snap.ends_with("no binlog position") || snap.contains(";binlog=") || snap.contains(";gtid"),
        "{snap}"
    );

    // One more row: an eleventh page of one row.
    db.exec(&format!("INSERT INTO {t} VALUES (1001, 0, NULL)"));
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0);
    assert_eq!(r["pages_observed"], 11);
    assert_ne!(
        r["snapshot_id"].as_str().unwrap(),
        snap,
        "each scan has its own snapshot"
    );

    // A `where` narrows the scope; an empty scope is a verified empty collection.
    let narrow = env.source(
        "narrow.json",
        &t,
        "id",
        r#""where": "id > 500 AND id <= 1000""#,
    );
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &narrow]);
    assert_eq!(code, 0);
    assert_eq!(r["unique_ids_observed"], 500);
    let empty = env.source("empty.json", &t, "id", r#""where": "id > 5000""#);
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &empty]);
    assert_eq!(code, 0);
    assert_eq!(r["unique_ids_observed"], 0);
    assert_eq!(r["pages_observed"], 1);
}

#[test]
fn writes_by_another_connection_during_a_slow_scan_are_not_seen() {
    let Some(db) = db() else { return };
    let t = db.table("consistent");
    db.numbered(&t, 200);
    let env = Env::new();
    // Pages of 20 with a pause before each: the scan takes about three seconds.
    let src = env.source(
        "my.json",
        &t,
        "id",
        r#""labels": {"grp0": "grp = 0"}, "pause_ms": 150"#,
    );
    let c = env.file("c.json", r#"{"source": "customers", "page_size": 20}"#);
    let mut scan = env.spawn_scan(&c, &src);
    scan.wait_for_ack(2);
    // Pages 1 and 2 covered IDs 1..=40; every change below is ahead of the scan or behind it.
    db.exec(&format!(
        "INSERT INTO {t} SELECT seq, 0, NULL FROM seq_1001_to_1050;\n\
         DELETE FROM {t} WHERE id BETWEEN 150 AND 159;\n\
         UPDATE {t} SET grp = 0"
    ));
    assert!(scan.running(), "the writes must land while the scan runs");
    let (code, r) = scan.finish();
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(
        r["unique_ids_observed"], 200,
        "inserts and deletes after the start are not seen"
    );
    assert_eq!(r["merkle_root"], root_of_1_to(200));
    assert_eq!(
        r["labels"]["grp0"]["count"], 28,
        "the update is not seen either"
    );
    assert!(r["pages_observed"].as_u64().unwrap() >= 10);
    let snap = r["snapshot_id"].as_str().unwrap().to_owned();

    // The writes did commit: a new scan, in a new snapshot, sees them.
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0);
    assert_eq!(r["unique_ids_observed"], 240);
    assert_eq!(r["labels"]["grp0"]["count"], 240);
    assert_ne!(r["snapshot_id"].as_str().unwrap(), snap);
}

#[test]
fn count_mode_asks_the_server_for_a_count() {
    let Some(db) = db() else { return };
    let t = db.table("count");
    db.numbered(&t, 700);
    let env = Env::new();
    let src = env.source("my.json", &t, "id", r#""where": "grp = 3""#);
    let c = env.file("c.json", r#"{"source": "customers", "mode": "count"}"#);
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 3, "a server count is unknown coverage: {err}");
    assert_eq!(r["count_total"], 100);
    assert_eq!(r["pages_observed"], 0);
    assert_eq!(r["conclusion_scope"], "none");
}

#[test]
fn string_keys_scan_in_collation_order_with_the_string_codec() {
    let Some(db) = db() else { return };
    let t = db.table("strings");
    db.exec(&format!(
        "CREATE TABLE {t} (code VARCHAR(32) CHARACTER SET utf8mb4 PRIMARY KEY, n INT) \
         ENGINE=InnoDB;\n\
         INSERT INTO {t} SELECT CONCAT('c-', LPAD(seq, 4, '0')), seq FROM seq_1_to_250;\n\
         INSERT INTO {t} VALUES ('é-1', 1), ('Zeta', 2), ('alpha', 3), ('x y', 4), ('_', 5)"
    ));
    let env = Env::new();
    let src = env.source("my.json", &t, "code", r#""labels": {"small": "n <= 3"}"#);
    let c = env.file(
        "c.json",
        r#"{"source": "codes", "page_size": 20, "id_codec": "string"}"#,
    );
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 255);
    assert_eq!(r["labels"]["small"]["count"], 6);
    let (code, out, _) = crate::util::run(&["--store", &env.store, "export", "1"]);
    assert_eq!(code, 0);
    let mut got: Vec<&str> = out.lines().collect();
    got.sort_unstable();
    let mut want: Vec<String> = (1..=250).map(|i| format!("c-{i:04}")).collect();
    want.extend(["é-1", "Zeta", "alpha", "x y", "_"].map(String::from));
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn a_table_without_a_consistent_snapshot_claims_only_live_records() {
    let Some(db) = db() else { return };
    let t = db.table("myisam");
    db.exec(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY) ENGINE=MyISAM;\n\
         INSERT INTO {t} SELECT seq FROM seq_1_to_30"
    ));
    let env = Env::new();
    let src = env.source("my.json", &t, "id", "");
    let c = env.file("c.json", r#"{"source": "m", "page_size": 7}"#);
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 30);
    assert_eq!(r["snapshot_id"], serde_json::Value::Null);
    assert_eq!(r["conclusion_scope"], "all_records_live");
}

#[test]
fn keys_that_cannot_page_and_unknown_names_are_refused_by_name() {
    let Some(db) = db() else { return };
    let t = db.table("refused");
    db.exec(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, code INT NULL UNIQUE, grp INT, amount DECIMAL(5,2), \
         UNIQUE KEY two (grp, amount)) ENGINE=InnoDB;\n\
         INSERT INTO {t} VALUES (1, 10, 1, 1.5), (2, NULL, 1, 2.5), (3, 30, 2, 1.5)"
    ));
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "r", "page_size": 10}"#);
    let scan = |name: &str, key: &str, extra: &str| {
        let src = env.source(name, &t, key, extra);
        env.json(&["scan", "--contract", &c, "--source", &src])
    };

    // A nullable unique key holding a NULL: that row could never be listed.
    let (code, r, _) = scan("nullable.json", "code", "");
    assert_eq!(code, 4, "{r}");
    assert_eq!(r["violations"][0]["kind"], "invalid_page");
    let detail = r["violations"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("1 row(s) of the scope have a NULL key `code`"),
        "{detail}"
    );
    // The same key with the NULL outside the scope is fine.
    let (code, r, _) = scan("scoped.json", "code", r#""where": "code IS NOT NULL""#);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["unique_ids_observed"], 2);

    for (key, extra, needle) in [
        ("grp", "", "no single-column PRIMARY KEY or UNIQUE index"),
        ("amount", "", "no single-column PRIMARY KEY or UNIQUE index"),
        ("nope", "", "unknown column"),
        ("id", r#""content": ["nope"]"#, "unknown column"),
        ("id", r#""where": "id >>> 1""#, "not valid SQL"),
        ("id", r#""labels": {"l": "no_such_fn(id)"}"#, "FUNCTION"),
    ] {
        let (code, _, err) = scan("bad.json", key, extra);
        assert_eq!(code, 2, "{key} {extra}: {err}");
        assert!(err.contains(needle), "{key} {extra}: {err}");
    }
    let env2 = Env::new();
    let src = env2.source("gone.json", &format!("{t}_gone"), "id", "");
    let (code, _, err) = env2.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown table") && err.contains("_gone"),
        "{err}"
    );
}

#[test]
fn a_key_range_scans_only_its_slice_and_a_plan_merges_to_the_whole_table() {
    // 200,000 rows (4 partitions): a shard's scan sees only `lo <= id < hi` (bound
    // parameters), and the merge of a plan of 3 shards is the single scan.
    let Some(db) = db() else { return };
    let t = db.table("ranged");
    db.numbered(&t, 200_000);
    let env = Env::new();
    let src = env.source("my.json", &t, "id", "");
    let c = env.file(
        "c.json",
        r#"{"source": "customers", "page_size": 5000, "key_range": {"lo": 65536, "hi": 131072}}"#,
    );
    let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["unique_ids_observed"], 65_536);
    assert_eq!(r["partitions"], 1);

    let whole = env.file("w.json", r#"{"source": "customers", "page_size": 5000}"#);
    let (code, single, err) = env.json(&["scan", "--contract", &whole, "--source", &src]);
    assert_eq!(code, 0, "{err}");
    let dir = env.dir.path().join("plan");
    let dir_s = dir.to_string_lossy().into_owned();
    let (code, p, err) = env.json(&[
        "plan",
        "--contract",
        &whole,
        "--source",
        &src,
        "--shards",
        "3",
        "--out",
        &dir_s,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(p["split"]["by"], "key_sample");
    assert_eq!(p["split"]["lo"], 1);
    assert_eq!(p["split"]["last"], 200_000);
    let plan = dir.join("plan.json").to_string_lossy().into_owned();
    let mut stores = Vec::new();
    for k in 0..3 {
        let store = dir
            .join(format!("s{k}.redb"))
            .to_string_lossy()
            .into_owned();
        let (code, out, err) = crate::util::run(&[
            "--store",
            &store,
            "scan",
            "--plan",
            &plan,
            "--shard",
            &k.to_string(),
        ]);
        assert_eq!(code, 0, "shard {k}: {err}{out}");
        stores.push(store);
    }
    let merged = dir.join("m.redb").to_string_lossy().into_owned();
    let mut args = vec!["merge", "--plan", plan.as_str(), "--out", merged.as_str()];
    args.extend(stores.iter().map(String::as_str));
    let (code, m, err) = env.json(&args);
    assert_eq!(code, 0, "{err}");
    // Each MySQL shard reads its own consistent snapshot (MySQL cannot share one), so the
    // merged run claims the live collection only; its IDs are the single scan's.
    assert_eq!(m["receipt"]["conclusion_scope"], "all_records_live");
    assert!(m["receipt"]["snapshot_id"].is_null());
    assert_eq!(single["conclusion_scope"], "all_records_in_snapshot");
    for key in ["merkle_root", "unique_ids_observed", "partitions"] {
        assert_eq!(m["receipt"][key], single[key], "{key}");
    }
}

/// One page in flight ahead: a page's successor is sent before the page is returned. The
/// scan with it (the default) and without it (`"prefetch": false`) are the same run: pages,
/// IDs, labels, content. And a source asked for anything but the page sent ahead (a first
/// page again, then the key bounds, then the next page) reads that answer to its end first,
/// so every request is answered on the same connection in the same snapshot.
#[test]
fn a_page_read_ahead_changes_nothing_and_a_request_it_did_not_guess_is_served() {
    use scanledger::{MysqlSource, PageRequest, PageSource, Request};
    let Some(db) = db() else { return };
    let t = db.table("ahead");
    db.numbered(&t, 2500);
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "ahead", "page_size": 100}"#);
    let mut receipts = Vec::new();
    for (name, extra) in [
        (
            "on.json",
            r#""content": ["email", "grp"], "labels": {"g0": "grp = 0"}"#,
        ),
        (
            "off.json",
            r#""content": ["email", "grp"], "labels": {"g0": "grp = 0"}, "prefetch": false"#,
        ),
    ] {
        let src = env.source(name, &t, "id", extra);
        let (code, r, err) = env.json(&["scan", "--contract", &c, "--source", &src]);
        assert_eq!(code, 0, "{name}: {err}");
        receipts.push(r);
    }
    for key in [
        "unique_ids_observed",
        "pages_observed",
        "merkle_root",
        "content_root",
        "labels",
    ] {
        assert_eq!(receipts[0][key], receipts[1][key], "{key}");
    }
    assert_eq!(receipts[0]["merkle_root"], root_of_1_to(2500));

    let path = env.file(
        "lib.json",
        &format!(
            r#"{{"dsn": "{}", "table": "{t}", "key": "id"}}"#,
            super::ROOT_DSN
        ),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut source = MysqlSource::open(path.as_ref()).unwrap();
    let req = |request: Request, snapshot: Option<String>| PageRequest {
        request,
        page_size: 100,
        snapshot,
        query: serde_json::Value::Null,
    };
    let first = rt
        .block_on(source.fetch(&req(Request::First, None)))
        .unwrap();
    let snap = first.snapshot.clone();
    assert_eq!(first.items.len(), 100);
    // Page 2 was sent ahead; a first page again is served from the same snapshot.
    let again = rt
        .block_on(source.fetch(&req(Request::First, snap.clone())))
        .unwrap();
    assert_eq!(again.items.len(), 100);
    assert_eq!(again.next, first.next);
    assert_eq!(again.snapshot, snap);
    // The key bounds run on the connection the page sent ahead held.
    assert_eq!(rt.block_on(source.key_bounds()).unwrap(), Some((1, 2500)));
    let next = first.next.clone().unwrap();
    let second = rt
        .block_on(source.fetch(&req(Request::Cursor(next), snap.clone())))
        .unwrap();
    assert_eq!(second.items.len(), 100);
    assert_eq!(second.items[0].id, scanledger::RawId::Int(101));
    assert_eq!(second.snapshot, snap);
}
