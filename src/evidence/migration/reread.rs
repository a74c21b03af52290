//! The re-read of `--reread`: only the key ranges of the partitions whose content digests
//! differ are read again from both SQL sources, each as a fresh verified collection under its
//! run's own contract, and the IDs whose records differ are named.
//!
//! A re-read reads the collections as they are now, so each side's re-read must reproduce,
//! partition by partition, the IDs and the content accumulator its run stored; a partition that
//! does not (the source changed since the scan) is reported as unreproduced and its changes are
//! never listed. Blocking: each side runs on a runtime of its own (`reread_key_ranges`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collect::reread_key_ranges;
use crate::contract::{IdCodecKind, Mode};
use crate::digest::Hash;
use crate::evidence::across::{changed_ids, int_accumulators};
use crate::evidence::lists::{Compared, RunAt};
use crate::idset::{partition_of, IdSet, PARTITION_BITS};
use crate::store::RunHeader;

use super::MigrationError;

/// The sources to re-read from, when not the ones recorded with the runs.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RereadSources {
    /// The old (`--from`) run's source.
    pub from_source: Option<String>,
    /// The new (`--to`) run's source.
    pub to_source: Option<String>,
}

impl RereadSources {
    /// Sources given for either side (`None` keeps the recorded one).
    #[must_use]
    pub fn new(from_source: Option<String>, to_source: Option<String>) -> RereadSources {
        RereadSources {
            from_source,
            to_source,
        }
    }
}

/// What a re-read found.
#[derive(Debug, Default)]
pub(crate) struct RereadOutcome {
    /// The partitions re-read.
    pub partitions: Vec<u64>,
    /// IDs both runs hold whose records differ, in partitions both re-reads reproduced.
    pub changed: IdSet,
    /// (side, partition) whose re-read did not reproduce the run's stored IDs and digest.
    pub unreproduced: Vec<(Side, u64)>,
    /// A side whose re-read did not verify, with why.
    pub failed: Vec<(Side, String)>,
}

/// A side of a comparison, as the JSON names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The old (`--from`) run.
    Old,
    /// The new (`--to`) run.
    New,
}

impl RereadOutcome {
    /// Whether the re-read is complete evidence for its partitions.
    pub(crate) fn is_exact(&self) -> bool {
        self.unreproduced.is_empty() && self.failed.is_empty()
    }
}

/// Inclusive key ranges covering `partitions` (ascending), adjacent ones merged.
pub(crate) fn key_ranges(partitions: &[u64]) -> Vec<(u64, u64)> {
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

/// Re-reads `partitions` from both runs' sources and names the IDs whose records differ.
pub(crate) fn reread(
    cmp: &Compared<'_, '_>,
    partitions: &[u64],
    sources: &RereadSources,
) -> Result<RereadOutcome, MigrationError> {
    for h in [&cmp.old, &cmp.new] {
        if h.contract.id_codec != IdCodecKind::Int {
            return Err(MigrationError::RereadCodec {
                run: h.run_id,
                codec: h.contract.id_codec,
            });
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
    let (old_at, new_at) = cmp.at();
    let old = read_side(
        Side::Old,
        old_at,
        &cmp.old,
        sources.from_source.as_deref(),
        &ranges,
        partitions,
        &mut outcome,
    )?;
    let new = read_side(
        Side::New,
        new_at,
        &cmp.new,
        sources.to_source.as_deref(),
        &ranges,
        partitions,
        &mut outcome,
    )?;
    let bad: Vec<u64> = outcome.unreproduced.iter().map(|(_, p)| *p).collect();
    // Only the partitions asked for, and only those both re-reads reproduced: rows of other
    // partitions (read between merged ranges) were never checked against a scan.
    outcome.changed = changed_ids(&old, &new)
        .iter()
        .filter(|id| {
            let p = partition_of(*id);
            partitions.binary_search(&p).is_ok() && !bad.contains(&p)
        })
        .collect();
    Ok(outcome)
}

/// One side's re-read: its content digests by ID, with the partitions it did not reproduce
/// (or why it failed) recorded in `outcome`.
fn read_side(
    side: Side,
    at: RunAt<'_, '_>,
    h: &RunHeader,
    given: Option<&str>,
    ranges: &[(u64, u64)],
    partitions: &[u64],
    outcome: &mut RereadOutcome,
) -> Result<BTreeMap<u64, Option<Hash>>, MigrationError> {
    let spec = given
        .or(h.source_spec.as_deref())
        .ok_or(MigrationError::RereadSource {
            run: h.run_id,
            side,
        })?;
    let mut contract = h.contract.clone();
    contract.snapshot_id = None;
    contract.expected_count = None;
    contract.expected_partitions = None;
    contract.mode = Mode::All;
    let got = match reread_key_ranges(spec, ranges, &contract) {
        Err(source) => {
            return Err(MigrationError::RereadOpen {
                side,
                source: Box::new(source),
            })
        }
        Ok(Ok(r)) => r.contents,
        Ok(Err(e)) => {
            outcome.failed.push((side, e.to_string()));
            return Ok(BTreeMap::new());
        }
    };
    let stored_acc = at.snap.content(h.run_id)?;
    let stored_ids = at.snap.partitions_of(h.run_id, partitions)?;
    let rebuilt = int_accumulators(&got);
    let read_ids: IdSet = got.keys().copied().collect();
    for (p, stored) in &stored_ids {
        let ids_match = read_ids.partition(*p) == stored.as_ref();
        let acc_match = rebuilt.as_ref().and_then(|r| r.get(p)) == stored_acc.get(p);
        if !(ids_match && acc_match) {
            outcome.unreproduced.push((side, *p));
        }
    }
    Ok(got)
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
