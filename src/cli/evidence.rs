//! The evidence commands (issue 4): `verify`, `diff`, `missing`, `export`, `page`.
//!
//! Each handler opens the store, asks it for what it needs (the store and the pure `diff`,
//! `verify` and `token` modules do the work), prints, and returns the exit code. Nothing
//! here prints a raw cursor: runs carry only cursor hashes, and page tokens are our own.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::emit;
use scanledger::token::{self, Binding, Claims, TokenError, TOKEN_TTL_SECONDS_MAX};
use scanledger::{
    digest, partition_of, Error, IdCodecKind, Mismatch, RangeList, Receipt, Renderer, RunHeader,
    RunId, Snapshot, Status, Store, ITEMS_PER_PAGE_MAX, RANGES_SHOWN_MAX,
};

/// A receipt file larger than this is refused before it is read (bytes). A receipt holds at
/// most 256 violations and 64 labels of 32 ranges, far below.
const RECEIPT_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Exit code of a receipt that does not match its store (SPEC §8: failed).
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

fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// `verify RECEIPT_FILE`.
pub(crate) fn verify(store_path: &Path, file: &Path, json: bool) -> Result<i32, Error> {
    let text = scanledger::read_bounded(file, RECEIPT_BYTES_MAX)?;
    let receipt = Receipt::from_json(&text).map_err(|e| {
        usage(format!(
            "{}: {e} (a receipt is what `--json receipt RUN` prints)",
            file.display()
        ))
    })?;
    let store = Store::open_read(store_path)?;
    let mismatches = scanledger::verify_receipt(&store.read()?, &receipt)?;
    let verified = mismatches.is_empty();
    if json {
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
        emit(&to_json(&report)?)?;
    } else if verified {
        emit(&format!(
            "{}: receipt verified against store {}: every field recomputes \
             ({} pages, {} unique IDs in {} partitions, merkle root {}, chain {})",
            receipt.run_id,
            store_path.display(),
            receipt.pages_observed,
            receipt.unique_ids_observed,
            receipt.partitions,
            receipt.merkle_root,
            receipt.cursor_chain_digest
        ))?;
    } else {
        let mut out = format!(
            "{}: receipt REJECTED by store {}: {}",
            shown_run(&receipt.run_id),
            store_path.display(),
            mismatches[0]
        );
        for m in &mismatches[1..] {
            out.push_str(&format!("\n  also {m}"));
        }
        emit(&out)?;
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

fn to_json(v: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string_pretty(v).map_err(|e| usage(e.to_string()))
}

fn scope_of(h: &RunHeader) -> String {
    format!(
        "{} / {}",
        h.contract.scope.source,
        h.contract.scope.tenant.as_deref().unwrap_or("-")
    )
}

fn more(shown: usize, total: u64) -> String {
    if (shown as u64) < total {
        format!(" and {} more", total - shown as u64)
    } else {
        String::new()
    }
}

/// `diff OLD NEW`.
pub(crate) fn diff(store_path: &Path, old: RunId, new: RunId, json: bool) -> Result<i32, Error> {
    let store = Store::open_read(store_path)?;
    let snap = store.read()?;
    let rd = scanledger::diff_runs(&snap, old, new).map_err(diff_error)?;
    let added = RangeList::of(&rd.diff.added);
    let removed = RangeList::of(&rd.diff.removed);
    // Only the IDs printed are looked up, so equal runs never touch a dictionary.
    let codec = Renderer::for_ids(&snap, &rd.new, endpoints(&[&added, &removed]))?;
    let parts_total = rd.diff.partitions_differing.len() as u64;
    let parts_shown: Vec<u64> = rd
        .diff
        .partitions_differing
        .iter()
        .take(RANGES_SHOWN_MAX)
        .copied()
        .collect();
    if json {
        let v = serde_json::json!({
            "old_run": rd.old.run_id.to_string(),
            "new_run": rd.new.run_id.to_string(),
            "source": rd.new.contract.scope.source,
            "tenant": rd.new.contract.scope.tenant,
            "old_coverage_status": rd.old.coverage_status,
            "new_coverage_status": rd.new.coverage_status,
            "equal": rd.diff.is_empty(),
            "added_count": rd.diff.added_count(),
            "removed_count": rd.diff.removed_count(),
            "added_ranges": codec.ranges(&added.shown),
            "added_ranges_total": added.ranges_total,
            "removed_ranges": codec.ranges(&removed.shown),
            "removed_ranges_total": removed.ranges_total,
            "partitions_differing": parts_shown,
            "partitions_differing_total": parts_total,
            "partitions_loaded": rd.partitions_loaded,
        });
        emit(&to_json(&v)?)?;
        return Ok(0);
    }
    let mut out = String::new();
    if rd.diff.is_empty() {
        out.push_str(&format!(
            "{} and {} ({}) hold the same {} IDs",
            rd.old.run_id,
            rd.new.run_id,
            scope_of(&rd.new),
            rd.new.unique_ids_observed
        ));
    } else {
        out.push_str(&format!(
            "{} -> {} ({}): {} added, {} removed, {} partition{} differ{}",
            rd.old.run_id,
            rd.new.run_id,
            scope_of(&rd.new),
            rd.diff.added_count(),
            rd.diff.removed_count(),
            parts_total,
            if parts_total == 1 { "" } else { "s" },
            if parts_total == 1 { "s" } else { "" },
        ));
        for (name, list) in [("added", &added), ("removed", &removed)] {
            if list.ranges_total > 0 {
                out.push_str(&format!(
                    "\n  {name:<10} {}{}",
                    codec.ranges(&list.shown).join(", "),
                    more(list.shown.len(), list.ranges_total)
                ));
            }
        }
        let parts: Vec<String> = parts_shown.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "\n  partitions {}{}",
            parts.join(", "),
            more(parts.len(), parts_total)
        ));
    }
    for h in [&rd.old, &rd.new] {
        if h.coverage_status != Status::Verified {
            out.push_str(&format!(
                "\n  note: {} is {}: it is not a complete inventory",
                h.run_id,
                h.coverage_status.as_str()
            ));
        }
    }
    emit(&out)?;
    Ok(0)
}

