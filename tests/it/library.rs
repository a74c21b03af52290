//! The library as a user's own code sees it (issue 13, item 7): a custom `PageSource`, the
//! all-or-fail read with every codec, and a source's own error carried to the caller.
//!
//! The defects these pin: `collect()` with the `string` codec returned the dictionary's
//! internal indexes in `Inventory.ids`, so the original IDs were lost; a custom source could
//! not report its own error type.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use scanledger::{
    collect, Contract, Error, FetchError, IdCodecKind, Item, Page, PageRequest, PageSource, RawId,
    Request, SourceError,
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
        Ok(Page {
            items: ids
                .iter()
                .map(|s| Item::new(RawId::Str((*s).to_owned())))
                .collect(),
            next: matches!(req.request, Request::First).then(|| "p2".to_owned()),
            ..Page::default()
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
