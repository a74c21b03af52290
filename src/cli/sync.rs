//! The coordinator's side of a held snapshot, by source: PostgreSQL exports one snapshot and
//! holds it (`shard::hold`); MySQL/MariaDB cannot, so the coordinator holds a global read lock
//! while the shards begin their own consistent snapshots, each then writes `DIR/joined-K`, and
//! the lock is given up once every shard has joined or after `--lock-timeout-seconds`
//! (`source::mysql::sync` has the protocol).
//!
//! Invariant: writers wait only while the read lock is held, and the coordinator says for how
//! long.

use std::path::Path;
#[cfg(feature = "mysql")]
use std::time::{Duration, Instant};

use scanledger::{AnySource, Contract};

use super::error::CliError;
use super::output::Out;

/// The file a shard writes beside the plan once it has begun the held snapshot.
pub(crate) fn joined_file(k: u32) -> String {
    format!("joined-{k}")
}

/// Begins the held snapshot of a coordinator (`plan --hold-snapshot`); its ID.
pub(crate) fn hold(
    rt: &tokio::runtime::Runtime,
    source: &mut AnySource,
) -> Result<String, CliError> {
    match source {
        #[cfg(feature = "postgres")]
        AnySource::Postgres(pg) => rt
            .block_on(pg.hold_snapshot())
            .map_err(|e| super::shard::fetch_error("--hold-snapshot", &e)),
        #[cfg(feature = "mysql")]
        AnySource::Mysql(my) => rt
            .block_on(my.lock_for_shards())
            .map_err(|e| super::shard::fetch_error("--hold-snapshot", &e)),
        _ => {
            let _ = rt;
            Err(CliError::usage(
                "--hold-snapshot: only a postgres: source (an exported snapshot) or a mysql: source (a read lock while the shards begin theirs) can share one snapshot with other processes",
            )
            .with_field("--hold-snapshot"))
        }
    }
}

/// A shard of a held plan: begins the contract's snapshot before the first page and, once it
/// has, writes `path`. A snapshot that cannot be joined is not an error here: the scan's
/// first page meets it (`expired_cursor`) and the run records it.
pub(crate) fn join(
    out: &Out,
    rt: &tokio::runtime::Runtime,
    source: &mut AnySource,
    contract: &Contract,
    path: &Path,
) -> Result<(), CliError> {
    #[cfg(feature = "mysql")]
    if let (AnySource::Mysql(my), Some(id)) = (source, contract.snapshot_id.as_deref()) {
        match rt.block_on(my.join_snapshot(id)) {
            Ok(()) => {
                std::fs::write(path, id).map_err(|e| CliError::io("write", path, &e))?;
            }
            Err(e) => out.note(&format!(
                "this shard cannot join the plan's snapshot ({e:?}): its coordinator no longer holds the read lock"
            )),
        }
    }
    // A PostgreSQL shard imports the exported snapshot at its first page.
    #[cfg(not(feature = "mysql"))]
    let _ = (out, rt, source, contract, path);
    Ok(())
}

/// The MySQL/MariaDB coordinator: holds the read lock (taken at `locked`) until every shard
/// has joined (its `joined-K` file), `release` appears, or `timeout_seconds`; then gives it up
/// and says how long it was held (the longest any writer waited). Exit 0 when every shard joined, 1 otherwise.
#[cfg(feature = "mysql")]
pub(crate) fn synchronize(
    my: &mut scanledger::MysqlSource,
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    shards: u32,
    release: &Path,
    locked: Instant,
    timeout_seconds: u64,
) -> Result<i32, CliError> {
    use super::shard::say;
    let timeout = Duration::from_secs(timeout_seconds);
    say(&format!(
        "holding a global read lock (writers wait) until the plan's {shards} shards have begun their snapshots, at most {timeout_seconds} s"
    ));
    let missing = |dir: &Path| -> Vec<u32> {
        (0..shards)
            .filter(|k| !dir.join(joined_file(*k)).exists())
            .collect()
    };
    let why = loop {
        if missing(dir).is_empty() {
            break "every shard began its snapshot";
        }
        if release.exists() {
            break "an explicit release";
        }
        if locked.elapsed() >= timeout {
            break "the lock timed out (--lock-timeout-seconds)";
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let unlocked = rt.block_on(my.unlock_for_shards());
    let held_ms = locked.elapsed().as_millis();
    unlocked.map_err(|e| super::shard::fetch_error("giving the read lock up", &e))?;
    let late = missing(dir);
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
