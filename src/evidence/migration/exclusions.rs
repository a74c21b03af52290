//! The declared exclusions of `migration verify --exclude FILE`: IDs deliberately not migrated
//! (or present only in the target), one per line in exactly the form the runs' codec writes.
//!
//! Blank lines and lines starting with `#` are skipped; a line in any other form (`007`, `+7`,
//! `customer-007`) is refused with its file and line, never read as the ID it resembles, and a
//! line that repeats an earlier one is refused naming both lines, so `excluded_count` counts
//! distinct IDs. The file and its entries are bounded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::evidence::ids::{parse_given, GivenId, IdTextError};
use crate::evidence::lists::RunAt;
use crate::idset::IdSet;
use crate::io_bound::FileError;
use crate::store::{ReadError, RunHeader};

/// Bytes of an `--exclude` file.
pub const EXCLUDE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// IDs of an `--exclude` file.
pub const EXCLUDED_IDS_MAX: usize = 1_000_000;

/// Why an `--exclude` file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExcludeError {
    /// The file cannot be read within its bound.
    #[error(transparent)]
    File(#[from] FileError),
    /// A line is not an ID, or repeats one.
    #[error("{}:{line}: {problem}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// More IDs than `EXCLUDED_IDS_MAX`.
    #[error("{}: more than {EXCLUDED_IDS_MAX} excluded IDs", path.display())]
    TooMany {
        /// The file.
        path: PathBuf,
    },
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// The declared exclusions, as each run's codec reads them.
#[derive(Debug, Default)]
pub(crate) struct Exclusions {
    /// (text, ID in the old run's space, ID in the new run's space), one per distinct line.
    pub entries: Vec<(String, Option<u64>, Option<u64>)>,
    pub old: IdSet,
    pub new: IdSet,
}

/// Reads an `--exclude` file for the runs `old` and `new`.
pub(crate) fn read_exclusions(
    path: &Path,
    old_at: RunAt<'_, '_>,
    old: &RunHeader,
    new_at: RunAt<'_, '_>,
    new: &RunHeader,
) -> Result<Exclusions, ExcludeError> {
    let text = crate::io_bound::read_text(path, EXCLUDE_BYTES_MAX)?;
    let mut ex = Exclusions::default();
    let mut first_line: HashMap<&str, usize> = HashMap::new();
    for (idx, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let bad = |problem: String| ExcludeError::Line {
            path: path.to_owned(),
            line: idx + 1,
            problem,
        };
        if let Some(first) = first_line.insert(t, idx + 1) {
            return Err(bad(format!(
                "{:?} is declared twice (first on line {first})",
                t.chars().take(64).collect::<String>()
            )));
        }
        if ex.entries.len() >= EXCLUDED_IDS_MAX {
            return Err(ExcludeError::TooMany {
                path: path.to_owned(),
            });
        }
        let id_in = |at: RunAt<'_, '_>, h: &RunHeader| -> Result<Option<u64>, ExcludeError> {
            match parse_given(at.snap, h, t)? {
                Ok(GivenId::Known(id)) => Ok(Some(id)),
                Ok(GivenId::Unknown) => Ok(None),
                Err(e @ IdTextError::NotCanonical { .. }) => Err(bad(e.to_string())),
            }
        };
        let a = id_in(old_at, old)?;
        let b = id_in(new_at, new)?;
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

impl Exclusions {
    /// The entries that are no difference: neither missing from the new run (in `removed`,
    /// the old side's IDs excluded and found missing) nor extra in it (`added`).
    pub(crate) fn unmatched<'e>(&'e self, removed: &IdSet, added: &IdSet) -> Vec<&'e str> {
        self.entries
            .iter()
            .filter(|(_, a, b)| {
                !(a.is_some_and(|a| removed.contains(a)) || b.is_some_and(|b| added.contains(b)))
            })
            .map(|(t, _, _)| t.as_str())
            .collect()
    }
}
