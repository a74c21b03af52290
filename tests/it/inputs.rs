//! Input files are read with a bound while they are read, never by their stated size, through
//! the real binary: endless devices, pipes, directories, and small files that once asked for
//! gigabytes.
//!
//! The bugs: contracts, receipts and replay files were checked against the size
//! `stat` reports and then read whole, so `/dev/zero` (size 0) was read until memory ran out
//! and a FIFO without a writer hung the scan; and a 157 KB replay file of 2,275
//! `{"range": [1, 100000]}` lines expanded every generator when the file was opened, about
//! 21 GB of items before the first page (the same with one 157 KB generator prefix, copied
//! into 100,001 IDs). Each test runs the binary with a time limit, and the memory tests under
//! `ulimit -v`, so the old behaviour fails the test instead of hanging or swapping.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Seconds any of these commands may take; far more than a bounded read needs.
const COMMAND_SECONDS_MAX: u64 = 60;
/// Virtual memory the memory tests allow the binary (KiB): 1 GiB.
const VIRTUAL_KIB_MAX: u64 = 1 << 20;

const CONTRACT: &str = r#"{"source": "customers", "snapshot_id": "s1"}"#;
const PAGES: &str = r#"{"cursor": null, "items": [1, 2], "next": null, "snapshot": "s1"}"#;

/// Runs `program args`, killing it past the time limit; (exit code, stdout, stderr).
fn run_bounded(program: &str, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(COMMAND_SECONDS_MAX) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{program} {args:?} ran past {COMMAND_SECONDS_MAX} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scanledger(args: &[&str]) -> (i32, String, String) {
    run_bounded(util::bin().to_str().unwrap(), args)
}

/// `scan` of `contract` over `replay:pages` in a fresh store under `dir`.
fn scan(dir: &Path, contract: &str, pages: &str) -> (i32, String, String) {
    let store = dir.join("s.redb");
    scanledger(&[
        "--store",
        store.to_str().unwrap(),
        "--json",
        "scan",
        "--contract",
        contract,
        "--source",
        &format!("replay:{pages}"),
    ])
}

/// As `scan`, with the binary's virtual memory limited to `VIRTUAL_KIB_MAX`.
fn scan_memory_bounded(dir: &Path, contract: &str, pages: &str) -> (i32, String, String) {
    scan_source_memory_bounded(dir, contract, &format!("replay:{pages}"))
}

/// `scan` of `contract` over the source `spec` in a fresh store under `dir`, with the
/// binary's virtual memory limited to `VIRTUAL_KIB_MAX`.
fn scan_source_memory_bounded(dir: &Path, contract: &str, spec: &str) -> (i32, String, String) {
    let store = dir.join("s.redb");
    let script = format!(
        "ulimit -v {VIRTUAL_KIB_MAX} && exec \"$0\" --store \"$1\" --json scan --contract \"$2\" --source \"$3\""
    );
    run_bounded(
        "sh",
        &[
            "-c",
            &script,
            util::bin().to_str().unwrap(),
            store.to_str().unwrap(),
            contract,
            spec,
        ],
    )
}

#[cfg(unix)]
#[test]
fn a_contract_from_dev_zero_is_refused_at_its_bound() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let pages = util::write(tmp.path(), "pages.jsonl", PAGES);
    let (code, out, err) = scan(tmp.path(), "/dev/zero", &pages);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("/dev/zero is larger than 1048576 bytes"),
        "{err}"
    );
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_replay_file_from_dev_zero_is_refused() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    let (code, out, err) = scan(tmp.path(), &contract, "/dev/zero");
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("/dev/zero is not a regular file"), "{err}");
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_receipt_from_dev_zero_is_refused_at_its_bound() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let store = tmp.path().join("s.redb");
    let (code, out, err) = scanledger(&["--store", store.to_str().unwrap(), "verify", "/dev/zero"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("/dev/zero is larger than 16777216 bytes"),
        "{err}"
    );
    Ok(())
}

/// The sources whose `KIND:CONFIG.json` names a config file, in the features built.
fn config_sources() -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if cfg!(feature = "postgres") {
        kinds.push("postgres");
    }
    if cfg!(feature = "mysql") {
        kinds.push("mysql");
    }
    if cfg!(feature = "http") {
        kinds.push("http");
    }
    kinds
}

