//! What a job runner's shard needs before it scans, whatever runs it (the CLI's `scan --plan`,
//! a runner written against the library): its index, from the environment variable its runner
//! sets, and the attempt of its shard a store already holds, which it continues or shows
//! rather than begin a second one (so a runner's retry is safe).

use crate::contract::Contract;
use crate::receipt::{terminal_safe, RunId};
use crate::reconcile::Status;
use crate::store::{ReadError, RunState, Snapshot};

/// The environment variables a shard index is read from, and the runner that sets each.
pub const SHARD_ENV: [(&str, &str); 3] = [
    ("JOB_COMPLETION_INDEX", "a Kubernetes Indexed Job"),
    ("SLURM_ARRAY_TASK_ID", "a Slurm job array"),
    (
        "SCANLEDGER_SHARD",
        "a GitHub Actions matrix (env: SCANLEDGER_SHARD: ${{ matrix.shard }}) or any runner",
    ),
];

/// Why the environment names no shard index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardEnvError {
    /// None of `SHARD_ENV` is set.
    #[error("none of {} is set", SHARD_ENV.map(|(n, _)| n).join(", "))]
    Unset,
    /// Two of them are set to different values (shown terminal-safe).
    #[error("{first}={first_value} and {other}={other_value} disagree")]
    Disagree {
        /// The first variable set.
        first: &'static str,
        /// Its value.
        first_value: String,
        /// Another variable, set otherwise.
        other: &'static str,
        /// Its value.
        other_value: String,
    },
    /// The value is not a shard index (shown terminal-safe).
    #[error("{name}={value} is not a shard index")]
    NotAnIndex {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
}

/// The shard index from the process's environment: exactly one of `SHARD_ENV` set, or
/// several that agree.
///
/// # Errors
/// `ShardEnvError` when none is set, two disagree, or the value is not an index.
pub fn index_from_env() -> Result<u32, ShardEnvError> {
    index_from(|name| std::env::var(name).ok())
}

/// [`index_from_env`] over any lookup of the variables.
///
/// # Errors
/// As [`index_from_env`].
pub fn index_from(var: impl Fn(&str) -> Option<String>) -> Result<u32, ShardEnvError> {
    let found: Vec<(&'static str, String)> = SHARD_ENV
        .iter()
        .filter_map(|(name, _)| var(name).map(|v| (*name, v)))
        .collect();
    let Some((first, value)) = found.first() else {
        return Err(ShardEnvError::Unset);
    };
    let shown = |v: &str| terminal_safe(v).into_owned();
    if let Some((other, v)) = found.iter().find(|(_, v)| v != value) {
        return Err(ShardEnvError::Disagree {
            first,
            first_value: shown(value),
            other,
            other_value: shown(v),
        });
    }
    value
        .trim()
        .parse::<u32>()
        .map_err(|_| ShardEnvError::NotAnIndex {
            name: first,
            value: shown(value),
        })
}

/// A store's attempt of one shard: its newest run of the shard that is not superseded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The run.
    pub run: RunId,
    /// Its state.
    pub state: RunState,
    /// Its coverage status.
    pub status: Status,
}

impl Attempt {
    /// Whether the attempt is done: finished, and not `unknown` (which scanning again
    /// continues where it can); a done attempt is shown, never scanned again.
    #[must_use]
    pub fn done(&self) -> bool {
        self.state == RunState::Finished && self.status != Status::Unknown
    }
}

/// The attempt of the shard `contract` is (its `shard` reference) among the runs `snap` reads.
///
/// # Errors
/// `ReadError` when the store is unreadable or damaged.
pub fn attempt_of(snap: &Snapshot<'_>, contract: &Contract) -> Result<Option<Attempt>, ReadError> {
    for r in snap.runs()? {
        if r.state == RunState::Superseded {
            continue;
        }
        if snap.header(r.run_id)?.contract.scope.shard == contract.scope.shard {
            return Ok(Some(Attempt {
                run: r.run_id,
                state: r.state,
                status: r.coverage_status,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_one_variable_or_several_that_agree() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(index_from(env(&[])), Err(ShardEnvError::Unset));
        assert_eq!(index_from(env(&[("SCANLEDGER_SHARD", " 3 ")])), Ok(3));
        assert_eq!(
            index_from(env(&[
                ("SLURM_ARRAY_TASK_ID", "2"),
                ("SCANLEDGER_SHARD", "2")
            ])),
            Ok(2)
        );
        let e = index_from(env(&[
            ("JOB_COMPLETION_INDEX", "1"),
            ("SCANLEDGER_SHARD", "2"),
        ]));
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("JOB_COMPLETION_INDEX=1 and SCANLEDGER_SHARD=2 disagree".to_owned())
        );
        let e = index_from(env(&[("SCANLEDGER_SHARD", "x\u{1b}")])).map_err(|e| e.to_string());
        assert_eq!(
            e,
            Err("SCANLEDGER_SHARD=x\\u{1b} is not a shard index".to_owned())
        );
    }
}
