//! The re-read of `--reread`: only the key ranges of the partitions whose content digests
//! differ are read again from both SQL sources, each as a fresh verified collection under its
//! run's own contract, and the IDs whose records differ are named.
//!
//! A re-read reads the collections as they are now, so each side's re-read must reproduce,
//! partition by partition, the IDs and the content accumulator its run stored; a partition that
//! does not (the source changed since the scan) is reported as unreproduced and its changes are
//! never listed. Blocking: each side runs on a thread and a runtime of its own
//! (`reread_streamed`), and a third merges their key streams (`collect::KeyComparator`).
//! Bounded: a page or two of each side, the IDs read and one 64-byte accumulator per
//! partition, whatever the number of rows re-read.

use serde::Serialize;

use crate::collect::{key_streams, reread_streamed, IncompleteRead, StreamedKeys, StreamedReread};
use crate::contract::{Contract, IdCodecKind, Mode};
use crate::evidence::lists::{Compared, RunAt};
use crate::idset::{partition_of, IdSet, PARTITION_BITS};
use crate::source::AnySource;
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
    /// The first of them (`collect::CHANGED_COLUMNS_MAX` at most), each with its differing
    /// content columns as bits (`StreamedKeys::changed_columns`).
    pub changed_columns: Vec<(u64, Option<u64>)>,
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

/// Re-reads `partitions` from both runs' sources and names the IDs whose records differ: both
/// sides are read at once, in key order, and merged by the one-pass comparator as their pages
/// come (`collect::reread_streamed`), so a re-read holds a page or two of each side, the IDs
/// read and one accumulator per partition, never the rows of a partition.
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
    // Both sources opened before either is read: one that cannot be opened stops the re-read
    // before a row is read.
    let old_src = open_side(Side::Old, &cmp.old, sources.from_source.as_deref(), &ranges)?;
    let new_src = open_side(Side::New, &cmp.new, sources.to_source.as_deref(), &ranges)?;
    let (old_c, new_c) = (reread_contract(&cmp.old), reread_contract(&cmp.new));
    let (a, b, comparator) = key_streams();
    let (old, new, found) = std::thread::scope(|s| {
        let compared = s.spawn(move || comparator.run());
        let old = s.spawn(|| reread_streamed(old_src, &old_c, a));
        let new = s.spawn(|| reread_streamed(new_src, &new_c, b));
        let joined = |h: std::thread::ScopedJoinHandle<'_, _>| {
            h.join().unwrap_or_else(|_| Ok(Err(panicked())))
        };
        let (old, new) = (joined(old), joined(new));
        // Both senders are gone with their reads, so the comparator has ended.
        let found = compared.join().unwrap_or_else(|_| StreamedKeys {
            incomplete: Some("the comparator panicked".into()),
            ..StreamedKeys::default()
        });
        (old, new, found)
    });
    let (old_at, new_at) = cmp.at();
    for (side, at, h, read) in [
        (Side::Old, old_at, &cmp.old, old),
        (Side::New, new_at, &cmp.new, new),
    ] {
        let read = read.map_err(|source| MigrationError::RereadOpen {
            side,
            source: Box::new(source),
        })?;
        check_side(side, at, h, read, partitions, &mut outcome)?;
    }
    if let Some(why) = found.incomplete.as_deref() {
        if outcome.failed.is_empty() {
            let side = if why.starts_with("--to") {
                Side::New
            } else {
                Side::Old
            };
            outcome.failed.push((side, why.to_owned()));
        }
        return Ok(outcome);
    }
    let bad: Vec<u64> = outcome.unreproduced.iter().map(|(_, p)| *p).collect();
    // Only the partitions asked for, and only those both re-reads reproduced: rows of other
    // partitions (read between merged ranges) were never checked against a scan.
    let kept = |id: &u64| {
        let p = partition_of(*id);
        partitions.binary_search(&p).is_ok() && !bad.contains(&p)
    };
    outcome.changed = found.changed.iter().filter(kept).collect();
    outcome.changed_columns = found
        .changed_columns
        .into_iter()
        .filter(|(id, _)| kept(id))
        .collect();
    Ok(outcome)
}

/// The contract a side is re-read under: its run's own, for every row of its ranges.
fn reread_contract(h: &RunHeader) -> Contract {
    let mut contract = h.contract.clone();
    contract.snapshot_id = None;
    contract.expected_count = None;
    contract.expected_partitions = None;
    contract.mode = Mode::All;
    contract
}

fn panicked() -> IncompleteRead {
    IncompleteRead {
        receipt: None,
        reasons: Vec::new(),
        error: Some(crate::Error::Io {
            path: std::path::PathBuf::from("<re-read>"),
            source: std::io::Error::other("a re-read panicked"),
        }),
    }
}

/// A side's source, narrowed to `ranges`: the one given, else the one recorded with its run.
fn open_side(
    side: Side,
    h: &RunHeader,
    given: Option<&str>,
    ranges: &[(u64, u64)],
) -> Result<AnySource, MigrationError> {
    let spec = given
        .or(h.source_spec.as_deref())
        .ok_or(MigrationError::RereadSource {
            run: h.run_id,
            side,
        })?;
    AnySource::open_key_ranges(spec, ranges).map_err(|e| MigrationError::RereadOpen {
        side,
        source: Box::new(crate::Error::Source(e)),
    })
}

/// One side's re-read against its run: the partitions it did not reproduce (IDs or content
/// accumulator), or why it failed, recorded in `outcome`.
fn check_side(
    side: Side,
    at: RunAt<'_, '_>,
    h: &RunHeader,
    read: Result<StreamedReread, IncompleteRead>,
    partitions: &[u64],
    outcome: &mut RereadOutcome,
) -> Result<(), MigrationError> {
    let read = match read {
        Ok(r) if r.restarted => {
            outcome.failed.push((
                side,
                "it began again under a fresh snapshot after its first pages, which were compared already".into(),
            ));
            return Ok(());
        }
        Ok(r) => r,
        Err(e) => {
            outcome.failed.push((side, e.to_string()));
            return Ok(());
        }
    };
    let stored_acc = at.snap.content(h.run_id)?;
    let stored_ids = at.snap.partitions_of(h.run_id, partitions)?;
    let read_ids = read.inventory.id_set();
    for (p, stored) in &stored_ids {
        let ids_match = read_ids.partition(*p) == stored.as_ref();
        let acc_match = read.accumulators.as_ref().and_then(|r| r.get(p)) == stored_acc.get(p);
        if !(ids_match && acc_match) {
            outcome.unreproduced.push((side, *p));
        }
    }
    Ok(())
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
