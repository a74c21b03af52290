//! The one-command form of `migration verify`: a side given as a source (`mysql:CONFIG.json`,
//! `postgres:CONFIG.json`, or any other source kind) is scanned before the verdict, both
//! sides at once on two threads, each an ordinary durable run with its own receipt.
//!
//! Where the runs live: a store has one writer at a time, so two concurrent scans need two
//! store files. `--from`'s run is in `--store` and `--to`'s in `--other-store`, as in the
//! two-run form, so every command a verdict suggests reads the same files; when `--to` is a
//! source and `--other-store` is not given, it is `--store`'s file name with `.to` before its
//! extension (`scanledger.redb` gives `scanledger.to.redb`).
//!
//! Resumable: each side first looks in its store for the newest run of its scope from the
//! same source that stopped short of its end (`Store::unfinished_run`) and resumes it, so the
//! same command after a kill continues both runs. A failed side stops the other at its next
//! page boundary, where it stays resumable. Nothing here decides the verdict: it is the
//! library's, over the two runs the scans leave.
//!
//! One pass: when both sides are sources, each side's pages are tapped on their way to its
//! collector and their (key, row digest) pairs streamed through a bounded channel to a third
//! thread, the library's comparator (`scanledger::key_streams`), which names the missing,
//! extra and changed keys as the scans go; the verdict judges what it found against the
//! stored evidence.

use std::path::{Path, PathBuf};

use scanledger::{Contract, RunId, RunRef};

use super::scan::{read_contract, scan_side, stop_all, stopping};
use super::{CliError, Out, WriteOpts};

/// What `--from` or `--to` names.
#[derive(Debug, Clone)]
pub(crate) enum SideArg {
    /// A stored run.
    Run(RunRef),
    /// A source to scan (its spec as given).
    Source(String),
}

impl SideArg {
    /// Reads a `--from`/`--to` value: a source when it names a source kind (the library's
    /// `source_kind`), else a run.
    pub(crate) fn parse(value: &str, flag: &str) -> Result<SideArg, CliError> {
        if scanledger::source_kind(value).is_some() {
            // A password in an inline spec is refused before the spec is printed anywhere.
            scanledger::refuse_password(value)
                .map_err(|e| CliError::usage(e.to_string()).with_field(flag))?;
            return Ok(SideArg::Source(value.to_owned()));
        }
        value.parse::<RunRef>().map(SideArg::Run).map_err(|_| {
            CliError::usage(format!(
                "{flag}: {:?} is neither a run (run-N, N or latest) nor a source (mysql:CONFIG.json, postgres://USER@HOST/DB?table=T&key=K, sqlite:PATH?table=T&key=K, ...)",
                scanledger::terminal_safe(value)
            ))
            .with_field(flag)
        })
    }
}

/// The runs a verdict compares once the sides are scanned, and the other store's path.
pub(crate) struct Scanned {
    pub from: RunRef,
    pub to: RunRef,
    pub other_store: Option<PathBuf>,
    /// What the one-pass comparison found, when both sides were scanned.
    pub stream: Option<scanledger::StreamedKeys>,
}

/// `--store`'s path with `.to` before its extension: the default store of a `--to` source.
fn to_store_of(main: &Path) -> PathBuf {
    let stem = main
        .file_stem()
        .map_or_else(|| "scanledger".into(), |s| s.to_string_lossy().into_owned());
    let ext = main
        .extension()
        .map_or_else(|| "redb".into(), |s| s.to_string_lossy().into_owned());
    main.with_file_name(format!("{stem}.to.{ext}"))
}

/// The contract of a side: `--contract FILE` for both sides, or the library's default one
/// (`scanledger::side_contract`: named after the source, restarting on an expired cursor).
fn contract_of(spec: &str, file: Option<&Path>) -> Result<Contract, CliError> {
    if let Some(path) = file {
        return read_contract(path);
    }
    scanledger::side_contract(spec)
        .map_err(|e| CliError::usage(format!("the default contract of {spec}: {e}")))
}

