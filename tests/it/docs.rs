//! The README's and the guides' code blocks, executed: a pasted output cannot go stale.
//!
//! Every fenced block of README.md and docs/guide-*.md is preceded by a directive, an HTML
//! comment the rendered page does not show, and a block without one fails
//! (`every_block_says_how_it_is_tested`):
//!
//! - `<!-- doc-test: run -->`: a transcript. Each `$ COMMAND` line (continued by `> ` lines,
//!   as a shell shows a here-document) runs in one `bash` session per document, in order, in a
//!   scratch folder, with this build's `scanledger` first on `PATH`; the lines after it, up to
//!   the next `$ `, are its output (stdout and stderr together). A block without `$ ` lines is
//!   a script whose commands must succeed. Lines of the directive after its first are a hidden
//!   set-up (bash, which must succeed), run just before the block.
//! - `<!-- doc-test: file NAME -->`: the block is the content of the file `NAME`.
//! - `<!-- doc-test: sql postgres -->`, `<!-- doc-test: sql mysql -->`: run by `psql` or
//!   `mysql` against the test server.
//! - `<!-- doc-test: example examples/NAME.rs -->`: the block is that example's whole source,
//!   which `cargo build --examples` (and `cargo test`) compiles.
//! - `<!-- doc-test: not run: REASON -->`: shown, not run; the reason is stated in the
//!   document too (what needs a runner the tests do not have, or what is not a command).
//!
//! Expected output matches with two wildcards for what varies from run to run (times,
//! snapshot names, connection numbers, digests of things that hold a time, temporary paths):
//! `…` inside a line matches any text, and a line `...` any number of lines (none included).
//! Documents that need a server skip, saying so, without it, and fail under `CI=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util;

/// One fenced block of a document.
#[derive(Debug)]
struct Block {
    /// 1-based line of its opening fence.
    line: usize,
    directive: Directive,
    body: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Directive {
    /// Commands (a transcript when it has `$ ` lines), after a hidden set-up.
    Run {
        setup: Vec<String>,
    },
    File(String),
    Example(String),
    Sql(&'static str),
    NotRun,
    /// No directive, or one not understood: the reason.
    Missing(String),
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose blocks are tested.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("guide-") && n.ends_with(".md"))
        })
        .collect();
    guides.sort();
    docs.extend(guides);
    docs
}

fn directive(comment: &[&str]) -> Directive {
    let Some(first) = comment.first() else {
        return Directive::Missing("no `<!-- doc-test: ... -->` line before it".to_owned());
    };
    let head = first
        .trim()
        .trim_start_matches("<!-- doc-test:")
        .trim_end_matches("-->")
        .trim();
    let setup: Vec<String> = comment[1..]
        .iter()
        .map(|l| (*l).to_owned())
        .filter(|l| l.trim() != "-->")
        .collect();
    match head.split_once(' ').unwrap_or((head, "")) {
        ("run", "") => Directive::Run { setup },
        ("file", name) if !name.trim().is_empty() => Directive::File(name.trim().to_owned()),
        ("example", file) if file.starts_with("examples/") && file.ends_with(".rs") => {
            Directive::Example(file.to_owned())
        }
        ("sql", "postgres") => Directive::Sql("postgres"),
        ("sql", "mysql") => Directive::Sql("mysql"),
        ("not", rest) if rest.starts_with("run: ") && rest.len() > 20 => Directive::NotRun,
        _ => Directive::Missing(format!("directive {head:?} not understood")),
    }
}

