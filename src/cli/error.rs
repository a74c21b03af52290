//! The binary's errors: one `CliError` per failed command, said once.
//!
//! A `CliError` is built from the library's `Error` (whose messages never repeat their cause)
//! or from a usage problem of the command line. It carries what a person and a program need:
//! a kind (stable, snake_case), one sentence, the place (file, line, column, field) when
//! there is one, a hint of the next command, and the exit code. Text goes to stderr as
//! `error: FILE:LINE:COLUMN: message` plus `  hint: ...`; with `--json` the same as
//! `{"error": {...}}`. Never a raw cursor: the library's messages carry fingerprints only.

use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) use scanledger::io_words;
use scanledger::json::{ConfigError, Problem};
use scanledger::{
    said_once, terminal_safe, ContractError, Error, ErrorClass, OpenError, ReadError, SourceError,
    WriteError,
};
use serde::Serialize;

use super::Out;

/// Exit code of a usage or input error.
pub(crate) const EXIT_USAGE: i32 = 2;
/// Exit code of an internal error.
pub(crate) const EXIT_INTERNAL: i32 = 1;
/// Exit code of a busy store (docs/REFERENCE.md §2).
pub(crate) const EXIT_BUSY: i32 = 5;

/// A command that could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CliError {
    /// What kind of problem, for programs (`contract`, `replay`, `store_busy`, ...).
    pub kind: &'static str,
    /// One sentence, cause included once.
    pub message: String,
    /// The file at fault, when there is one.
    pub file: Option<PathBuf>,
    /// 1-based line in `file`.
    pub line: Option<usize>,
    /// 1-based column in `line`.
    pub column: Option<usize>,
    /// The field or key at fault (dotted for nested keys).
    pub field: Option<String>,
    /// What to do next, when something helps.
    pub hint: Option<String>,
    /// The process exit code.
    pub exit_code: i32,
}

