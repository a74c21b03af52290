//! Reclaiming space: deleting a run and compacting the file.
//!
//! A deleted run's records, page log, bitmaps, leaves, resume request and stop go in one write
//! transaction, then its key's slot in the key file is zeroed; the strings it interned stay (its (source, tenant) dictionary is shared with
//! the other runs of the collection). Compaction hands redb's freed pages back to the file
//! system, and with them whatever old values they still held.

use super::error::{Failure, WriteError};
use super::schema::{CONTENT, CURSORS, CURSOR_KEYS, IDS, LABELS, LEAVES, PAGES, RUNS};
use super::{RunState, Store};
use crate::receipt::RunId;

impl Store {
    /// Removes `run` when it committed no page and was not restarted: a run its source refused
    /// at its first request, so that no run is left that `resume` would only fail on again.
    /// Returns whether it was removed; a run that cannot be read or deleted stays as it is
    /// (`runs` shows it interrupted).
    pub fn discard_unstarted(&mut self, run: RunId) -> bool {
        let unstarted = self
            .read()
            .ok()
            .and_then(|snap| snap.header(run).ok())
            .is_some_and(|h| h.pages_observed == 0 && h.state != RunState::Superseded);
        unstarted && self.delete_run(run).is_ok()
    }

    /// Deletes a run and everything recorded for it, in one transaction. A run another
    /// process is writing is refused.
    ///
    /// # Errors
    /// `UnknownRun`; `RunLive` when another process writes the run; otherwise as any write.
    pub fn delete_run(&mut self, run: RunId) -> Result<(), WriteError> {
        self.settle()?;
        let header = self.read()?.header(run)?;
        if header.state == RunState::Running {
            return Err(WriteError::RunLive { run });
        }
        let txn = self.write_txn()?;
        let result = self
            .engine
            .contain("delete a run", || -> Result<(), redb::Error> {
                let r = run.0;
                txn.open_table(RUNS)?.remove(r)?;
                txn.open_table(PAGES)?
                    .retain_in((r, 0)..=(r, u32::MAX), |_, _| false)?;
                txn.open_table(IDS)?
                    .retain_in((r, 0)..=(r, u64::MAX), |_, _| false)?;
                txn.open_table(LABELS)?
                    .retain_in((r, 0, 0)..=(r, u32::MAX, u64::MAX), |_, _| false)?;
                txn.open_table(LEAVES)?
                    .retain_in((r, 0)..=(r, u64::MAX), |_, _| false)?;
                txn.open_table(CONTENT)?
                    .retain_in((r, 0)..=(r, u64::MAX), |_, _| false)?;
                txn.open_table(CURSORS)?.remove(r)?;
                txn.open_table(CURSOR_KEYS)?.remove(r)?;
                Ok(())
            })
            .and_then(|()| super::stops::remove(&self.engine, &txn, run));
        if let Err(f) = result {
            return Err(self.poison(f));
        }
        self.commit(txn)?;
        self.erase_keys(&[run.0])
    }

    /// Compacts the file: freed pages (and the old values they held) go back to the file
    /// system. Needs the store to itself: no reader in another process.
    ///
    /// # Errors
    /// `WriteError::Busy` when another process reads the store; otherwise as any write.
    pub fn compact(&mut self) -> Result<(), WriteError> {
        let path = self.path().to_owned();
        if self.poisoned.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(WriteError::Poisoned { path });
        }
        self.settle()?;
        match self.engine.compact() {
            Ok(()) => Ok(()),
            Err(CompactOutcome::Busy) => Err(WriteError::Busy { path }),
            Err(CompactOutcome::ReadOnly) => Err(WriteError::ReadOnly { path }),
            Err(CompactOutcome::Failed(f)) => Err(self.poison(f)),
        }
    }
}

/// Why a compaction did not happen.
pub(crate) enum CompactOutcome {
    /// Another transaction (a reader in another process) is open.
    Busy,
    /// The store was opened for reading.
    ReadOnly,
    /// The engine failed.
    Failed(Failure),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use crate::contract::Contract;
    use crate::source::{SimConfig, SimSource};
    use crate::store::StoreOptions;

    #[test]
    fn a_deleted_run_leaves_nothing_and_compaction_shrinks_the_file() {
        let dir = std::env::temp_dir().join(format!("sl-maint-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.redb");
        let mut store = Store::open(&path, StoreOptions::new().checkpoint_every(50)).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut kept = SimSource::new(SimConfig {
            records: 1_000,
            ..SimConfig::default()
        });
        let keep = rt
            .block_on(crate::collect::scan(
                &Contract::new("a"),
                &mut kept,
                &mut store,
            ))
            .unwrap()
            .meta
            .run_id;
        let mut big = SimSource::new(SimConfig {
            records: 2_000_000,
            random: true,
            ..SimConfig::default()
        });
        let gone = rt
            .block_on(crate::collect::scan(
                &Contract::new("b"),
                &mut big,
                &mut store,
            ))
            .unwrap()
            .meta
            .run_id;
        let before = std::fs::metadata(&path).unwrap().len();
        store.delete_run(gone).unwrap();
        {
            let snap = store.read().unwrap();
            assert!(matches!(
                snap.header(gone),
                Err(crate::store::ReadError::UnknownRun { .. })
            ));
            assert_eq!(snap.ids(gone).unwrap().len(), 0);
            assert_eq!(snap.page_log(gone).unwrap().len(), 0);
            assert_eq!(snap.ids(keep).unwrap().len(), 1_000);
        }
        store.compact().unwrap();
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after < before / 2,
            "compaction kept {after} of {before} bytes"
        );
        assert!(matches!(
            store.delete_run(gone),
            Err(WriteError::UnknownRun { .. })
        ));
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
