//! A finished or superseded run keeps no raw cursor and no key that could open a sealed one:
//! not in the store's live data, not in redb's freed pages, not in the page journal, not in
//! the key file. The tests learn each run's key from its writer, then scan the bytes of every
//! file beside the store for the key and for the source's cursors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;
use crate::collect::Error;
use crate::collect::RunLog;
use crate::contract::{ExpiredPolicy, Item, Page, RawId};
use crate::reconcile::{Delta, Reconciler, Request};
use crate::source::{FetchError, PageRequest, PageSource};

/// Pages of 10 IDs; every cursor carries a canary; the cursor into `expire_at` expires once.
struct Canaries {
    records: u64,
    expire_at: Option<u64>,
    expired: bool,
}

const CANARY: &str = "CANARYCURSOR";

fn cursor(offset: u64) -> String {
    format!("{CANARY}{offset:06}x")
}

impl PageSource for Canaries {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let offset = match &req.request {
            Request::First => 0,
            Request::Cursor(c) => c
                .strip_prefix(CANARY)
                .and_then(|s| s.strip_suffix('x'))
                .and_then(|n| n.parse().ok())
                .ok_or(FetchError::ServerError)?,
            Request::After(_) => return Err(FetchError::ServerError),
        };
        if Some(offset) == self.expire_at && !self.expired {
            self.expired = true;
            return Err(FetchError::ExpiredCursor);
        }
        let end = (offset + 10).min(self.records);
        Ok(Page {
            items: (offset..end)
                .map(|i| Item {
                    id: RawId::Int(i + 1),
                    labels: Vec::new(),
                    content: None,
                })
                .collect(),
            next: (end < self.records).then(|| cursor(end)),
            complete: Some(end >= self.records),
            snapshot: Some("s".into()),
            size_bytes: 10,
            columns: None,
            query: None,
            truncated: false,
            total: None,
        })
    }
}

/// Every key a run writer held, by run.
#[derive(Default, Clone)]
struct Keys(Arc<Mutex<BTreeMap<u64, [u8; records::CURSOR_KEY_LEN]>>>);

struct Spy<'s> {
    w: RunWriter<'s>,
    keys: Keys,
}

impl Spy<'_> {
    fn note(&self) {
        self.keys
            .0
            .lock()
            .expect("keys")
            .insert(self.w.run().0, self.w.cursor_key_for_tests());
    }
}

impl RunLog for Spy<'_> {
    fn run(&self) -> RunId {
        self.w.run()
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        self.note();
        Ok(self.w.checkpoint(rec, delta)?)
    }
    fn set_server_count(&mut self, n: u64) {
        self.w.set_server_count(n);
    }
    fn finish(self, rec: &Reconciler, at: u64) -> Result<(), Error> {
        self.note();
        Ok(self.w.finish(rec, at)?)
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        self.note();
        let w = self.w.restart(rec, contract, at)?;
        let s = Spy { w, keys: self.keys };
        s.note();
        Ok(s)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

fn contract(max_pages: Option<u32>) -> Contract {
    let mut c = Contract::new("canary");
    c.page_size = 10;
    c.limits.max_pages = max_pages;
    c.on_expired_cursor = ExpiredPolicy::Restart;
    c
}

fn scan(store: &mut Store, c: &Contract, source: &mut Canaries, keys: &Keys) -> Receipt {
    let (w, _) = store.begin(c, crate::collect::now_ms()).expect("begin");
    let log = Spy {
        w,
        keys: keys.clone(),
    };
    let done = runtime()
        .block_on(crate::collect::scan_with(
            c,
            Reconciler::new(c),
            log,
            crate::collect::now_ms(),
            source,
        ))
        .expect("scan");
    done.receipt()
}

fn resume(store: &mut Store, run: RunId, source: &mut Canaries, keys: &Keys) -> Receipt {
    let raise = Raise {
        max_pages: Some(1_000),
        ..Raise::default()
    };
    let (w, loaded) = store.resume(run, &raise).expect("resume");
    let log = Spy {
        w,
        keys: keys.clone(),
    };
    runtime()
        .block_on(crate::collect::resume_with(loaded, log, None, source))
        .expect("resume")
        .receipt()
}

use crate::receipt::Receipt;

/// The store file and every file beside it that shares its name (journal, key file).
fn files_of(store: &Path) -> Vec<PathBuf> {
    let dir = store.parent().expect("dir");
    let name = store
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&name))
        })
        .collect();
    out.sort();
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where in the files a secret is found: (file name, offset).
fn leaks(store: &Path, keys: &[(u64, [u8; 32])]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files_of(store) {
        let bytes = std::fs::read(&f).expect("read");
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        if let Some(at) = find(&bytes, CANARY.as_bytes()) {
            out.push(format!("a raw cursor in {name} at byte {at}"));
        }
        for (run, key) in keys {
            if let Some(at) = find(&bytes, key) {
                out.push(format!("the key of run-{run} in {name} at byte {at}"));
            }
        }
    }
    out
}

fn keys_of(keys: &Keys, runs: &[u64]) -> Vec<(u64, [u8; 32])> {
    let k = keys.0.lock().expect("keys");
    runs.iter().map(|r| (*r, k[r])).collect()
}

fn erasure_case(options: StoreOptions) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.redb");
    let keys = Keys::default();
    let mut store = Store::open(&path, options).expect("open");
    // Run 1 stops at its page budget (resumable: its key must stay), then finishes.
    let mut src = Canaries {
        records: 60,
        expire_at: None,
        expired: false,
    };
    let r = scan(&mut store, &contract(Some(2)), &mut src, &keys);
    assert_eq!(r.coverage_status, Status::Unknown);
    let r = resume(&mut store, RunId(1), &mut src, &keys);
    assert_eq!(r.coverage_status, Status::Verified, "{r:?}");
    assert_eq!(r.unique_ids_observed, 60);
    // Run 2 stops at its budget, is resumed, meets an expired cursor and restarts as run 3
    // (run 2 superseded), which finishes.
    let mut src = Canaries {
        records: 60,
        expire_at: Some(40),
        expired: false,
    };
    let r = scan(&mut store, &contract(Some(2)), &mut src, &keys);
    assert_eq!(r.run_id, "run-2");
    let r = resume(&mut store, RunId(2), &mut src, &keys);
    assert_eq!(
        (r.run_id.as_str(), r.coverage_status),
        ("run-3", Status::Verified)
    );
    let all = keys_of(&keys, &[1, 2, 3]);
    let open = leaks(&path, &all);
    drop(store);
    let closed = leaks(&path, &all);
    assert!(
        open.is_empty() && closed.is_empty(),
        "while the store is open (as a kill leaves it): {open:#?}; after it closed: {closed:#?}"
    );
}

#[test]
fn no_key_or_raw_cursor_outlives_a_finished_or_superseded_run_in_the_shared_mode() {
    erasure_case(StoreOptions::new());
}

#[test]
fn no_key_or_raw_cursor_outlives_a_finished_or_superseded_run_in_the_exclusive_mode() {
    erasure_case(StoreOptions::new().exclusive(true));
}
