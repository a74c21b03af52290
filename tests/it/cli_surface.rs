//! The surfaces people touch, through the real binary: the run lifecycle (Ctrl-C,
//! `interrupted`, filters, `latest`, `delete`, `compact`, `SCANLEDGER_STORE`), output for
//! programs (`--json` on every command, `--json-lines`), complete lists (`--all`,
//! `--output`, `export --label`), wording, shell integration and the reference.
//!
//! Each test names the defect it pins; before this work each of them failed: Ctrl-C exited
//! 130 silently and left the run `running`; `runs` had no filters; `latest`, `delete`,
//! `compact`, `explain`, `completions` and `man` did not exist; `export` ignored `--json`;
//! `runs --json` was compact while the others were pretty; lists stopped at 32 ranges;
//! `--checkpoint-every 0` silently meant 1; texts said "1 partitions" and "250..250".
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cli_errors::Env;
use crate::util;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Ctrl-C stops at a page boundary: the run is committed, the partial receipt and the resume
/// command are printed, the exit code is 3, and the run resumes to the end.
#[test]
fn ctrl_c_stops_at_a_page_boundary_prints_the_resume_command_and_exits_3() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "page_size": 10}"#);
    let child = Command::new(util::bin())
        .args([
            "--store",
            &env.store,
            "scan",
            "--contract",
            &c,
            "--source",
            "sim:records=2000,delay_ms=5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until a page is committed, then interrupt.
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        // The store may not exist yet: then `runs` prints no JSON, and we wait on.
        let (_, out, _) = env.sl(&["--json", "runs"]);
        let pages = serde_json::from_str::<Value>(&out)
            .ok()
            .and_then(|v| v["runs"][0]["pages_observed"].as_u64());
        if pages.unwrap_or(0) > 2 {
            break;
        }
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.starts_with("run-1  UNKNOWN"), "{stdout}");
    assert!(stdout.contains("limits hit   interrupted"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "continue it with `scanledger --store {} resume run-1`",
            env.store
        )),
        "{stderr}"
    );
    let (code, out, _) = env.sl(&["--json", "runs"]);
    assert_eq!(code, 0);
    assert_eq!(
        json(&out)["runs"][0]["state"],
        "finished",
        "committed, not dangling"
    );
    let (code, out, err) = env.sl(&["resume", "run-1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2000 observed, 2000 unique"), "{out}");
}

/// A scan whose process is killed shows as `interrupted`, not `running`, in `runs`.
#[test]
fn a_killed_scan_shows_as_interrupted_and_says_how_to_resume() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "page_size": 10}"#);
    let mut child = Command::new(util::bin())
        .args(["--store", &env.store, "scan", "--contract", &c, "--source"])
        .arg("sim:records=100000,delay_ms=5")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut live = String::new();
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(25));
        let (_, out, _) = env.sl(&["--json", "runs"]);
        if out.contains("\"run-1\"") {
            live = json(&out)["runs"][0]["state"].as_str().unwrap().to_owned();
            break;
        }
    }
    assert_eq!(live, "running", "a live scan is running");
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, out, err) = env.sl(&["runs", "--status", "interrupted"]);
    assert_eq!(code, 0);
    assert!(out.contains("run-1  interrupted"), "{out}");
    assert!(err.contains("resume run-1"), "{err}");
}

