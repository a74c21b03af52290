//! The migration verdict (docs/guide-migration.md): one answer over the scans of a migration's
//! source and target collections, for a library user, the command line and any other face.
//!
//! A verdict is `verified` only on complete evidence: both runs finished, verified inventories
//! (mode `all`), their ID sets equal but for exactly the declared exclusions, and with content
//! every partition's accumulator equal, or an exact re-read that found no changed record. A
//! definite difference between two inventories is `failed`; anything short of evidence is
//! `unknown`. A re-read that does not reproduce its run's stored digests never lists changes.
//!
//! Shape: the verdict is built in steps over a `Verdict` (reasons, next commands, flags), and
//! its lists (missing, extra, changed) are fed in ascending key order into capped tallies with
//! exact totals (`RangeTally`), so a streaming comparison of two ordered (key, row digest)
//! streams can feed the same `MigrationReport`. The one-command form does stream: its findings
//! (`collect::StreamedKeys`) name the changed rows once `streamed` has judged them against the
//! stored evidence (a disagreement is `unknown`); a stream that is not whole falls back to a
//! re-read of the partitions whose digests differ.
//! Never: a rule the faces must know, a list of every ID in memory (but the re-read's rows and
//! the declared exclusions, both bounded).

use serde::Serialize;

use super::lists::{compare, Compared, RunAt, Which};
use super::side::{run_names, RunName, RunSide};
use super::stream::{EmitError, Tally};
use super::DiffError;
use crate::contract::{Contract, ContractError, IdCodecKind, Mode};
use crate::idset::IdSet;
use crate::receipt::RunId;
use crate::reconcile::Status;
use crate::store::{ReadError, RunHeader, RunState};

mod content;
mod exclusions;
mod hints;
mod reread;
mod streamed;
#[cfg(test)]
mod tests;
mod verdict;

pub use content::{
    check_source_columns, ChangedColumns, ContentReport, RereadFailure, RereadReport, Unreproduced,
    IDS_SHOWN_MAX,
};
pub use exclusions::{ExcludeError, EXCLUDED_IDS_MAX, EXCLUDE_BYTES_MAX};
pub use hints::shell_word;
pub use reread::{RereadSources, Side};
pub use streamed::StreamReport;

pub(crate) use content::compare as compare_content;

/// Why a comparison of content or a migration verdict could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// The runs cannot be compared, or the store failed.
    #[error(transparent)]
    Diff(#[from] DiffError),
    /// The `--exclude` file cannot be used.
    #[error(transparent)]
    Exclude(#[from] ExcludeError),
    /// `diff --content` of a run without content digests.
    #[error("{run} has no content digests: its source config names no content columns")]
    NoContent {
        /// The run.
        run: RunId,
    },
    /// The two sides' content columns cannot be compared.
    #[error("the content columns differ: {old_run} hashes {old:?}, {new_run} hashes {new:?}; both sides must name the same columns in the same order")]
    ContentColumns {
        /// The old run.
        old_run: RunId,
        /// Its columns, as its source config names them.
        old: Vec<String>,
        /// The new run.
        new_run: RunId,
        /// Its columns.
        new: Vec<String>,
    },
    /// Two sources to be scanned whose content columns cannot be compared, or one that names
    /// none.
    #[error("the content columns of the two sources cannot be compared: {from} hashes {old:?}, {to} hashes {new:?}; both configs must name the same columns in the same order")]
    SourceContent {
        /// The `--from` source.
        from: String,
        /// Its columns (empty: it names none).
        old: Vec<String>,
        /// The `--to` source.
        to: String,
        /// Its columns.
        new: Vec<String>,
    },
    /// `--reread` of runs whose IDs are not integers.
    #[error("--reread needs int IDs, and {run} has {} IDs: their content leaves are buckets of digests, not key ranges", codec_word(*codec))]
    RereadCodec {
        /// The run.
        run: RunId,
        /// Its codec.
        codec: IdCodecKind,
    },
    /// A run with no recorded source and none given.
    #[error("{run} has no recorded source to re-read")]
    RereadSource {
        /// The run.
        run: RunId,
        /// Its side.
        side: Side,
    },
    /// A re-read's source could not be opened.
    #[error("the {} run's source to re-read cannot be opened", match side { Side::Old => "old", Side::New => "new" })]
    RereadOpen {
        /// Its side.
        side: Side,
        /// Why.
        #[source]
        source: Box<crate::Error>,
    },
}

impl MigrationError {
    /// The command-line flag at fault, when one is.
    #[must_use]
    pub fn flag(&self) -> Option<&'static str> {
        let source_flag = |side: &Side| match side {
            Side::Old => "--from-source",
            Side::New => "--to-source",
        };
        Some(match self {
            MigrationError::Exclude(_) => "--exclude",
            MigrationError::NoContent { .. }
            | MigrationError::ContentColumns { .. }
            | MigrationError::SourceContent { .. } => "--content",
            MigrationError::RereadCodec { .. } => "--reread",
            MigrationError::RereadSource { side, .. } | MigrationError::RereadOpen { side, .. } => {
                source_flag(side)
            }
            MigrationError::Diff(_) => return None,
        })
    }

    /// What to do next, when something helps.
    #[must_use]
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            MigrationError::Exclude(ExcludeError::Line { .. }) => {
                "one ID per line, exactly as the runs write it (blank lines and # lines skipped)".into()
            }
            MigrationError::NoContent { .. } => "name the same `content` columns in both source configs and scan again (docs/guide-migration.md)".into(),
            MigrationError::ContentColumns { .. } => "name the same columns in the same order in both source configs and scan again".into(),
            MigrationError::SourceContent { .. } => "name the same `content` columns, in the same order, in both source configs (docs/guide-migration.md)".into(),
            MigrationError::RereadCodec { .. } => "diff --content without --reread still names the differing buckets".into(),
            MigrationError::RereadSource { .. } => format!(
                "give {} postgres:CONFIG.json or mysql:CONFIG.json",
                self.flag().unwrap_or("--from-source")
            ),
            MigrationError::Diff(e) => return e.hint().map(str::to_owned),
            _ => return None,
        })
    }
}

