//! The one-pass comparison through the verdict: two runs scanned with their keys streamed to
//! the comparator, then judged against what the runs stored.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::Path;

use super::{verify_migration, MigrationRequest};
use crate::collect::{key_streams, scan, KeySender, KeyTap, StreamedKeys};
use crate::contract::{Contract, Item, Page};
use crate::evidence::lists::RunAt;
use crate::reconcile::{Request, Status};
use crate::source::{FetchError, PageRequest, PageSource};
use crate::store::{Store, StoreOptions};

/// Pages of 100 items, cursors their indexes.
struct Pages(Vec<Vec<Item>>);

impl PageSource for Pages {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let i = match &req.request {
            Request::Cursor(c) => c.parse().unwrap_or(usize::MAX),
            _ => 0,
        };
        let mut page = Page::new(self.0.get(i).cloned().unwrap_or_default());
        if i + 1 < self.0.len() {
            page.next = Some((i + 1).to_string());
        }
        Ok(page)
    }
}

fn rows(ids: impl Iterator<Item = u64>, changed: &[u64]) -> Pages {
    let items: Vec<Item> = ids
        .map(|id| {
            let mut d = [0u8; 32];
            d[..8].copy_from_slice(&id.to_le_bytes());
            d[8] = u8::from(changed.contains(&id));
            Item::int(id).with_content(d)
        })
        .collect();
    Pages(items.chunks(100).map(<[Item]>::to_vec).collect())
}

fn scan_into(path: &Path, name: &str, mut src: Pages, mut keys: KeySender) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut store = Store::open(path, StoreOptions::new()).unwrap();
    let done = rt
        .block_on(scan(
            &Contract::new(name),
            &mut KeyTap::new(&mut src, &mut keys),
            &mut store,
        ))
        .unwrap();
    keys.finish(done.reconciler.status() == Status::Verified);
}

/// Scans `from` and `to` into two stores, their keys compared as they go.
fn scanned(dir: &Path, from: Pages, to: Pages) -> StreamedKeys {
    let (a, b, cmp) = key_streams();
    std::thread::scope(|s| {
        let found = s.spawn(move || cmp.run());
        s.spawn(|| scan_into(&dir.join("a.redb"), "a", from, a));
        s.spawn(|| scan_into(&dir.join("b.redb"), "b", to, b));
        found.join().unwrap()
    })
}

fn verdict(dir: &Path, stream: StreamedKeys) -> serde_json::Value {
    let (pa, pb) = (dir.join("a.redb"), dir.join("b.redb"));
    let (a, b) = (
        Store::open_read(&pa).unwrap(),
        Store::open_read(&pb).unwrap(),
    );
    let (sa, sb) = (a.read().unwrap(), b.read().unwrap());
    let run = |snap, store| RunAt {
        snap,
        run: crate::receipt::RunId(1),
        store,
    };
    let mut request = MigrationRequest::new();
    request.content = true;
    request.stream = Some(stream);
    let (report, _) = verify_migration(run(&sa, &pa), run(&sb, &pb), true, &request).unwrap();
    serde_json::to_value(&report).unwrap()
}

/// Keys in two partitions: 1 to 200 and 70,001 to 70,100.
fn keys() -> impl Iterator<Item = u64> {
    (1..=200).chain(70_001..=70_100)
}

#[test]
fn a_whole_stream_names_the_changed_keys_and_agrees_with_the_digests() {
    let dir = tempfile::tempdir().unwrap();
    let from = rows(keys(), &[]);
    let mut to: Vec<u64> = keys().filter(|&k| k != 10 && k != 20).collect();
    to.push(300);
    to.sort_unstable();
    let to = rows(to.into_iter(), &[50, 70]);
    let s = scanned(dir.path(), from, to);
    assert_eq!(s.incomplete, None);
    let v = verdict(dir.path(), s.clone());
    assert_eq!(v["verdict"], "failed", "{v}");
    assert_eq!(
        (v["missing_count"].as_u64(), v["extra_count"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(v["changed_count"], 2, "{v}");
    assert_eq!(v["changed_ids"], serde_json::json!([50, 70]));
    assert_eq!(v["stream"]["compared"], true, "{v}");
    // A stream that says more than the stored digests allow: unknown, with why.
    let mut more = s.clone();
    more.changed.insert(70_050);
    more.differing.push(1);
    let v = verdict(dir.path(), more);
    assert_eq!(v["verdict"], "unknown", "{v}");
    assert_eq!(v["stream"]["compared"], false);
    assert_eq!(v["changed_count"], serde_json::Value::Null, "{v}");
    assert!(
        v["reasons"]
            .to_string()
            .contains("disagree with the stored evidence"),
        "{v}"
    );
    // Counts that are not the runs': unknown too.
    let mut fewer = s.clone();
    fewer.missing -= 1;
    let v = verdict(dir.path(), fewer);
    assert_eq!(v["verdict"], "unknown", "{v}");
    // A stream that is not whole is not used (no source recorded to re-read instead).
    let broken = StreamedKeys {
        incomplete: Some("--to: it restarted".into()),
        ..StreamedKeys::default()
    };
    let v = verdict(dir.path(), broken);
    assert_eq!(v["verdict"], "failed", "{v}");
    assert_eq!(v["changed_count"], serde_json::Value::Null, "{v}");
    assert_eq!(v["stream"]["why_not"], "--to: it restarted");
}

#[test]
fn equal_runs_streamed_whole_verify() {
    let dir = tempfile::tempdir().unwrap();
    let s = scanned(dir.path(), rows(keys(), &[]), rows(keys(), &[]));
    let v = verdict(dir.path(), s);
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["changed_count"], 0);
    assert_eq!(v["stream"]["compared"], true);
    assert_eq!(v["stream"]["from_rows"], 300);
}
