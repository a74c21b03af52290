//! A plan's held snapshot, by source, as any runner needs it (the CLI's `plan
//! --hold-snapshot` and `scan --plan` only print what these return): PostgreSQL exports one
//! snapshot and holds it; MySQL/MariaDB cannot, so the coordinator holds a global read lock
//! while the shards begin their own consistent snapshots, each then writes `DIR/joined-K`
//! (`join`), and the coordinator gives the lock up once every shard has joined, the release
//! file appears, or its timeout passes (`wait_for_joins`); `source::mysql::sync` has the
//! protocol.
//!
//! A shard joins whenever it (re)starts reading under the plan, a resumed attempt included: its
//! new MySQL snapshot begins while the coordinator still holds the lock (the join proves it, or
//! fails), so it reads the same state as every other shard, and its `joined-K` frees the
//! coordinator. A join that fails writes nothing: the run's first page meets the snapshot it
//! cannot have (`expired_cursor`) and records it.
//!
//! Invariant: writers wait only while the read lock is held; every wait here is bounded by its
//! timeout.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Plan;
use crate::contract::Contract;
use crate::source::{AnySource, FetchError};

/// How often the coordinator looks for the shards' `joined-K` files.
const JOIN_POLL: Duration = Duration::from_millis(10);
/// The longest time between two statements in a held PostgreSQL transaction.
const HOLD_PING_MAX: Duration = Duration::from_secs(15);
/// The shortest.
const HOLD_PING_MIN: Duration = Duration::from_millis(100);
/// Bytes of the release file a coordinator reads (its first line says who released).
const RELEASE_BYTES_MAX: u64 = 4096;

/// How often a coordinator holding a PostgreSQL snapshot runs a statement in its transaction
/// under a server whose `idle_in_transaction_session_timeout` is `idle_ms` (`None`: off): a
/// third of it, from 100 ms to 15 s, so the server never ends the hold as idle.
#[must_use]
pub fn ping_every(idle_ms: Option<u64>) -> Duration {
    idle_ms.map_or(HOLD_PING_MAX, |ms| {
        Duration::from_millis(ms / 3).clamp(HOLD_PING_MIN, HOLD_PING_MAX)
    })
}

/// Who asked for the release, when the release file `release` ([`super::RELEASE_FILE`])
/// exists: its first line (terminal-safe) and the file; `None` while it does not.
#[must_use]
pub fn released_by(release: &Path) -> Option<String> {
    if !release.exists() {
        return None;
    }
    let first = crate::io_bound::read_text(release, RELEASE_BYTES_MAX).unwrap_or_default();
    let first = first.lines().next().unwrap_or("").trim().to_owned();
    Some(format!(
        "{} ({})",
        crate::receipt::terminal_safe(&first),
        release.display()
    ))
}

/// The file a shard writes beside the plan once it has begun the held snapshot.
#[must_use]
pub fn joined_file(k: u32) -> String {
    format!("joined-{k}")
}

/// Where shard `k` of `plan` (read from `plan_path`) says it joined the held snapshot; `None`
/// when the plan holds no snapshot.
#[must_use]
pub fn joined_path(plan: &Plan, plan_path: &Path, k: u32) -> Option<PathBuf> {
    plan.snapshot_held
        .then(|| plan_path.with_file_name(joined_file(k)))
}

/// Why a coordinator cannot hold a snapshot for a plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HoldError {
    /// A source that cannot share one snapshot with other processes.
    #[error(
        "only a postgres: source (an exported snapshot) or a mysql: source (a read lock while the shards begin theirs) can share one snapshot with other processes"
    )]
    Unsupported,
    /// The source could not begin it (a server unreachable, a lock refused).
    #[error("the source could not begin the held snapshot: {0:?}")]
    Source(FetchError),
}

