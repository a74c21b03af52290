//! A stdout that cannot take the output: a full device is one sentence on stderr and exit 1,
//! a closed pipe ends the output quietly with the command's own exit code; never a panic.
//!
//! The defect this pins: `scanledger completions bash > /dev/full` panicked (exit 101) inside
//! the completion generator, and once on a closed pipe too; `export` to a full stdout exited
//! 2 as if the input were wrong; `--help` into a full stdout exited 0 having written nothing.

#![cfg(unix)]

use std::process::{Command, Stdio};

use crate::util::{self, Env};

/// Runs the binary with `stdout` as its standard output; (exit code, stderr).
fn run_into(env: &Env, args: &[&str], stdout: Stdio) -> (i32, String) {
    let out = Command::new(util::bin())
        .arg("--store")
        .arg(&env.store)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run the binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A store with run-1 verified and run-2 stopped by its page budget (unknown).
fn two_runs() -> Env {
    let env = Env::new();
    let full = env.write("full.json", r#"{"source": "s", "page_size": 100}"#);
    let (code, out, err) = env.sl(&["scan", "--contract", &full, "--source", "sim:records=20000"]);
    assert_eq!(code, 0, "{out}{err}");
    let cut = env.write(
        "cut.json",
        r#"{"source": "s", "page_size": 100, "limits": {"max_pages": 5}}"#,
    );
    let (code, out, err) = env.sl(&["scan", "--contract", &cut, "--source", "sim:records=20000"]);
    assert_eq!(code, 3, "{out}{err}");
    env
}

/// The commands checked, each with its exit code when stdout takes everything.
const COMMANDS: &[(&[&str], i32)] = &[
    (&["completions", "bash"], 0),
    (&["completions", "zsh"], 0),
    (&["man"], 0),
    (&["export", "run-1"], 0),
    (&["--json", "export", "run-1"], 0),
    (&["export", "run-2"], 3),
    (&["runs"], 0),
    (&["--json", "runs"], 0),
    (&["receipt", "run-1"], 0),
    (&["--help"], 0),
    (&["--version"], 0),
];

#[test]
fn a_full_stdout_is_one_sentence_and_exit_1() {
    let env = two_runs();
    for (args, _) in COMMANDS {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let (code, err) = run_into(&env, args, Stdio::from(full));
        assert_eq!(code, 1, "{args:?}: {err}");
        if args.contains(&"--json") {
            let v: serde_json::Value = serde_json::from_str(&err).expect("a JSON error");
            assert_eq!(v["error"]["kind"], "stdout", "{args:?}: {err}");
            assert_eq!(v["error"]["exit_code"], 1, "{args:?}: {err}");
        } else {
            assert_eq!(
                err, "error: cannot write to stdout: no space left on the device\n",
                "{args:?}"
            );
        }
    }
}

#[test]
fn a_closed_pipe_ends_the_output_quietly_with_the_commands_exit_code() {
    let env = two_runs();
    for (args, expected) in COMMANDS {
        // The reading end is closed before the command starts: its first write fails.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let (code, err) = run_into(&env, args, Stdio::from(writer));
        assert_eq!(code, *expected, "{args:?}: {err}");
        assert!(
            !err.contains("error") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        if *expected == 0 {
            assert_eq!(err, "", "{args:?}");
        }
    }
}
