//! The library as a user's own code sees it: a custom `PageSource`, the all-or-fail read with
//! every codec, a source's own error carried to the caller, and a scan future dropped
//! mid-run.
//!
//! The defects these pin: `collect()` with the `string` codec returned the dictionary's
//! internal indexes in `Inventory.ids`, so the original IDs were lost; a custom source could
//! not report its own error type; a scan future dropped with group-commit pages pending left
//! them on the `Store`, so the next scan on the same handle reported `verified` in memory
//! while the store's page log had a gap.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::time::Duration;

use scanledger::{
    collect, resume, scan, verify_receipt, Contract, Error, FetchError, IdCodecKind, Item, Page,
    PageRequest, PageSource, Raise, RawId, Request, RunState, SourceError, Status, Store,
    StoreOptions,
};

/// A source of my own: two pages of string IDs, then (when `broken`) my own error.
struct Mine {
    broken: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the upstream API said 418")]
struct Teapot;

impl PageSource for Mine {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let ids: &[&str] = match &req.request {
            Request::First => &["zebra", "apple"],
            Request::Cursor(c) if c == "p2" && self.broken => {
                return Err(FetchError::Fatal(SourceError::Other {
                    what: "fetching page 2 of the upstream API".to_owned(),
                    source: Box::new(Teapot),
                }))
            }
            Request::Cursor(c) if c == "p2" => &["mango"],
            other => panic!("unexpected request {other:?}"),
        };
        Ok({
            let mut page = Page::default();
            page.items = ids
                .iter()
                .map(|s| Item::new(RawId::Str((*s).to_owned())))
                .collect();
            page.next = matches!(req.request, Request::First).then(|| "p2".to_owned());
            page
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn an_inventory_of_string_ids_yields_the_original_strings() {
    let mut contract = Contract::new("mine");
    contract.id_codec = IdCodecKind::String;
    let inventory = runtime()
        .block_on(collect(&contract, &mut Mine { broken: false }))
        .unwrap();
    let ids: Vec<RawId> = inventory.ids().collect();
    assert_eq!(
        ids,
        ["zebra", "apple", "mango"].map(|s| RawId::Str(s.to_owned())),
        "the strings themselves, in first-appearance order, not dictionary indexes"
    );
}

#[test]
fn a_custom_source_reports_its_own_error_type() {
    let mut contract = Contract::new("mine");
    contract.id_codec = IdCodecKind::String;
    let incomplete = runtime()
        .block_on(collect(&contract, &mut Mine { broken: true }))
        .unwrap_err();
    let error = incomplete
        .error
        .expect("the source's error stopped the read");
    assert!(
        matches!(error, Error::Source(SourceError::Other { .. })),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "fetching page 2 of the upstream API");
    let cause = std::error::Error::source(&error).expect("the source's own error is the cause");
    assert!(cause.downcast_ref::<Teapot>().is_some(), "{cause:?}");
}

/// Pages of 100 IDs, `PAGES` of them; the page `hang_at` (1-based) never answers.
struct Paged {
    hang_at: Option<u64>,
}

const PAGES: u64 = 20;

impl PageSource for Paged {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let page: u64 = match &req.request {
            Request::First => 1,
            Request::Cursor(c) => c.parse().unwrap(),
            other => panic!("unexpected request {other:?}"),
        };
        if self.hang_at == Some(page) {
            std::future::pending::<()>().await;
        }
        Ok({
            let mut page_ = Page::default();
            page_.items = (1..=100)
                .map(|i| Item::new(RawId::Int((page - 1) * 100 + i)))
                .collect();
            page_.next = (page < PAGES).then(|| (page + 1).to_string());
            page_.snapshot = Some("s1".to_owned());
            page_
        })
    }
}

#[test]
fn a_dropped_scan_leaves_no_gap_and_the_next_scan_on_the_handle_is_right() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    // Group commit: pages 1-4 are committed together; 5 and 6 are pending when page 7 hangs.
    let mut store = Store::open(&path, StoreOptions::new().checkpoint_every(4)).unwrap();
    let mut contract = Contract::new("dropped");
    contract.page_size = 100;
    // The page timeout must not end page 7 first: the outer timeout drops the future.
    contract.limits.page_timeout_ms = Some(600_000);
    // Paused time: the runtime jumps to the earliest timer only when every task waits, so
    // the outer timeout fires exactly while page 7 hangs, whatever the machine's speed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let dropped = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(1),
            scan(&contract, &mut Paged { hang_at: Some(7) }, &mut store),
        )
        .await
    });
    assert!(dropped.is_err(), "the scan future was dropped mid-run");

    // The same handle: run-1 holds its committed pages only, and its evidence agrees.
    let snap = store.read().unwrap();
    let runs = snap.runs().unwrap();
    assert_eq!(runs.len(), 1);
    let first = runs[0].run_id;
    let header = snap.header(first).unwrap();
    assert_eq!(
        header.pages_observed, 4,
        "pages 5 and 6 were never committed"
    );
    assert_eq!(header.unique_ids_observed, 400);
    assert_eq!(header.state, RunState::Interrupted, "its writer is gone");
    let receipt = snap.receipt(first).unwrap();
    assert_eq!(
        verify_receipt(&snap, &receipt).unwrap(),
        [],
        "the stored run-1 has no gap"
    );
    drop(snap);

    // A new scan on the same handle is a run of its own, complete and exact.
    let done = rt
        .block_on(scan(&contract, &mut Paged { hang_at: None }, &mut store))
        .unwrap();
    let second = done.meta.run_id;
    assert_ne!(second, first);
    let r = done.receipt();
    assert_eq!(r.coverage_status, Status::Verified);
    assert_eq!(r.pages_observed, 20);
    assert_eq!(r.unique_ids_observed, 2_000);
    assert_eq!(r.duplicate_ids, 0);
    let snap = store.read().unwrap();
    let stored = snap.receipt(second).unwrap();
    assert_eq!(stored, r, "what the store says is what the scan said");
    assert_eq!(verify_receipt(&snap, &stored).unwrap(), []);
    drop(snap);

    // And run-1 resumes from its last commit: pages 5-20 once each, nothing lost.
    let resumed = rt
        .block_on(resume(
            &mut store,
            first,
            &Raise::default(),
            &mut Paged { hang_at: None },
        ))
        .unwrap();
    let r = resumed.receipt();
    assert_eq!(r.coverage_status, Status::Verified);
    assert_eq!(r.pages_observed, 20);
    assert_eq!(r.unique_ids_observed, 2_000);
    assert_eq!(r.duplicate_ids, 0);
    let snap = store.read().unwrap();
    assert_eq!(snap.ids(first).unwrap(), snap.ids(second).unwrap());
    assert_eq!(
        verify_receipt(&snap, &snap.receipt(first).unwrap()).unwrap(),
        []
    );
}