/// Begins the held snapshot of a coordinator (`plan --hold-snapshot`): PostgreSQL's exported
/// snapshot, or MySQL/MariaDB's read lock. Returns the snapshot's ID, which the plan names.
///
/// # Errors
/// `Unsupported` for any other source; `Source` when the source refuses.
pub async fn hold(source: &mut AnySource) -> Result<String, HoldError> {
    match source {
        #[cfg(feature = "postgres")]
        AnySource::Postgres(pg) => pg.hold_snapshot().await.map_err(HoldError::Source),
        #[cfg(feature = "mysql")]
        AnySource::Mysql(my) => my.lock_for_shards().await.map_err(HoldError::Source),
        _ => Err(HoldError::Unsupported),
    }
}

/// What a shard's join of its plan's held snapshot came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Joined {
    /// Nothing to join before the first page: not a MySQL/MariaDB source, or a contract
    /// without a snapshot (a PostgreSQL shard imports the exported one at its first page).
    NotNeeded,
    /// The shard began the snapshot and wrote its `joined-K`.
    Joined,
    /// The snapshot cannot be joined (the coordinator no longer holds the read lock); nothing
    /// was written.
    Refused(FetchError),
}

/// A shard of a held plan, before it reads (a first attempt or a resumed one): begins the
/// contract's snapshot and, once it has, writes `joined` (see the module's note on resumed
/// shards).
///
/// # Errors
/// When `joined` cannot be written.
pub async fn join(
    source: &mut AnySource,
    contract: &Contract,
    joined: &Path,
) -> std::io::Result<Joined> {
    #[cfg(feature = "mysql")]
    if let (AnySource::Mysql(my), Some(id)) = (source, contract.snapshot_id.as_deref()) {
        return match my.join_snapshot(id).await {
            Ok(()) => std::fs::write(joined, id).map(|()| Joined::Joined),
            Err(e) => Ok(Joined::Refused(e)),
        };
    }
    #[cfg(not(feature = "mysql"))]
    let _ = (source, contract, joined);
    Ok(Joined::NotNeeded)
}

/// Why a MySQL/MariaDB coordinator stopped waiting for its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinWait {
    /// Every shard's `joined-K` exists.
    AllJoined,
    /// The release file appeared.
    Released,
    /// The timeout passed.
    TimedOut,
}

impl JoinWait {
    /// The reason in words, as the coordinator says it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JoinWait::AllJoined => "every shard began its snapshot",
            JoinWait::Released => "an explicit release",
            JoinWait::TimedOut => "the lock timed out (--lock-timeout-seconds)",
        }
    }
}

/// The shards of `0..shards` whose `joined-K` is not in `dir`.
#[must_use]
pub fn not_joined(dir: &Path, shards: u32) -> Vec<u32> {
    (0..shards)
        .filter(|k| !dir.join(joined_file(*k)).exists())
        .collect()
}

/// The coordinator's wait while it holds the read lock (taken at `locked`): until every shard
/// of `0..shards` has written its `joined-K` in `dir`, `release` exists, or `timeout` has
/// passed since `locked`. Blocks the calling thread; the caller then gives the lock up.
#[must_use]
pub fn wait_for_joins(
    dir: &Path,
    shards: u32,
    release: &Path,
    locked: Instant,
    timeout: Duration,
) -> JoinWait {
    // Bounded by the timeout: one look per poll, and one more.
    let looks = timeout.as_millis() / JOIN_POLL.as_millis() + 2;
    for _ in 0..looks {
        if not_joined(dir, shards).is_empty() {
            return JoinWait::AllJoined;
        }
        if release.exists() {
            return JoinWait::Released;
        }
        if locked.elapsed() >= timeout {
            break;
        }
        std::thread::sleep(JOIN_POLL);
    }
    JoinWait::TimedOut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_ends_on_every_join_on_a_release_or_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        let release = d.join("release");
        let wait =
            |t: u64| wait_for_joins(d, 2, &release, Instant::now(), Duration::from_millis(t));
        assert_eq!(wait(30), JoinWait::TimedOut);
        assert_eq!(not_joined(d, 2), [0, 1]);
        std::fs::write(d.join(joined_file(1)), "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(not_joined(d, 2), [0]);
        std::fs::write(&release, "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(wait(60_000), JoinWait::Released);
        std::fs::write(d.join(joined_file(0)), "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(wait(60_000), JoinWait::AllJoined);
    }
}
