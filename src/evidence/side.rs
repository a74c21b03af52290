//! A run as a comparison names it: its identity in a report (`RunSide`: store, scope,
//! snapshot, status and roots) and in a sentence (`RunName`: `run-1`, or `pg.redb:run-1` when
//! two store files are involved).
//!
//! Reads a run's record and content accumulators, never its ID bitmaps (a finished run's root
//! is stored), so naming a run costs the same whatever its size.

use std::path::Path;

use serde::Serialize;

use crate::digest;
use crate::receipt::RunId;
use crate::reconcile::{ConclusionScope, Status};
use crate::store::{ReadError, RunHeader, Snapshot};

/// A run's identity in a comparison's report: which store and run, its scope and snapshot, its
/// status and its roots (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunSide {
    /// The run, `run-N`.
    pub run_id: String,
    /// The store file it was read from, as given.
    pub store: String,
    /// Its scope's source.
    pub source: String,
    /// Its scope's tenant.
    pub tenant: Option<String>,
    /// The snapshot it was pinned to; null for a live scan.
    pub snapshot_id: Option<String>,
    /// Its state: `running`, `interrupted`, `finished` or `superseded`.
    pub state: String,
    /// Its coverage status.
    pub coverage_status: Status,
    /// What its receipt may conclude.
    pub conclusion_scope: ConclusionScope,
    /// Its unique IDs.
    pub unique_ids_observed: u64,
    /// Its query digest.
    pub query_digest: String,
    /// Its cursor chain digest.
    pub cursor_chain_digest: String,
    /// Its Merkle root.
    pub merkle_root: String,
    /// Its content root, when its source gave content digests.
    pub content_root: Option<String>,
}

/// The side of `header`'s run, read through `snap` from the store at `store`.
///
/// # Errors
/// `ReadError` when the run's record or accumulators are unreadable or damaged.
pub fn run_side(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    store: &Path,
) -> Result<RunSide, ReadError> {
    let run = header.run_id;
    let record = snap.record(run)?;
    let progress = record.progress;
    let chain = digest::display(&progress.chain);
    // The status and conclusion follow from the progress alone: no ID is needed.
    let (coverage_status, conclusion_scope) = (progress.status(), progress.conclusion_scope());
    let merkle_root = match header.merkle_root {
        Some(root) => digest::display(&root),
        // A run that has not finished has no stored root: its receipt computes one.
        None => snap.receipt(run)?.merkle_root,
    };
    let content = snap.content(run)?;
    Ok(RunSide {
        run_id: run.to_string(),
        store: store.display().to_string(),
        source: header.contract.scope.source.clone(),
        tenant: header.contract.scope.tenant.clone(),
        snapshot_id: header.snapshot_id.clone(),
        state: header.state.as_str().to_owned(),
        coverage_status,
        conclusion_scope,
        unique_ids_observed: header.unique_ids_observed,
        query_digest: digest::query_digest(&header.contract.scope),
        cursor_chain_digest: chain,
        merkle_root,
        content_root: (!content.is_empty())
            .then(|| digest::display(&crate::content::root(content.iter().map(|(l, a)| (*l, a))))),
    })
}

/// How a sentence names a run: `run-1`, or `FILE:run-1` when the comparison reads two store
/// files (the file's name, or its whole path when both files have the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunName {
    /// The run.
    pub run: RunId,
    /// The store it is named by, when two are involved.
    pub store: Option<String>,
}

impl std::fmt::Display for RunName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.store {
            Some(s) => write!(f, "{}:{}", crate::receipt::terminal_safe(s), self.run),
            None => write!(f, "{}", self.run),
        }
    }
}

/// The names of two runs: plain within one store file, each with its store's name across two.
#[must_use]
pub fn run_names(
    old: RunId,
    old_store: &Path,
    new: RunId,
    new_store: Option<&Path>,
) -> (RunName, RunName) {
    let Some(new_store) = new_store else {
        let name = |run| RunName { run, store: None };
        return (name(old), name(new));
    };
    let short = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let (a, b) = if short(old_store) == short(new_store) {
        (
            old_store.display().to_string(),
            new_store.display().to_string(),
        )
    } else {
        (short(old_store), short(new_store))
    };
    (
        RunName {
            run: old,
            store: Some(a),
        },
        RunName {
            run: new,
            store: Some(b),
        },
    )
}

/// The worse of two statuses.
#[must_use]
pub(crate) fn worse(a: Status, b: Status) -> Status {
    a.max(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_named_by_their_store_only_across_two_files() {
        let (a, b) = run_names(RunId(1), Path::new("x/a.redb"), RunId(1), None);
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("run-1".into(), "run-1".into())
        );
        let (a, b) = run_names(
            RunId(1),
            Path::new("x/source.redb"),
            RunId(2),
            Some(Path::new("/y/target.redb")),
        );
        assert_eq!(a.to_string(), "source.redb:run-1");
        assert_eq!(b.to_string(), "target.redb:run-2");
        let (a, b) = run_names(
            RunId(1),
            Path::new("x/s.redb"),
            RunId(1),
            Some(Path::new("y/s.redb")),
        );
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("x/s.redb:run-1".into(), "y/s.redb:run-1".into())
        );
    }
}
