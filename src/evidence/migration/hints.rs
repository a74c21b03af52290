//! The commands a migration verdict suggests next, each naming the store its run lives in:
//! `--store` holds the first run of a command and `--other-store` the second, so a command
//! about the target's run puts the target's store first.

use std::path::Path;

use crate::receipt::RunId;

/// A word as a POSIX shell reads it back: quoted when it holds anything but plain characters.
///
/// ```
/// assert_eq!(scanledger::shell_word("a.redb"), "a.redb");
/// assert_eq!(scanledger::shell_word("my store.redb"), "'my store.redb'");
/// ```
#[must_use]
pub fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=+@%,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Where the two runs live, for the commands a verdict suggests.
#[derive(Debug, Clone)]
pub(crate) struct Stores {
    /// The first run's store (`--store`).
    pub main: String,
    /// Whether `--store` must be named (it is not the default).
    pub main_named: bool,
    /// The second run's store, when it is another file (`--other-store`).
    pub other: Option<String>,
}

impl Stores {
    pub(crate) fn new(main: &Path, main_named: bool, other: Option<&Path>) -> Stores {
        Stores {
            main: main.display().to_string(),
            main_named,
            other: other.map(|p| p.display().to_string()),
        }
    }

    /// ` --store PATH` for a command about the first run, when it must be named.
    fn main_arg(&self) -> String {
        if self.main_named || self.other.is_some() {
            format!(" --store {}", shell_word(&self.main))
        } else {
            String::new()
        }
    }

    /// ` --store PATH` for a command about a run of one side.
    fn store_of(&self, new_side: bool) -> String {
        match (&self.other, new_side) {
            (Some(other), true) => format!(" --store {}", shell_word(other)),
            _ => self.main_arg(),
        }
    }

    /// Continue a run that stopped early.
    pub(crate) fn resume(&self, run: RunId, new_side: bool) -> String {
        format!("scanledger{} resume {run}", self.store_of(new_side))
    }

    /// List every ID the target lacks: `missing` reads its run from `--store`, so the target's
    /// store comes first and the source's is `--other-store`.
    pub(crate) fn missing(&self, old: RunId, new: RunId) -> String {
        match &self.other {
            Some(other) => format!(
                "scanledger --store {} missing {new} --against {old} --across --other-store {} --all",
                shell_word(other),
                shell_word(&self.main)
            ),
            None => format!(
                "scanledger{} missing {new} --against {old} --across --all",
                self.main_arg()
            ),
        }
    }

    /// The verdict again with a re-read of the differing partitions.
    pub(crate) fn reread(&self, old: RunId, new: RunId) -> String {
        let other = self
            .other
            .as_ref()
            .map(|p| format!(" --other-store {}", shell_word(p)))
            .unwrap_or_default();
        format!(
            "scanledger{} migration verify --from {old} --to {new}{other} --content --reread (lists the changed IDs)",
            self.main_arg()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_names_the_store_of_the_run_it_is_about() {
        let s = Stores::new(Path::new("my.redb"), true, Some(Path::new("pg.redb")));
        assert_eq!(
            s.resume(RunId(2), true),
            "scanledger --store pg.redb resume run-2"
        );
        assert_eq!(
            s.resume(RunId(1), false),
            "scanledger --store my.redb resume run-1"
        );
        assert_eq!(
            s.missing(RunId(1), RunId(2)),
            "scanledger --store pg.redb missing run-2 --against run-1 --across --other-store my.redb --all"
        );
        let one = Stores::new(Path::new("./scanledger.redb"), false, None);
        assert_eq!(one.resume(RunId(2), true), "scanledger resume run-2");
    }
}
