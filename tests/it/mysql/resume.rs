//! A scan of a MariaDB table killed with SIGKILL in the middle, then `resume`d under each
//! expired-cursor policy.
//!
//! The failure this guards against: MySQL cannot export a snapshot, so after the process dies
//! its snapshot is gone. A resume that quietly went on in a new snapshot would splice two
//! collection states and still claim `all_records_in_snapshot`. The source must answer the
//! stored cursor with `ExpiredCursor`, and the receipt must say what the policy made of it:
//! `high_water` goes on after the last key in a fresh snapshot and claims only the live
//! records, `restart` begins a new linked run that claims its own snapshot, `block` stops
//! with `expired_cursor`.

use serde_json::Value;

use super::{db, root_of_1_to, Db, Env};

const ROWS: u64 = 300;

/// Scans `ROWS` rows in pages of 10 under `policy`, kills the scan after page 5 is durable,
/// and returns the environment, the table and the pinned snapshot of run-1.
fn killed_scan(db: &Db, policy: &str) -> (Env, String, String, String) {
    let t = db.table(&format!("kill_{policy}"));
    db.numbered(&t, ROWS);
    let env = Env::new();
    let src = env.source("my.json", &t, "id", r#""pause_ms": 40"#);
    let c = env.file(
        "c.json",
        &format!(r#"{{"source": "customers", "page_size": 10, "on_expired_cursor": "{policy}"}}"#),
    );
    let mut scan = env.spawn_scan(&c, &src);
    scan.wait_for_ack(5);
    scan.kill();
    let (code, r, err) = env.json(&["receipt", "1"]);
    assert_eq!(code, 3, "{err}");
    assert!(r["unique_ids_observed"].as_u64().unwrap() >= 50);
    assert!(r["unique_ids_observed"].as_u64().unwrap() < ROWS);
    let snap = r["snapshot_id"].as_str().unwrap().to_owned();
    (env, t, src, snap)
}

#[test]
fn after_a_kill_high_water_continues_live_after_the_last_key() {
    let Some(db) = db() else { return };
    let (env, t, _src, snap) = killed_scan(&db, "high_water");
    // While the scan is down: a row appears past the end, a row already seen disappears.
    db.exec(&format!(
        "INSERT INTO {t} VALUES (5000, 1, NULL);\nDELETE FROM {t} WHERE id = 3"
    ));
    // No --source: the run recorded the one it was started with.
    let (code, r, err) = env.json(&["resume", "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["run_id"], "run-1");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(
        r["conclusion_scope"], "all_records_live",
        "pages from two snapshots cannot claim either"
    );
    assert_eq!(
        r["snapshot_id"],
        snap.as_str(),
        "the run stays pinned to where it began"
    );
    // Row 3 was seen before the kill; row 5000 after the resume: the live union.
    assert_eq!(r["unique_ids_observed"], ROWS + 1);
    assert_eq!(r["violations"], Value::Array(vec![]));
}

#[test]
fn after_a_kill_restart_begins_a_linked_run_in_a_new_snapshot() {
    let Some(db) = db() else { return };
    let (env, t, _src, snap) = killed_scan(&db, "restart");
    db.exec(&format!("DELETE FROM {t} WHERE id = 3"));
    let (code, r, err) = env.json(&["resume", "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["run_id"], "run-2");
    assert_eq!(r["restarted_from"], "run-1");
    assert_eq!(r["coverage_status"], "verified");
    assert_eq!(r["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(
        r["unique_ids_observed"],
        ROWS - 1,
        "the new snapshot no longer has row 3"
    );
    let new_snap = r["snapshot_id"].as_str().unwrap();
    assert_ne!(new_snap, snap);
    assert!(new_snap.contains(";conn="), "{new_snap}");
    let (_, old, _) = env.json(&["receipt", "1"]);
    assert_eq!(old["superseded_by"], "run-2");
    assert_eq!(old["violations"][0]["kind"], "expired_cursor");
    assert_eq!(old["conclusion_scope"], "none");
}

#[test]
fn after_a_kill_block_stops_with_expired_cursor() {
    let Some(db) = db() else { return };
    let (env, _t, src, snap) = killed_scan(&db, "block");
    let (code, r, err) = env.json(&["resume", "1"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(r["coverage_status"], "unknown");
    assert_eq!(r["conclusion_scope"], "none");
    assert_eq!(r["snapshot_id"], snap.as_str());
    assert_eq!(r["violations"][0]["kind"], "expired_cursor");
    // Nothing collected is presented as the collection; a new scan is the way forward.
    let c = env.file("c2.json", r#"{"source": "customers", "page_size": 100}"#);
    let (code, r, _) = env.json(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 0);
    assert_eq!(r["merkle_root"], root_of_1_to(ROWS));
}

/// The connection holding the snapshot is killed by the server between two pages (an
/// operator's `KILL`, a failover): the next page fails as a server error (retried), the retry
/// finds the snapshot gone (`ExpiredCursor`), and a high-water request after the last key is
/// served from a fresh snapshot whose new ID is echoed.
#[test]
fn a_lost_connection_is_a_server_error_then_its_snapshot_is_expired() {
    use scanledger::MysqlSource;
    use scanledger::{FetchError, PageRequest, PageSource, Request};

    let Some(db) = db() else { return };
    let t = db.table("lost");
    db.numbered(&t, 30);
    let env = Env::new();
    let spec = env.source("my.json", &t, "id", "");
    let mut source = MysqlSource::open(spec.strip_prefix("mysql:").unwrap().as_ref()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut req = PageRequest {
        request: Request::First,
        page_size: 10,
        snapshot: None,
        query: Value::Null,
    };
    let page = rt.block_on(source.fetch(&req)).unwrap();
    let snap = page.snapshot.clone().unwrap();
    let conn_id = snap
        .split(';')
        .find_map(|p| p.strip_prefix("conn="))
        .unwrap()
        .to_owned();
    db.exec(&format!("KILL {conn_id}"));
    req.request = Request::Cursor(page.next.clone().unwrap());
    req.snapshot = Some(snap.clone());
    let first_try = rt.block_on(source.fetch(&req));
    assert!(
        matches!(first_try, Err(FetchError::ServerError)),
        "{first_try:?}"
    );
    let retry = rt.block_on(source.fetch(&req));
    assert!(matches!(retry, Err(FetchError::ExpiredCursor)), "{retry:?}");

    req.request = Request::After("10".into());
    let page = rt.block_on(source.fetch(&req)).unwrap();
    assert_eq!(page.items.len(), 10);
    assert_eq!(page.items[0].id, scanledger::RawId::Int(11));
    let fresh = page.snapshot.clone().unwrap();
    assert_ne!(fresh, snap, "a fresh snapshot, under its own ID");
    // The run stays pinned to the old ID; this source answers it from the fresh snapshot.
    req.request = Request::Cursor(page.next.unwrap());
    let last = rt.block_on(source.fetch(&req)).unwrap();
    assert_eq!(last.snapshot.as_deref(), Some(fresh.as_str()));
    assert_eq!(last.items.len(), 10);
    assert_eq!(last.next, None);
}
