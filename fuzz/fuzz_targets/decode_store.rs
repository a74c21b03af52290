//! A corrupt store file is an `Err`, never a panic (docs/FORMAT.md §10): every value decoder of the
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
use scanledger::{
    Contract, IdCodecKind, Item, Page, Raise, RawId, Reconciler, RunId, Store, StoreOptions,
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
        .map(|(i, id)| {
            let mut item = Item::new(id);
            item.labels = if labeled && i % 3 == 0 {
                vec!["needs_migration".to_owned()]
            } else {
                Vec::new()
            };
            item.content = None;
            item
        })
        .collect();
    {
        let mut page = Page::default();
        page.items = items;
        page.next = next.map(str::to_owned);
        page.snapshot = Some("snap-1".to_owned());
        page.size_bytes = 100;
        page
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
    let (mut writer, interner) = store.begin(contract, 1_000).map_err(|e| e.to_string())?;
    if let Some(i) = interner {
        rec.set_interner(i);
    }
    for p in pages {
        if rec.is_finished() {
            break;
        }
        let seen = rec.observe(p);
        writer
            .checkpoint(&rec, seen.delta)
            .map_err(|e| e.to_string())?;
    }
    if finish {
        writer.finish(&rec, 2_000).map_err(|e| e.to_string())?;
    } else {
        writer.commit(&rec).map_err(|e| e.to_string())?;
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

/// Every reader on every run, through one snapshot; results are dropped after rendering
/// errors (which must not panic either).
fn read_everything(store: &Store) {
    let Ok(snap) = store.read() else {
        return;
    };
    let mut ids: Vec<RunId> = (1..=3).map(RunId).collect();
    if let Ok(runs) = snap.runs() {
        for s in runs {
            if !ids.contains(&s.run_id) {
                ids.push(s.run_id);
            }
        }
    }
    for &run in &ids {
        let _ = snap.header(run).map(|h| {
            let _ = scanledger::Renderer::for_ids(&snap, &h, [0, 1, 2, 70_000])
                .map_err(|e| e.to_string());
            let scope = scanledger::ScopeKey::of(&h.contract);
            let _ = snap.strings(&scope, &[0, 1, 5]).map_err(|e| e.to_string());
        });
        let _ = snap.page_log(run).map_err(|e| e.to_string());
        let _ = snap
            .partitions_of(run, &[0, 1, 2])
            .map_err(|e| e.to_string());
        let _ = snap
            .partitions_between(run, 0, 3)
            .map(|s| s.check_invariants());
        let _ = snap.ids_from(run, 0, 64).map_err(|e| e.to_string());
        let _ = snap.leaves(run).map_err(|e| e.to_string());
        if let Ok(loaded) = snap.load(run) {
            loaded.reconciler.check_invariants();
        }
        if let Ok(receipt) = snap.receipt(run) {
            let _ = scanledger::verify_receipt(&snap, &receipt).map_err(|e| e.to_string());
        }
    }
    // The two seed runs are of different scopes, so one ordered pair each way reaches the
    // comparability check and the leaf comparison.
    for pair in ids.windows(2) {
        let _ = scanledger::diff_runs(&snap, pair[0], pair[1]).map_err(|e| e.to_string());
        let _ = scanledger::diff_runs(&snap, pair[1], pair[0]).map_err(|e| e.to_string());
    }
    let _ = scanledger::diff_runs(&snap, ids[0], ids[0]).map_err(|e| e.to_string());
}

fn exercise(path: &Path) {
    match Store::open_read(path) {
        Ok(store) => read_everything(&store),
        Err(e) => drop(e.to_string()),
    }
    match Store::open(path, StoreOptions::default()) {
        Ok(mut store) => {
            // Opening for writing may have run redb's repair; the readers then see its result.
            if let Ok(snap) = store.read() {
                let _ = snap.runs().map_err(|e| e.to_string());
                let _ = snap.load(RunId(2)).map(|l| l.reconciler.check_invariants());
            }
            for run in 1..=3 {
                let _ = store
                    .resume(RunId(run), &Raise::default())
                    .map(|(_, l)| l.reconciler.check_invariants())
                    .map_err(|e| e.to_string());
            }
            let c = Contract::new("after");
            let pages = [page((0..10).map(RawId::Int).collect(), None, true)];
            let _ = record(&mut store, &c, &pages, true);
        }
        Err(e) => drop(e.to_string()),
    }
}

/// libfuzzer-sys aborts on every panic. The store catches redb's panics on damaged files and
/// reports them as damage (see `Engine::contain`), so those must unwind; any other panic is
/// still a crash.
fn install_hook() {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let fuzzer_hook = std::panic::take_hook();
        // DECODE_STORE_ENGINE_PANICS=1 makes the storage engine's own panics findings too, to
        // collect reproducers for redb (contrib/redb-panics/).
        let engine_panics = std::env::var_os("DECODE_STORE_ENGINE_PANICS").is_some();
        std::panic::set_hook(Box::new(move |info| {
            if engine_panics || !scanledger::inside_engine_call() {
                fuzzer_hook(info);
                if engine_panics {
                    std::process::abort();
                }
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
