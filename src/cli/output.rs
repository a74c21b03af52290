//! Output for people and programs: where results go, colour, logs, tables and words.
//!
//! Results go to stdout through `anstream`, which drops colour off a terminal, with
//! `NO_COLOR`, or with `--color never` (and keeps it with `--color always`); notes, logs and
//! the progress bar go to stderr, and `-q` silences all of them but errors. With `--json`
//! results are pretty JSON, with `--json-lines` one compact value per line.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use scanledger::{RunState, Status};
use serde::Serialize;

use super::{Cli, CliError, ColorWhen};

/// The global options every handler reads.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    /// The store file.
    pub store: PathBuf,
    /// Machine output (`--json` or `--json-lines`).
    pub json: bool,
    /// One compact JSON value per line (`--json-lines`).
    pub lines: bool,
    /// `-q`: no notes, no progress.
    pub quiet: bool,
    /// `--wait`: how long to wait for a busy store.
    pub wait: Option<Duration>,
    /// Whether `--store` was given or set by `SCANLEDGER_STORE` (so commands we suggest
    /// must name it).
    pub store_named: bool,
}

impl Out {
    pub(crate) fn new(cli: &Cli) -> Out {
        Out {
            store_named: cli.store != std::path::Path::new("./scanledger.redb"),
            store: cli.store.clone(),
            json: cli.json || cli.json_lines,
            lines: cli.json_lines,
            quiet: cli.quiet,
            wait: super::wait_of(cli.wait),
        }
    }

    /// Writes `text` and a newline to stdout (colour dropped off a terminal); see
    /// [`stdout_written`] for what a failed write does.
    pub(crate) fn emit(&self, text: &str) -> Result<(), CliError> {
        let mut out = anstream::stdout().lock();
        stdout_written(writeln!(out, "{text}").and_then(|()| out.flush()))
    }

    /// Writes one JSON value: pretty, or compact on one line with `--json-lines`.
    pub(crate) fn json_value(&self, v: &impl Serialize) -> Result<(), CliError> {
        let text = if self.lines {
            serde_json::to_string(v)
        } else {
            serde_json::to_string_pretty(v)
        }
        .map_err(|e| CliError::internal(format!("cannot encode JSON: {e}")))?;
        self.emit(&text)
    }

    /// Writes a list: with `--json-lines` one compact value per item, else the whole
    /// `wrapper` object pretty.
    pub(crate) fn json_list<T: Serialize>(
        &self,
        items: &[T],
        wrapper: &serde_json::Value,
    ) -> Result<(), CliError> {
        if self.lines {
            for item in items {
                self.json_value(item)?;
            }
            Ok(())
        } else {
            self.json_value(wrapper)
        }
    }

    /// A note to stderr (`note: ...`), unless `-q` or `--json`; one line, with any text from
    /// a source in it escaped.
    pub(crate) fn note(&self, text: &str) {
        if !self.quiet && !self.json {
            let bold = Style::new().bold();
            let text = scanledger::terminal_safe(text);
            let _ = writeln!(anstream::stderr().lock(), "{bold}note:{bold:#} {text}");
        }
    }

    /// The command line that continues `run`, naming the store when it is not the default.
    pub(crate) fn resume_command(&self, run: scanledger::RunId) -> String {
        if self.store_named {
            format!(
                "scanledger --store {} resume {run}",
                shell_word(&self.store.display().to_string())
            )
        } else {
            format!("scanledger resume {run}")
        }
    }
}

/// Writes `bytes` to stdout as they are (a completion script, a man page) and flushes; see
/// [`stdout_written`].
pub(crate) fn write_raw(bytes: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    stdout_written(out.write_all(bytes).and_then(|()| out.flush()))
}

/// What a write to stdout came to. A closed pipe (`scanledger runs | head -1`) ends the
/// output quietly: nothing more is written and nothing is said, and the command keeps its own
/// exit code (0, or the run's status, so a cut-off receipt never reads as verified). Any
/// other failure (a full disk) is one sentence and exit 1.
pub(crate) fn stdout_written(result: std::io::Result<()>) -> Result<(), CliError> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(stdout_error(&e)),
        _ => Ok(()),
    }
}

/// The error of a failed write to stdout (exit 1).
pub(crate) fn stdout_error(e: &std::io::Error) -> CliError {
    CliError::internal(format!(
        "cannot write to stdout: {}",
        super::error::io_words(e)
    ))
    .with_kind("stdout")
}

pub(crate) use scanledger::shell_word;

/// Applies `--color` to everything written through `anstream` (which reads `NO_COLOR` and
/// whether the stream is a terminal in `auto`).
pub(crate) fn set_color(when: ColorWhen) {
    let choice = match when {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// Whether stderr shows colour and animation: a terminal, and colour not turned off.
pub(crate) fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Logs to stderr through `tracing`: warnings by default, `-v` info (retries, backoff,
/// policy decisions), `-vv` debug (every checkpoint), `-vvv` trace; `-q` errors only.
/// `RUST_LOG` (`LEVEL` or `TARGET=LEVEL,...`) overrides the flags.
pub(crate) fn init_logs(quiet: bool, verbose: u8) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let level = match (quiet, verbose) {
        (true, _) => LevelFilter::ERROR,
        (false, 0) => LevelFilter::WARN,
        (false, 1) => LevelFilter::INFO,
        (false, 2) => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse::<Targets>().ok())
        // The MCP SDK logs whole protocol messages at its debug levels, and they hold the
        // upstream's raw cursors: it stays silent unless RUST_LOG names it.
        .unwrap_or_else(|| {
            Targets::new()
                .with_default(level)
                .with_target("rmcp", LevelFilter::OFF)
        });
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time();
    let _ = tracing_subscriber::registry()
        .with(layer.with_filter(targets))
        .try_init();
}

/// `1 partition`, `2 partitions`.
pub(crate) fn count(n: impl Into<u128>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The style of a status: green, yellow, red.
pub(crate) fn status_style(s: Status) -> Style {
    match s {
        Status::Verified => AnsiColor::Green.on_default().bold(),
        Status::Failed => AnsiColor::Red.on_default().bold(),
        // A status this build does not know yet reads as unknown.
        Status::Unknown | _ => AnsiColor::Yellow.on_default().bold(),
    }
}

/// The style of a run state: interrupted stands out.
pub(crate) fn state_style(s: &str) -> Style {
    match s {
        _ if s == RunState::Running.as_str() => AnsiColor::Cyan.on_default(),
        _ if s == RunState::Interrupted.as_str() => AnsiColor::Yellow.on_default(),
        _ if s == RunState::Superseded.as_str() => Style::new().dimmed(),
        _ => Style::new(),
    }
}

/// `text` in `style` (dropped off a terminal by `anstream`).
pub(crate) fn styled(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// Bold text.
pub(crate) fn bold(text: &str) -> String {
    styled(Style::new().bold(), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1u64, "partition", "partitions"), "1 partition");
        assert_eq!(count(0u64, "partition", "partitions"), "0 partitions");
        assert_eq!(
            count(2u64, "duplicate ID", "duplicate IDs"),
            "2 duplicate IDs"
        );
    }
}
