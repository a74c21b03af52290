//! Memory of read commands, measured on the real binary as the peak resident set of a child
//! process (`getrusage(RUSAGE_CHILDREN)` through python3's `resource` module), never by time.
//!
//! The defects these pin: `page RUN --size 10` loaded the run's whole string dictionary
//! (866 MB for 500,000 long IDs) to render ten of them. It now looks up only the strings of
//! the page, so its peak stays far below the dictionary's size.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::Path;
use std::process::Command;

use scanledger::{
    scan, Contract, FetchError, IdCodecKind, Item, Page, PageRequest, PageSource, RawId, Request,
    Status, Store, StoreOptions,
};

use crate::util;

/// IDs in the store: 64 MB of strings, enough to tell a dictionary load from point lookups
/// (building the store in a debug build costs time in proportion to its bytes).
const IDS: u32 = 125_000;
/// Bytes of each ID (the most the string codec takes).
const ID_BYTES: usize = 512;
/// IDs per page of the source.
const PER_PAGE: u32 = 1_000;

/// The `i`-th ID: distinct, `ID_BYTES` long.
fn long_id(i: u32) -> String {
    let head = format!("customer-{i:09}-");
    format!("{head}{}", "x".repeat(ID_BYTES - head.len()))
}

/// `IDS` long string IDs in pages of `PER_PAGE`, built in memory (no JSON to parse).
struct LongIds;

impl PageSource for LongIds {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let page: u32 = match &req.request {
            Request::First => 0,
            Request::Cursor(c) => c.parse().expect("a cursor of ours"),
            other => panic!("unexpected request {other:?}"),
        };
        let start = page * PER_PAGE;
        let end = (start + PER_PAGE).min(IDS);
        Ok({
            let mut page_ = Page::default();
            page_.items = (start..end)
                .map(|i| Item::new(RawId::Str(long_id(i))))
                .collect();
            page_.next = (end < IDS).then(|| (page + 1).to_string());
            page_.snapshot = Some("s1".to_owned());
            page_
        })
    }
}

/// Runs `args` on the binary; (exit code, stdout, peak RSS of the child in KiB).
fn run_measured(args: &[&str]) -> (i32, String, u64) {
    // ru_maxrss of the terminated children is the binary's own peak (KiB on Linux).
    let script = "import resource, subprocess, sys\n\
                  r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n\
                  sys.stdout.buffer.write(r.stdout)\n\
                  sys.stderr.write('%d %d' % (r.returncode, \
                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(util::bin())
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is required by this test (it measures a child's peak RSS): {e}")
        });
    let err = String::from_utf8_lossy(&out.stderr);
    // The last line is the script's; the child's own stderr, if any, comes before it.
    let mut words = err.lines().last().unwrap_or_default().split_whitespace();
    let code: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .expect("exit code");
    let rss: u64 = words
        .next()
        .and_then(|w| w.parse().ok())
        .expect("ru_maxrss");
    (code, String::from_utf8_lossy(&out.stdout).into_owned(), rss)
}

fn build_store(path: &Path) -> String {
    let mut store = Store::open(path, StoreOptions::new().checkpoint_every(50)).unwrap();
    let mut contract = Contract::new("long-ids");
    contract.id_codec = IdCodecKind::String;
    contract.page_size = PER_PAGE;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let done = rt
        .block_on(scan(&contract, &mut LongIds, &mut store))
        .unwrap();
    assert_eq!(done.reconciler.status(), Status::Verified);
    assert_eq!(done.receipt().unique_ids_observed, u64::from(IDS));
    done.meta.run_id.to_string()
}

#[test]
fn a_page_of_ten_string_ids_does_not_load_the_dictionary() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("long.redb");
    let run = build_store(&path);
    let dictionary_kib = u64::from(IDS) * ID_BYTES as u64 / 1024;
    let store = path.to_str().unwrap();
    let (code, out, rss_kib) = run_measured(&["--store", store, "page", &run, "--size", "10"]);
    assert_eq!(code, 0, "{out}");
    let page: serde_json::Value = serde_json::from_str(&out).expect("page JSON");
    let ids = page["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), 10, "{out}");
    assert!(ids
        .iter()
        .all(|id| id.as_str().is_some_and(|s| s.len() == ID_BYTES)));
    assert!(page["next_token"].is_string(), "{out}");
    // The dictionary's strings alone are 61 MiB; loading them costs more than twice that
    // (the strings, their map and the store's read cache: 135 MB when `page` rendered every
    // ID of the run). A page of ten needs its ten strings and the binary's own footprint
    // (about 32 MB in a debug build with mimalloc, which keeps more than glibc's 19 MB), so
    // a peak below the dictionary's own size is a page that did not load it.
    assert!(
        rss_kib < dictionary_kib,
        "page --size 10 peaked at {rss_kib} KiB, against a dictionary of {dictionary_kib} KiB"
    );
    // And the next page through its token, the same.
    let token = page["next_token"].as_str().unwrap().to_owned();
    let (code, out, rss_kib) = run_measured(&[
        "--store", store, "page", &run, "--size", "10", "--token", &token,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        rss_kib < dictionary_kib,
        "the second page peaked at {rss_kib} KiB, against {dictionary_kib} KiB"
    );
}

/// The group commit held every ID since the last durable checkpoint in memory: one scan of
/// 1,000,000,000 dense IDs in pages of 100,000 with `--checkpoint-every 10000` peaked at
/// 15.7 GB (a group of 10,000 such pages is 8 GB of IDs before it is sorted and encoded).
/// What waits is now bounded in bytes (16 MiB, docs/REFERENCE.md §1), and reaching the bound
/// brings the checkpoint forward. This scans 10,000,000 dense IDs the same way: the whole scan
/// fits in one group, so before the bound its IDs (80 MB, and the vector's doubling) waited
/// whole (peak 231 MB in a debug build); now the peak is that of a scan of 1,000,000 IDs
/// (about 100 MB in a debug build, most of it the binary, redb's cache and one page).
#[test]
fn a_group_of_large_pages_waits_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let contract = tmp.path().join("c.json");
    std::fs::write(&contract, r#"{"source": "dense", "page_size": 100000}"#).unwrap();
    let store = tmp.path().join("s.redb");
    let (code, out, rss_kib) = run_measured(&[
        "--store",
        store.to_str().unwrap(),
        "scan",
        "--contract",
        contract.to_str().unwrap(),
        "--source",
        "sim:records=10000000",
        "--checkpoint-every",
        "10000",
        "--no-progress",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("10000000") || out.contains("10,000,000"),
        "{out}"
    );
    assert!(
        rss_kib < 160 * 1024,
        "a scan of 10,000,000 IDs in one group peaked at {rss_kib} KiB"
    );
}
