//! Text a source controls never reaches a terminal raw: source and tenant names, the query,
//! snapshot names, label names, string IDs and the recorded source spec (a replay file's
//! path) each carry ESC, BEL, CR and LF bytes, and every text output of every command that
//! shows them (stdout and stderr, results, notes, errors and hints) must show them escaped.
//!
//! The commands run with `--color always`: off a terminal `anstream` would strip an escape
//! sequence silently and hide a leak, while a person's terminal gets it whole.

use std::path::Path;

use serde_json::{json, Value};

use crate::util::Env;

/// A string that, printed raw, sets the colour, retitles the window, rings the bell, returns
/// the carriage and forges a `VERIFIED` line.
const HOSTILE: &str = "x\u{1b}[5;31mFORGED\u{1b}]0;title\u{7}\r\n  VERIFIED";
/// How `terminal_safe` shows the start of `HOSTILE`.
const ESCAPED: &str = "x\\u{1b}[5;31mFORGED\\u{1b}]0;title\\u{7}\\r\\n  VERIFIED";

/// `text` without the SGR sequences (`ESC [ digits ; ... m`) our own styles write.
fn without_our_styles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let params = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(tail.len());
        if tail[params..].starts_with('m') {
            rest = &tail[params + 1..];
        } else {
            // Not one of ours: keep the ESC, so the check below sees it.
            out.push('\u{1b}');
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Asserts `text` (what `what` printed) holds no raw byte of `HOSTILE` and, when `shows` is
/// set, that it shows the hostile text escaped (so the check is not vacuous).
fn assert_safe(what: &str, text: &str, shows: bool) {
    assert!(
        !text.contains("\u{1b}[5;31m"),
        "{what}: a source's escape sequence reached the terminal: {text:?}"
    );
    let plain = without_our_styles(text);
    for (byte, name) in [('\u{1b}', "ESC"), ('\u{7}', "BEL"), ('\r', "CR")] {
        assert!(
            !plain.contains(byte),
            "{what}: a raw {name} reached the terminal: {text:?}"
        );
    }
    assert!(
        !plain
            .lines()
            .any(|l| l.trim_start().starts_with("VERIFIED")),
        "{what}: a forged line: {plain}"
    );
    if shows {
        assert!(
            plain.contains(ESCAPED),
            "{what}: the hostile text is not shown escaped: {plain}"
        );
    }
}

/// A replay file of `lines` at `path`, as a `replay:` spec.
fn replay_at(path: &Path, lines: &[Value]) -> String {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write replay");
    format!("replay:{}", path.display())
}

#[test]
fn every_source_string_is_escaped_in_text_output() {
    let env = Env::new();
    let sl = |args: &[&str]| {
        let mut all = vec!["--color", "always"];
        all.extend_from_slice(args);
        env.sl(&all)
    };
    let contract = env.write(
        "c.json",
        &json!({
            "source": format!("src{HOSTILE}"),
            "tenant": format!("ten{HOSTILE}"),
            "query": {"q": HOSTILE},
            "id_codec": "string",
        })
        .to_string(),
    );
    let snapshot = format!("snap{HOSTILE}");
    let id = |n: u32| json!(format!("id{HOSTILE}{n}"));
    let labelled = |n: u32| json!({"id": id(n), "labels": [format!("lab{HOSTILE}")]});
    // run-1: three IDs, one labelled. run-2: from a replay file whose name is hostile, one ID
    // fewer and one more.
    let one = replay_at(
        &env.path().join("one.jsonl"),
        &[
            json!({"cursor": null, "items": [labelled(1), id(2)], "next": "c1", "snapshot": snapshot}),
            json!({"cursor": "c1", "items": [id(3)], "next": null, "snapshot": snapshot}),
        ],
    );
    let hostile_file = env.path().join(format!("pages{HOSTILE}.jsonl"));
    let two = replay_at(
        &hostile_file,
        &[
            json!({"cursor": null, "items": [labelled(1), id(2)], "next": "c1", "snapshot": snapshot}),
            json!({"cursor": "c1", "items": [id(4)], "next": null, "snapshot": snapshot}),
        ],
    );
    let (code, out, err) = sl(&["scan", "--contract", &contract, "--source", &one]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("scan", &out, true);
    assert_safe("scan (stderr)", &err, false);
    let (code, out, err) = sl(&["scan", "--contract", &contract, "--source", &two]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("scan of run-2", &format!("{out}{err}"), true);

    // run-3: the hostile replay file runs out after its first page, so the error names it,
    // and so does the resume of the recorded source spec.
    let three = replay_at(
        &hostile_file,
        &[json!({"cursor": null, "items": [id(1)], "next": "c1", "snapshot": snapshot})],
    );
    let (code, out, err) = sl(&["scan", "--contract", &contract, "--source", &three]);
    assert_eq!(code, 2, "{out}{err}");
    assert_safe("scan that runs out", &err, true);
    let (code, out, err) = sl(&["resume", "run-3"]);
    assert_eq!(code, 2, "{out}{err}");
    assert_safe("resume of a recorded hostile source", &err, true);

    for args in [
        &["receipt", "run-1"][..],
        &["runs"],
        &["diff", "run-1", "run-2"],
        &["missing", "run-2", "--against", "run-1"],
    ] {
        let (code, out, err) = sl(args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert_safe(&format!("{args:?}"), &out, true);
        assert_safe(&format!("{args:?} (stderr)"), &err, false);
    }
    let (code, out, err) = sl(&["runs", "--status", "interrupted"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("runs (the note)", &format!("{out}{err}"), true);

    // The hint of a missing label lists the run's label names.
    let (code, out, err) = sl(&["export", "run-1", "--label", "nope"]);
    assert_eq!(code, 2, "{out}{err}");
    assert_safe("export --label (hint)", &err, true);
    // A text export writes each string ID as the inside of a JSON string literal.
    let (code, out, err) = sl(&["export", "run-1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("export", &format!("{out}{err}"), false);
    assert!(out.contains("\\u001b[5;31mFORGED"), "{out}");
    let labelled_out = env.path().join(format!("ids{HOSTILE}.txt"));
    let (code, out, err) = sl(&[
        "export",
        "run-1",
        "--label",
        &format!("lab{HOSTILE}"),
        "--output",
        labelled_out.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("export --output (summary)", &format!("{out}{err}"), true);

    // A receipt handed to `verify` is untrusted too: a label renamed to hostile text is
    // named in the mismatch, escaped.
    let (code, out, _) = env.sl(&["--json", "receipt", "run-1"]);
    assert_eq!(code, 0);
    let mut receipt: Value = serde_json::from_str(&out).expect("receipt JSON");
    let labels = receipt["labels"].as_object().expect("labels").clone();
    let renamed: serde_json::Map<String, Value> = labels
        .into_iter()
        .map(|(_, v)| (format!("other{HOSTILE}"), v))
        .collect();
    receipt["labels"] = Value::Object(renamed);
    let tampered = env.write("tampered.json", &receipt.to_string());
    let (code, out, err) = sl(&["verify", &tampered]);
    assert_eq!(code, 4, "{out}{err}");
    assert_safe("verify of a tampered receipt", &format!("{out}{err}"), true);

    let report_out = env.path().join(format!("report{HOSTILE}.html"));
    let (code, out, err) = sl(&[
        "report",
        "run-2",
        "--against",
        "run-1",
        "-o",
        report_out.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("report", &format!("{out}{err}"), true);

    // Logs (`-v`) name a high-water request by its key, a string ID from the source.
    let hw_contract = env.write(
        "hw.json",
        &json!({"source": "hw", "id_codec": "string", "on_expired_cursor": "high_water"})
            .to_string(),
    );
    let after = format!("id{HOSTILE}2");
    let hw = replay_at(
        &env.path().join("hw.jsonl"),
        &[
            json!({"cursor": null, "items": [id(1), id(2)], "next": "c1", "snapshot": "s"}),
            json!({"cursor": "c1", "error": "expired_cursor"}),
            json!({"after": after, "error": "server_error"}),
            json!({"after": after, "items": [id(5)], "next": null}),
        ],
    );
    let (code, out, err) = sl(&["-v", "scan", "--contract", &hw_contract, "--source", &hw]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("the log of a retried high-water request", &err, true);

    // A page is JSON: control characters are escaped by JSON itself.
    let (code, out, err) = sl(&["page", "run-1", "--size", "10"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_safe("page", &format!("{out}{err}"), false);
}
