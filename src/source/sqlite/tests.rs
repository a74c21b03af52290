#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use serde_json::Value as Json;

use super::SqliteSource;
use crate::contract::{Page, RawId};
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest, PageSource};

/// A database file in a temporary directory, made by `sql` (in WAL mode).
fn db(sql: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    c.execute_batch(sql).unwrap();
    (dir, path.to_string_lossy().into_owned())
}

fn req(request: Request, snapshot: Option<String>, page_size: u32) -> PageRequest {
    PageRequest {
        request,
        page_size,
        snapshot,
        query: Json::Null,
    }
}

fn ids(p: &Page) -> Vec<u64> {
    p.items
        .iter()
        .map(|i| match &i.id {
            RawId::Int(u) => *u,
            other => panic!("{other:?}"),
        })
        .collect()
}

const ORDERS: &str =
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount DECIMAL(10,2), email TEXT);
     WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 25)
     INSERT INTO orders SELECT n, printf('%d.50', n), 'u' || n || '@example.com' FROM s;";

#[tokio::test]
async fn pages_follow_the_key_in_one_read_transaction_writers_do_not_reach() {
    let (_dir, path) = db(ORDERS);
    let spec = format!("sqlite:{path}?table=orders&key=id&content=amount,email");
    let mut s = SqliteSource::open_spec(&spec).unwrap();
    s.preflight().await.unwrap();
    let first = s.fetch(&req(Request::First, None, 10)).await.unwrap();
    assert_eq!(ids(&first), (1..=10).collect::<Vec<_>>());
    assert_eq!(first.complete, Some(false));
    let snap = first.snapshot.clone().expect("pages echo the transaction");
    assert!(first.items.iter().all(|i| i.content.is_some()));
    // A writer commits beside the scan (WAL): the scan's transaction does not see it.
    let w = rusqlite::Connection::open(&path).unwrap();
    w.execute_batch("DELETE FROM orders WHERE id = 15; INSERT INTO orders VALUES (99, 1, 'x');")
        .unwrap();
    let mut all = ids(&first);
    let mut next = first.next.clone();
    let mut pages = 1;
    while let Some(cursor) = next {
        let p = s
            .fetch(&req(Request::Cursor(cursor), Some(snap.clone()), 10))
            .await
            .unwrap();
        assert_eq!(p.snapshot.as_deref(), Some(snap.as_str()));
        all.extend(ids(&p));
        next = p.next.clone();
        pages += 1;
        assert!(pages < 10);
    }
    assert_eq!(
        all,
        (1..=25).collect::<Vec<_>>(),
        "the state the scan began in"
    );
    assert_eq!(s.count().await, Some(25));
    // Another process's snapshot cannot be had: the contract's policy decides.
    let mut other = SqliteSource::open_spec(&spec).unwrap();
    let e = other
        .fetch(&req(Request::Cursor("after:10".into()), Some(snap), 10))
        .await
        .unwrap_err();
    assert!(matches!(e, FetchError::ExpiredCursor), "{e:?}");
    // A fresh scan sees the writer's rows.
    let p = other.fetch(&req(Request::First, None, 100)).await.unwrap();
    assert_eq!(p.items.len(), 25);
    assert!(ids(&p).contains(&99) && !ids(&p).contains(&15));
}

#[tokio::test]
async fn text_keys_page_by_the_unique_indexs_collation() {
    let (_dir, path) = db("CREATE TABLE c (code TEXT NOT NULL, n INT);
         CREATE UNIQUE INDEX c_code ON c (code COLLATE NOCASE);
         INSERT INTO c VALUES ('b', 1), ('A', 2), ('c', 3), ('D', 4);");
    let spec = format!("sqlite:{path}?table=c&key=code");
    let mut s = SqliteSource::open_spec(&spec).unwrap();
    let p = s.fetch(&req(Request::First, None, 3)).await.unwrap();
    let keys: Vec<String> = p.items.iter().map(|i| format!("{:?}", i.id)).collect();
    assert_eq!(keys, [r#"Str("A")"#, r#"Str("b")"#, r#"Str("c")"#]);
    let q = s
        .fetch(&req(Request::Cursor(p.next.unwrap()), p.snapshot, 3))
        .await
        .unwrap();
    assert_eq!(q.items.len(), 1);
    assert_eq!(q.complete, Some(true));
}

#[tokio::test]
async fn what_keyset_pages_cannot_serve_is_refused_saying_why() {
    let (_dir, path) = db("CREATE TABLE nokey (id INTEGER, v TEXT);
         CREATE TABLE real_key (id REAL PRIMARY KEY);
         CREATE TABLE loose (id INT PRIMARY KEY, v TEXT);
         INSERT INTO loose VALUES (1, 'a'), (2.5, 'b');
         CREATE VIEW v AS SELECT * FROM loose;");
    let refused = |table: &str, content: &str| {
        let spec = format!("sqlite:{path}?table={table}&key=id{content}");
        async move {
            let mut s = SqliteSource::open_spec(&spec).unwrap();
            s.preflight().await.unwrap_err().to_string()
        }
    };
    let e = refused("nokey", "").await;
    assert!(e.contains("has no unique index of its own"), "{e}");
    let e = refused("real_key", "").await;
    assert!(e.contains("is of type REAL"), "{e}");
    let e = refused("v", "").await;
    assert!(e.contains("is a view, not a table"), "{e}");
    let e = refused("missing", "").await;
    assert!(e.contains("has no table \"missing\""), "{e}");
    let e = refused("loose", "&content=nope").await;
    assert!(
        e.contains("content: the table has no column \"nope\""),
        "{e}"
    );
    // A key of another class than its column's is an invalid page, never skipped.
    let spec = format!("sqlite:{path}?table=loose&key=id");
    let mut s = SqliteSource::open_spec(&spec).unwrap();
    let e = s.fetch(&req(Request::First, None, 10)).await.unwrap_err();
    assert!(
        matches!(&e, FetchError::InvalidPage { detail } if detail.contains("REAL value")),
        "{e:?}"
    );
    // A missing file is the config's error.
    let mut s = SqliteSource::open_spec("sqlite:/nonexistent/x.db?table=t&key=id").unwrap();
    let e = s.preflight().await.unwrap_err().to_string();
    assert!(
        e.contains("cannot open the database /nonexistent/x.db"),
        "{e}"
    );
    // A database without its table and key is refused before anything is opened.
    let e = SqliteSource::open_spec(&format!("sqlite:{path}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sqlite:PATH?table=T&key=K"), "{e}");
}

#[tokio::test]
async fn a_config_file_names_the_database_relative_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.json");
    std::fs::write(&cfg, r#"{"dsn": "data/t.db", "table": "t", "key": "id"}"#).unwrap();
    let mut s = SqliteSource::open_spec(&format!("sqlite:{}", cfg.display())).unwrap();
    let e = s.preflight().await.unwrap_err().to_string();
    let want = dir.path().join("data/t.db").display().to_string();
    assert!(
        e.contains(&format!("cannot open the database {want}")),
        "{e}"
    );
}
