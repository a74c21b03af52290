//! Comparisons across collections: the store pair behind `--other-store`, the cross-scope ID
//! diff of `diff --across` and `missing --across`, the content comparison and targeted re-read of
//! `diff --content [--reread]`, and `migration verify`, the one verdict over a migration's two
//! scans (docs/guide-migration.md).
//!
//! The other store is opened read-only through the ordinary reader path; nothing here writes a
//! store. A verdict is `verified` only on complete evidence: both runs verified inventories, the
//! ID sets equal but for exactly the declared exclusions, and with `--content` every partition's
//! content digest equal (or, after a re-read that reproduced both runs' stored digests, no record
//! changed). Anything short of that is `unknown`, and a definite difference is `failed`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scanledger::{
    ContentDiff, IdCodecKind, IdSet, Mode, Renderer, RunDiff, RunHeader, RunId, RunState, Snapshot,
    Status, Store, PARTITION_BITS,
};

use super::output::count;
use super::{open_read, CliError, Out, RunArg};

/// IDs listed by name (changed IDs, unmatched exclusions) unless `--all` lifts the cap.
pub(crate) const IDS_SHOWN_MAX: usize = 100;
/// Bytes of an `--exclude` file.
const EXCLUDE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// IDs of an `--exclude` file.
const EXCLUDED_IDS_MAX: usize = 1_000_000;

/// Where the other run lives and whether another collection may be compared.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct CrossOpts {
    /// Compare runs of different collections (another source or tenant: a migration's source
    /// and target); the ID codecs must agree. String IDs are compared by their original bytes.
    #[arg(long)]
    pub across: bool,
    /// Read the second run (NEW, --against or --to) from this store file, read-only.
    #[arg(long, value_name = "FILE")]
    pub other_store: Option<PathBuf>,
}

/// What `--content` and `--reread` need.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ContentOpts {
    /// Also compare the runs' per-partition content digests (both sources must have named
    /// `content` columns or pointers).
    #[arg(long)]
    pub content: bool,
    /// Re-read from both SQL sources only the key ranges of the partitions whose content
    /// digests differ, and list the changed IDs (int IDs; implies --content).
    #[arg(long)]
    pub reread: bool,
    /// The source to re-read the old (or --from) run from [default: the source recorded with
    /// the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub from_source: Option<String>,
    /// The source to re-read the new (or --to) run from [default: the source recorded with
    /// the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub to_source: Option<String>,
}

/// The main store and, with `--other-store`, the second one (`None` when it is the same file).
pub(crate) struct Stores {
    pub main: Store,
    pub other: Option<Store>,
}

impl Stores {
    /// Opens `--store` and the other store, both read-only.
    pub(crate) fn open(out: &Out, other: Option<&Path>) -> Result<Stores, CliError> {
        let main = open_read(out)?;
        let other = match other {
            Some(p) if !same_file(&out.store, p) => Some(
                match out.wait {
                    Some(w) => Store::open_read_waiting(p, w),
                    None => Store::open_read(p),
                }
                .map_err(|e| {
                    CliError::from(e).with_field("--other-store").with_hint(
                        "--other-store names the store file the second run was scanned into",
                    )
                })?,
            ),
            _ => None,
        };
        Ok(Stores { main, other })
    }

