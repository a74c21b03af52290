//! `plan`, `scan --plan`, `merge`: one scan cut into shards that job runners scan side by
//! side, and merged back into one run (docs/REFERENCE.md §11).
//!
//! `plan` writes `DIR/shard-K.json` (each an ordinary contract) and then `DIR/plan.json`, by
//! rename, so a runner that waits for the plan sees it whole. With `--hold-snapshot` it stays
//! up as the coordinator of a PostgreSQL snapshot until `DIR/release` appears (a verified
//! `merge` makes it, and so does `plan --release DIR`), Ctrl-C or SIGTERM, or its timeout, and
//! says so on stderr; it ignores SIGHUP, and runs a statement in the held transaction well
//! inside the server's `idle_in_transaction_session_timeout`. A shard scan of a store that
//! already holds an attempt of its shard continues that attempt (or shows its receipt) rather
//! than begin a second one, so a runner's retry is safe.
//!
//! Invariant: the held snapshot outlives every merge that is not verified, so the shard a
//! merge names can be scanned again in the same snapshot and merged.

use std::path::{Path, PathBuf};
#[cfg(feature = "postgres")]
use std::time::{Duration, Instant};

use scanledger::shard::{self, Plan, ShardStore, RELEASE_FILE};
use scanledger::{AnySource, Contract, Error, Status, Store, StoreOptions};

use super::error::CliError;
use super::output::count;
use super::{receipt_exit, scan, show, Out, RunArg, WriteOpts};

/// How often the coordinator checks the release file, its timeout and the signals.
#[cfg(feature = "postgres")]
const HOLD_POLL: Duration = Duration::from_millis(250);

/// The arguments of `plan`.
#[derive(Debug)]
pub(crate) struct PlanArgs {
    pub contract: PathBuf,
    pub source: String,
    pub shards: u32,
    pub out: PathBuf,
    pub key_space: Option<String>,
    pub hold_snapshot: bool,
    pub hold_timeout_seconds: u64,
    pub lock_timeout_seconds: u64,
}

fn source_error(e: scanledger::SourceError) -> CliError {
    CliError::from(Error::Source(e))
}

pub(super) fn fetch_error(what: &str, e: &scanledger::FetchError) -> CliError {
    match e {
        scanledger::FetchError::Fatal(s) => CliError::usage(format!("{what}: {s}")),
        other => CliError::usage(format!("{what}: the source answered {other:?}")),
    }
}

/// `LO..HI` (inclusive, as `missing --range` reads it) as the span a plan divides.
fn parse_key_space(text: &str) -> Result<(u64, u64), CliError> {
    let bad = || {
        CliError::usage(format!(
            "--key-space: {:?} is not LO..HI (two non-negative integers, LO <= HI)",
            scanledger::terminal_safe(text)
        ))
        .with_field("--key-space")
    };
    let (lo, hi) = text.split_once("..").ok_or_else(bad)?;
    let lo: u64 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u64 = hi.trim().parse().map_err(|_| bad())?;
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text.as_bytes()).map_err(|e| CliError::io("write", path, &e))
}