#[cfg(unix)]
#[test]
fn source_configs_from_dev_zero_are_refused_at_their_bound() -> TestResult {
    // A config was once checked against its stated size (0 for a device) and then read
    // whole: `mysql:/dev/zero` read until memory ran out. Under `ulimit -v` that is an "out
    // of memory" error, not the bound's.
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    assert!(!config_sources().is_empty(), "no config source is built");
    for kind in config_sources() {
        let (code, out, err) =
            scan_source_memory_bounded(tmp.path(), &contract, &format!("{kind}:/dev/zero"));
        assert_eq!(code, 2, "{kind}: {out}{err}");
        assert!(
            err.contains("/dev/zero is larger than 1048576 bytes"),
            "{kind}: {err}"
        );
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn source_configs_from_a_fifo_are_read_once() -> TestResult {
    // A config read from a FIFO is read once, bounded, and then judged like a file: `{}`
    // lacks the key every config source needs (`dsn`, or `url`), so each names it.
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    for kind in config_sources() {
        let fifo = tmp.path().join(format!("{kind}.fifo"));
        mkfifo(&fifo);
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, "{}"))
        };
        let spec = format!("{kind}:{}", fifo.display());
        let (code, out, err) = scan_source_memory_bounded(tmp.path(), &contract, &spec);
        writer.join().unwrap()?;
        assert_eq!(code, 2, "{kind}: {out}{err}");
        assert!(err.contains(&format!("{kind}.fifo")), "{kind}: {err}");
        let key = if kind == "http" { "url" } else { "dsn" };
        assert!(err.contains(&format!("\\\"{key}\\\"")), "{kind}: {err}");
    }
    Ok(())
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn a_contract_from_a_fifo_is_read() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let pages = util::write(tmp.path(), "pages.jsonl", PAGES);
    let fifo = tmp.path().join("contract.fifo");
    mkfifo(&fifo);
    let writer = {
        let fifo = fifo.clone();
        // Opening a FIFO for writing waits for its reader: the scan below.
        std::thread::spawn(move || std::fs::write(fifo, CONTRACT))
    };
    let (code, out, err) = scan(tmp.path(), fifo.to_str().unwrap(), &pages);
    writer.join().unwrap()?;
    assert_eq!(code, 0, "{out}{err}");
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_replay_file_that_is_a_fifo_is_refused_without_waiting_for_a_writer() -> TestResult {
    // A replay file is read again by offsets, so only a regular file can serve it; the check
    // comes before opening, which for a FIFO without a writer would wait forever.
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    let fifo = tmp.path().join("pages.fifo");
    mkfifo(&fifo);
    let (code, out, err) = scan(tmp.path(), &contract, fifo.to_str().unwrap());
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("is not a regular file"), "{err}");
    Ok(())
}

#[test]
fn directories_are_refused_as_inputs() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("a-directory");
    std::fs::create_dir(&dir)?;
    let dir = dir.to_str().unwrap();
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    let pages = util::write(tmp.path(), "pages.jsonl", PAGES);
    let store = tmp.path().join("s.redb");
    for (code, out, err) in [
        scan(tmp.path(), dir, &pages),
        scan(tmp.path(), &contract, dir),
        scanledger(&["--store", store.to_str().unwrap(), "verify", dir]),
    ] {
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("a-directory is a directory"), "{err}");
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_small_replay_file_of_wide_generators_scans_in_bounded_memory() -> TestResult {
    // 157 KB: a one-page scan, then 2,275 lines that each generate 100,000 IDs. Opening the
    // file once expanded every one of them (about 21 GB); now a generator is expanded only
    // when its page is served, and none of these is.
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    let mut text = String::from(PAGES);
    text.push('\n');
    for i in 1..=2_275 {
        text.push_str(&format!(
            "{{\"cursor\": \"c{i}\", \"items\": {{\"range\": [1, 100000]}}, \"next\": \"c{}\"}}\n",
            i + 1
        ));
    }
    assert!(text.len() > 150_000, "{}", text.len());
    let pages = util::write(tmp.path(), "pages.jsonl", &text);
    let (code, out, err) = scan_memory_bounded(tmp.path(), &contract, &pages);
    assert_eq!(code, 0, "{out}{err}");
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_long_generator_prefix_is_refused_not_copied_into_every_id() -> TestResult {
    // One 157 KB line: a generator of 100,000 IDs with a 157,000-byte prefix asked for
    // 100,001 copies of the prefix (about 15.7 GB). The prefix is bounded like a codec's.
    let tmp = tempfile::tempdir()?;
    let contract = util::write(tmp.path(), "contract.json", CONTRACT);
    let text = format!(
        "{{\"cursor\": null, \"items\": {{\"range\": [1, 100000], \"prefix\": \"{}\"}}, \"next\": null}}\n",
        "x".repeat(157_000)
    );
    let pages = util::write(tmp.path(), "pages.jsonl", &text);
    let (code, out, err) = scan_memory_bounded(tmp.path(), &contract, &pages);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("\"message\": \"items.prefix: 157000 bytes, longer than the bound of 128\"")
            && err.contains("\"line\": 1,")
            && err.contains("\"column\": 157062,"),
        "{err}"
    );
    Ok(())
}
