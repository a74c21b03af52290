//! The evidence commands: `verify`, `export` and `page` (`diff` and `missing` are in
//! `lists.rs`).
//!
//! Each handler opens the store, asks it for what it needs (the store and the library's pure
//! `verify` and `token` modules do the work), prints, and returns the exit code. Nothing here
//! prints a raw cursor: runs carry only cursor hashes, and page tokens are our own.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::lists::refuse_store_as_output;
use super::output::count;
use super::{open_read, status_exit, CliError, Out, RunArg};
use scanledger::token::TOKEN_TTL_SECONDS_MAX;
use scanledger::{
    terminal_safe, IdCodecKind, IdSet, Mismatch, Receipt, Renderer, RunHeader, RunId, Snapshot,
    Status, ITEMS_PER_PAGE_MAX,
};

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
    let mismatches = scanledger::verify_receipt(&store.read()?, &receipt)?;
    let verified = mismatches.is_empty();
    if out.json {
        #[derive(Serialize)]
        struct Report<'a> {
            run_id: &'a str,
            store: String,
            verified: bool,
            first_mismatch: Option<&'a Mismatch>,
            mismatches: &'a [Mismatch],
        }
        let report = Report {
            run_id: &receipt.run_id,
            store: store_path.display().to_string(),
            verified,
            first_mismatch: mismatches.first(),
            mismatches: &mismatches,
        };
        out.json_value(&report)?;
    } else if verified {
        out.emit(&format!(
            "{}: receipt verified against store {}: every field recomputes \
             ({}, {} in {}, merkle root {}, chain {})",
            terminal_safe(&receipt.run_id),
            terminal_safe(&store_path.display().to_string()),
            count(receipt.pages_observed, "page", "pages"),
            count(receipt.unique_ids_observed, "unique ID", "unique IDs"),
            count(receipt.partitions, "partition", "partitions"),
            receipt.merkle_root,
            receipt.cursor_chain_digest
        ))?;
    } else {
        // A mismatch names the receipt's own fields and values (a label name, a snapshot):
        // the receipt is untrusted input, so each line is escaped.
        let mut text = format!(
            "{}: receipt REJECTED by store {}: {}",
            shown_run(&receipt.run_id),
            terminal_safe(&store_path.display().to_string()),
            terminal_safe(&mismatches[0].to_string())
        );
        for m in &mismatches[1..] {
            text.push_str(&format!("\n  also {}", terminal_safe(&m.to_string())));
        }
        out.emit(&text)?;
    }
    Ok(if verified { 0 } else { EXIT_MISMATCH })
}

/// A run ID from an untrusted receipt, quoted and shortened unless it is of the form run-N.
fn shown_run(run_id: &str) -> String {
    if run_id.parse::<RunId>().is_ok() && run_id.len() <= 24 {
        run_id.to_owned()
    } else {
        let short: String = run_id.chars().take(40).collect();
        format!("{short:?}")
    }
}