fn diff_error(e: scanledger::DiffError) -> Error {
    match e {
        scanledger::DiffError::Read(r) => Error::Read(r),
        other => usage(other.to_string()),
    }
}

/// The endpoints of the ranges a command prints.
fn endpoints(lists: &[&RangeList]) -> Vec<u64> {
    lists
        .iter()
        .flat_map(|l| l.shown.iter().flat_map(|(a, b)| [*a, *b]))
        .collect()
}

/// Parses `LO..HI` in the IDs' original form with the run's codec.
fn parse_range(text: &str, snap: &Snapshot<'_>, header: &RunHeader) -> Result<(u64, u64), Error> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| usage(format!("--range {text:?}: expected LO..HI")))?;
    let id = |s: &str| -> Result<u64, Error> {
        let parsed = match header.contract.id_codec {
            IdCodecKind::Int => s.parse().ok(),
            IdCodecKind::Prefixed => {
                let digits = match &header.id_prefix {
                    Some(p) => s.strip_prefix(p.as_str()),
                    None => Some(s),
                };
                digits.and_then(|d| d.parse().ok())
            }
            IdCodecKind::String => {
                snap.interned_id(&scanledger::ScopeKey::of(&header.contract), s)?
            }
        };
        parsed.ok_or_else(|| {
            let what = match header.contract.id_codec {
                IdCodecKind::Int => "is not an integer from 0 to 2^64-1".to_owned(),
                IdCodecKind::Prefixed => format!(
                    "is not an ID of this run's prefix {:?}",
                    header.id_prefix.as_deref().unwrap_or("")
                ),
                IdCodecKind::String => "is not an ID known in this (source, tenant)".to_owned(),
            };
            usage(format!("--range: {s:?} {what}"))
        })
    };
    let (lo, hi) = (id(lo)?, id(hi)?);
    if lo > hi {
        return Err(usage(format!(
            "--range {text:?}: the first ID is above the last"
        )));
    }
    Ok((lo, hi))
}