/// The fenced blocks of `text`, each with the directive of the comment right above it.
fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```") {
            i += 1;
            continue;
        }
        let open = i;
        // The comment ending on the line above the fence.
        let mut comment = Vec::new();
        if open > 0 && lines[open - 1].trim_end().ends_with("-->") {
            let mut j = open - 1;
            while !lines[j].starts_with("<!--") && j > 0 {
                j -= 1;
            }
            if lines[j].starts_with("<!-- doc-test:") {
                comment = lines[j..open].to_vec();
            }
        }
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            body.push(lines[i].to_owned());
            i += 1;
        }
        i += 1;
        out.push(Block {
            line: open + 1,
            directive: directive(&comment),
            body,
        });
    }
    out
}

#[test]
fn every_block_says_how_it_is_tested() {
    let mut missing = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for b in blocks(&text) {
            if let Directive::Missing(why) = &b.directive {
                missing.push(format!("{}:{}: {why}", doc.display(), b.line));
            }
            if let Directive::Example(file) = &b.directive {
                let source = std::fs::read_to_string(repo().join(file)).unwrap();
                assert_eq!(
                    b.body.join("\n"),
                    source.trim_end(),
                    "{}:{}: the block is {file} as it is",
                    doc.display(),
                    b.line
                );
            }
        }
        // A block not run says why, in the document as well as in its directive.
        for (n, line) in text.lines().enumerate() {
            if let Some(reason) = line
                .strip_prefix("<!-- doc-test: not run: ")
                .and_then(|r| r.strip_suffix("-->"))
            {
                assert!(
                    reason.trim().len() >= 12,
                    "{}:{}: a block not run says why",
                    doc.display(),
                    n + 1
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "blocks without a directive:\n{}",
        missing.join("\n")
    );
    // The parser sees what it should: a known document has its run blocks.
    let readme = blocks(&std::fs::read_to_string(repo().join("README.md")).unwrap());
    assert!(readme
        .iter()
        .any(|b| matches!(b.directive, Directive::Run { .. })));
}

/// One command of a transcript and the output the document shows for it.
struct Step {
    /// Where it is shown: `FILE:LINE`.
    at: String,
    command: String,
    /// `None`: not checked (a set-up, or a script's line: it must succeed instead).
    expected: Option<Vec<String>>,
}

/// The steps of a document's runnable blocks, in order.
fn steps(doc: &Path) -> Vec<Step> {
    let text = std::fs::read_to_string(doc).unwrap();
    let name = doc
        .strip_prefix(repo())
        .unwrap_or(doc)
        .display()
        .to_string();
    let mut steps = Vec::new();
    for b in blocks(&text) {
        let at = |n: usize| format!("{name}:{}", b.line + 1 + n);
        match &b.directive {
            Directive::Run { setup } => {
                if !setup.is_empty() {
                    steps.push(Step {
                        at: format!("{name}:{} (set-up)", b.line - 1),
                        command: format!("( set -e\n{}\n) >/dev/null", setup.join("\n")),
                        expected: None,
                    });
                }
                if !b.body.iter().any(|l| l.starts_with("$ ")) {
                    steps.push(Step {
                        at: at(0),
                        command: b.body.join("\n"),
                        expected: None,
                    });
                    continue;
                }
                let mut i = 0;
                while i < b.body.len() {
                    let Some(cmd) = b.body[i].strip_prefix("$ ") else {
                        panic!("{}: output before any `$ ` command", at(i));
                    };
                    let start = i;
                    let mut command = cmd.to_owned();
                    i += 1;
                    while let Some(more) = b.body.get(i).and_then(|l| l.strip_prefix("> ")) {
                        command.push('\n');
                        command.push_str(more);
                        i += 1;
                    }
                    let mut expected = Vec::new();
                    while i < b.body.len() && !b.body[i].starts_with("$ ") {
                        expected.push(b.body[i].clone());
                        i += 1;
                    }
                    while expected.last().is_some_and(|l| l.is_empty()) {
                        expected.pop();
                    }
                    steps.push(Step {
                        at: at(start),
                        command,
                        expected: Some(expected),
                    });
                }
            }
            Directive::File(file) => steps.push(Step {
                at: at(0),
                command: format!(
                    "cat > {file} <<'DOC_TEST_EOF'\n{}\nDOC_TEST_EOF",
                    b.body.join("\n")
                ),
                expected: None,
            }),
            Directive::Sql(server) => {
                let client = if *server == "postgres" {
                    "psql -X -q -v ON_ERROR_STOP=1"
                } else {
                    "mysql"
                };
                steps.push(Step {
                    at: at(0),
                    command: format!(
                        "{client} <<'DOC_TEST_EOF'\n{}\nDOC_TEST_EOF",
                        b.body.join("\n")
                    ),
                    expected: None,
                });
            }
            Directive::NotRun | Directive::Example(_) | Directive::Missing(_) => {}
        }
    }
    steps
}

/// Whether `line` matches `pattern`, where `…` matches any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (k, part) in parts.iter().enumerate() {
        if k + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `lines` match `pattern`, where a pattern line `...` matches any lines.
fn lines_match(pattern: &[String], lines: &[&str]) -> bool {
    match pattern.split_first() {
        None => lines.is_empty(),
        Some((p, rest)) if p == "..." => (0..=lines.len()).any(|k| lines_match(rest, &lines[k..])),
        Some((p, rest)) => lines
            .split_first()
            .is_some_and(|(l, more)| line_matches(p, l) && lines_match(rest, more)),
    }
}

/// Runs a document's steps in one bash session in a scratch folder; panics naming every
/// step whose output differs from the document's (or that failed where it must succeed).
fn run_document(doc: &str) {
    let doc = repo().join(doc);
    let steps = steps(&doc);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let home = tmp.path().join("home");
    let bin = tmp.path().join("bin");
    for d in [&work, &home, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(util::bin(), bin.join("scanledger")).unwrap();
    // The repository's scripts and helpers, where the documents name them.
    for shared in ["contrib", "scripts", "examples"] {
        std::os::unix::fs::symlink(repo().join(shared), work.join(shared)).unwrap();
    }
    std::fs::write(
        home.join(".my.cnf"),
        "[client]\nhost=127.0.0.1\nport=3306\nuser=root\ndatabase=test\n",
    )
    .unwrap();
    let mut script = String::from("exec 2>&1\ncd \"$DOC_TEST_WORK\"\n");
    for (n, s) in steps.iter().enumerate() {
        let _ = write!(
            script,
            "{}\n__rc=$?\nprintf '\\n\\036DOC-TEST %d %d\\036\\n' {n} \"$__rc\"\n(exit $__rc)\n",
            s.command
        );
    }
    script.push_str("kill $(jobs -p) 2>/dev/null\nwait 2>/dev/null\nexit 0\n");
    let mut path = vec![bin.clone()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = Command::new("timeout")
        .args(["-s", "KILL", "600", "bash", "-c", &script])
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("HOME", &home)
        .env("DOC_TEST_WORK", &work)
        .env("NO_COLOR", "1")
        .env("TERM", "dumb")
        .env("LC_ALL", "C")
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", "5432")
        .env("PGUSER", "postgres")
        .env("PGDATABASE", "test")
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .env_remove("SCANLEDGER_STORE")
        .env_remove("SCANLEDGER_BIN")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("bash runs");
    let all = String::from_utf8_lossy(&out.stdout).into_owned();
    let work_shown = work.display().to_string();
    let mut outputs: Vec<Option<(i32, String)>> = (0..steps.len()).map(|_| None).collect();
    let mut rest = all.as_str();
    while let Some(at) = rest.find("\n\u{1e}DOC-TEST ") {
        let text = &rest[..at];
        let tail = &rest[at + "\n\u{1e}DOC-TEST ".len()..];
        let end = tail.find('\u{1e}').unwrap();
        let mut nums = tail[..end].split(' ').map(|n| n.parse::<i64>().unwrap());
        let (n, rc) = (nums.next().unwrap(), nums.next().unwrap());
        outputs[usize::try_from(n).unwrap()] =
            Some((i32::try_from(rc).unwrap(), text.replace(&work_shown, ".")));
        rest = tail[end + 1..]
            .strip_prefix('\n')
            .unwrap_or(&tail[end + 1..]);
    }
    let print = std::env::var_os("SCANLEDGER_DOCS_PRINT").is_some();
    let mut wrong = Vec::new();
    for (s, got) in steps.iter().zip(&outputs) {
        let Some((rc, text)) = got else {
            wrong.push(format!(
                "{}: never ran (the session ended early):\n{all}",
                s.at
            ));
            break;
        };
        if print {
            eprintln!("---- {} (exit {rc})\n$ {}\n{text}", s.at, s.command);
        }
        match &s.expected {
            None if *rc != 0 => wrong.push(format!(
                "{}: `{}` failed (exit {rc}):\n{text}",
                s.at, s.command
            )),
            None => {}
            Some(expected) => {
                let lines: Vec<&str> = text.lines().collect();
                if !lines_match(expected, &lines) {
                    wrong.push(format!(
                        "{}: `{}` printed (exit {rc}):\n{text}\n-- the document shows:\n{}",
                        s.at,
                        s.command,
                        expected.join("\n")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{}: {} step(s) differ from the document\n\n{}",
        doc.display(),
        wrong.len(),
        wrong.join("\n\n")
    );
}

#[test]
fn the_wildcards_match_what_they_say() {
    assert!(line_matches("run-1  VERIFIED", "run-1  VERIFIED"));
    assert!(!line_matches("run-1  VERIFIED", "run-2  VERIFIED"));
    assert!(line_matches("  time  …", "  time  2026-12-01T00:00:00Z"));
    assert!(line_matches("a…c…e", "abcde"));
    assert!(!line_matches("a…c…e", "abcdf"));
    assert!(!line_matches("a…", "b"));
    let p = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(lines_match(&p(&["a", "...", "d"]), &["a", "b", "c", "d"]));
    assert!(lines_match(&p(&["a", "...", "d"]), &["a", "d"]));
    assert!(!lines_match(&p(&["a", "...", "d"]), &["a", "b"]));
    assert!(!lines_match(&p(&["a"]), &["a", "b"]));
}

#[test]
fn the_readme_runs_as_shown() {
    run_document("README.md");
}

#[cfg(feature = "postgres")]
#[test]
fn the_postgres_guide_runs_as_shown() {
    let Some(_pg) = crate::postgres::Pg::server() else {
        return;
    };
    run_document("docs/guide-postgres.md");
}

#[cfg(feature = "mysql")]
#[test]
fn the_mysql_guide_runs_as_shown() {
    let Some(_db) = crate::mysql::db() else {
        return;
    };
    run_document("docs/guide-mysql.md");
}

#[cfg(feature = "http")]
#[test]
fn the_http_guide_runs_as_shown() {
    run_document("docs/guide-http.md");
}

#[cfg(all(feature = "postgres", feature = "mysql"))]
#[test]
fn the_migration_guide_runs_as_shown() {
    let (Some(_pg), Some(_db)) = (crate::postgres::Pg::server(), crate::mysql::db()) else {
        return;
    };
    run_document("docs/guide-migration.md");
}

#[cfg(all(feature = "sqlite", feature = "postgres"))]
#[test]
fn the_sqlite_guide_runs_as_shown() {
    let Some(_pg) = crate::postgres::Pg::server() else {
        return;
    };
    run_document("docs/guide-sqlite.md");
}

/// The `scanledger` commands of a document's transcripts and scripts, as whitespace-split
/// words (a here-document's lines and what follows a pipe or a redirection left out).
fn scanledger_commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in blocks(text) {
        if !matches!(b.directive, Directive::Run { .. }) {
            continue;
        }
        for line in &b.body {
            let line = line.strip_prefix("$ ").unwrap_or(line);
            let line = line.split(['|', '>', '&', ';', '#']).next().unwrap_or("");
            let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            if let Some(at) = words.iter().position(|w| w == "scanledger") {
                out.push(words[at + 1..].to_vec());
            }
        }
    }
    out
}

#[test]
fn every_flag_a_document_uses_is_in_help_and_the_reference() {
    let reference = std::fs::read_to_string(repo().join("docs/REFERENCE.md")).unwrap();
    let (_, global, _) = util::run(&["--help"]);
    let mut wrong = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for words in scanledger_commands(&text) {
            // The global options and their values, then the command's words up to its first
            // option: their `--help`.
            let mut rest = words.as_slice();
            while let Some((w, more)) = rest.split_first() {
                if !w.starts_with('-') {
                    break;
                }
                let takes_value = ["--store", "--wait", "--color"].contains(&w.as_str());
                rest = if takes_value && !more.is_empty() {
                    &more[1..]
                } else {
                    more
                };
            }
            let mut sub: Vec<&str> = rest
                .iter()
                .take_while(|w| !w.starts_with('-'))
                .take(2)
                .map(String::as_str)
                .collect();
            sub.push("--help");
            let (_, help, _) = util::run(&sub);
            for w in &words {
                let Some(flag) = w
                    .strip_prefix("--")
                    .map(|f| f.split('=').next().unwrap_or(f))
                else {
                    continue;
                };
                let flag = format!("--{flag}");
                checked += 1;
                if !global.contains(&flag) && !help.contains(&flag) {
                    wrong.push(format!(
                        "{}: {flag} is not in `scanledger {}`",
                        doc.display(),
                        sub.join(" ")
                    ));
                }
                if !reference.contains(&flag) {
                    wrong.push(format!(
                        "{}: {flag} is not in docs/REFERENCE.md",
                        doc.display()
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked > 50, "only {checked} flags found in the documents");
}