/// `export RUN [--label NAME] [--format text|jsonl|roaring] [--output FILE]`.
///
/// With `--json` (and no `--output`) stdout gets one JSON object with the IDs as an array;
/// with `--json-lines` one JSON value per ID. With `--output`, the IDs go to the file in
/// `--format` and stdout gets a summary (JSON with `--json`).
pub(crate) fn export(
    out: &Out,
    run: RunArg,
    format: ExportFormat,
    label: Option<&str>,
    output: Option<&Path>,
) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let header = snap.header(run)?;
    let ids = match label {
        None => snap.ids(run)?,
        Some(name) => label_ids(&snap, run, name)?,
    };
    let shape = match (output, out.json, out.lines, format) {
        (None, true, false, _) => Shape::JsonObject,
        (None, true, true, _) => Shape::Jsonl,
        (_, _, _, ExportFormat::Text) => Shape::Text,
        (_, _, _, ExportFormat::Jsonl) => Shape::Jsonl,
        (_, _, _, ExportFormat::Roaring) => Shape::Roaring,
    };
    let (mut sink, path): (Box<dyn Write>, PathBuf) = match output {
        Some(p) => {
            refuse_store_as_output(&out.store, p)?;
            let f = std::fs::File::create(p).map_err(|e| CliError::io("write", p, &e))?;
            (Box::new(std::io::BufWriter::new(f)), p.to_owned())
        }
        None => {
            if shape == Shape::Roaring && std::io::stdout().is_terminal() {
                return Err(usage(
                    "export --format roaring writes binary: redirect stdout or give --output FILE",
                )
                .with_field("--format"));
            }
            (
                Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
                PathBuf::from("<stdout>"),
            )
        }
    };
    let written = match shape {
        Shape::Roaring => {
            let treemap = roaring::RoaringTreemap::from_sorted_iter(ids.iter())
                .map_err(|_| CliError::internal("the run's IDs are out of order"))?;
            treemap.serialize_into(&mut sink)
        }
        Shape::JsonObject => {
            let head = serde_json::json!({
                "run_id": run.to_string(),
                "label": label,
                "coverage_status": header.coverage_status,
                "complete": header.coverage_status == Status::Verified,
                "count": ids.len(),
            });
            let head = serde_json::to_string_pretty(&head)
                .map_err(|e| CliError::internal(format!("cannot encode JSON: {e}")))?;
            // The object's keys, then the IDs as its last key, streamed.
            let open = format!("{},\n  \"ids\": [", head.trim_end_matches("\n}"));
            match sink.write_all(open.as_bytes()) {
                Err(e) => Err(e),
                Ok(()) => write_ids(&snap, &header, &ids, &mut sink, shape)?
                    .and_then(|()| sink.write_all(b"\n  ]\n}\n")),
            }
        }
        _ => write_ids(&snap, &header, &ids, &mut sink, shape)?,
    }
    .and_then(|()| sink.flush());
    drop(sink);
    match written {
        Err(e) if output.is_none() => super::output::stdout_written(Err(e))?,
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(CliError::io("write", &path, &e))
        }
        _ => {}
    }
    let what = match label {
        Some(name) => format!("{} labelled {name:?}", count(ids.len(), "ID", "IDs")),
        None => count(ids.len(), "ID", "IDs"),
    };
    if let Some(p) = output {
        if out.json {
            out.json_value(&serde_json::json!({
                "run_id": run.to_string(),
                "label": label,
                "coverage_status": header.coverage_status,
                "complete": header.coverage_status == Status::Verified,
                "count": ids.len(),
                "output": p.display().to_string(),
            }))?;
        } else if !out.quiet {
            out.emit(&format!(
                "{run}: {what} written to {}",
                terminal_safe(&p.display().to_string())
            ))?;
        }
    }
    if header.coverage_status != Status::Verified {
        out.note(&format!(
            "{run} is {}: these {what} are not a complete inventory",
            header.coverage_status.as_str(),
        ));
    }
    Ok(status_exit(header.coverage_status))
}

/// A label's IDs; a label the run does not carry is an error naming the ones it does.
fn label_ids(snap: &Snapshot<'_>, run: RunId, name: &str) -> Result<IdSet, CliError> {
    let ids = snap.label_ids(run, name)?;
    if !ids.is_empty() {
        return Ok(ids);
    }
    let names: Vec<String> = snap.receipt(run)?.labels.into_keys().collect();
    if names.iter().any(|n| n == name) {
        return Ok(ids);
    }
    // Label names come from the source: escaped, so a name cannot forge a line (the error's
    // text is escaped again as a whole; this keeps the hint safe wherever it goes).
    let hint = if names.is_empty() {
        format!("{run} carries no label")
    } else {
        let names: Vec<String> = names
            .iter()
            .map(|n| terminal_safe(n).into_owned())
            .collect();
        format!("its labels: {}", names.join(", "))
    };
    Err(usage(format!("{run} has no label {name:?}"))
        .with_kind("unknown_label")
        .with_field("--label")
        .with_hint(hint))
}

