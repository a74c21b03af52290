//! A corrupt store file is an `Err`, never a panic (SPEC §7): every value decoder of the
//! store (run records, page records, partition and label bitmaps, resume requests,
//! interners, leaves) reached through the public API.
//!
//! Random bytes are rarely a redb file, so most inputs patch a valid seed store instead: a
//! store with a finished `int` run (labels, three partitions) and an interrupted `string`
//! run, built once per process through the public API. The patched (or raw) bytes are
//! written to a file, opened read-only (every reader is called on every run), then for
//! writing (a short run is recorded). Each call must return, `Ok` or `Err`.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::collect::{PageLog, Raise};
use scanledger::{
    digest, Contract, IdCodecKind, Item, Page, RawId, Reconciler, RunId, RunSink, Store,
    StoreOptions,
};
use scanledger_fuzz::Bounded;

#[derive(Arbitrary, Debug)]
enum Input<'a> {
    /// The file is these bytes.
    Raw(&'a [u8]),
    /// The seed store with bytes XORed at offsets (modulo its length).
    Patched(Bounded<(u32, u8), 32>),
    /// The seed store cut at a length (modulo its length), then patched.
    Truncated(u32, Bounded<(u32, u8), 8>),
}

struct Seed {
    _dir: tempfile::TempDir,
    bytes: Vec<u8>,
    path: PathBuf,
}

fn page(ids: Vec<RawId>, next: Option<&str>, labeled: bool) -> Page {
    let items = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| Item {
            id,
            labels: if labeled && i % 3 == 0 {
                vec!["needs_migration".to_owned()]
            } else {
                Vec::new()
            },
            content: None,
        })
        .collect();
    Page {
        items,
        next: next.map(str::to_owned),
        snapshot: Some("snap-1".to_owned()),
        size_bytes: 100,
        ..Page::default()
    }
}

