//! The binary in a pseudo-terminal (util-linux `script`): the progress bar and colours appear
//! on a terminal, and never in a pipe, with `NO_COLOR`, with `--color never` or with `--json`.
//!
//! The defect this pins: no colour anywhere, progress only with `--progress` (a line
//! every 2 s), while the demo wrote raw escape codes into pipes. `script` is in every Debian
//! (bsdutils, essential); without it the test fails under CI and says SKIPPED otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::process::{Command, Stdio};

use crate::cli_errors::Env;
use crate::util;

/// Whether `script` can run a command in a pseudo-terminal here.
fn script_works() -> bool {
    Command::new("script")
        .args(["-q", "-e", "-c", "true", "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `scanledger ARGS` in a pseudo-terminal with `extra_env`; returns the terminal's bytes
/// (stdout and stderr together, as a person sees them) as text.
fn in_terminal(args: &[&str], extra_env: &[(&str, &str)]) -> String {
    let mut cmd = util::bin().to_string_lossy().into_owned();
    for a in args {
        cmd.push(' ');
        cmd.push_str(&format!("'{}'", a.replace('\'', r"'\''")));
    }
    let mut script = Command::new("script");
    script
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null());
    for (k, v) in extra_env {
        script.env(k, v);
    }
    let out = script.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An SGR sequence (colour, bold): `ESC [ digits/semicolons m`.
fn has_sgr(text: &str) -> bool {
    text.split('\u{1b}').skip(1).any(|rest| {
        let Some(body) = rest.strip_prefix('[') else {
            return false;
        };
        let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        end.is_some_and(|i| body[i..].starts_with('m'))
    })
}

/// The progress bar's own text (its ETA and its rate), never in a receipt.
fn has_bar(text: &str) -> bool {
    text.contains("ETA") && text.contains("IDs/s")
}

#[test]
fn progress_bar_and_colours_appear_on_a_terminal_and_nowhere_else() {
    if !script_works() {
        assert!(
            std::env::var_os("CI").is_none(),
            "`script` (util-linux) is needed to test the terminal output"
        );
        println!("SKIPPED: `script` cannot run a pseudo-terminal here");
        return;
    }
    let env = Env::new();
    let c = env.write(
        "c.json",
        r#"{"source": "s", "page_size": 10, "expected_count": 3000}"#,
    );
    let scan = |store: &str| -> Vec<String> {
        [
            "--store",
            store,
            "scan",
            "--contract",
            &c,
            "--source",
            "sim:records=3000,delay_ms=2",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let args = |store: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        v.extend(scan(store));
        v
    };
    let run = |store: &str, extra: &[&str], env_vars: &[(&str, &str)]| {
        let a = args(&env.path(store), extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        in_terminal(&refs, env_vars)
    };

    let tty = run("a.redb", &[], &[]);
    assert!(has_bar(&tty), "a terminal shows the progress bar: {tty:?}");
    assert!(has_sgr(&tty), "a terminal shows colour: {tty:?}");
    assert!(tty.contains("VERIFIED"), "{tty:?}");

    let no_color = run("b.redb", &[], &[("NO_COLOR", "1")]);
    assert!(
        has_bar(&no_color),
        "NO_COLOR keeps the bar (it is not colour)"
    );
    assert!(!has_sgr(&no_color), "NO_COLOR: no colour: {no_color:?}");

    let never = run("c.redb", &["--color", "never"], &[]);
    assert!(!has_sgr(&never), "--color never: no colour: {never:?}");

    let as_json = run("d.redb", &["--json"], &[]);
    assert!(!has_bar(&as_json), "--json: no bar: {as_json:?}");
    assert!(!has_sgr(&as_json), "--json: no colour");

    let quiet = run("e.redb", &["-q"], &[]);
    assert!(!has_bar(&quiet), "-q: no bar");

    // In a pipe: neither, not even an escape code.
    let a = scan(&env.path("f.redb"));
    let refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, out, err) = util::run(&refs);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}'),
        "{out}{err}"
    );
    assert!(!has_bar(&err));

    // --color always colours even a pipe.
    let store_g = env.path("g.redb");
    let mut always = vec!["--color", "always"];
    always.extend_from_slice(&refs);
    always[3] = &store_g;
    let (_, out, _) = util::run(&always);
    assert!(has_sgr(&out), "--color always: {out:?}");
}