impl CliError {
    /// A usage error (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> CliError {
        CliError {
            kind: "usage",
            message: message.into(),
            file: None,
            line: None,
            column: None,
            field: None,
            hint: None,
            exit_code: EXIT_USAGE,
        }
    }

    /// An internal failure (exit 1).
    pub(crate) fn internal(message: impl Into<String>) -> CliError {
        CliError {
            kind: "internal",
            exit_code: EXIT_INTERNAL,
            ..CliError::usage(message)
        }
    }

    /// A file that could not be read or written, said in words (exit 2, or 1 for stdout).
    pub(crate) fn io(what: &str, path: &Path, e: &std::io::Error) -> CliError {
        CliError {
            kind: "file",
            file: Some(path.to_owned()),
            ..CliError::usage(format!("cannot {what} {}: {}", path.display(), io_words(e)))
        }
    }

    /// An input file that could not be read within its bound.
    pub(crate) fn file(e: scanledger::FileError, what: &str) -> CliError {
        match e {
            scanledger::FileError::Io { path, source } => CliError::io(what, &path, &source),
            other => CliError {
                kind: "file",
                file: Some(other.path().to_owned()),
                ..CliError::usage(other.to_string())
            },
        }
    }

    pub(crate) fn with_kind(mut self, kind: &'static str) -> CliError {
        self.kind = kind;
        self
    }

    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn with_field(mut self, field: impl Into<String>) -> CliError {
        self.field = Some(field.into());
        self
    }

    /// Prints the error to stderr (text, or JSON with `--json`); returns its exit code.
    pub(crate) fn print(&self, out: &Out) -> i32 {
        let mut err = anstream::stderr().lock();
        let _ = if out.json {
            writeln!(err, "{}", self.to_json(out.lines))
        } else {
            write!(err, "{}", self.to_text())
        };
        self.exit_code
    }

    /// `{"error": {...}}`, pretty unless `compact`.
    pub(crate) fn to_json(&self, compact: bool) -> String {
        let v = serde_json::json!({ "error": self });
        let text = if compact {
            serde_json::to_string(&v)
        } else {
            serde_json::to_string_pretty(&v)
        };
        text.unwrap_or_else(|_| String::from(r#"{"error": {"kind": "internal"}}"#))
    }

    /// `error: PLACE: message` and an optional `  hint: ...` line, styled for a terminal
    /// (`anstream` strips the styles elsewhere).
    pub(crate) fn to_text(&self) -> String {
        let red = anstyle::AnsiColor::Red.on_default().bold();
        let bold = anstyle::Style::new().bold();
        let mut place = String::new();
        if let Some(file) = &self.file {
            if !self.message.contains(&file.display().to_string()) || self.line.is_some() {
                place = file.display().to_string();
                if let Some(l) = self.line {
                    place.push_str(&format!(":{l}"));
                    if let Some(c) = self.column {
                        place.push_str(&format!(":{c}"));
                    }
                }
                place.push_str(": ");
            }
        }
        let message = match (&self.file, self.line) {
            // The location is said in front: the message need not repeat it.
            (Some(file), Some(_)) => strip_prefix_path(&self.message, file),
            _ => self.message.clone(),
        };
        // A message, a hint or a path may hold text from a source or a store (a label name,
        // a snapshot, a recorded source spec): escaped, it cannot move the cursor or forge a
        // line. Our own styles are added after.
        let (place, message) = (terminal_safe(&place), terminal_safe(&message));
        let mut s = format!("{red}error:{red:#} {place}{message}\n");
        if let Some(h) = &self.hint {
            let h = terminal_safe(h);
            s.push_str(&format!("  {bold}hint:{bold:#} {h}\n"));
        }
        s
    }
}

/// `message` without a leading `PATH:` or `PATH: ` that a location in front already says.
fn strip_prefix_path(message: &str, file: &Path) -> String {
    let shown = file.display().to_string();
    message
        .strip_prefix(&shown)
        .and_then(|rest| rest.strip_prefix(':'))
        .map_or_else(|| message.to_owned(), |rest| rest.trim_start().to_owned())
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        let exit_code = if e.is_input_error() {
            EXIT_USAGE
        } else {
            EXIT_INTERNAL
        };
        let base = CliError {
            exit_code,
            ..CliError::usage(said_once(&e))
        };
        match e {
            Error::Contract { path, source } => contract_error(&path, &source, None),
            Error::Source(s) => source_error(s, base),
            Error::Open(o) => o.into(),
            Error::Read(r) => r.into(),
            Error::Write(w) => w.into(),
            Error::Io { path, source } => CliError::io("read or write", &path, &source),
            Error::File(f) => CliError::file(f, "read"),
            _ => CliError {
                kind: "internal",
                ..base
            },
        }
    }
}

fn source_error(s: SourceError, base: CliError) -> CliError {
    match s {
        SourceError::Replay {
            path,
            line,
            column,
            problem,
        } => CliError {
            kind: "replay",
            message: problem,
            file: Some(path),
            line: (line > 0).then_some(line),
            column,
            ..base
        },
        SourceError::Unanswered { path, .. } => CliError {
            kind: "replay",
            file: Some(path),
            ..base
        },
        SourceError::Io { path, source } => CliError::io("read source file", &path, &source),
        SourceError::File(f) => CliError::file(f, "read source file"),
        SourceError::UnknownKind { .. } => CliError {
            kind: "source",
            hint: Some("see the sources in docs/REFERENCE.md".to_owned()),
            ..base
        },
        SourceError::ConfigFile { path, error } => {
            let mut err = CliError {
                kind: "source",
                file: Some(path),
                ..base
            };
            place_config_error(&mut err, &error);
            err
        }
        SourceError::Config { path, .. } => CliError {
            kind: "source",
            file: Some(path),
            ..base
        },
        _ => CliError {
            kind: "source",
            ..base
        },
    }
}