fn random_hex16() -> Result<String, CliError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| {
        CliError::internal(format!("cannot draw from the system's random source: {e}"))
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// `plan --contract FILE --source SPEC --shards N [--out DIR] [--key-space LO..HI]
/// [--hold-snapshot]`.
pub(crate) fn plan(out: &Out, args: &PlanArgs) -> Result<i32, CliError> {
    let contract = scan::read_contract(&args.contract)?;
    shard::check_plannable(&contract).map_err(|e| {
        let err = match e {
            shard::Unplannable::Scoped => format!("{}: {e}", args.contract.display()),
            _ => e.to_string(),
        };
        CliError::usage(err).with_field(e.field())
    })?;
    let mut source = AnySource::open_for(&args.source, &contract).map_err(source_error)?;
    let rt = scan::runtime()?;
    if args.hold_snapshot {
        outlive_the_terminal(&rt);
    }
    // The split first: a MySQL/MariaDB key sample is one read of the key column, which no
    // writer should wait for under the coordinator's read lock. (A PostgreSQL snapshot begun
    // here is the one held.)
    let key_space = args.key_space.as_deref().map(parse_key_space).transpose()?;
    let (split, ranges) = rt
        .block_on(shard::split_for(&mut source, key_space, args.shards))
        .map_err(|e| match e {
            shard::SplitError::Source { what, error } => fetch_error(what, &error),
            other => CliError::usage(other.to_string()).with_field("--shards"),
        })?;
    // Writers wait from here while a MySQL/MariaDB coordinator holds its read lock.
    let locked_at = std::time::Instant::now();
    let held = if args.hold_snapshot {
        Some(rt.block_on(shard::hold(&mut source)).map_err(|e| match e {
            shard::HoldError::Source(e) => fetch_error("--hold-snapshot", &e),
            other => {
                CliError::usage(format!("--hold-snapshot: {other}")).with_field("--hold-snapshot")
            }
        })?)
    } else {
        None
    };
    let snapshot_id = held.clone().or_else(|| contract.snapshot_id.clone());
    let plan = Plan::new(
        &contract,
        &args.source,
        snapshot_id,
        held.is_some(),
        split,
        ranges,
        scanledger::rfc3339(scanledger::now_ms()),
        random_hex16()?,
    )
    .map_err(|e| CliError::internal(e.to_string()))?;
    let (path, release) = write_plan(&args.out, &plan)?;
    print_plan(out, &args.out, &plan, &path)?;
    let Some(snapshot) = held else {
        return Ok(0);
    };
    coordinate(args, &mut source, &rt, &snapshot, &release, locked_at)
}

/// `plan --within PLAN --shard K --shards N [--out DIR]`: shard K of PLAN divided into a
/// sub-plan (`Plan::within`), written and printed as `plan` writes a plan.
pub(crate) fn plan_within(
    out: &Out,
    outer: &Path,
    index: u32,
    shards: Option<u32>,
    dir: PathBuf,
) -> Result<i32, CliError> {
    let Some(shards) = shards else {
        return Err(CliError::usage(
            "plan --within PLAN needs --shard K --shards N",
        ));
    };
    let outer_plan = read_plan(outer)?;
    let plan = Plan::within(
        &outer_plan,
        index,
        shards,
        scanledger::rfc3339(scanledger::now_ms()),
        random_hex16()?,
    )
    .map_err(|e| CliError::usage(e).with_field("--within"))?;
    let (path, _) = write_plan(&dir, &plan)?;
    print_plan(out, &dir, &plan, &path)?;
    Ok(0)
}

/// Writes the plan's directory (`shard::write_plan_dir`). Returns the plan's path and the
/// release file's.
fn write_plan(dir: &Path, plan: &Plan) -> Result<(PathBuf, PathBuf), CliError> {
    shard::write_plan_dir(plan, dir).map_err(|e| CliError::io(e.action, &e.path, &e.source))
}

/// Prints the plan written at `path`, as JSON or as text.
fn print_plan(out: &Out, dir: &Path, plan: &Plan, path: &Path) -> Result<(), CliError> {
    let summary = shard::plan_summary(plan, path, dir);
    if out.json {
        out.json_value(&summary)?;
    } else {
        let shown = path.display().to_string();
        let shown = scanledger::terminal_safe(&shown);
        let mut text = format!(
            "plan {shown} ({}), {} by {}\n",
            plan.digest(),
            count(plan.shards.len() as u64, "shard", "shards"),
            plan.split.by
        );
        for (k, r) in plan.shards.iter().enumerate() {
            text.push_str(&format!("  shard {k}: {}\n", r.shown()));
        }
        text.push_str(&format!(
            "run each with: scanledger --store shard-K.redb scan --plan {shown} --shard K"
        ));
        out.emit(&text)?;
    }
    Ok(())
}

/// With a held snapshot: the coordinator, until the shards no longer need it (PostgreSQL's
/// hold, MySQL/MariaDB's synchronization).
fn coordinate(
    args: &PlanArgs,
    source: &mut AnySource,
    rt: &tokio::runtime::Runtime,
    snapshot: &str,
    release: &Path,
    locked_at: std::time::Instant,
) -> Result<i32, CliError> {
    match source {
        #[cfg(feature = "postgres")]
        AnySource::Postgres(pg) => hold(pg, rt, snapshot, release, args.hold_timeout_seconds),
        #[cfg(feature = "mysql")]
        AnySource::Mysql(my) => synchronize(
            my,
            rt,
            &args.out,
            args.shards,
            release,
            locked_at,
            args.lock_timeout_seconds,
        ),
        _ => {
            let _ = (rt, snapshot, release, locked_at);
            let _ = (args.hold_timeout_seconds, args.lock_timeout_seconds);
            Ok(0)
        }
    }
}

/// A shard's join of its plan's held snapshot (`shard::join`): a join refused is a note, and
/// the run's first page records it.
pub(super) fn join(
    out: &Out,
    rt: &tokio::runtime::Runtime,
    source: &mut AnySource,
    contract: &Contract,
    path: &Path,
) -> Result<(), CliError> {
    match rt.block_on(shard::join(source, contract, path)) {
        Ok(shard::Joined::Refused(e)) => out.note(&format!(
            "this shard cannot join the plan's snapshot ({e:?}): its coordinator no longer holds the read lock"
        )),
        Ok(_) => {}
        Err(e) => return Err(CliError::io("write", path, &e)),
    }
    Ok(())
}

/// The MySQL/MariaDB coordinator: holds the read lock (taken at `locked`) until
/// `shard::wait_for_joins` ends, gives it up and says how long it was held (the longest any
/// writer waited). Exit 0 when every shard joined, 1 otherwise.
#[cfg(feature = "mysql")]
fn synchronize(
    my: &mut scanledger::MysqlSource,
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    shards: u32,
    release: &Path,
    locked: std::time::Instant,
    timeout_seconds: u64,
) -> Result<i32, CliError> {
    say(&format!(
        "holding a global read lock (writers wait) until the plan's {shards} shards have begun their snapshots, at most {timeout_seconds} s"
    ));
    let timeout = std::time::Duration::from_secs(timeout_seconds);
    let why = shard::wait_for_joins(dir, shards, release, locked, timeout).as_str();
    let unlocked = rt.block_on(my.unlock_for_shards());
    let held_ms = locked.elapsed().as_millis();
    unlocked.map_err(|e| fetch_error("giving the read lock up", &e))?;
    let late = shard::not_joined(dir, shards);
    if late.is_empty() {
        say(&format!(
            "released the read lock after {held_ms} ms ({why}): every shard reads the same state"
        ));
        return Ok(0);
    }
    let named: Vec<String> = late.iter().map(u32::to_string).collect();
    say(&format!(
        "released the read lock after {held_ms} ms ({why}); shards {} had not begun: they cannot join this snapshot (their scans end expired_cursor), so make a new plan",
        named.join(", ")
    ));
    Ok(1)
}

/// One line on stderr; a write that fails (a terminal gone with SIGHUP) is not the hold's end.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The coordinator: keeps the snapshot's transaction open until the release file appears,
/// Ctrl-C or SIGTERM, or the timeout, running a statement in it often enough for the server's
/// `idle_in_transaction_session_timeout`, so a lost snapshot is said at once. SIGHUP is
/// ignored: a coordinator started from a terminal outlives the terminal.
#[cfg(feature = "postgres")]
fn hold(
    pg: &mut scanledger::PostgresSource,
    rt: &tokio::runtime::Runtime,
    snapshot: &str,
    release: &Path,
    timeout_seconds: u64,
) -> Result<i32, CliError> {
    let snapshot_shown = scanledger::terminal_safe(snapshot).into_owned();
    let dir_shown = release
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let dir_shown = scanledger::terminal_safe(&dir_shown).into_owned();
    let (idle_ms, txn_ms) = rt
        .block_on(pg.hold_limits())
        .map_err(|e| fetch_error("--hold-snapshot", &e))?;
    let ping = shard::ping_every(idle_ms);
    say(&format!(
        "holding snapshot {snapshot_shown} for the plan's shards; released by a verified merge, `scanledger plan --release {dir_shown}`, Ctrl-C or SIGTERM, or in {timeout_seconds} s (SIGHUP is ignored)"
    ));
    if let Some(ms) = idle_ms {
        say(&format!(
            "the server's idle_in_transaction_session_timeout is {ms} ms: the held transaction runs a statement every {} ms",
            ping.as_millis()
        ));
    }
    if let Some(ms) = txn_ms.filter(|ms| *ms / 1000 < timeout_seconds) {
        say(&format!(
            "warning: the server's transaction_timeout ({ms} ms) ends the held transaction whatever it runs: the snapshot is lost after it"
        ));
    }
    let timeout = Duration::from_secs(timeout_seconds);
    match rt.block_on(wait_for_release(pg, release, timeout, ping)) {
        Ok(why) => {
            // The caller drops the source, which closes its connection and ends the
            // transaction.
            say(&format!("released snapshot {snapshot_shown}: {why}"));
            Ok(0)
        }
        Err(e) => {
            say(&format!(
                "the held snapshot {snapshot_shown} is lost ({e:?}): shards that have not begun cannot import it, and a merge will show them"
            ));
            Ok(1)
        }
    }
}

/// Waits for a reason to release: the release file (its first line says who made it), Ctrl-C
/// or SIGTERM, or the timeout; pings every `ping`. `Err`: the transaction is gone.
#[cfg(feature = "postgres")]
async fn wait_for_release(
    pg: &mut scanledger::PostgresSource,
    release: &Path,
    timeout: Duration,
    ping: Duration,
) -> Result<String, scanledger::FetchError> {
    let mut signals = Signals::new();
    let poll = HOLD_POLL.min(ping / 2);
    let start = Instant::now();
    let mut pinged = Instant::now();
    loop {
        tokio::select! {
            stop = signals.next() => return Ok(stop.to_owned()),
            () = tokio::time::sleep(poll) => {}
        }
        if let Some(who) = shard::released_by(release) {
            return Ok(who);
        }
        if start.elapsed() >= timeout {
            return Ok("the hold timed out (--hold-timeout-seconds)".to_owned());
        }
        if pinged.elapsed() + poll >= ping {
            pinged = Instant::now();
            pg.keep_alive().await?;
        }
    }
}

/// From here a SIGHUP no longer ends the process (the coordinator's `Signals` then says when
/// one comes): a coordinator started from a terminal outlives it from its first statement,
/// not only once its hold begins. SIGINT and SIGTERM keep their default action until then.
#[cfg(unix)]
fn outlive_the_terminal(rt: &tokio::runtime::Runtime) {
    let _context = rt.enter();
    // tokio's handler stays installed when the stream is dropped, and drops the signal.
    if let Err(e) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "cannot listen to SIGHUP ({e}): it keeps its default action"
        );
    }
}

