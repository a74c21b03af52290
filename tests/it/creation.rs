//! Creating a store while other processes open it: real processes of the binary, started
//! together on a path that does not exist yet.
//!
//! The failure these guard against: the first process created the file empty and formatted it
//! in place, so a second one started at the same moment found an empty file or a database
//! without the format record, and was refused ("empty file", "not a scanledger store", exit 2)
//! on a store nothing was wrong with.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::process::{Child, Command, Stdio};

use crate::util;

const CONTRACT: &str = r#"{"source": "files", "tenant": "t", "page_size": 50}"#;
const TRIALS: usize = 20;

fn spawn(args: &[&str]) -> Child {
    Command::new(util::bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn scanledger")
}

fn finish(child: Child) -> (i32, String, String) {
    let out = child.wait_with_output().expect("wait for scanledger");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scan_args<'a>(store: &'a str, contract: &'a str) -> Vec<&'a str> {
    vec![
        "--store",
        store,
        "--wait",
        "60",
        "scan",
        "--contract",
        contract,
        "--source",
        "sim:records=200",
    ]
}

#[test]
fn two_scans_creating_one_store_at_once_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "contract.json", CONTRACT);
    let mut failed = Vec::new();
    for trial in 0..TRIALS {
        let store = dir
            .path()
            .join(format!("race-{trial}.redb"))
            .to_string_lossy()
            .into_owned();
        let a = spawn(&scan_args(&store, &contract));
        let b = spawn(&scan_args(&store, &contract));
        let (a, b) = (finish(a), finish(b));
        for (code, _, err) in [&a, &b] {
            if *code != 0 {
                failed.push(format!("trial {trial}: exit {code}: {}", err.trim()));
            }
        }
        if a.0 != 0 || b.0 != 0 {
            continue;
        }
        // One after the other through the writer lock: two runs, both verified.
        let (code, out, err) = util::run(&["--store", &store, "runs"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("run-1") && out.contains("run-2"), "{out}");
        assert_eq!(out.matches("verified").count(), 2, "{out}");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains(".creating-"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }
    assert!(
        failed.is_empty(),
        "{} of {} scans failed:\n{}",
        failed.len(),
        2 * TRIALS,
        failed.join("\n")
    );
}

#[test]
fn a_reader_started_with_the_scan_creating_the_store_sees_no_store_or_a_whole_one() {
    let dir = tempfile::tempdir().unwrap();
    let contract = util::write(dir.path(), "contract.json", CONTRACT);
    let mut failed = Vec::new();
    for trial in 0..TRIALS {
        let store = dir
            .path()
            .join(format!("read-{trial}.redb"))
            .to_string_lossy()
            .into_owned();
        let scan = spawn(&scan_args(&store, &contract));
        let reader = if trial % 2 == 0 {
            spawn(&["--store", &store, "runs"])
        } else {
            spawn(&["--store", &store, "receipt", "1"])
        };
        let (read_code, out, err) = finish(reader);
        let (scan_code, _, scan_err) = finish(scan);
        assert_eq!(scan_code, 0, "trial {trial}: the scan failed: {scan_err}");
        // Before the file is there: it does not exist. After: a store, with or without its
        // first run; `receipt 1` of a run still being written is unknown (3).
        let refused = ["empty file", "not a scanledger store", "damaged"]
            .iter()
            .any(|wrong| err.contains(wrong));
        let fine = !refused
            && match read_code {
                0 => true,
                2 => err.contains("does not exist") || err.contains("has no run-1"),
                3 => trial % 2 == 1,
                _ => false,
            };
        if !fine {
            failed.push(format!(
                "trial {trial}: exit {read_code}: {} {}",
                out.trim(),
                err.trim()
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {TRIALS} readers failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