/// A contract error, placed at its line and column when `text` (the file's text) has the
/// key it names.
pub(crate) fn contract_error(path: &Path, e: &ContractError, text: Option<&str>) -> CliError {
    let mut err = CliError {
        kind: "contract",
        file: Some(path.to_owned()),
        ..CliError::usage(e.to_string())
    };
    if let ContractError::Config(c) = e {
        let c = match text {
            Some(t) => c.clone().placed(t),
            None => c.clone(),
        };
        place_config_error(&mut err, &c);
        if matches!(c.problem(), Problem::UnknownKey) && err.hint.is_none() {
            err.hint = Some("docs/REFERENCE.md lists the contract's keys".to_owned());
        }
    }
    err
}

/// The place, field and the word meant of a config error (the strict config layer's, alike
/// for every format): the message without the word meant, which becomes the hint.
fn place_config_error(err: &mut CliError, c: &ConfigError) {
    err.message = c.message_alone();
    err.field = (!c.field().is_empty()).then(|| c.field().to_owned());
    err.line = c.position().map(|p| p.0);
    err.column = c.position().map(|p| p.1);
    err.hint = c.did_you_mean().map(|m| format!("did you mean {m:?}?"));
}

/// The exit code of an error of `class` (docs/REFERENCE.md §2).
fn exit_code(class: ErrorClass) -> i32 {
    match class {
        ErrorClass::Input => EXIT_USAGE,
        ErrorClass::Busy => EXIT_BUSY,
        _ => EXIT_INTERNAL,
    }
}

/// The hint that names the run list, for an unknown run.
const RUNS_HINT: &str = "`scanledger runs` lists the runs of the store";

impl From<OpenError> for CliError {
    fn from(e: OpenError) -> CliError {
        let hint = match &e {
            OpenError::NotFound { .. } => Some("scan into it first, or name an existing store with --store PATH or SCANLEDGER_STORE"),
            OpenError::NoDirectory { .. } => Some("create the directory first"),
            OpenError::IsDirectory { .. } => Some("name a file with --store PATH"),
            OpenError::Busy { .. } => Some("wait for it with --wait SECONDS"),
            _ => None,
        };
        CliError {
            kind: e.kind(),
            file: Some(e.path().to_owned()),
            hint: hint.map(str::to_owned),
            exit_code: exit_code(e.class()),
            ..CliError::usage(said_once(&e))
        }
    }
}

impl From<ReadError> for CliError {
    fn from(e: ReadError) -> CliError {
        let hint = matches!(e, ReadError::UnknownRun { .. }).then(|| RUNS_HINT.to_owned());
        CliError {
            kind: e.kind(),
            file: Some(e.path().to_owned()),
            hint,
            exit_code: exit_code(e.class()),
            ..CliError::usage(said_once(&e))
        }
    }
}

impl From<WriteError> for CliError {
    fn from(e: WriteError) -> CliError {
        let hint = match &e {
            WriteError::UnknownRun { .. } => Some(RUNS_HINT),
            WriteError::RunLive { .. } => {
                Some("wait for its scan to end (`scanledger runs` shows it running)")
            }
            WriteError::Busy { .. } => {
                Some("stop the other processes that have it open, or retry with --wait SECONDS")
            }
            _ => None,
        };
        CliError {
            kind: e.kind(),
            hint: hint.map(str::to_owned),
            exit_code: exit_code(e.class()),
            ..CliError::usage(said_once(&e))
        }
    }
}

impl From<scanledger::RunRefError> for CliError {
    fn from(e: scanledger::RunRefError) -> CliError {
        match e {
            scanledger::RunRefError::Read(e) => e.into(),
            other => CliError::usage(other.to_string())
                .with_kind("unknown_run")
                .with_hint("start one with `scanledger scan --contract FILE --source SPEC`"),
        }
    }
}

impl From<scanledger::DiffError> for CliError {
    fn from(e: scanledger::DiffError) -> CliError {
        let hint = e.hint().map(str::to_owned);
        match e {
            scanledger::DiffError::Read(r) => r.into(),
            // Two runs of another source, tenant or codec: bad input (exit 2).
            e => CliError {
                kind: "not_comparable",
                hint,
                ..CliError::usage(said_once(&e))
            },
        }
    }
}