#[cfg(not(unix))]
fn outlive_the_terminal(_: &tokio::runtime::Runtime) {}

/// The signals a coordinator answers: SIGINT and SIGTERM end the hold; SIGHUP is caught and
/// said, so it no longer ends the process. A signal that cannot be listened to keeps its
/// default action (said once).
#[cfg(all(feature = "postgres", unix))]
struct Signals {
    int: Option<tokio::signal::unix::Signal>,
    term: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

#[cfg(all(feature = "postgres", unix))]
impl Signals {
    fn new() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                say(&format!(
                    "cannot listen to {name} ({e}): it keeps its default action"
                ));
                None
            }
        };
        Signals {
            int: listen(SignalKind::interrupt(), "SIGINT"),
            term: listen(SignalKind::terminate(), "SIGTERM"),
            hup: listen(SignalKind::hangup(), "SIGHUP"),
        }
    }

    /// The next signal that ends the hold.
    async fn next(&mut self) -> &'static str {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            if let Some(s) = s {
                if s.recv().await.is_some() {
                    return;
                }
            }
            std::future::pending().await
        }
        loop {
            tokio::select! {
                () = recv(&mut self.int) => return "Ctrl-C (SIGINT)",
                () = recv(&mut self.term) => return "SIGTERM",
                () = recv(&mut self.hup) => say("SIGHUP ignored: the snapshot stays held"),
            }
        }
    }
}

