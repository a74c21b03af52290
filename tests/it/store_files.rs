//! Bad store files and concurrent access, through the real binary (a child process, so an
//! abort or a panic shows up as an exit code instead of taking the test runner down).
//!
//! The failures these guard against: a corrupt, truncated, empty, foreign or newer-format file
//! that panics the program, or worse, is silently treated as an empty store (redb's
//! `Database::create` starts a fresh database on a 0-byte file) so that `runs` says "no runs"
//! and a new scan overwrites the evidence.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util;

const CONTRACT: &str = r#"{"source": "files", "tenant": "t", "page_size": 50}"#;

/// Makes a valid store with one verified run; returns its path.
fn valid_store(dir: &std::path::Path) -> String {
    let contract = util::write(dir, "contract.json", CONTRACT);
    let store = dir.join("good.redb").to_string_lossy().into_owned();
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "scan",
        "--contract",
        &contract,
        "--source",
        "sim:records=2000",
    ]);
    assert_eq!(code, 0, "{err}");
    store
}

/// Writes one key into a table of a redb file with redb itself, bypassing scanledger: how the
/// foreign, newer-format and corrupt-value files of these tests are made.
pub(crate) fn write_one<K: redb::Key + 'static, V: redb::Value + 'static>(
    path: impl AsRef<std::path::Path>,
    create: bool,
    table: &str,
    key: K::SelfType<'_>,
    value: V::SelfType<'_>,
) {
    let db = if create {
        redb::Database::create(path).unwrap()
    } else {
        redb::Database::open(path).unwrap()
    };
    let txn = db.begin_write().unwrap();
    {
        let def: redb::TableDefinition<K, V> = redb::TableDefinition::new(table);
        txn.open_table(def).unwrap().insert(key, value).unwrap();
    }
    txn.commit().unwrap();
}

#[track_caller]
fn check_refused(store: &str, expect_in_message: &str) {
    let dir = std::path::Path::new(store).parent().unwrap();
    let contract = util::write(dir, "contract.json", CONTRACT);
    let before = std::fs::read(store).unwrap();
    for args in [
        vec!["--store", store, "runs"],
        vec!["--store", store, "receipt", "1"],
        vec![
            "--store",
            store,
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=10",
        ],
        vec![
            "--store",
            store,
            "resume",
            "1",
            "--source",
            "sim:records=10",
        ],
    ] {
        let (code, out, err) = util::run(&args);
        assert_eq!(code, 2, "{args:?}: exit {code}, stdout {out}, stderr {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(
            err.contains(store),
            "{args:?}: the message does not name the path: {err}"
        );
        assert!(
            err.contains(expect_in_message),
            "{args:?}: expected {expect_in_message:?} in: {err}"
        );
    }
    assert!(
        std::fs::read(store).unwrap() == before,
        "{store}: a refused store file was modified"
    );
}

#[test]
fn empty_store_file_is_refused_not_reset() {
    let dir = tempfile::tempdir().unwrap();
    let store = util::write(dir.path(), "empty.redb", "");
    check_refused(&store, "empty");
}

#[test]
fn garbage_store_file_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let store = dir.path().join("garbage.redb");
    std::fs::write(&store, bytes).unwrap();
    check_refused(&store.to_string_lossy(), "not a scanledger store");
}

#[test]
fn truncated_store_file_is_reported_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = valid_store(dir.path());
    let bytes = std::fs::read(&store).unwrap();
    let (_, runs_before, _) = util::run(&["--store", &store, "runs"]);
    // Half the file: what redb reads first (its header and the runs table) may all lie in the
    // half that is kept, so `runs` may still list the stored runs, exactly as before; but
    // nothing that reads the run's IDs may answer, and nothing may write.
    std::fs::write(&store, &bytes[..bytes.len() / 2]).unwrap();
    let (code, out, err) = util::run(&["--store", &store, "runs"]);
    assert!(
        code == 2 && err.contains("damaged") || code == 0 && out == runs_before,
        "runs of a truncated store: exit {code}, stdout {out}, stderr {err}"
    );
    for args in [
        vec!["--store", store.as_str(), "receipt", "1"],
        vec!["--store", store.as_str(), "export", "1"],
    ] {
        let (code, out, err) = util::run(&args);
        assert_eq!(code, 2, "{args:?}: exit {code}, stdout {out}, stderr {err}");
        assert!(
            err.contains("damaged") && err.contains(store.as_str()),
            "{args:?}: {err}"
        );
    }
    for keep in [4096, 100] {
        std::fs::write(&store, &bytes[..keep]).unwrap();
        check_refused(&store, "damaged");
    }
}