#[test]
fn runs_filter_by_status_source_and_limit_and_latest_names_the_newest() {
    let env = Env::new();
    let a = env.write("a.json", r#"{"source": "alpha"}"#);
    let b = env.write(
        "b.json",
        r#"{"source": "beta", "limits": {"max_pages": 1}}"#,
    );
    for (c, src) in [
        (&a, "sim:records=50"),
        (&b, "sim:records=500"),
        (&a, "sim:records=60"),
    ] {
        env.sl(&["scan", "--contract", c, "--source", src]);
    }
    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let (code, out, err) = env.sl(&all);
        assert_eq!(code, 0, "{err}");
        json(&out)["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&["runs"]), ["run-3", "run-2", "run-1"]);
    assert_eq!(ids(&["runs", "--status", "unknown"]), ["run-2"]);
    assert_eq!(ids(&["runs", "--status", "verified"]), ["run-3", "run-1"]);
    assert_eq!(
        ids(&["runs", "--source", "alpha", "--limit", "1"]),
        ["run-3"]
    );
    let (code, out, _) = env.sl(&["--json", "receipt", "latest"]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["run_id"], "run-3");
    // `runs --json` is pretty like every other command; `--json-lines` gives one run a line.
    let (_, out, _) = env.sl(&["--json", "runs"]);
    assert!(out.starts_with("{\n  \"runs\": ["), "{out}");
    let (_, out, _) = env.sl(&["--json-lines", "runs"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(json(lines[0])["run_id"], "run-3");
    // The table aligns its columns: every row starts its STATE column at the same place.
    let (_, out, _) = env.sl(&["runs"]);
    let header = out.lines().next().unwrap();
    for column in ["STATE", "STATUS", "SOURCE", "STARTED"] {
        let at = header.find(column).unwrap();
        for row in out.lines().skip(1) {
            assert!(
                row.as_bytes()[at - 1] == b' ' && row.as_bytes()[at] != b' ',
                "{column} starts at {at} in every row:\n{out}"
            );
        }
    }
}

#[test]
fn scanledger_store_names_the_default_store() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s"}"#);
    let run = |args: &[&str]| {
        let out = Command::new(util::bin())
            .args(args)
            .env("SCANLEDGER_STORE", &env.store)
            .current_dir(env.dir.path())
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        run(&["scan", "--contract", &c, "--source", "sim:records=5"]).0,
        0
    );
    assert!(std::path::Path::new(&env.store).exists());
    assert!(!env.dir.path().join("scanledger.redb").exists());
    let (code, out) = run(&["runs"]);
    assert_eq!(code, 0);
    assert!(out.contains("run-1"), "{out}");
}

#[test]
fn delete_and_compact_reclaim_space() {
    let env = Env::new();
    env.sim_run(10);
    let c = env.write("big.json", r#"{"source": "big", "page_size": 10000}"#);
    let (code, _, err) = env.sl(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=400000,ids=random",
    ]);
    assert_eq!(code, 0, "{err}");
    let before = std::fs::metadata(&env.store).unwrap().len();
    let (code, out, err) = env.sl(&["delete", "latest"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("run-2 deleted"), "{out}");
    let (code, _, err) = env.sl(&["receipt", "2"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = env.sl(&["--json", "compact"]);
    assert_eq!(code, 0, "{err}");
    let after = json(&out)["bytes_after"].as_u64().unwrap();
    assert!(after < before / 2, "{before} -> {after}");
    let (code, _, _) = env.sl(&["receipt", "1"]);
    assert_eq!(code, 0, "the other run is intact");
}

/// Two runs differing in many ranges (every other ID of a dense collection).
fn two_runs_far_apart(env: &Env) {
    let c = env.write("c.json", r#"{"source": "s", "page_size": 1000}"#);
    let (code, _, err) = env.sl(&["scan", "--contract", &c, "--source", "sim:records=20000"]);
    assert_eq!(code, 0, "{err}");
    let ids: Vec<String> = (1..=20000)
        .filter(|i| i % 2 == 0)
        .map(|i| i.to_string())
        .collect();
    let pages = format!(
        "{{\"cursor\": null, \"items\": [{}, 50000], \"next\": null}}\n",
        ids.join(", ")
    );
    let p = env.write("half.jsonl", &pages);
    let (code, _, err) = env.sl(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn diff_and_missing_give_complete_lists_with_all_or_output() {
    let env = Env::new();
    two_runs_far_apart(&env);
    let (_, out, _) = env.sl(&["diff", "1", "2"]);
    assert!(out.contains("and 9968 more (--all lists them)"), "{out}");
    assert!(
        out.contains("  added      50000\n"),
        "a single ID alone: {out}"
    );
    let (_, out, _) = env.sl(&["diff", "1", "2", "--all"]);
    assert_eq!(out.matches("..").count(), 0, "single IDs: {}", &out[..200]);
    assert!(out.contains("19999"), "the last removed ID is listed");
    let (_, out, _) = env.sl(&["--json", "diff", "1", "2", "--all"]);
    let v = json(&out);
    assert_eq!(v["removed_ranges"].as_array().unwrap().len(), 10000);
    assert_eq!(v["removed_ranges_total"], 10000);
    let file = env.path("diff.txt");
    let (code, out, _) = env.sl(&["diff", "1", "2", "--output", &file]);
    assert_eq!(code, 0);
    assert!(out.contains("every range written to"), "{out}");
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        written.lines().filter(|l| l.starts_with("- ")).count(),
        10000
    );
    assert_eq!(written.lines().filter(|l| l.starts_with("+ ")).count(), 1);
    let (_, out, _) = env.sl(&["--json", "missing", "2", "--against", "1", "--all"]);
    assert_eq!(
        json(&out)["missing_ranges"].as_array().unwrap().len(),
        10000
    );
    let (_, out, _) = env.sl(&["missing", "2", "--range", "1..100", "--all"]);
    assert!(
        out.starts_with("run-2 lacks 50 IDs that the range 1..100 has, in 50 ranges"),
        "{out}"
    );
}

#[test]
fn export_honours_json_and_exports_a_label() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s"}"#);
    env.sl(&[
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=1000,label_every=250",
    ]);
    let (code, out, _) = env.sl(&["export", "1", "--label", "needs_migration"]);
    assert_eq!(code, 0);
    assert_eq!(out, "250\n500\n750\n1000\n");
    let (code, out, _) = env.sl(&["--json", "export", "1", "--label", "needs_migration"]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["ids"], serde_json::json!([250, 500, 750, 1000]));
    assert_eq!(v["count"], 4);
    assert_eq!(v["complete"], true);
    let (_, out, _) = env.sl(&["--json", "export", "1"]);
    assert_eq!(json(&out)["ids"].as_array().unwrap().len(), 1000);
    let (_, out, _) = env.sl(&["--json-lines", "export", "1", "--label", "needs_migration"]);
    assert_eq!(out, "250\n500\n750\n1000\n");
    let file = env.path("ids.txt");
    let (_, out, _) = env.sl(&["--json", "export", "1", "--output", &file]);
    assert_eq!(json(&out)["count"], 1000);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().lines().count(),
        1000
    );
}

#[test]
fn page_of_a_failed_run_exits_4_with_a_note() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "expected_count": 3}"#);
    let (code, _, _) = env.sl(&["scan", "--contract", &c, "--source", "sim:records=5"]);
    assert_eq!(code, 4);
    let (code, out, err) = env.sl(&["page", "1"]);
    assert_eq!(code, 4, "{out}");
    assert_eq!(json(&out)["coverage_status"], "failed");
    assert!(err.contains("not pages of a complete inventory"), "{err}");
}

#[test]
fn words_agree_with_their_counts_and_single_ids_stand_alone() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s"}"#);
    let p = env.write(
        "p.jsonl",
        r#"{"cursor": null, "items": [{"id": 250, "labels": ["x"]}, 7, 7], "next": null}"#,
    );
    let (code, out, _) = env.sl(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("3 observed, 2 unique, 1 duplicate, none expected"),
        "{out}"
    );
    assert!(out.contains("label        x: 1 ID (250)"), "{out}");
    assert!(out.contains("1 duplicate ID: 7"), "{out}");
    assert!(!out.contains("250..250"), "{out}");
    let (_, out, _) = env.sl(&["verify", &{
        let (_, r, _) = env.sl(&["--json", "receipt", "1"]);
        env.write("r.json", &r)
    }]);
    assert!(out.contains("1 page, 2 unique IDs in 1 partition"), "{out}");
}

/// A `string` run's IDs have no ranges a person could read: `missing` lists them one by one
/// and counts no "ranges" of them.
#[test]
fn missing_string_ids_are_listed_one_by_one_without_ranges() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "id_codec": "string"}"#);
    let all = env.write(
        "all.jsonl",
        r#"{"cursor": null, "items": ["b", "a", "c", "d"], "next": null}"#,
    );
    let some = env.write(
        "some.jsonl",
        r#"{"cursor": null, "items": ["b", "d"], "next": null}"#,
    );
    for p in [&all, &some] {
        let (code, out, err) =
            env.sl(&["scan", "--contract", &c, "--source", &format!("replay:{p}")]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, out, err) = env.sl(&["missing", "run-2", "--against", "run-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "run-2 lacks 2 IDs that run-1 has:\n  a, c\n", "{out}");
}

#[test]
fn shell_completions_man_page_and_help_are_generated() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let (code, out, err) = util::run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            out.contains("resume") && out.contains("checkpoint-every"),
            "{shell}"
        );
    }
    let (code, out, _) = util::run(&["man"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with(".ie") || out.contains(".TH scanledger"),
        "{}",
        &out[..80]
    );
    let (code, out, _) = util::run(&["--help"]);
    assert_eq!(code, 0);
    for needle in [
        "Exit codes:",
        "5  the store is busy",
        "docs/REFERENCE.md",
        "Examples:",
    ] {
        assert!(out.contains(needle), "--help lacks {needle:?}");
    }
    let (code, out, _) = util::run(&["explain", "duplicate_id"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("### `duplicate_id` (R4)"), "{out}");
    let (_, out, _) = util::run(&["--json", "explain", "limit_reached"]);
    assert_eq!(json(&out)["status"], "unknown");
}

#[test]
fn the_repository_carries_its_own_reference() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p);
        }
    }
    for p in &docs {
        let text = std::fs::read_to_string(p).unwrap();
        for outside in ["../shared", "SPEC §", "the seeds"] {
            assert!(
                !text.contains(outside),
                "{} points outside the repo: {outside}",
                p.display()
            );
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("docs/REFERENCE.md"),
        "the README links the reference"
    );
    assert!(
        readme.contains("cargo install --path ."),
        "the README says how to install"
    );
    let (_, help, _) = util::run(&["scan", "--help"]);
    assert!(!help.contains("SPEC §"), "{help}");
}