/// Observes `pages` into a fresh run of `contract` and checkpoints each; `finish` at the end.
fn record(
    store: &mut Store,
    contract: &Contract,
    pages: &[Page],
    finish: bool,
) -> Result<(), String> {
    let mut rec = Reconciler::new(contract);
    let run = store
        .begin(contract, None, 1_000, &mut rec)
        .map_err(|e| e.to_string())?;
    for p in pages {
        if rec.is_finished() {
            break;
        }
        rec.observe(p);
        let log = PageLog {
            page_idx: rec.progress().pages_observed,
            cursor_hash: digest::cursor_hash(p.next.as_deref()),
            n_items: p.items.len() as u32,
            size_bytes: p.size_bytes,
            at_ms: 1_500,
        };
        store
            .checkpoint(run, &mut rec, Some(&log))
            .map_err(|e| e.to_string())?;
    }
    if finish {
        store
            .finish(run, &mut rec, 2_000)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn seed() -> &'static Seed {
    static SEED: OnceLock<Seed> = OnceLock::new();
    SEED.get_or_init(|| {
        // A RAM-backed directory when there is one: the writer's fsyncs then cost nothing.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("tempdir");
        let seed_path = dir.path().join("seed.redb");
        {
            let mut store =
                Store::open(&seed_path, StoreOptions::default()).expect("seed store opens");
            let ints = |r: std::ops::Range<u64>| r.map(RawId::Int).collect::<Vec<_>>();
            let c = Contract::new("seed");
            let pages = [
                page(ints(0..300), Some("c1"), true),
                page(ints(65_500..70_000), Some("c2"), true),
                page(ints(140_000..140_010), None, false),
            ];
            record(&mut store, &c, &pages, true).expect("seed run 1");

            let mut c = Contract::new("seed-strings");
            c.id_codec = IdCodecKind::String;
            c.limits.max_pages = Some(2);
            let strs = |r: std::ops::Range<u64>| {
                r.map(|i| RawId::Str(format!("key-{i:x}")))
                    .collect::<Vec<_>>()
            };
            let pages = [
                page(strs(0..50), Some("s1"), false),
                page(strs(50..90), Some("s2"), true),
                page(strs(90..99), None, false),
            ];
            record(&mut store, &c, &pages, true).expect("seed run 2");
        }
        let bytes = std::fs::read(&seed_path).expect("seed bytes");
        Seed {
            path: dir.path().join("fuzz.redb"),
            _dir: dir,
            bytes,
        }
    })
}

fn patch(bytes: &mut [u8], patches: &[(u32, u8)]) {
    if bytes.is_empty() {
        return;
    }
    for (at, x) in patches {
        let i = *at as usize % bytes.len();
        bytes[i] ^= *x;
    }
}

/// Every reader on every run; results are dropped after rendering errors (which must not
/// panic either).
fn read_everything(store: &Store) {
    let mut ids: Vec<RunId> = (1..=3).map(RunId).collect();
    if let Ok(runs) = store.runs() {
        for s in runs {
            let run: RunId = s.run_id.parse().expect("runs() names runs as run-N");
            if !ids.contains(&run) {
                ids.push(run);
            }
        }
    }
    for &run in &ids {
        let _ = store.run_header(run).map(|h| {
            let _ = store.codec(&h).map_err(|e| e.to_string());
        });
        let _ = store.page_log(run).map_err(|e| e.to_string());
        let _ = store.partition(run, 1).map_err(|e| e.to_string());
        let _ = store
            .partitions_between(run, 0, 3)
            .map(|s| s.check_invariants());
        let _ = store.ids_from(run, 0, 64).map_err(|e| e.to_string());
        let _ = store.leaves(run).map_err(|e| e.to_string());
        let _ = store.stored_root(run).map_err(|e| e.to_string());
        if let Ok(loaded) = store.load(run) {
            loaded.reconciler.check_invariants();
        }
        if let Ok(receipt) = store.receipt(run) {
            let _ = store.verify(&receipt).map_err(|e| e.to_string());
        }
        let _ = store
            .prepare_resume(run, &Raise::default())
            .map(|l| l.reconciler.check_invariants())
            .map_err(|e| e.to_string());
    }
    // The two seed runs are of different scopes, so one ordered pair each way reaches the
    // comparability check and the leaf comparison.
    for pair in ids.windows(2) {
        let _ = store.diff_runs(pair[0], pair[1]).map_err(|e| e.to_string());
        let _ = store.diff_runs(pair[1], pair[0]).map_err(|e| e.to_string());
    }
    let _ = store.diff_runs(ids[0], ids[0]).map_err(|e| e.to_string());
}

fn exercise(path: &Path) {
    match Store::open_read(path) {
        Ok(store) => read_everything(&store),
        Err(e) => drop(e.to_string()),
    }
    match Store::open(path, StoreOptions::default()) {
        Ok(mut store) => {
            // Opening for writing may have run redb's repair; the readers then see its result.
            let _ = store.runs().map_err(|e| e.to_string());
            let _ = store
                .load(RunId(2))
                .map(|l| l.reconciler.check_invariants());
            let c = Contract::new("after");
            let pages = [page((0..10).map(RawId::Int).collect(), None, true)];
            let _ = record(&mut store, &c, &pages, true);
        }
        Err(e) => drop(e.to_string()),
    }
}

/// libfuzzer-sys aborts on every panic. The store catches redb's panics on damaged files and
/// reports them as `Corrupt` (see `store::guard`), so those must unwind; any other panic is
/// still a crash.
fn install_hook() {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !scanledger::store::inside_guard() {
                fuzzer_hook(info);
            }
        }));
    });
}

fuzz_target!(|input: Input<'_>| {
    install_hook();
    let seed = seed();
    let bytes = match input {
        Input::Raw(b) => b.to_vec(),
        Input::Patched(p) => {
            let mut b = seed.bytes.clone();
            patch(&mut b, &p.0);
            b
        }
        Input::Truncated(len, p) => {
            let mut b = seed.bytes.clone();
            b.truncate(len as usize % (b.len() + 1));
            patch(&mut b, &p.0);
            b
        }
    };
    std::fs::write(&seed.path, &bytes).expect("writing the fuzz store file");
    // To replay a crash through the real binary: DECODE_STORE_KEEP=/tmp/bad.redb cargo fuzz
    // run decode_store CRASH_FILE, then `scanledger --store /tmp/bad.redb runs`.
    if let Some(keep) = std::env::var_os("DECODE_STORE_KEEP") {
        std::fs::write(keep, &bytes).expect("writing DECODE_STORE_KEEP");
    }
    exercise(&seed.path);
});