#[test]
fn foreign_redb_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("foreign.redb");
    write_one::<&str, u64>(&store, true, "other", "x", 1);
    check_refused(&store.to_string_lossy(), "not a scanledger store");
}

#[test]
fn newer_format_version_is_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = valid_store(dir.path());
    write_one::<&str, &[u8]>(
        &store,
        false,
        "meta",
        "format_version",
        99u32.to_le_bytes().as_slice(),
    );
    check_refused(&store, "format version 99");
}

#[test]
fn corrupt_value_in_a_table_names_table_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = valid_store(dir.path());
    write_one::<(u64, u64), &[u8]>(&store, false, "ids", (1, 0), [1u8, 2, 3].as_slice());
    let (code, _, err) = util::run(&["--store", &store, "receipt", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("damaged: table ids, run-1"), "{err}");
    // `runs` reads only run records, which are intact.
    let (code, out, _) = util::run(&["--store", &store, "runs"]);
    assert_eq!(code, 0);
    assert!(out.contains("run-1"));
}

#[test]
fn missing_store_is_an_input_error_for_read_commands() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nope.redb").to_string_lossy().into_owned();
    let (code, _, err) = util::run(&["--store", &store, "runs"]);
    assert_eq!(code, 2);
    assert!(err.contains("does not exist"), "{err}");
    assert!(
        !std::path::Path::new(&store).exists(),
        "a read command created the store"
    );
}

#[test]
fn readers_work_while_a_scan_writes_and_a_second_writer_is_told_the_store_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "contract.json", CONTRACT);
    let store = dir.path().join("busy.redb").to_string_lossy().into_owned();
    let mut writer = Command::new(util::bin())
        .args([
            "--store",
            &store,
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=3000,delay_ms=20",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) for the first run to be visible.
    let mut seen = false;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        let (code, out, _) = util::run(&["--store", &store, "runs"]);
        if code == 0 && out.contains("run-1") {
            seen = true;
            break;
        }
    }
    assert!(seen, "runs never showed the run being written");
    let (code, out, err) = util::run(&["--store", &store, "--json", "receipt", "1"]);
    assert_eq!(
        code, 3,
        "an in-progress run's receipt is unknown: {out} {err}"
    );
    let (code, _, err) = util::run(&[
        "--store",
        &store,
        "scan",
        "--contract",
        &contract,
        "--source",
        "sim:records=10",
    ]);
    assert_eq!(code, 5, "a busy store has its own exit code: {err}");
    assert!(
        err.contains("is busy: another process is writing it"),
        "{err}"
    );
    let _ = writer.kill();
    let _ = writer.wait();
}

/// redb 4 panics on some damaged files instead of returning an error (the `decode_store`
/// fuzz target found dozens of sites: unreachable B-tree states, invalid UTF-8 in keys,
/// out-of-range slices). The store contains those panics and reports the file as corrupt.
/// This flips one byte at a time across a valid store and runs a reader and a writer on it:
/// whatever the damage, the answer is a documented exit code (never 101, never a panic
/// message), and a damaged file that is refused says so with its path.
#[test]
fn single_byte_damage_anywhere_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = valid_store(dir.path());
    let bytes = std::fs::read(&good).unwrap();
    let contract = util::write(dir.path(), "contract.json", CONTRACT);
    let damaged = dir
        .path()
        .join("damaged.redb")
        .to_string_lossy()
        .into_owned();
    let mut refused = 0;
    let step = (bytes.len() / 160).max(1);
    for (n, offset) in (0..bytes.len()).step_by(step).enumerate() {
        let mut b = bytes.clone();
        b[offset] ^= 0x5a ^ (n as u8);
        let scan = [
            "--store",
            damaged.as_str(),
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=10",
        ];
        let receipt = ["--store", damaged.as_str(), "receipt", "1"];
        let mut commands = vec![&receipt[..]];
        if n % 8 == 0 {
            commands.push(&scan[..]);
        }
        for args in commands {
            std::fs::write(&damaged, &b).unwrap();
            let (code, _, err) = util::run(args);
            assert!(
                [0, 2, 3, 4].contains(&code),
                "byte {offset}: {args:?} exit {code}: {err}"
            );
            assert!(!err.contains("panicked"), "byte {offset}: {args:?}: {err}");
            if code == 2 {
                assert!(err.contains(&damaged), "byte {offset}: no path in {err}");
                refused += 1;
            }
        }
    }
    assert!(
        refused > 0,
        "no damage was noticed at all: the test exercises nothing"
    );
}
