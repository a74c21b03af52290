//! The README's main job, `scripts/demo.sh`, end to end with the debug binary found on `PATH`
//! (its prebuilt path: a `scanledger` of this checkout's version is used, nothing is built),
//! its output going into pipes as in a CI log: it must say first which binary it runs, finish,
//! name the folder it kept, write the report, and write no escape code.

use std::path::Path;
use std::process::Command;

use crate::util;

#[test]
fn the_demo_runs_end_to_end_and_writes_no_escape_code_into_a_pipe() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("demo");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `scanledger` on PATH: the debug binary, under its own name.
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir(&bin_dir).expect("bin dir");
    std::os::unix::fs::symlink(util::bin(), bin_dir.join("scanledger")).expect("link");
    let mut path = vec![bin_dir.clone()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = Command::new("bash")
        .arg(root.join("scripts/demo.sh"))
        .arg(&dir)
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env_remove("SCANLEDGER_BIN")
        // Colour is decided by the pipe alone here.
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("SCANLEDGER_STORE")
        .env("TERM", "xterm-256color")
        .output()
        .expect("bash runs the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !text.contains('\u{1b}'),
            "the demo wrote an escape code into its {name} pipe: {text:?}"
        );
    }
    // Its first line says which binary runs, and that nothing is built.
    assert!(
        stdout.starts_with(&format!(
            "\n== The binary: {} (on PATH, scanledger {};",
            bin_dir.join("scanledger").display(),
            env!("CARGO_PKG_VERSION")
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("cargo build"), "{stdout}");
    let kept = std::fs::canonicalize(&dir).expect("the demo made its folder");
    assert!(
        stdout.contains(&format!("== Kept in {}", kept.display())),
        "the demo names its folder: {stdout}"
    );
    for step in 1..=9 {
        assert!(
            stdout.contains(&format!("\n== {step}. ")),
            "step {step}: {stdout}"
        );
    }
    // Its answers: run-2 stopped by its budget, then verified; the tampered receipt and the
    // looping source refused.
    assert!(
        stdout.contains("(exit 3)") && stdout.contains("(exit 4)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("run-2: receipt verified against store"),
        "{stdout}"
    );
    let store = kept.join("demo.redb");
    assert!(store.is_file(), "the store is kept");
    assert!(
        stdout.contains(&format!("store    {}", store.display())),
        "{stdout}"
    );
    let report = kept.join("report-run-2.html");
    let html = std::fs::read_to_string(&report).expect("the demo wrote its report");
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("run-2") && html.contains("run-1"),
        "a report of run-2 against run-1"
    );
    assert!(
        stdout.contains(&format!("open file://{}", report.display())),
        "{stdout}"
    );
}