/// Elsewhere: Ctrl-C only.
#[cfg(all(feature = "postgres", not(unix)))]
struct Signals;

#[cfg(all(feature = "postgres", not(unix)))]
impl Signals {
    fn new() -> Signals {
        Signals
    }

    async fn next(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// Reads and checks a plan file.
pub(crate) fn read_plan(path: &Path) -> Result<Plan, CliError> {
    let text = scanledger::read_bounded(path, shard::PLAN_BYTES_MAX)
        .map_err(|e| CliError::file(e, "read plan").with_kind("plan"))?;
    Plan::from_json(&text).map_err(|e| {
        CliError::usage(format!("{}: {e}", path.display()))
            .with_kind("plan")
            .with_field("--plan")
    })
}

/// The shard index from the environment (`shard::index_from_env`).
pub(crate) fn shard_from_env() -> Result<u32, CliError> {
    shard::index_from_env().map_err(|e| {
        let err = CliError::usage(format!("--shard-from-env: {e}")).with_field("--shard-from-env");
        match e {
            shard::ShardEnvError::Unset => err.with_hint("set one, or pass --shard K"),
            _ => err,
        }
    })
}

/// `scan --plan PLAN --shard K | --shard-from-env [--source SPEC]`.
pub(crate) fn scan_shard(
    out: &Out,
    plan_path: &Path,
    index: u32,
    source: Option<&str>,
    write: &WriteOpts,
) -> Result<i32, CliError> {
    let plan = read_plan(plan_path)?;
    let Some(contract) = plan.shard_contract(index) else {
        return Err(CliError::usage(format!(
            "shard {index}: the plan has {} (0 to {})",
            count(plan.shards.len() as u64, "shard", "shards"),
            plan.shards.len().saturating_sub(1)
        ))
        .with_field("--shard"));
    };
    let spec = source.unwrap_or(&plan.source).to_owned();
    // A shard of a plan whose snapshot is held joins it before it reads, a resumed attempt
    // too, and says so in DIR/joined-K (a MySQL/MariaDB coordinator waits for every shard's).
    let joined = shard::joined_path(&plan, plan_path, index);
    // An attempt of this shard in this store already: continue it or show it, never a second.
    if out.store.exists() {
        let found = shard::attempt_of(&super::open_read(out)?.read()?, &contract)?;
        if let Some(attempt) = found {
            let run = attempt.run;
            if attempt.done() {
                out.note(&format!(
                    "{run} is this store's attempt of shard {index}; it is finished, so it is shown, not scanned again"
                ));
                return super::runs::receipt(out, RunArg::Id(run));
            }
            out.note(&format!(
                "{run} is this store's attempt of shard {index}; continuing it"
            ));
            return scan::resume(
                out,
                RunArg::Id(run),
                Some(spec),
                &scanledger::Raise::default(),
                write,
                joined.as_deref(),
            );
        }
    }
    scan::scan_contract_in(out, contract, &spec, write, joined.as_deref())
}

/// `merge --plan PLAN --out STORE SHARD_STORE...`.
pub(crate) fn merge(
    out: &Out,
    plan_path: &Path,
    target: &Path,
    shard_paths: &[PathBuf],
) -> Result<i32, CliError> {
    let plan = read_plan(plan_path)?;
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    if let Some(t) = canonical(target) {
        if shard_paths
            .iter()
            .any(|p| canonical(p).as_ref() == Some(&t))
        {
            return Err(CliError::usage(format!(
                "--out {}: the merged store cannot be one of the shard stores",
                target.display()
            ))
            .with_field("--out"));
        }
    }
    for p in shard_paths {
        if !p.exists() {
            return Err(no_shard_store(&plan, p));
        }
    }
    let mut opened: Vec<(PathBuf, Store)> = Vec::with_capacity(shard_paths.len());
    for p in shard_paths {
        let store = Store::open_read_streaming(p).map_err(CliError::from)?;
        opened.push((p.clone(), store));
    }
    let mut views = Vec::with_capacity(opened.len());
    for (p, store) in &opened {
        views.push(ShardStore {
            path: p.clone(),
            snapshot: store.read()?,
        });
    }
    // Streamed: the shard stores are read partition by partition into the merged run,
    // committed whole at its end.
    let mut store = Store::open(target, StoreOptions::new()).map_err(CliError::from)?;
    let merged =
        shard::merge_into(&plan, &views, &mut store, scanledger::now_ms).map_err(|e| match e {
            shard::MergeError::Read(e) => CliError::from(e),
            shard::MergeError::Write(e) => CliError::from(e),
        })?;
    drop(views);
    drop(opened);
    let run = merged.run;
    let receipt = store.read()?.receipt(run)?;
    drop(store);
    // The held snapshot is released by a verified merge only: after any other the shards
    // named are scanned again in the same snapshot and merged again.
    let verified = receipt.coverage_status == Status::Verified;
    let held = shard::held_after_merge(&plan, verified, &merged.merged_from.shards);
    let dir = plan_path.parent().unwrap_or(Path::new("."));
    if held.as_ref().is_some_and(|h| h.released) {
        write_file(
            &dir.join(RELEASE_FILE),
            &format!(
                "a verified merge ({run} in {})\n",
                scanledger::terminal_safe(&target.display().to_string())
            ),
        )?;
    }
    if out.json {
        // The shards as the stored receipt lists them.
        let mut v = serde_json::json!({
            "plan_digest": plan.digest(),
            "store": target.display().to_string(),
            "shards": receipt.shards,
            "receipt": receipt,
        });
        if let Some(held) = &held {
            v["snapshot"] = serde_json::json!(held);
        }
        out.json_value(&v)?;
    } else {
        // The receipt's own layout lists the plan and the shards.
        out.emit(&show::receipt_text(&receipt))?;
        if let Some(held) = &held {
            out.note(&held.text(plan_path, dir));
        }
    }
    Ok(receipt_exit(&receipt))
}

/// A shard store given to `merge` that does not exist: said plainly, an unexpanded pattern
/// (`shard-*.redb` that matched no file) above all.
fn no_shard_store(plan: &Plan, path: &Path) -> CliError {
    let shown = path.display().to_string();
    let problem = if shown.contains(['*', '?', '[']) {
        format!(
            "no shard store matches {:?}: no file matched the pattern, and the shell passed it on as it is",
            scanledger::terminal_safe(&shown)
        )
    } else {
        format!("no shard store at {}", scanledger::terminal_safe(&shown))
    };
    let held = if plan.snapshot_held {
        "; no merge was made, so a held snapshot stays held"
    } else {
        ""
    };
    CliError::usage(problem)
        .with_field("SHARD_STORE")
        .with_hint(format!(
            "name each shard store that exists (a shard that never began has none: leave it out, and the merge names it missing){held}"
        ))
}

/// `plan --release DIR`: asks the coordinator of the plan in DIR to release its snapshot.
pub(crate) fn release(out: &Out, dir: &Path) -> Result<i32, CliError> {
    let (dir, plan_path) = if dir.is_file() {
        (dir.parent().unwrap_or(Path::new(".")), dir.to_path_buf())
    } else {
        (dir, dir.join("plan.json"))
    };
    let plan = read_plan(&plan_path)?;
    if !plan.snapshot_held {
        return Err(CliError::usage(format!(
            "{}: the plan holds no snapshot (it was made without --hold-snapshot): there is nothing to release",
            plan_path.display()
        ))
        .with_field("--release"));
    }
    let file = dir.join(RELEASE_FILE);
    write_file(&file, "an explicit release (scanledger plan --release)\n")?;
    if out.json {
        out.json_value(&serde_json::json!({
            "plan": plan_path.display().to_string(),
            "snapshot_id": plan.snapshot_id,
            "release_file": file.display().to_string(),
        }))?;
    } else {
        out.emit(&format!(
            "asked the coordinator of {} to release snapshot {} ({} written); it does within a second and says so on its stderr",
            scanledger::terminal_safe(&plan_path.display().to_string()),
            scanledger::terminal_safe(plan.snapshot_id.as_deref().unwrap_or("-")),
            scanledger::terminal_safe(&file.display().to_string()),
        ))?;
    }
    Ok(0)
}