    /// The path of the store the second run is read from.
    pub(crate) fn other_path<'a>(&'a self, out: &'a Out) -> &'a Path {
        self.other.as_ref().map_or(out.store.as_path(), Store::path)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// The ID diff of two runs: the ordinary one within one store and one scope; across scopes
/// only with `--across` (else the existing refusal, with a hint naming it); across two files by
/// the cross-store comparison (string IDs by their bytes).
pub(crate) fn id_diff(
    old_snap: &Snapshot<'_>,
    old: RunId,
    new_snap: &Snapshot<'_>,
    new: RunId,
    across: bool,
    two_files: bool,
) -> Result<RunDiff, CliError> {
    if !across {
        let (a, b) = (old_snap.header(old)?, new_snap.header(new)?);
        if let Err(e) = scanledger::diff::comparable(
            &scanledger::comparable_of(&a),
            &scanledger::comparable_of(&b),
        ) {
            let other_scope = matches!(e, scanledger::NotComparable::OtherScope { .. });
            let err = CliError::from(scanledger::DiffError::NotComparable(e));
            return Err(if other_scope {
                err.with_hint(
                    "to compare two collections (a migration's source and target), add --across",
                )
            } else {
                err
            });
        }
    }
    if across || two_files {
        Ok(scanledger::diff_across(old_snap, old, new_snap, new)?)
    } else {
        Ok(scanledger::diff_runs(old_snap, old, new)?)
    }
}

/// `source / tenant` of a run, escaped for a terminal.
pub(crate) fn scope_words(h: &RunHeader) -> String {
    format!(
        "{} / {}",
        scanledger::terminal_safe(&h.contract.scope.source),
        scanledger::terminal_safe(h.contract.scope.tenant.as_deref().unwrap_or("-"))
    )
}

/// A run's identity in JSON: run, store, scope, snapshot, status and roots.
pub(crate) fn side_json(
    snap: &Snapshot<'_>,
    h: &RunHeader,
    store: &Path,
) -> Result<serde_json::Value, CliError> {
    let receipt = snap.receipt(h.run_id)?;
    Ok(serde_json::json!({
        "run_id": h.run_id.to_string(),
        "store": store.display().to_string(),
        "source": h.contract.scope.source,
        "tenant": h.contract.scope.tenant,
        "snapshot_id": h.snapshot_id,
        "state": h.state.as_str(),
        "coverage_status": h.coverage_status,
        "conclusion_scope": receipt.conclusion_scope,
        "unique_ids_observed": h.unique_ids_observed,
        "query_digest": receipt.query_digest,
        "cursor_chain_digest": receipt.cursor_chain_digest,
        "merkle_root": receipt.merkle_root,
        "content_root": receipt.content_root,
    }))
}

/// What a re-read of the partitions whose content differs found.
#[derive(Debug, Default)]
pub(crate) struct RereadOutcome {
    /// The partitions re-read.
    pub partitions: Vec<u64>,
    /// IDs both runs hold whose records differ, in partitions both re-reads reproduced.
    pub changed: IdSet,
    /// (side, partition) whose re-read did not reproduce the run's stored IDs and content
    /// digest: the source changed since the scan, so its changes are not listed.
    pub unreproduced: Vec<(&'static str, u64)>,
    /// A side whose re-read did not verify, with why.
    pub failed: Vec<(&'static str, String)>,
}

impl RereadOutcome {
    /// Whether the re-read is complete evidence for its partitions.
    pub(crate) fn is_exact(&self) -> bool {
        self.unreproduced.is_empty() && self.failed.is_empty()
    }

    pub(crate) fn json(&self, new: &Renderer, all: bool) -> serde_json::Value {
        let ids: Vec<serde_json::Value> = self
            .changed
            .iter()
            .take(if all { usize::MAX } else { IDS_SHOWN_MAX })
            .map(|id| new.json(id))
            .collect();
        serde_json::json!({
            "partitions": self.partitions,
            "changed_count": self.changed.len(),
            "changed_ids": ids,
            "unreproduced": self.unreproduced.iter().map(|(side, p)| serde_json::json!({"run": side, "partition": p})).collect::<Vec<_>>(),
            "failed": self.failed.iter().map(|(side, why)| serde_json::json!({"run": side, "why": why})).collect::<Vec<_>>(),
            "exact": self.is_exact(),
        })
    }
}

/// The content comparison of two runs; an error when a run has no content digests is left to
/// the caller (`has_content`).
pub(crate) fn content_of(
    old_snap: &Snapshot<'_>,
    old: RunId,
    new_snap: &Snapshot<'_>,
    new: RunId,
) -> Result<ContentDiff, CliError> {
    Ok(scanledger::content_diff(old_snap, old, new_snap, new)?)
}

/// Inclusive key ranges covering `partitions` (ascending), adjacent ones merged.
fn key_ranges(partitions: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in partitions {
        // A partition index is at most u64::MAX >> PARTITION_BITS (the store checks it).
        let lo = p << PARTITION_BITS;
        let hi = lo | ((1u64 << PARTITION_BITS) - 1);
        match out.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(lo) => last.1 = hi,
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Re-reads `partitions` from both runs' SQL sources (or the given specs) and names the IDs
/// whose records differ. Each side's re-read must reproduce, partition by partition, the IDs
/// and content digest its run stored; a partition that does not is reported, not compared.
pub(crate) fn reread(
    rd: &RunDiff,
    old_snap: &Snapshot<'_>,
    new_snap: &Snapshot<'_>,
    partitions: &[u64],
    opts: &ContentOpts,
) -> Result<RereadOutcome, CliError> {
    for h in [&rd.old, &rd.new] {
        if h.contract.id_codec != IdCodecKind::Int {
            return Err(CliError::usage(format!(
                "--reread needs int IDs, and {} has {} IDs: their content leaves are buckets of digests, not key ranges",
                h.run_id,
                codec_word(h.contract.id_codec)
            ))
            .with_field("--reread")
            .with_hint("diff --content without --reread still names the differing buckets"));
        }
    }
    let mut outcome = RereadOutcome {
        partitions: partitions.to_vec(),
        ..RereadOutcome::default()
    };
    if partitions.is_empty() {
        return Ok(outcome);
    }
    let ranges = key_ranges(partitions);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the async runtime: {e}")))?;
    let mut contents: Vec<BTreeMap<u64, Option<scanledger::digest::Hash>>> = Vec::new();
    let sides = [
        (
            "old",
            &rd.old,
            old_snap,
            opts.from_source.as_deref(),
            "--from-source",
        ),
        (
            "new",
            &rd.new,
            new_snap,
            opts.to_source.as_deref(),
            "--to-source",
        ),
    ];
    for (side, h, snap, given, flag) in sides {
        let spec = given.or(h.source_spec.as_deref()).ok_or_else(|| {
            CliError::usage(format!("{} has no recorded source to re-read", h.run_id))
                .with_field(flag)
                .with_hint(format!(
                    "give {flag} postgres:CONFIG.json or mysql:CONFIG.json"
                ))
        })?;
        let mut source = scanledger::AnySource::open_key_ranges(spec, &ranges)
            .map_err(|e| CliError::from(scanledger::Error::Source(e)).with_field(flag))?;
        let mut contract = h.contract.clone();
        contract.snapshot_id = None;
        contract.expected_count = None;
        contract.expected_partitions = None;
        contract.mode = Mode::All;
        let read = rt.block_on(scanledger::reread_contents(&contract, &mut source));
        rt.block_on(source.close());
        let got = match read {
            Ok(r) => r.contents,
            Err(e) => {
                outcome.failed.push((side, e.to_string()));
                BTreeMap::new()
            }
        };
        let stored_acc = snap.content(h.run_id)?;
        let stored_ids = snap.partitions_of(h.run_id, partitions)?;
        let rebuilt = scanledger::int_accumulators(&got);
        let read_ids: IdSet = got.keys().copied().collect();
        if outcome.failed.iter().all(|(s, _)| *s != side) {
            for (p, stored) in &stored_ids {
                let ids_match = read_ids.partition(*p) == stored.as_ref();
                let acc_match = rebuilt.as_ref().and_then(|r| r.get(p)) == stored_acc.get(p);
                if !(ids_match && acc_match) {
                    outcome.unreproduced.push((side, *p));
                }
            }
        }
        contents.push(got);
    }
    if let [old, new] = contents.as_slice() {
        let bad: Vec<u64> = outcome.unreproduced.iter().map(|(_, p)| *p).collect();
        let changed = scanledger::changed_ids(old, new);
        // Only the partitions asked for, and only those both re-reads reproduced: rows of
        // other partitions (read between merged ranges) were never checked against a scan.
        outcome.changed = changed
            .iter()
            .filter(|id| {
                let p = scanledger::partition_of(*id);
                partitions.binary_search(&p).is_ok() && !bad.contains(&p)
            })
            .collect();
    }
    Ok(outcome)
}

fn codec_word(k: IdCodecKind) -> &'static str {
    match k {
        IdCodecKind::Int => "int",
        IdCodecKind::Prefixed => "prefixed",
        IdCodecKind::String => "string",
    }
}

/// A run is complete evidence: a finished, verified inventory (mode `all`).
fn is_inventory(h: &RunHeader) -> bool {
    h.state == RunState::Finished
        && h.coverage_status == Status::Verified
        && h.contract.mode == Mode::All
}

/// The declared exclusions: every line an ID in its original form (blank lines and lines
/// starting with `#` skipped), as each run's codec reads it.
struct Exclusions {
    /// (text, ID in the old run's space, ID in the new run's space).
    entries: Vec<(String, Option<u64>, Option<u64>)>,
    old: IdSet,
    new: IdSet,
}

fn read_exclusions(
    path: &Path,
    old_snap: &Snapshot<'_>,
    old: &RunHeader,
    new_snap: &Snapshot<'_>,
    new: &RunHeader,
) -> Result<Exclusions, CliError> {
    let text = scanledger::read_bounded(path, EXCLUDE_BYTES_MAX)
        .map_err(|e| CliError::file(e, "read").with_field("--exclude"))?;
    let mut ex = Exclusions {
        entries: Vec::new(),
        old: IdSet::new(),
        new: IdSet::new(),
    };
    for (idx, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if ex.entries.len() >= EXCLUDED_IDS_MAX {
            return Err(CliError::usage(format!(
                "{}: more than {EXCLUDED_IDS_MAX} excluded IDs",
                path.display()
            ))
            .with_field("--exclude"));
        }
        let bad = |why: &str| {
            let mut e = CliError::usage(format!(
                "{:?} {why}",
                t.chars().take(64).collect::<String>()
            ))
            .with_field("--exclude");
            e.file = Some(path.to_owned());
            e.line = Some(idx + 1);
            e
        };
        let id_in = |snap: &Snapshot<'_>, h: &RunHeader| -> Result<Option<u64>, CliError> {
            Ok(match h.contract.id_codec {
                IdCodecKind::Int => Some(
                    t.parse::<u64>()
                        .map_err(|_| bad("is not an integer ID from 0 to 2^64-1"))?,
                ),
                IdCodecKind::Prefixed => {
                    let digits = match &h.id_prefix {
                        Some(p) => t.strip_prefix(p.as_str()),
                        None => Some(t),
                    };
                    Some(
                        digits
                            .and_then(|d| d.parse::<u64>().ok())
                            .ok_or_else(|| bad("is not an ID of the runs' prefix"))?,
                    )
                }
                IdCodecKind::String => {
                    snap.interned_id(&scanledger::ScopeKey::of(&h.contract), t)?
                }
            })
        };
        let a = id_in(old_snap, old)?;
        let b = id_in(new_snap, new)?;
        if let Some(a) = a {
            ex.old.insert(a);
        }
        if let Some(b) = b {
            ex.new.insert(b);
        }
        ex.entries.push((t.to_owned(), a, b));
    }
    Ok(ex)
}

/// The arguments of `migration verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The scan of the source collection (run-N, N or latest).
    #[arg(long, value_name = "RUN")]
    pub from: RunArg,
    /// The scan of the target collection (run-N, N or latest; in --other-store if given).
    #[arg(long, value_name = "RUN")]
    pub to: RunArg,
    /// IDs deliberately not migrated (or present only in the target), one per line in their
    /// original form; the differences must be exactly these.
    #[arg(long, value_name = "FILE")]
    pub exclude: Option<PathBuf>,
    /// Every ID and range, not the first ones.
    #[arg(long)]
    pub all: bool,
    /// The second run's store.
    #[arg(long, value_name = "FILE")]
    pub other_store: Option<PathBuf>,
    #[command(flatten)]
    pub content: ContentOpts,
}

/// `migration verify --from RUN --to RUN [--content [--reread]] [--exclude FILE]`.
pub(crate) fn verify(out: &Out, args: &VerifyArgs) -> Result<i32, CliError> {
    let stores = Stores::open(out, args.other_store.as_deref())?;
    let from_snap = stores.main.read()?;
    let other_snap = match &stores.other {
        Some(s) => Some(s.read()?),
        None => None,
    };
    let to_snap = other_snap.as_ref().unwrap_or(&from_snap);
    let from = args.from.resolve(&from_snap)?;
    let to = args.to.resolve(to_snap)?;
    let rd = id_diff(&from_snap, from, to_snap, to, true, stores.other.is_some())?;
    let want_content = args.content.content || args.content.reread;

    let mut reasons: Vec<String> = Vec::new();
    let mut next: Vec<String> = Vec::new();
    let mut unknown = false;
    let mut failed = false;
    let store_args = store_args(out, &stores);

    for (h, role) in [(&rd.old, "--from"), (&rd.new, "--to")] {
        if !is_inventory(h) {
            unknown = true;
            reasons.push(format!(
                "{role} {} is not a verified inventory (state {}, status {}, mode {})",
                h.run_id,
                h.state.as_str(),
                h.coverage_status.as_str(),
                mode_word(&h.contract.mode)
            ));
            if matches!(h.state, RunState::Interrupted | RunState::Finished)
                && h.coverage_status == Status::Unknown
            {
                next.push(format!("scanledger{store_args} resume {}", h.run_id));
            } else {
                next.push(format!(
                    "scan {} again and verify the new run",
                    scope_words(h)
                ));
            }
        }
    }

    let ex = match &args.exclude {
        Some(p) => Some(read_exclusions(p, &from_snap, &rd.old, to_snap, &rd.new)?),
        None => None,
    };
    let (ex_old, ex_new) = match &ex {
        Some(e) => (e.old.clone(), e.new.clone()),
        None => (IdSet::new(), IdSet::new()),
    };
    let missing = rd.diff.removed.difference(&ex_old);
    let extra = rd.diff.added.difference(&ex_new);
    let unmatched: Vec<&str> = ex
        .as_ref()
        .map(|e| {
            e.entries
                .iter()
                .filter(|(_, a, b)| {
                    !(a.is_some_and(|a| rd.diff.removed.contains(a))
                        || b.is_some_and(|b| rd.diff.added.contains(b)))
                })
                .map(|(t, _, _)| t.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !missing.is_empty() {
        failed = true;
        reasons.push(format!(
            "{} of {} {} missing from {}",
            count(missing.len(), "ID", "IDs"),
            rd.old.run_id,
            if missing.len() == 1 { "is" } else { "are" },
            rd.new.run_id
        ));
    }
    if !extra.is_empty() {
        failed = true;
        reasons.push(format!(
            "{} {} only in {} (extra)",
            count(extra.len(), "ID", "IDs"),
            if extra.len() == 1 { "is" } else { "are" },
            rd.new.run_id
        ));
    }
    if !unmatched.is_empty() {
        failed = true;
        reasons.push(format!(
            "{} declared in --exclude {} not a difference",
            count(unmatched.len() as u64, "ID", "IDs"),
            if unmatched.len() == 1 { "is" } else { "are" }
        ));
    }
    if !missing.is_empty() || !extra.is_empty() {
        // `missing` reads its run from --store and the reference from --other-store: with two
        // files the target's store comes first.
        let cmd = match &stores.other {
            Some(other) => format!(
                "scanledger --store {} missing {} --against {} --across --other-store {} --all",
                shell_word(&other.path().display().to_string()),
                rd.new.run_id,
                rd.old.run_id,
                shell_word(&out.store.display().to_string())
            ),
            None => format!(
                "scanledger{store_args} missing {} --against {} --across --all",
                rd.new.run_id, rd.old.run_id
            ),
        };
        next.push(cmd);
    }

    let mut content_json = serde_json::Value::Null;
    let mut changed_count: Option<u64> = None;
    let mut changed_ids: Vec<serde_json::Value> = Vec::new();
    let mut changed_partitions: Vec<u64> = Vec::new();
    let renderer = |ids: &IdSet| -> Result<Renderer, CliError> {
        Ok(Renderer::for_ids(
            to_snap,
            &rd.new,
            ids.iter()
                .take(if args.all { usize::MAX } else { IDS_SHOWN_MAX }),
        )?)
    };
    if want_content {
        let cd = content_of(&from_snap, from, to_snap, to)?;
        let mut reread_json = serde_json::Value::Null;
        if !(cd.old_has_content && cd.new_has_content) {
            unknown = true;
            for (h, has) in [(&rd.old, cd.old_has_content), (&rd.new, cd.new_has_content)] {
                if !has {
                    reasons.push(format!(
                        "{} has no content digests: its source config names no content columns",
                        h.run_id
                    ));
                }
            }
            next.push(
                "name the same `content` columns in both source configs and scan again".into(),
            );
        } else if !cd.leaves_differing.is_empty() {
            let ints = rd.old.contract.id_codec == IdCodecKind::Int;
            // Partitions whose ID sets differ (declared exclusions) cannot say by their digest
            // alone whether a record there changed; the others can: a record did.
            let id_parts = &rd.diff.partitions_differing;
            let (with_ids, pure): (Vec<u64>, Vec<u64>) = if ints {
                cd.leaves_differing
                    .iter()
                    .partition(|p| id_parts.binary_search(p).is_ok())
            } else if rd.diff.is_empty() {
                (Vec::new(), cd.leaves_differing.clone())
            } else {
                (cd.leaves_differing.clone(), Vec::new())
            };
            changed_partitions = pure.clone();
            if args.content.reread {
                let r = reread(
                    &rd,
                    &from_snap,
                    to_snap,
                    &cd.leaves_differing,
                    &args.content,
                )?;
                if !r.is_exact() {
                    unknown = true;
                    for (side, p) in &r.unreproduced {
                        let run = if *side == "old" {
                            rd.old.run_id
                        } else {
                            rd.new.run_id
                        };
                        reasons.push(format!(
                            "partition #{p} of {run} re-read differently from its scan: the source changed since"
                        ));
                    }
                    for (side, why) in &r.failed {
                        let run = if *side == "old" {
                            rd.old.run_id
                        } else {
                            rd.new.run_id
                        };
                        reasons.push(format!(
                            "the re-read of {run}'s source did not verify: {why}"
                        ));
                    }
                    next.push("scan both collections again and verify the new runs".into());
                }
                let changed = r.changed.difference(&ex_old);
                if !changed.is_empty() {
                    failed = true;
                    reasons.push(format!(
                        "{} changed between {} and {}",
                        count(changed.len(), "record", "records"),
                        rd.old.run_id,
                        rd.new.run_id
                    ));
                }
                if r.is_exact() {
                    changed_count = Some(changed.len());
                }
                let rn = renderer(&changed)?;
                changed_ids = changed
                    .iter()
                    .take(if args.all { usize::MAX } else { IDS_SHOWN_MAX })
                    .map(|id| rn.json(id))
                    .collect();
                reread_json = r.json(&rn, args.all);
            } else {
                if !pure.is_empty() {
                    failed = true;
                    reasons.push(format!(
                        "the content digests of {} differ with the same IDs: a record there changed",
                        count(pure.len() as u64, "partition", "partitions")
                    ));
                }
                if !with_ids.is_empty() && !failed {
                    unknown = true;
                    reasons.push(format!(
                        "the content of {} with excluded IDs cannot be checked by digest",
                        count(with_ids.len() as u64, "partition", "partitions")
                    ));
                }
                if ints {
                    next.push(format!(
                        "scanledger{store_args} migration verify --from {} --to {}{} --content --reread (lists the changed IDs)",
                        rd.old.run_id,
                        rd.new.run_id,
                        match &args.other_store {
                            Some(p) => format!(" --other-store {}", shell_word(&p.display().to_string())),
                            None => String::new(),
                        }
                    ));
                }
            }
        } else {
            changed_count = Some(0);
        }
        content_json = serde_json::json!({
            "leaves_compared": cd.leaves_compared,
            "partitions_differing": cd.leaves_differing,
            "reread": reread_json,
        });
    }

    // A difference is a defect of the migration only between two complete inventories: a
    // run that stopped early may simply not have reached what it lacks.
    let inventories = is_inventory(&rd.old) && is_inventory(&rd.new);
    let verdict = if failed && inventories {
        Status::Failed
    } else if unknown {
        Status::Unknown
    } else {
        Status::Verified
    };
    let shown = |n: usize| {
        if args.all {
            n
        } else {
            n.min(scanledger::RANGES_SHOWN_MAX)
        }
    };
    let missing_ranges: Vec<(u64, u64)> = missing.ranges().collect();
    let extra_ranges: Vec<(u64, u64)> = extra.ranges().collect();
    let missing_shown = render(
        &from_snap,
        &rd.old,
        &missing_ranges[..shown(missing_ranges.len())],
    )?;
    let extra_shown = render(to_snap, &rd.new, &extra_ranges[..shown(extra_ranges.len())])?;
    let unmatched_shown: Vec<&str> = unmatched
        .iter()
        .take(if args.all { usize::MAX } else { IDS_SHOWN_MAX })
        .copied()
        .collect();

    if out.json {
        let v = serde_json::json!({
            "verdict": verdict,
            "from": side_json(&from_snap, &rd.old, &out.store)?,
            "to": side_json(to_snap, &rd.new, stores.other_path(out))?,
            "missing_count": missing.len(),
            "extra_count": extra.len(),
            "changed_count": changed_count,
            "missing_ranges": missing_shown,
            "missing_ranges_total": missing_ranges.len(),
            "extra_ranges": extra_shown,
            "extra_ranges_total": extra_ranges.len(),
            "changed_ids": changed_ids,
            "changed_partitions": changed_partitions,
            "content_checked": want_content,
            "content": content_json,
            "excluded_count": ex.as_ref().map_or(0, |e| e.entries.len()),
            "exclusions_unmatched": unmatched_shown,
            "exclusions_unmatched_count": unmatched.len(),
            "reasons": reasons,
            "next": next,
        });
        out.json_value(&v)?;
        return Ok(super::status_exit(verdict));
    }
    let mut text = format!(
        "migration {}: {} ({}, snapshot {}) -> {} ({}, snapshot {})",
        verdict.as_str(),
        rd.old.run_id,
        scope_words(&rd.old),
        snapshot_words(&rd.old),
        rd.new.run_id,
        scope_words(&rd.new),
        snapshot_words(&rd.new),
    );
    if verdict == Status::Verified {
        text.push_str(&format!(
            "\n  every one of {} of {} is in {}{}{}",
            count(rd.old.unique_ids_observed, "ID", "IDs"),
            rd.old.run_id,
            rd.new.run_id,
            match &ex {
                Some(e) if !e.entries.is_empty() => {
                    format!(
                        " but the {} declared excluded",
                        count(e.entries.len() as u64, "ID", "IDs")
                    )
                }
                _ => String::new(),
            },
            if want_content {
                ", with the same content"
            } else {
                ""
            }
        ));
    }
    for r in &reasons {
        text.push_str(&format!("\n  {}", scanledger::terminal_safe(r)));
    }
    for (name, list, total) in [
        ("missing", &missing_shown, missing_ranges.len()),
        ("extra", &extra_shown, extra_ranges.len()),
    ] {
        if !list.is_empty() {
            text.push_str(&format!(
                "\n  {name:<8} {}{}",
                super::lists::line_of(list),
                super::lists::more(list.len(), total)
            ));
        }
    }
    if !changed_ids.is_empty() {
        let words: Vec<String> = changed_ids
            .iter()
            .map(|v| match v {
                serde_json::Value::String(s) => scanledger::terminal_safe(s).into_owned(),
                other => other.to_string(),
            })
            .collect();
        let total = changed_count.unwrap_or(words.len() as u64) as usize;
        text.push_str(&format!(
            "\n  changed  {}{}",
            words.join(", "),
            super::lists::more(words.len(), total)
        ));
    } else if !changed_partitions.is_empty() {
        let idx: Vec<String> = changed_partitions.iter().map(|p| format!("#{p}")).collect();
        text.push_str(&format!("\n  changed  in partitions {}", idx.join(", ")));
    }
    if !unmatched_shown.is_empty() {
        let words: Vec<String> = unmatched_shown
            .iter()
            .map(|s| scanledger::terminal_safe(s).into_owned())
            .collect();
        text.push_str(&format!(
            "\n  declared but not different: {}{}",
            words.join(", "),
            super::lists::more(words.len(), unmatched.len())
        ));
    }
    for n in &next {
        text.push_str(&format!("\n  next: {}", scanledger::terminal_safe(n)));
    }
    out.emit(&text)?;
    Ok(super::status_exit(verdict))
}

fn render(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ranges: &[(u64, u64)],
) -> Result<Vec<String>, CliError> {
    super::lists::render(snap, header, ranges)
}

fn mode_word(m: &Mode) -> String {
    match m {
        Mode::All => "all".into(),
        Mode::Sample(n) => format!("sample {n}"),
        Mode::Count => "count".into(),
    }
}

/// A run's snapshot for a terminal: the ID, escaped, or `none`.
pub(crate) fn snapshot_words(h: &RunHeader) -> String {
    h.snapshot_id.as_deref().map_or_else(
        || "none".to_owned(),
        |s| scanledger::terminal_safe(s).into_owned(),
    )
}

/// ` --store PATH` when the store is not the default, for suggested commands.
fn store_args(out: &Out, _stores: &Stores) -> String {
    if out.store_named {
        format!(" --store {}", shell_word(&out.store.display().to_string()))
    } else {
        String::new()
    }
}

fn shell_word(s: &str) -> String {
    super::output::shell_word(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_ranges_cover_partitions_and_merge_neighbours() {
        assert_eq!(key_ranges(&[]), vec![]);
        assert_eq!(key_ranges(&[0]), vec![(0, 65_535)]);
        assert_eq!(
            key_ranges(&[1, 2, 5]),
            vec![(65_536, 3 * 65_536 - 1), (5 * 65_536, 6 * 65_536 - 1)]
        );
        let last = u64::MAX >> PARTITION_BITS;
        assert_eq!(
            key_ranges(&[last]),
            vec![(last << PARTITION_BITS, u64::MAX)]
        );
    }
}