/// `missing RUN --against OTHER | --range LO..HI`.
pub(crate) fn missing(
    store_path: &Path,
    run: RunId,
    against: Option<RunId>,
    range: Option<&str>,
    json: bool,
) -> Result<i32, Error> {
    let store = Store::open_read(store_path)?;
    let snap = store.read()?;
    let (header, reference, list) = match (against, range) {
        (Some(other), None) => {
            let rd = scanledger::diff_runs(&snap, run, other).map_err(diff_error)?;
            let list = RangeList::of(&rd.diff.added);
            (rd.old, other.to_string(), list)
        }
        (None, Some(text)) => {
            let header = snap.header(run)?;
            let (lo, hi) = parse_range(text, &snap, &header)?;
            let set = snap.partitions_between(run, partition_of(lo), partition_of(hi))?;
            (header, text.to_owned(), RangeList::gaps(&set, lo, hi))
        }
        _ => {
            return Err(usage(
                "missing takes one of --against RUN or --range LO..HI",
            ))
        }
    };
    let codec = Renderer::for_ids(&snap, &header, endpoints(&[&list]))?;
    let ranges = codec.ranges(&list.shown);
    if json {
        let v = serde_json::json!({
            "run_id": header.run_id.to_string(),
            "reference": reference,
            "coverage_status": header.coverage_status,
            "missing_count": list.ids_total,
            "missing_ranges": ranges,
            "missing_ranges_total": list.ranges_total,
        });
        emit(&to_json(&v)?)?;
    } else if list.ranges_total == 0 {
        emit(&format!(
            "{} lacks nothing that {reference} has",
            header.run_id
        ))?;
    } else {
        emit(&format!(
            "{} lacks {} IDs that {reference} has, in {} range{}:\n  {}{}",
            header.run_id,
            list.ids_total,
            list.ranges_total,
            if list.ranges_total == 1 { "" } else { "s" },
            ranges.join(", "),
            more(ranges.len(), list.ranges_total)
        ))?;
    }
    Ok(0)
}

/// `export RUN [--format text|roaring] [--output FILE]`.
pub(crate) fn export(
    store_path: &Path,
    run: RunId,
    format: ExportFormat,
    output: Option<&Path>,
) -> Result<i32, Error> {
    let store = Store::open_read(store_path)?;
    let snap = store.read()?;
    let header = snap.header(run)?;
    let ids = snap.ids(run)?;
    let (mut sink, path): (Box<dyn Write>, PathBuf) = match output {
        Some(p) => {
            refuse_store_as_output(store_path, p)?;
            let f = std::fs::File::create(p).map_err(|e| Error::Io {
                path: p.to_owned(),
                source: e,
            })?;
            (Box::new(std::io::BufWriter::new(f)), p.to_owned())
        }
        None => {
            if format == ExportFormat::Roaring && std::io::stdout().is_terminal() {
                return Err(usage(
                    "export --format roaring writes binary: redirect stdout or give --output FILE",
                ));
            }
            (
                Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
                PathBuf::from("<stdout>"),
            )
        }
    };
    let written = match format {
        ExportFormat::Text => write_text(&snap, &header, &ids, &mut sink, false)?,
        ExportFormat::Jsonl => write_text(&snap, &header, &ids, &mut sink, true)?,
        ExportFormat::Roaring => {
            let treemap = roaring::RoaringTreemap::from_sorted_iter(ids.iter())
                .map_err(|_| usage("internal: IDs out of order"))?;
            treemap.serialize_into(&mut sink)
        }
    }
    .and_then(|()| sink.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(Error::Io { path, source: e })
        }
        _ => {}
    }
    if header.coverage_status != Status::Verified {
        eprintln!(
            "note: {run} is {}: these {} IDs are not a complete inventory",
            header.coverage_status.as_str(),
            ids.len()
        );
    }
    Ok(super::status_exit(header.coverage_status))
}

/// Writes a run's IDs one per line in their original form; string IDs are read from the
/// dictionary in chunks and each checked against its digest (a damaged one is an error, never
/// printed). Returns the write's own result, the store's error as `Err`.
fn write_text(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ids: &scanledger::IdSet,
    sink: &mut dyn Write,
    jsonl: bool,
) -> Result<std::io::Result<()>, Error> {
    if header.contract.id_codec != IdCodecKind::String {
        let codec = Renderer::for_ids(snap, header, [])?;
        for id in ids.iter() {
            let line = if jsonl {
                codec.json(id).to_string()
            } else {
                codec.render(id)
            };
            if let Err(e) = writeln!(sink, "{line}") {
                return Ok(Err(e));
            }
        }
        return Ok(Ok(()));
    }
    let mut written = Ok(());
    let scope = scanledger::ScopeKey::of(&header.contract);
    snap.for_each_string(&scope, ids, |_, s, _| {
        if written.is_ok() {
            let quoted = serde_json::Value::from(s).to_string();
            written = if jsonl {
                writeln!(sink, "{quoted}")
            } else {
                // The inside of the JSON literal: unambiguous, and the ID itself when plain.
                writeln!(sink, "{}", &quoted[1..quoted.len() - 1])
            };
        }
        Ok(())
    })?;
    Ok(written)
}