/// Prints a command-line parse error (or the help and version text clap answers) and returns
/// its exit code; with `--json` among the arguments, an error is a JSON object too.
pub(crate) fn clap_exit(e: &clap::Error, args: &[std::ffi::OsString]) -> i32 {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !e.use_stderr() {
        // `--help` and `--version` go to stdout, which may be full or closed.
        let text = e.render().ansi().to_string();
        let mut stdout = anstream::stdout().lock();
        return match super::output::stdout_written(
            write!(stdout, "{text}").and_then(|()| stdout.flush()),
        ) {
            Ok(()) => 0,
            Err(err) => {
                let _ = write!(anstream::stderr().lock(), "{}", err.to_text());
                err.exit_code
            }
        };
    }
    let json = args.iter().any(|a| a == "--json" || a == "--json-lines");
    // A mistyped command gets one suggestion, the same in text and JSON; other errors of the
    // command line are clap's own text.
    if !json && e.kind() != ErrorKind::InvalidSubcommand {
        let _ = e.print();
        return EXIT_USAGE;
    }
    let rendered = e.render().to_string();
    let first = rendered
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_owned();
    let mut err = CliError::usage(first);
    if let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) {
        err.field = Some(arg.clone());
    }
    // clap lists its suggestions from the least to the most similar: the last is the one.
    if let Some(ContextValue::Strings(s)) = e.get(ContextKind::SuggestedSubcommand) {
        if let Some(s) = s.last() {
            err.hint = Some(format!("did you mean `{s}`?"));
        }
    }
    if e.kind() == ErrorKind::InvalidSubcommand && err.hint.is_none() {
        err.hint = Some("`scanledger --help` lists the commands".to_owned());
    }
    if json {
        let _ = writeln!(std::io::stderr().lock(), "{}", err.to_json(false));
    } else {
        let _ = write!(anstream::stderr().lock(), "{}", err.to_text());
    }
    EXIT_USAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(e: &CliError) -> String {
        anstream::adapter::strip_str(&e.to_text()).to_string()
    }

    /// Root reads any file, so the permission error is built here rather than provoked.
    #[test]
    fn a_permission_problem_is_named_once_and_never_as_damage() {
        let e = CliError::from(OpenError::PermissionDenied {
            path: PathBuf::from("/srv/s.redb"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
        assert_eq!(plain(&e), "error: store /srv/s.redb: permission denied\n");
        assert_eq!((e.kind, e.exit_code), ("store_permission", EXIT_USAGE));
    }

    #[test]
    fn causes_are_added_once_and_only_when_the_message_lacks_them() {
        let e = Error::Open(OpenError::Io {
            path: PathBuf::from("s.redb"),
            op: "read",
            source: Box::new(std::io::Error::other("disk on fire")),
        });
        let e = CliError::from(e);
        assert_eq!(
            plain(&e),
            "error: store s.redb: read failed: disk on fire\n"
        );
        assert_eq!(e.exit_code, EXIT_INTERNAL);
        let io = CliError::io(
            "read contract",
            Path::new("nope.json"),
            &std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert_eq!(
            plain(&io),
            "error: cannot read contract nope.json: no such file or directory\n"
        );
    }

    #[test]
    fn a_placed_error_says_its_place_in_front_and_once() {
        let e = CliError::from(Error::Source(SourceError::Replay {
            path: PathBuf::from("p.jsonl"),
            line: 2,
            column: Some(7),
            problem: "malformed JSON: expected value".to_owned(),
        }));
        assert_eq!(
            plain(&e),
            "error: p.jsonl:2:7: malformed JSON: expected value\n"
        );
        let v: serde_json::Value = serde_json::from_str(&e.to_json(true)).unwrap_or_default();
        assert_eq!(v["error"]["line"], 2);
        assert_eq!(v["error"]["column"], 7);
        assert_eq!(v["error"]["kind"], "replay");
    }
}
