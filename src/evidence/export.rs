//! The answer of `export RUN [--label NAME]`: a run's (or a label's) IDs in their original
//! form, ascending in codec order, written as they are read a chunk of partitions at a time.
//!
//! A string ID is looked up in the dictionary with its chunk and checked against its digest (a
//! damaged one is an error, never written). The `text` shape writes a string ID as the inside
//! of its JSON string literal, so a line break in an ID can never split it; `roaring` is the
//! portable 64-bit roaring format of the u64 IDs (one bitmap, as compact as the run's own).

use std::io::Write;

use serde::Serialize;

use super::stream::{walk_run, EmitError};
use super::Renderer;
use crate::contract::IdCodecKind;
use crate::idset::{IdSet, PARTITION_BITS};
use crate::receipt::RunId;
use crate::reconcile::Status;
use crate::store::{ReadError, RunHeader, ScopeKey, Snapshot};

/// How `export` writes IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportShape {
    /// One ID per line, as text.
    Text,
    /// One JSON value per line.
    Jsonl,
    /// `ExportSummary`'s object with the IDs as its last key, `ids`.
    JsonObject,
    /// A portable 64-bit roaring bitmap (RoaringTreemap).
    Roaring,
}

/// What an export holds (docs/REFERENCE.md §8): the head of `export --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The run, `run-N`.
    pub run_id: String,
    /// The label exported, if one was.
    pub label: Option<String>,
    /// The run's status: the IDs of a run that did not verify are no inventory.
    pub coverage_status: Status,
    /// Whether the IDs are a complete inventory (the run is verified).
    pub complete: bool,
    /// IDs exported.
    pub count: u64,
    /// The file written, when the face wrote one.
    pub output: Option<String>,
}

/// Why an export cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The run carries no such label.
    #[error("{run} has no label {name:?}")]
    UnknownLabel {
        /// The run.
        run: RunId,
        /// The label asked for.
        name: String,
        /// The labels it carries.
        labels: Vec<String>,
    },
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// A run's IDs (or a label's), ready to be written.
pub struct Export<'a, 's> {
    snap: &'a Snapshot<'s>,
    header: RunHeader,
    /// A label's IDs (bitmaps, as compact as the store's); `None` for the run's own.
    label: Option<IdSet>,
    /// What is exported.
    pub summary: ExportSummary,
}

/// The export of `run`'s IDs, or of its label `label`.
///
/// # Errors
/// `UnknownLabel` naming the labels the run carries; `Read`.
pub fn export_of<'a, 's>(
    snap: &'a Snapshot<'s>,
    run: RunId,
    label: Option<&str>,
) -> Result<Export<'a, 's>, ExportError> {
    let header = snap.header(run)?;
    let ids = match label {
        None => None,
        Some(name) => {
            let ids = snap.label_ids(run, name)?;
            let labels: Vec<String> = if ids.is_empty() {
                snap.receipt(run)?.labels.into_keys().collect()
            } else {
                Vec::new()
            };
            if ids.is_empty() && !labels.iter().any(|n| n == name) {
                return Err(ExportError::UnknownLabel {
                    run,
                    name: name.to_owned(),
                    labels,
                });
            }
            Some(ids)
        }
    };
    let summary = ExportSummary {
        run_id: run.to_string(),
        label: label.map(str::to_owned),
        coverage_status: header.coverage_status,
        complete: header.coverage_status == Status::Verified,
        count: ids.as_ref().map_or(header.unique_ids_observed, IdSet::len),
        output: None,
    };
    Ok(Export {
        snap,
        header,
        label: ids,
        summary,
    })
}

impl Export<'_, '_> {
    /// Calls `f` on the exported IDs a chunk of partitions at a time.
    fn chunks(&self, mut f: impl FnMut(&IdSet) -> Result<(), EmitError>) -> Result<(), EmitError> {
        if let Some(ids) = &self.label {
            return f(ids);
        }
        let mut chunk = IdSet::new();
        let mut last_chunk = None;
        let last = u64::MAX >> PARTITION_BITS;
        walk_run(
            self.snap,
            self.header.run_id,
            0,
            last,
            |p, b| -> Result<(), EmitError> {
                let key = p / super::stream::WALK_CHUNK as u64;
                if last_chunk.is_some_and(|k| k != key) {
                    f(&std::mem::take(&mut chunk))?;
                }
                last_chunk = Some(key);
                chunk.set_partition(p, b.clone());
                Ok(())
            },
        )?;
        f(&chunk)
    }

    /// Writes the IDs to `w` in `shape`.
    ///
    /// # Errors
    /// `EmitError::Read` when the store fails, `Io` when the writer does.
    pub fn write(&self, shape: ExportShape, w: &mut dyn Write) -> Result<(), EmitError> {
        match shape {
            ExportShape::Roaring => {
                let mut all = roaring::RoaringTreemap::new();
                self.chunks(|ids| {
                    all.extend(ids.iter());
                    Ok(())
                })?;
                all.serialize_into(w)?;
            }
            ExportShape::JsonObject => {
                let head =
                    serde_json::to_string_pretty(&self.summary).map_err(std::io::Error::other)?;
                // The object's keys, then the IDs as its last key.
                write!(w, "{},\n  \"ids\": [", head.trim_end_matches("\n}"))?;
                let mut first = true;
                self.each(&mut |v| {
                    let sep = if first { "\n    " } else { ",\n    " };
                    first = false;
                    write!(w, "{sep}{v}")
                })?;
                w.write_all(if first { b"]\n}\n" } else { b"\n  ]\n}\n" })?;
            }
            ExportShape::Jsonl => self.each(&mut |v| writeln!(w, "{v}"))?,
            _ => self.each(&mut |v| match v {
                // The inside of the JSON literal: unambiguous, and the ID itself when plain.
                serde_json::Value::String(_) => {
                    let quoted = v.to_string();
                    writeln!(w, "{}", &quoted[1..quoted.len() - 1])
                }
                other => writeln!(w, "{other}"),
            })?,
        }
        Ok(())
    }

    /// Hands on every ID as JSON (a number for `int`, a string otherwise), ascending.
    fn each(
        &self,
        put: &mut dyn FnMut(&serde_json::Value) -> std::io::Result<()>,
    ) -> Result<(), EmitError> {
        let h = &self.header;
        if h.contract.id_codec != IdCodecKind::String {
            let codec = Renderer::for_ids(self.snap, h, [])?;
            return self.chunks(|ids| {
                for id in ids.iter() {
                    put(&codec.json(id))?;
                }
                Ok(())
            });
        }
        let scope = ScopeKey::of(&h.contract);
        self.chunks(|ids| {
            let mut written = Ok(());
            self.snap.for_each_string(&scope, ids, |_, s, _| {
                if written.is_ok() {
                    written = put(&serde_json::Value::from(s));
                }
                Ok(())
            })?;
            Ok(written?)
        })
    }
}
