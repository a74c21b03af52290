//! The evidence commands: `verify`, `export` and `page` (`diff` and `missing` are in
//! `lists.rs`).
//!
//! Each handler opens the store, asks it for what it needs (the store and the library's pure
//! `verify` and `token` modules do the work), prints, and returns the exit code. Nothing here
//! prints a raw cursor: runs carry only cursor hashes, and page tokens are our own.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::lists::refuse_store_as_output;
use super::output::count;
use super::{open_read, status_exit, CliError, Out, RunArg};
use scanledger::{terminal_safe, EmitError, ExportShape, Receipt, Status};

/// A receipt file larger than this is refused before it is read (bytes). A receipt holds at
/// most 256 violations and 64 labels of 32 ranges, far below.
const RECEIPT_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Exit code of a receipt that does not match its store (docs/REFERENCE.md §2: failed).
const EXIT_MISMATCH: i32 = 4;

/// The formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// One ID per line in its original form, ascending in codec order; a string ID is written
    /// as the inside of a JSON string literal (`"`, `\` and control characters escaped), so
    /// a line break in an ID can never split it.
    Text,
    /// One JSON value per line: a number for the `int` codec, a string otherwise.
    Jsonl,
    /// The portable 64-bit roaring format (RoaringTreemap: u64 LE bucket count, then per
    /// bucket a u32 LE high half and a portable 32-bit roaring bitmap), of the u64 IDs.
    Roaring,
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::usage(msg)
}

/// The arguments of `export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The run (run-N, N or latest).
    pub run: RunArg,
    /// `text` (one ID per line), `jsonl` (one JSON value per line) or `roaring`.
    #[arg(long, value_enum, default_value_t = ExportFormat::Text)]
    pub format: ExportFormat,
    /// Only the IDs carrying this label.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The arguments of `page`.
#[derive(Debug, clap::Args)]
pub(crate) struct PageArgs {
    /// The run (run-N, N or latest).
    pub run: RunArg,
    /// The `next_token` of the previous page; none for the first page.
    #[arg(long)]
    pub token: Option<String>,
    /// IDs per page.
    #[arg(long, default_value_t = 100)]
    pub size: u32,
    /// Lifetime of the token handed out, in seconds.
    #[arg(long, default_value_t = scanledger::token::TOKEN_TTL_SECONDS_DEFAULT)]
    pub ttl_seconds: u64,
}

/// `verify RECEIPT_FILE`.
pub(crate) fn verify(out: &Out, file: &Path) -> Result<i32, CliError> {
    let store_path = &out.store;
    // Bounded while read: a FIFO works, /dev/zero is refused.
    let text = scanledger::read_bounded(file, RECEIPT_BYTES_MAX)
        .map_err(|e| CliError::file(e, "read receipt").with_kind("receipt"))?;
    let receipt = Receipt::from_json(&text).map_err(|e| {
        let mut err = usage(format!("{}: {e}", file.display()))
            .with_kind("receipt")
            .with_hint("a receipt is what `scanledger --json receipt RUN` prints");
        err.file = Some(file.to_owned());
        err
    })?;
    let store = open_read(out)?;
    let report = scanledger::verify_report(&store.read()?, store_path, &receipt)?;
    if out.json {
        out.json_value(&report)?;
    } else {
        out.emit(&report.text(&receipt))?;
    }
    // A receipt that matches its store exits with its own status: it proves no more than that.
    Ok(if report.matches {
        status_exit(report.coverage_status)
    } else {
        EXIT_MISMATCH
    })
}

/// `export RUN [--label NAME] [--format text|jsonl|roaring] [--output FILE]`.
///
/// With `--json` (and no `--output`) stdout gets one JSON object with the IDs as an array;
/// with `--json-lines` one JSON value per ID. With `--output`, the IDs go to the file in
/// `--format` and stdout gets a summary (JSON with `--json`).
pub(crate) fn export(out: &Out, args: &ExportArgs) -> Result<i32, CliError> {
    let (label, output) = (args.label.as_deref(), args.output.as_deref());
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = args.run.resolve(&snap)?;
    let mut export = scanledger::export_of(&snap, run, label).map_err(|e| match e {
        scanledger::ExportError::UnknownLabel { ref labels, .. } => {
            // Label names come from the source: escaped, so a name cannot forge a line.
            let names: Vec<String> = labels
                .iter()
                .map(|n| terminal_safe(n).into_owned())
                .collect();
            let hint = if names.is_empty() {
                format!("{run} carries no label")
            } else {
                format!("its labels: {}", names.join(", "))
            };
            usage(e.to_string())
                .with_kind("unknown_label")
                .with_field("--label")
                .with_hint(hint)
        }
        scanledger::ExportError::Read(e) => e.into(),
        other => CliError::internal(other.to_string()),
    })?;
    let shape = match (output, out.json, out.lines, args.format) {
        (None, true, false, _) => ExportShape::JsonObject,
        (None, true, true, _) | (_, _, _, ExportFormat::Jsonl) => ExportShape::Jsonl,
        (_, _, _, ExportFormat::Text) => ExportShape::Text,
        (_, _, _, ExportFormat::Roaring) => ExportShape::Roaring,
    };
    match output {
        Some(p) => {
            refuse_store_as_output(&out.store, p)?;
            let f = std::fs::File::create(p).map_err(|e| CliError::io("write", p, &e))?;
            let mut w = std::io::BufWriter::new(f);
            match export.write(shape, &mut w).and_then(|()| Ok(w.flush()?)) {
                Err(EmitError::Io(e)) => return Err(CliError::io("write", p, &e)),
                other => super::migration::emitted(other)?,
            }
            export.summary.output = Some(p.display().to_string());
        }
        None => {
            if shape == ExportShape::Roaring && std::io::stdout().is_terminal() {
                return Err(usage(
                    "export --format roaring writes binary: redirect stdout or give --output FILE",
                )
                .with_field("--format"));
            }
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            super::migration::emitted(export.write(shape, &mut w).and_then(|()| Ok(w.flush()?)))?;
        }
    }
    let s = &export.summary;
    let what = match label {
        Some(name) => format!("{} labelled {name:?}", count(s.count, "ID", "IDs")),
        None => count(s.count, "ID", "IDs"),
    };
    if let Some(p) = &s.output {
        if out.json {
            out.json_value(s)?;
        } else if !out.quiet {
            out.emit(&format!("{run}: {what} written to {}", terminal_safe(p)))?;
        }
    }
    if s.coverage_status != Status::Verified {
        out.note(&format!(
            "{run} is {}: these {what} are not a complete inventory",
            s.coverage_status.as_str(),
        ));
    }
    Ok(status_exit(s.coverage_status))
}

/// `page RUN [--token T] [--size N] [--ttl-seconds S]`.
pub(crate) fn page(out: &Out, args: &PageArgs) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = args.run.resolve(&snap)?;
    let (token, now) = (args.token.as_deref(), scanledger::now_ms());
    let page = scanledger::page_report(&snap, run, token, args.size, args.ttl_seconds, now)
        .map_err(|e| match e {
            scanledger::PageRunError::Read(e) => CliError::from(e),
            other => usage(format!("page {run}: {other}")).with_kind("page_token"),
        })?;
    let header_status = page.coverage_status;
    out.json_value(&page)?;
    // A page of a run that is not verified is never a page of an inventory.
    if header_status != Status::Verified {
        out.note(&format!(
            "{run} is {}: its pages are not pages of a complete inventory",
            header_status.as_str()
        ));
    }
    Ok(status_exit(header_status))
}