impl From<ReadError> for MigrationError {
    fn from(e: ReadError) -> MigrationError {
        MigrationError::Diff(DiffError::Read(e))
    }
}

fn codec_word(k: IdCodecKind) -> &'static str {
    k.name()
}

/// What a migration verdict is asked.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct MigrationRequest {
    /// The `--exclude` file: IDs deliberately not migrated.
    pub exclude: Option<std::path::PathBuf>,
    /// Compare the runs' content digests.
    pub content: bool,
    /// Re-read the partitions whose content differs (implies `content`).
    pub reread: Option<RereadSources>,
    /// Every changed ID and unmatched exclusion, not the first `IDS_SHOWN_MAX`.
    pub all: bool,
    /// Whether the first store must be named in suggested commands (not the default path).
    pub store_named: bool,
    /// What the one-pass comparison of the two sides' scans found (the one-command form).
    pub stream: Option<crate::collect::StreamedKeys>,
}

impl MigrationRequest {
    /// A request comparing IDs only.
    #[must_use]
    pub fn new() -> MigrationRequest {
        MigrationRequest::default()
    }
}

/// The migration verdict (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct MigrationReport {
    /// `verified`, `unknown` or `failed`.
    pub verdict: Status,
    /// The source collection's run.
    pub from: RunSide,
    /// The target collection's run.
    pub to: RunSide,
    /// IDs of `from` missing from `to`, less the declared exclusions.
    pub missing_count: u64,
    /// IDs only in `to`, less the declared exclusions.
    pub extra_count: u64,
    /// Records both hold whose content differs: null when not known (no content compared, or
    /// digests that differ without a re-read).
    pub changed_count: Option<u64>,
    /// The first ranges missing, in `from`'s original form.
    pub missing_ranges: Vec<String>,
    /// Ranges missing in all.
    pub missing_ranges_total: u64,
    /// The first ranges extra, in `to`'s original form.
    pub extra_ranges: Vec<String>,
    /// Ranges extra in all.
    pub extra_ranges_total: u64,
    /// The first changed IDs (a re-read's), in `to`'s original form.
    pub changed_ids: Vec<serde_json::Value>,
    /// Of `changed_ids`, in order, those whose differing content columns are known, with them.
    pub changed_columns: Vec<ChangedColumns>,
    /// Partitions whose content digests differ with the same IDs (a record there changed).
    pub changed_partitions: Vec<u64>,
    /// Whether content was compared.
    pub content_checked: bool,
    /// The content comparison; null without `content`.
    pub content: Option<ContentReport>,
    /// Distinct IDs declared in the `--exclude` file.
    pub excluded_count: u64,
    /// The first declared IDs that are no difference.
    pub exclusions_unmatched: Vec<String>,
    /// Declared IDs that are no difference, in all.
    pub exclusions_unmatched_count: u64,
    /// The one-pass comparison of the one-command form; null in the two-run form.
    pub stream: Option<StreamReport>,
    /// Why the verdict is not `verified`, one sentence each.
    pub reasons: Vec<String>,
    /// The commands to run next.
    pub next: Vec<String>,
    /// How sentences name the runs (with their store across two files).
    #[serde(skip)]
    pub names: (RunName, RunName),
}