/// `export --output` never names the store itself (directly, by another path, or through a
/// link): that would destroy the evidence.
fn refuse_store_as_output(store_path: &Path, output: &Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (std::fs::metadata(store_path), std::fs::metadata(output)) else {
        return Ok(());
    };
    if a.dev() == b.dev() && a.ino() == b.ino() {
        return Err(usage(format!(
            "--output {}: that is the store file itself; name another file",
            output.display()
        )));
    }
    Ok(())
}

/// `page RUN [--token T] [--size N] [--ttl-seconds S]`.
pub(crate) fn page(
    store_path: &Path,
    run: RunId,
    token_text: Option<&str>,
    size: u32,
    ttl_seconds: u64,
) -> Result<i32, Error> {
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
    let token_err = |e: TokenError| usage(format!("page {run}: {e}"));
    let store = Store::open_read(store_path)?;
    let snap = store.read()?;
    let header = snap.header(run)?;
    let query_digest = digest::query_digest(&header.contract.scope);
    let binding = Binding {
        tenant: header.contract.scope.tenant.as_deref(),
        query_digest: &query_digest,
    };
    let now = scanledger::now_ms();
    let position = match token_text {
        None => 0,
        Some(text) => {
            let key = snap.page_token_key()?;
            let (claims, mac) = token::decode(text).map_err(token_err)?;
            if claims.run != run {
                return Err(token_err(other_run_error(
                    &snap, &key, &claims, &mac, run, &binding,
                )));
            }
            token::check(&key, text, run, &binding, header.pages_observed, now)
                .map_err(token_err)?
                .position
        }
    };
    let size_n = size as usize;
    let mut ids = snap.ids_from(run, position, size_n + 1)?;
    let next_token = if ids.len() > size_n {
        let next = ids[size_n];
        ids.truncate(size_n);
        let key = snap.page_token_key()?;
        let claims = Claims {
            run,
            position: next,
            stamp: header.pages_observed,
            expires_at_ms: now.saturating_add(ttl_seconds.saturating_mul(1000)),
        };
        Some(token::issue(&key, &claims, &binding))
    } else {
        None
    };
    let codec = Renderer::for_ids(&snap, &header, ids.iter().copied())?;
    let rendered: Vec<serde_json::Value> = ids.iter().map(|id| codec.json(*id)).collect();
    let v = serde_json::json!({
        "run_id": run.to_string(),
        "coverage_status": header.coverage_status,
        "ids": rendered,
        "next_token": next_token,
    });
    emit(&to_json(&v)?)?;
    // A page of a run that is not verified is never a page of an inventory.
    Ok(super::status_exit(header.coverage_status))
}

/// The error for a token of another run: `OtherRun` (naming how the runs differ) when the
/// token is genuine for the run it names, `Forged` otherwise.
fn other_run_error(
    snap: &Snapshot<'_>,
    key: &[u8; 32],
    claims: &Claims,
    mac: &digest::Hash,
    presented_for: RunId,
    presented: &Binding<'_>,
) -> TokenError {
    let forged = TokenError::Forged { run: presented_for };
    let Ok(issued) = snap.header(claims.run) else {
        return forged;
    };
    let issued_digest = digest::query_digest(&issued.contract.scope);
    let issued_binding = Binding {
        tenant: issued.contract.scope.tenant.as_deref(),
        query_digest: &issued_digest,
    };
    if !token::mac_matches(key, claims, &issued_binding, mac) {
        return forged;
    }
    TokenError::OtherRun {
        issued_for: claims.run,
        presented_for,
        why: token::how_runs_differ(&issued_binding, presented),
    }
}
