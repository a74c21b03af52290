//! How `plan` cuts a source's key space into shards, as any runner needs it (the CLI's `plan`
//! only prints what this returns): a span given (`--key-space`) in equal widths; otherwise the
//! source's smallest and largest key, cut at the quantiles of the key's distribution where the
//! source can say it (`AnySource::key_cuts`: PostgreSQL's histogram, a MySQL/MariaDB key
//! sample), else in equal widths between them; a source with no bounds in equal widths over
//! the whole ID space. Where the cuts come from changes how even the shards are, never which
//! IDs they cover (`split`, `split_at`).

use super::plan::{split, split_at, Split};
use crate::contract::KeyRange;
use crate::source::{AnySource, FetchError};

/// Why the key space could not be cut.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// The source could not say its key's bounds or statistics.
    #[error("{what}: {error:?}")]
    Source {
        /// What was being read (`reading the key's bounds`, `reading the key's statistics`).
        what: &'static str,
        /// The source's error.
        error: FetchError,
    },
    /// The number of shards does not fit the key space.
    #[error(transparent)]
    Shards(#[from] super::plan::ShardsError),
}

/// The split of `source`'s key space into `n` shards: `key_space` (inclusive) when given,
/// else as the module says.
///
/// # Errors
/// `SplitError::Source` when the source cannot be asked; `Shards` when `n` does not fit.
pub async fn split_for(
    source: &mut AnySource,
    key_space: Option<(u64, u64)>,
    n: u32,
) -> Result<(Split, Vec<KeyRange>), SplitError> {
    let (by, lo, last) = match key_space {
        Some((lo, hi)) => ("given", lo, hi),
        None => match source
            .key_bounds()
            .await
            .map_err(|error| SplitError::Source {
                what: "reading the key's bounds",
                error,
            })? {
            Some((lo, hi)) => ("min_max", lo, hi),
            None => ("equal_width", 0, u64::MAX - 1),
        },
    };
    let cuts = if by == "min_max" {
        source
            .key_cuts(lo, last, n)
            .await
            .map_err(|error| SplitError::Source {
                what: "reading the key's statistics",
                error,
            })?
    } else {
        None
    };
    let (by, ranges) = match cuts {
        Some((by, cuts)) => (by, split_at(&cuts)),
        None => (by, split(lo, last, n)),
    };
    let ranges = ranges.map_err(SplitError::Shards)?;
    Ok((
        Split {
            by: by.to_owned(),
            lo,
            last,
        },
        ranges,
    ))
}
