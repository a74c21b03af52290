//! Backward compatibility of the store format, as redb's `backward_compatibility.rs` does it: a
//! store file written by format 2 is committed under `tests/fixtures/`, and every build must
//! open it, read every run, verify every receipt the fixture recorded, and resume the run it
//! left resumable. Format 1 files are refused with a message that names the versions.
//!
//! The fixture is written by this same test with `SCANLEDGER_WRITE_FIXTURES=1` (only when the
//! format version rises; commit the new file beside the old ones, never replace one).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Writes `store-v2.redb` and `store-v2.receipts.json` (the receipts as printed when written).
fn write_fixture() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store.redb");
    let s = store.to_string_lossy().into_owned();
    let put = |name: &str, text: &str| util::write(dir.path(), name, text);
    let mut receipts = Vec::new();
    let mut scan = |contract: &str, source: &str| {
        let (_, out, err) = util::run(&[
            "--store",
            &s,
            "--json",
            "scan",
            "--contract",
            contract,
            "--source",
            source,
        ]);
        let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        receipts.push(r);
    };
    // 1: an int run with labels, verified.
    scan(
        &put(
            "c1.json",
            r#"{"source": "customers", "tenant": "acme", "snapshot_id": "s1", "page_size": 500}"#,
        ),
        "sim:records=3000,snapshot=s1,label_every=7",
    );
    // 2: a string run, verified.
    let lines: String = (0..4)
        .map(|p| {
            let items: Vec<String> = (0..25)
                .map(|i| format!("user-{}@example.org", p * 25 + i))
                .collect();
            let cursor = if p == 0 {
                Value::Null
            } else {
                json!(format!("c{p}"))
            };
            let next = if p == 3 {
                Value::Null
            } else {
                json!(format!("c{}", p + 1))
            };
            json!({"cursor": cursor, "items": items, "next": next, "snapshot": "u1"}).to_string()
                + "\n"
        })
        .collect();
    let replay = put("users.jsonl", &lines);
    scan(
        &put("c2.json", r#"{"source": "users", "id_codec": "string"}"#),
        &format!("replay:{replay}"),
    );
    // 3: a run stopped by its page budget, resumable.
    scan(
        &put(
            "c3.json",
            r#"{"source": "orders", "page_size": 100, "limits": {"max_pages": 3}}"#,
        ),
        "sim:records=1000",
    );
    let fixtures = fixture_dir();
    std::fs::create_dir_all(&fixtures).expect("fixtures dir");
    std::fs::copy(&store, fixtures.join("store-v2.redb")).expect("copy fixture");
    std::fs::write(
        fixtures.join("store-v2.receipts.json"),
        serde_json::to_string_pretty(&receipts).expect("json") + "\n",
    )
    .expect("write receipts");
}

#[test]
fn a_format_2_store_is_read_verified_and_resumed_by_every_build() {
    if std::env::var_os("SCANLEDGER_WRITE_FIXTURES").is_some() {
        write_fixture();
    }
    let fixture = fixture_dir().join("store-v2.redb");
    let receipts: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("store-v2.receipts.json"))
            .expect("the committed receipts"),
    )
    .expect("receipts JSON");
    // Work on a copy: a resume writes.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("copy.redb");
    std::fs::copy(&fixture, &store).expect("copy");
    let s = store.to_string_lossy().into_owned();
    let (code, out, err) = util::run(&["--store", &s, "--json", "runs"]);
    assert_eq!(code, 0, "{err}");
    let runs: Value = serde_json::from_str(&out).expect("runs");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(3));
    for r in &receipts {
        let run = r["run_id"].as_str().expect("run_id");
        let file = util::write(dir.path(), &format!("{run}.json"), &r.to_string());
        let (code, out, err) = util::run(&["--store", &s, "verify", &file]);
        // A matching receipt exits with its own status (0 verified, 3 unknown, 4 failed).
        let want = match r["coverage_status"].as_str() {
            Some("verified") => 0,
            Some("unknown") => 3,
            _ => 4,
        };
        assert_eq!(code, want, "{run} no longer verifies: {out}{err}");
        assert!(out.contains("every field recomputes"), "{run}: {out}");
        let (_, out, _) = util::run(&["--store", &s, "--json", "receipt", run]);
        let now: Value = serde_json::from_str(&out).expect("receipt");
        assert_eq!(now["merkle_root"], r["merkle_root"], "{run}");
    }
    let (code, out, err) = util::run(&[
        "--store",
        &s,
        "--json",
        "resume",
        "run-3",
        "--max-pages",
        "100",
        "--source",
        "sim:records=1000",
    ]);
    assert_eq!(code, 0, "the fixture's resumable run resumes: {out}{err}");
    let resumed: Value = serde_json::from_str(&out).expect("receipt");
    assert_eq!(resumed["unique_ids_observed"], json!(1000));
}

#[test]
fn a_format_1_store_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("v1.redb");
    crate::store_files::write_one::<&str, &[u8]>(
        &store,
        true,
        "meta",
        "magic",
        b"scanledger-store".as_slice(),
    );
    crate::store_files::write_one::<&str, &[u8]>(
        &store,
        false,
        "meta",
        "format_version",
        1u32.to_le_bytes().as_slice(),
    );
    let s = store.to_string_lossy().into_owned();
    let (code, _, err) = util::run(&["--store", &s, "runs"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("format version 1"), "{err}");
    assert!(err.contains("no longer reads"), "{err}");
}