/// The lists of a verdict, to be walked again for every range (`--all` on a terminal).
pub struct MigrationLists<'a, 's> {
    cmp: Compared<'a, 's>,
    exclude: (IdSet, IdSet),
}

impl MigrationLists<'_, '_> {
    /// Hands on every missing (`Which::Removed`) or extra (`Which::Added`) range, less the
    /// declared exclusions, rendered, ascending.
    ///
    /// # Errors
    /// `EmitError`.
    pub fn each_range(
        &self,
        which: Which,
        emit: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<(), EmitError> {
        let less = match which {
            Which::Removed => &self.exclude.0,
            _ => &self.exclude.1,
        };
        self.cmp.each_range(which, Some(less), emit)
    }
}

/// A run is complete evidence: a finished, verified inventory (mode `all`).
fn is_inventory(h: &RunHeader) -> bool {
    h.state == RunState::Finished
        && h.coverage_status == Status::Verified
        && h.contract.mode == Mode::All
}

/// Items per page of a migration side's default contract: large pages, since a database
/// scan is bound by its round trips (each page one query), and small enough that a page's
/// rows stay a few MB.
pub const SIDE_PAGE_SIZE: u32 = 5_000;

/// Pages a durable checkpoint of a migration side scanned under [`side_contract`] (unless the
/// command line says otherwise): 16 pages, 80,000 rows. That contract restarts a killed side
/// from its first key, so an fsync a page would buy no work a restart keeps; the cadence
/// bounds what waits in memory for its commit. Measured at 1 M rows of six columns: 0.90x the
/// wall time of a checkpoint a page, the same CPU, 10-15 MB more peak memory.
pub const SIDE_CHECKPOINT_EVERY: u32 = 16;

/// Pages a durable checkpoint of a migration side: `asked` when the caller gave a cadence;
/// else one a page under a contract of the caller's own (`own_contract`: it may continue a
/// killed scan after its last key, where every committed page counts), else
/// [`SIDE_CHECKPOINT_EVERY`] under [`side_contract`].
#[must_use]
pub fn side_checkpoint_every(asked: Option<u32>, own_contract: bool) -> u32 {
    asked.unwrap_or(if own_contract {
        1
    } else {
        SIDE_CHECKPOINT_EVERY
    })
}

/// The contract a side of `migration verify` given as a source (`mysql:orders.json`) is
/// scanned under when no contract is given: its scope named after the source's kind and file
/// name (`mysql:orders.json`, whatever the directory, so a repeated command finds its run),
/// [`SIDE_PAGE_SIZE`] items a page, and `restart` on an expired cursor (a database's snapshot
/// dies with the process that held it: a continued scan begins a fresh snapshot, linked to
/// the killed run, never spliced with it). Every face scans a side under this one contract.
/// An inline SQL spec (`postgres://...?table=orders&key=id`) is named after its kind and table
/// (`postgres:orders`).
///
/// # Errors
/// `ContractError` when the name it makes is not a valid source name.
pub fn side_contract(spec: &str) -> Result<Contract, ContractError> {
    let source = crate::source::inline_scope_name(spec).unwrap_or_else(|| {
        let (kind, rest) = spec.split_once(':').unwrap_or(("source", spec));
        let name = std::path::Path::new(rest)
            .file_name()
            .map_or_else(|| rest.to_owned(), |n| n.to_string_lossy().into_owned());
        format!("{kind}:{name}")
    });
    // Through the contract file's own reader: the defaults and checks of every contract.
    let text = serde_json::json!({
        "source": source,
        "page_size": SIDE_PAGE_SIZE,
        "on_expired_cursor": "restart",
    })
    .to_string();
    Contract::from_json(&text)
}

/// The verdict over the migration from `from`'s run to `to`'s (two store files when
/// `two_files`). Blocking when it re-reads (`request.reread`).
///
/// # Errors
/// `MigrationError`: runs of other codecs, an unusable `--exclude` file, content columns that
/// cannot be compared, a re-read that cannot start, the store.
pub fn verify_migration<'a, 's>(
    from: RunAt<'a, 's>,
    to: RunAt<'a, 's>,
    two_files: bool,
    request: &MigrationRequest,
) -> Result<(MigrationReport, MigrationLists<'a, 's>), MigrationError> {
    let cmp = compare(from, to, two_files, true)?;
    let names = run_names(
        cmp.old.run_id,
        from.store,
        cmp.new.run_id,
        two_files.then_some(to.store),
    );
    let stores = hints::Stores::new(
        from.store,
        request.store_named,
        two_files.then_some(to.store),
    );
    let mut v = verdict::Verdict::new(names, stores);
    v.inventories(&cmp.old, &cmp.new);
    let ex = match &request.exclude {
        Some(p) => Some(exclusions::read_exclusions(
            p, from, &cmp.old, to, &cmp.new,
        )?),
        None => None,
    };
    let ids = v.ids(&cmp, ex.as_ref(), request.all)?;
    let inventories = is_inventory(&cmp.old) && is_inventory(&cmp.new);
    // A stream that is not whole cannot name the changed rows: the partitions whose digests
    // differ are re-read instead (only between two inventories of int IDs, as --reread would).
    let fallback = request.content
        && request.reread.is_none()
        && inventories
        && streamed::streamable(&cmp)
        && cmp.old.source_spec.is_some()
        && cmp.new.source_spec.is_some()
        && request
            .stream
            .as_ref()
            .is_some_and(|s| s.incomplete.is_some());
    let reread = if fallback {
        Some(RereadSources::default())
    } else {
        request.reread.clone()
    };
    let found = if request.content || reread.is_some() {
        Some(compare_content(&cmp, cmp.partitions(), reread.as_ref())?)
    } else {
        None
    };
    let judged = request.stream.as_ref().map(|s| {
        let cd = found.as_ref().map(|f| &f.cd);
        streamed::judge(s, &cmp, ids.all, cd, fallback)
    });
    if let Some(why) = judged.as_ref().and_then(|j| j.disagrees.as_deref()) {
        v.stream_disagrees(why);
    }
    let content = match found {
        Some(found) => {
            let less = ex.as_ref().map(|e| e.old.clone()).unwrap_or_default();
            let usable = judged.as_ref().and_then(|j| j.usable);
            Some(v.content(&cmp, found, &less, request.all, usable)?)
        }
        None => None,
    };
    let exclude = ex.map(|e| (e.old, e.new)).unwrap_or_default();
    let stream = judged.map(|j| j.report);
    let report = v.finish(&cmp, ids, content, stream, inventories)?;
    Ok((report, MigrationLists { cmp, exclude }))
}

/// The content comparison of `diff --content [--reread]`: both runs must carry content digests.
///
/// # Errors
/// `NoContent` for a run without content digests; `ContentColumns`; the re-read's and the
/// store's errors.
pub fn diff_content(
    cmp: &Compared<'_, '_>,
    reread: Option<&RereadSources>,
    all: bool,
) -> Result<ContentReport, MigrationError> {
    let found = compare_content(cmp, cmp.partitions(), reread)?;
    for (h, has) in [
        (&cmp.old, found.cd.old_has_content),
        (&cmp.new, found.cd.new_has_content),
    ] {
        if !has {
            return Err(MigrationError::NoContent { run: h.run_id });
        }
    }
    Ok(found.report(cmp, &IdSet::new(), all)?)
}

/// The ID half of a verdict, counted.
pub(crate) struct IdFindings {
    pub missing: Tally,
    pub extra: Tally,
    /// Missing and extra IDs before the declared exclusions are taken out.
    pub all: (u64, u64),
    pub excluded_count: u64,
    pub unmatched: Vec<String>,
    pub unmatched_count: u64,
}

/// A mode as a reason names it.
fn mode_word(m: &Mode) -> String {
    match m {
        Mode::All => "all".into(),
        Mode::Sample(n) => format!("sample {n}"),
        Mode::Count => "count".into(),
    }
}