/// Where `text` cites a tracker issue by number (`issue 12`, `Issues 10 and 11`).
fn cites_an_issue(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    for word in ["issue ", "issues ", "issue #"] {
        let mut from = 0;
        while let Some(at) = lower[from..].find(word) {
            let start = from + at;
            let after = &lower[start + word.len()..];
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                let line = text[..start].matches('\n').count() + 1;
                return Some(format!(
                    "line {line}: {}",
                    &text[start..(start + word.len() + 3).min(text.len())]
                ));
            }
            from = start + word.len();
        }
    }
    None
}

#[test]
fn no_doc_or_code_comment_cites_the_tracker_or_the_team_spec() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = [
        "src", "benches", "tests/it", "examples", "scripts", "docs", "contrib", "fuzz",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    // A bounded walk: the repository's own folders, a few levels deep.
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        seen += 1;
        assert!(seen < 10_000, "too many folders");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if !["target", "corpus", "artifacts", "snapshots"].contains(&name.as_str()) {
                    dirs.push(p);
                }
            } else if [".rs", ".md", ".sh", ".py", ".toml"]
                .iter()
                .any(|x| name.ends_with(x))
            {
                files.push(p);
            }
        }
    }
    for doc in ["README.md", "ARCHITECTURE.md", "CHANGELOG.md", "Cargo.toml"] {
        files.push(root.join(doc));
    }
    assert!(files.len() > 50, "{} files", files.len());
    let mut found = Vec::new();
    // This file names what it looks for.
    let me = root.join(file!());
    for p in files.iter().filter(|p| **p != me) {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        if let Some(at) = cites_an_issue(&text) {
            found.push(format!("{}: {at}", p.display()));
        }
        for outside in ["SPEC §", "SPEC.md", "../shared", "the seeds"] {
            if text.contains(outside) {
                found.push(format!("{}: {outside}", p.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the product's files must stand alone:\n{}",
        found.join("\n")
    );
}

#[test]
fn verbose_logs_show_retries_and_policy_decisions_never_a_cursor_and_quiet_says_nothing() {
    let env = Env::new();
    let c = env.write(
        "c.json",
        r#"{"source": "s", "page_size": 10, "on_expired_cursor": "restart"}"#,
    );
    let source = "sim:records=50,timeout_at=2,expire_at=3";
    let (code, out, err) = env.sl(&["-v", "scan", "--contract", &c, "--source", source]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("attempt 1 of 3 failed (timeout); retrying in 50 ms"),
        "{err}"
    );
    assert!(err.contains("on_expired_cursor is restart"), "{err}");
    assert!(
        !err.contains("sim-offset-"),
        "a raw cursor in the logs: {err}"
    );
    let (code, _, err) = env.sl(&["-vv", "scan", "--contract", &c, "--source", source]);
    assert_eq!(code, 0);
    assert!(err.contains("page 1 observed, committed"), "{err}");
    let (code, _, err) = env.sl(&["scan", "--contract", &c, "--source", source]);
    assert_eq!(code, 0);
    assert!(err.is_empty(), "no logs by default: {err}");
    let (code, out, err) = env.sl(&["-q", "diff", "run-1", "run-99"]);
    assert_eq!(code, 2, "{out}");
    assert!(err.starts_with("error: "), "-q keeps errors: {err}");
    let out = Command::new(util::bin())
        .args([
            "--store",
            &env.store,
            "scan",
            "--contract",
            &c,
            "--source",
            source,
        ])
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("committed"),
        "RUST_LOG=debug"
    );
}

/// The backticked names in the first column of the first table after `heading` in `doc`
/// (a cell may name several: `` `a`, `b` ``).
fn documented_keys(doc: &str, heading: &str) -> Vec<String> {
    let section = doc
        .split_once(heading)
        .unwrap_or_else(|| panic!("no section {heading:?}"))
        .1;
    let mut keys = Vec::new();
    let mut in_table = false;
    for line in section.lines() {
        let Some(row) = line.strip_prefix('|') else {
            if in_table {
                break;
            }
            continue;
        };
        in_table = true;
        let first = row.split('|').next().unwrap_or("");
        // The header row and the separator have no backticked name.
        keys.extend(
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .filter(|k| !k.is_empty()),
        );
    }
    keys
}

#[test]
fn the_documented_receipt_keys_are_a_real_receipts_keys() {
    let env = Env::new();
    let c = env.write("c.json", r#"{"source": "s", "page_size": 100}"#);
    let (code, out, err) = env.sl(&[
        "--json",
        "scan",
        "--contract",
        &c,
        "--source",
        "sim:records=250,label_every=10",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let receipt: Value = serde_json::from_str(&out).unwrap();
    let real: Vec<String> = receipt.as_object().unwrap().keys().cloned().collect();
    let merged = merged_receipt(&env);
    let merged: Vec<String> = merged.as_object().unwrap().keys().cloned().collect();
    let merge_only = scanledger::RECEIPT_MERGED_KEYS.map(str::to_owned);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference = std::fs::read_to_string(root.join("docs/REFERENCE.md")).unwrap();
    let format = std::fs::read_to_string(root.join("docs/FORMAT.md")).unwrap();
    // Both tables list the keys of a merged receipt in its own order; an ordinary receipt has
    // all of them but the two merge keys, in the same order.
    for (doc, heading, text) in [
        ("docs/REFERENCE.md", "## 7. The receipt", &reference),
        ("docs/FORMAT.md", "## 6. The receipt", &format),
    ] {
        let documented = documented_keys(text, heading);
        assert_eq!(
            documented, merged,
            "{doc} documents other keys than a merged run's receipt has, or in another order"
        );
        let ordinary: Vec<String> = documented
            .into_iter()
            .filter(|k| !merge_only.contains(k))
            .collect();
        assert_eq!(
            ordinary, real,
            "{doc} documents other keys than a receipt has, or in another order"
        );
    }
    for said in [
        format!("exactly these {} keys", real.len()),
        format!("has {}: `plan_digest` and `shards`", merged.len()),
    ] {
        assert!(
            reference.contains(&said),
            "docs/REFERENCE.md §7 must say {said:?}"
        );
    }
    assert_eq!(real.len(), scanledger::RECEIPT_KEYS.len());
    assert_eq!(
        merged.len(),
        scanledger::RECEIPT_KEYS.len() + merge_only.len()
    );
}

/// The stored receipt of a run `merge` wrote from a plan of two shards.
fn merged_receipt(env: &Env) -> Value {
    let c = env.write(
        "plan.contract.json",
        r#"{"source": "s", "page_size": 1000}"#,
    );
    let dir = std::path::PathBuf::from(env.path("plan"));
    let dir_s = dir.to_string_lossy().into_owned();
    let source = "sim:records=2000";
    let (code, out, err) = env.sl(&[
        "--json",
        "plan",
        "--contract",
        &c,
        "--source",
        source,
        "--shards",
        "2",
        "--out",
        &dir_s,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let plan = dir.join("plan.json").to_string_lossy().into_owned();
    let mut stores = Vec::new();
    for k in ["0", "1"] {
        let store = dir
            .join(format!("shard-{k}.redb"))
            .to_string_lossy()
            .into_owned();
        let (code, out, err) =
            crate::util::run(&["--store", &store, "scan", "--plan", &plan, "--shard", k]);
        assert_eq!(code, 0, "{out}{err}");
        stores.push(store);
    }
    let merged = dir.join("merged.redb").to_string_lossy().into_owned();
    let mut args = vec!["merge", "--plan", &plan, "--out", &merged];
    args.extend(stores.iter().map(String::as_str));
    let (code, out, err) = crate::util::run(&args);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = crate::util::run(&["--store", &merged, "--json", "receipt", "latest"]);
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap()
}