/// Scans the sides that are sources (both at once when both are), and returns the runs to
/// compare. A side that is a run is left as it is.
pub(crate) fn scan_sides(
    out: &Out,
    from: SideArg,
    to: SideArg,
    other_store: Option<&Path>,
    contract: Option<&Path>,
    write: &WriteOpts,
) -> Result<Scanned, CliError> {
    let other = match (&to, other_store) {
        (_, Some(p)) => Some(p.to_owned()),
        (SideArg::Source(_), None) => Some(to_store_of(&out.store)),
        (SideArg::Run(_), None) => None,
    };
    if let (SideArg::Source(_), SideArg::Source(_), Some(o)) = (&from, &to, &other) {
        if same_path(&out.store, o) {
            return Err(CliError::usage(
                "both sides are sources, and a store has one writer at a time: their runs need two store files",
            )
            .with_field("--other-store")
            .with_hint("give --other-store another file, or leave it out (the default is --store's name with .to before .redb)"));
        }
    }
    let mut write = write.clone();
    write.no_progress = true;
    write.checkpoint_every = Some(scanledger::side_checkpoint_every(
        write.checkpoint_every,
        contract.is_some(),
    ));
    let side_out = |store: &Path| Out {
        store: store.to_owned(),
        ..out.clone()
    };
    let to_out = side_out(other.as_deref().unwrap_or(&out.store));
    let jobs: [(&SideArg, Out, &str); 2] = [
        (&from, side_out(&out.store), "--from"),
        (&to, to_out, "--to"),
    ];
    // Each source side's contract, read before either scan starts (a bad one stops both
    // before any row is read), and said in order, `--from` first: the lines a side prints
    // when it ends come in the order the sides end.
    let mut contracts = Vec::with_capacity(2);
    for (side, side_out, flag) in &jobs {
        let c = match side {
            SideArg::Source(spec) => {
                let c = contract_of(spec, contract)?;
                if !out.quiet && !out.json {
                    eprintln!("{flag}: scanning {spec} into {}", side_out.store.display());
                }
                Some(c)
            }
            SideArg::Run(_) => None,
        };
        contracts.push(c);
    }
    // Both sides sources: their keys are compared as they are scanned.
    let (senders, comparator) = if contracts.iter().all(Option::is_some) {
        let (a, b, c) = scanledger::key_streams();
        ([Some(a), Some(b)], Some(c))
    } else {
        ([None, None], None)
    };
    let (results, stream) = std::thread::scope(|s| {
        let compared = comparator.map(|c| s.spawn(move || c.run()));
        let handles: Vec<_> = jobs
            .iter()
            .zip(&contracts)
            .zip(senders)
            .map(|(((side, side_out, flag), c), keys)| {
                let write = &write;
                s.spawn(move || scan_one(side, c.as_ref(), side_out, flag, write, keys))
            })
            .collect();
        let results: Vec<Result<Option<RunId>, CliError>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::internal("a side's scan panicked")))
            })
            .collect();
        // The senders are gone with their threads, so the comparator has ended.
        let stream = compared.and_then(|h| h.join().ok());
        (results, stream)
    });
    let mut runs = Vec::with_capacity(2);
    for ((side, _, _), r) in jobs.iter().zip(results) {
        runs.push(match (side, r?) {
            (SideArg::Run(r), _) => *r,
            (SideArg::Source(_), Some(run)) => RunRef::Id(run),
            (SideArg::Source(_), None) => RunRef::Latest,
        });
    }
    Ok(Scanned {
        from: runs[0],
        to: runs[1],
        other_store: other,
        stream,
    })
}

/// One side: a run is left as it is; a source is scanned under its contract (or its
/// unfinished run continued). Returns the run the scan ended as (a restart's new run, when it
/// restarted).
fn scan_one(
    side: &SideArg,
    contract: Option<&Contract>,
    out: &Out,
    flag: &str,
    write: &WriteOpts,
    keys: Option<scanledger::KeySender>,
) -> Result<Option<RunId>, CliError> {
    let (SideArg::Source(spec), Some(c)) = (side, contract) else {
        return Ok(None);
    };
    match scan_side(out, c, spec, write, keys) {
        Ok((receipt, resumed)) => {
            if !out.quiet && !out.json {
                let how = resumed.map_or_else(String::new, |r| format!(", continuing {r}"));
                eprintln!(
                    "{flag}: {} {}{how}",
                    receipt.run_id,
                    receipt.coverage_status.as_str()
                );
            }
            Ok(receipt.run_id.parse::<RunId>().ok())
        }
        Err(e) => {
            // The other side stops at its next page boundary, resumable; unless it was a stop
            // already (Ctrl-C), this side's error is the one to report.
            if !stopping() {
                stop_all();
            }
            let mut e = e;
            if e.hint.is_none() {
                e.hint = Some(
                    "each side's run is kept at its last commit: run the same command again to continue it".into(),
                );
            }
            Err(e)
        }
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_with_a_source_kind_is_a_source_and_anything_else_a_run() {
        assert!(matches!(
            SideArg::parse("mysql:my.json", "--from"),
            Ok(SideArg::Source(s)) if s == "mysql:my.json"
        ));
        assert!(matches!(
            SideArg::parse("run-3", "--from"),
            Ok(SideArg::Run(RunRef::Id(RunId(3))))
        ));
        assert!(matches!(
            SideArg::parse("latest", "--to"),
            Ok(SideArg::Run(RunRef::Latest))
        ));
        assert!(SideArg::parse("oracle:x.json", "--to").is_err());
        assert!(matches!(
            SideArg::parse("postgresql://u@h/db?table=t&key=id", "--to"),
            Ok(SideArg::Source(_))
        ));
        assert!(matches!(
            SideArg::parse("sqlite:a.db?table=t&key=id", "--from"),
            Ok(SideArg::Source(_))
        ));
        let e = SideArg::parse("mysql://root:hunter2canary@h/db?table=t&key=id", "--from")
            .expect_err("a password is refused");
        assert!(!e.message.contains("hunter2canary") && e.message.contains("MYSQL_PWD"));
        assert!(SideArg::parse("mysql:", "--to").is_err());
    }

    #[test]
    fn the_target_store_is_the_main_one_with_to_before_its_extension() {
        assert_eq!(
            to_store_of(Path::new("./scanledger.redb")),
            PathBuf::from("./scanledger.to.redb")
        );
        assert_eq!(
            to_store_of(Path::new("/x/mig")),
            PathBuf::from("/x/mig.to.redb")
        );
    }

    #[test]
    fn the_default_contract_is_named_after_the_source_and_restarts() {
        let c = contract_of("mysql:/a/b/orders.json", None).expect("a valid default contract");
        assert_eq!(c.scope.source, "mysql:orders.json");
        assert_eq!(c.page_size, scanledger::SIDE_PAGE_SIZE);
        assert_eq!(c.on_expired_cursor, scanledger::ExpiredPolicy::Restart);
    }
}