/// How `export` writes IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One ID per line, as text.
    Text,
    /// One JSON value per line.
    Jsonl,
    /// JSON values separated for the inside of an array.
    JsonObject,
    /// A portable roaring treemap.
    Roaring,
}

/// Writes a run's IDs in their original form; string IDs are read from the dictionary in
/// chunks and each checked against its digest (a damaged one is an error, never printed).
/// Returns the write's own result, the store's error as `Err`.
fn write_ids(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ids: &IdSet,
    sink: &mut dyn Write,
    shape: Shape,
) -> Result<std::io::Result<()>, CliError> {
    let mut first = true;
    let mut put = |sink: &mut dyn Write, json: &serde_json::Value| -> std::io::Result<()> {
        let r = match shape {
            Shape::JsonObject => {
                let sep = if first { "\n    " } else { ",\n    " };
                write!(sink, "{sep}{json}")
            }
            Shape::Jsonl => writeln!(sink, "{json}"),
            _ => match json {
                // The inside of the JSON literal: unambiguous, and the ID itself when plain.
                serde_json::Value::String(_) => {
                    let quoted = json.to_string();
                    writeln!(sink, "{}", &quoted[1..quoted.len() - 1])
                }
                other => writeln!(sink, "{other}"),
            },
        };
        first = false;
        r
    };
    if header.contract.id_codec != IdCodecKind::String {
        let codec = Renderer::for_ids(snap, header, [])?;
        for id in ids.iter() {
            let v = match header.contract.id_codec {
                IdCodecKind::Int | IdCodecKind::Signed => codec.json(id),
                _ => serde_json::Value::String(codec.render(id)),
            };
            if let Err(e) = put(sink, &v) {
                return Ok(Err(e));
            }
        }
        return Ok(Ok(()));
    }
    let mut written = Ok(());
    let scope = scanledger::ScopeKey::of(&header.contract);
    snap.for_each_string(&scope, ids, |_, s, _| {
        if written.is_ok() {
            written = put(sink, &serde_json::Value::from(s));
        }
        Ok(())
    })?;
    Ok(written)
}

/// `page RUN [--token T] [--size N] [--ttl-seconds S]`.
pub(crate) fn page(
    out: &Out,
    run: RunArg,
    token_text: Option<&str>,
    size: u32,
    ttl_seconds: u64,
) -> Result<i32, CliError> {
    if size == 0 || size > ITEMS_PER_PAGE_MAX {
        return Err(usage(format!(
            "--size {size}: a page holds 1 to {ITEMS_PER_PAGE_MAX} IDs"
        )));
    }
    if ttl_seconds > TOKEN_TTL_SECONDS_MAX {
        return Err(usage(format!(
            "--ttl-seconds {ttl_seconds}: a token lives at most {TOKEN_TTL_SECONDS_MAX} seconds"
        )));
    }
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let page = scanledger::page_of_run(
        &snap,
        run,
        token_text,
        size,
        ttl_seconds,
        scanledger::now_ms(),
    )
    .map_err(|e| match e {
        scanledger::PageRunError::Read(e) => CliError::from(e),
        other => usage(format!("page {run}: {other}")).with_kind("page_token"),
    })?;
    let header_status = page.coverage_status;
    let v = serde_json::json!({
        "run_id": run.to_string(),
        "coverage_status": header_status,
        "ids": page.ids,
        "next_token": page.next_token,
    });
    out.json_value(&v)?;
    // A page of a run that is not verified is never a page of an inventory.
    if header_status != Status::Verified {
        out.note(&format!(
            "{run} is {}: its pages are not pages of a complete inventory",
            header_status.as_str()
        ));
    }
    Ok(status_exit(header_status))
}
