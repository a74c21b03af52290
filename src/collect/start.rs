//! Where a repeated command's scan starts: the unfinished run it left continued, else a new
//! run begun (`migration verify` with a source on a side continues its killed or interrupted
//! scan rather than begin again).

use super::{now_ms, resume_with, scan_with, Error, RunLog, ScanResult};
use crate::contract::Contract;
use crate::receipt::RunId;
use crate::reconcile::Reconciler;
use crate::source::PageSource;
use crate::store::{LoadedRun, Raise, RunWriter, Store};

/// Where a scan starts: a run reopened to be continued, or a new run (its reconciler and its
/// start time).
pub enum ScanStart {
    /// The unfinished run, reopened (`Store::resume`).
    Continue(Box<LoadedRun>),
    /// A new run: its reconciler and its start, in milliseconds since the Unix epoch.
    Begin(Box<Reconciler>, u64),
}

impl ScanStart {
    /// A new run of `contract` in `store`, begun now: its writer, and its start.
    ///
    /// # Errors
    /// `Error::Write` when the store cannot begin a run.
    pub fn begin<'s>(
        store: &'s mut Store,
        contract: &Contract,
    ) -> Result<(RunWriter<'s>, ScanStart), Error> {
        let started = now_ms();
        let mut rec = Reconciler::new(contract);
        let (writer, interner) = store.begin(contract, started)?;
        if let Some(interner) = interner {
            rec.set_interner(interner);
        }
        Ok((writer, ScanStart::Begin(Box::new(rec), started)))
    }

    /// Scans from here to the end, recording through `log` (the writer
    /// [`continue_or_begin`] returned, or a log around it).
    ///
    /// # Errors
    /// As [`scan`](super::scan).
    pub async fn run<S: PageSource, L: RunLog>(
        self,
        contract: &Contract,
        log: L,
        source: &mut S,
    ) -> Result<ScanResult, Error> {
        match self {
            ScanStart::Continue(loaded) => resume_with(*loaded, log, None, source).await,
            ScanStart::Begin(rec, started) => scan_with(contract, *rec, log, started, source).await,
        }
    }
}

/// The run a repeated command scans `contract` into: the newest run of its scope read from
/// `recorded` (the source as runs record it, `recordable_spec`) that stopped short of its end
/// and can go on without a raised budget (`Store::unfinished_run`), continued; else a new
/// run. Returns the run's writer, where it starts, and the run continued, if one was.
///
/// # Errors
/// `Error::Read` or `Error::Write` when the store cannot be read or written.
pub fn continue_or_begin<'s>(
    store: &'s mut Store,
    contract: &Contract,
    recorded: &str,
) -> Result<(RunWriter<'s>, ScanStart, Option<RunId>), Error> {
    if let Some(run) = store.unfinished_run(&contract.scope, recorded)? {
        let (writer, loaded) = store.resume(run, &Raise::default())?;
        tracing::info!("{run} resumed");
        return Ok((writer, ScanStart::Continue(Box::new(loaded)), Some(run)));
    }
    let (writer, start) = ScanStart::begin(store, contract)?;
    tracing::info!("{} begun", writer.run());
    Ok((writer, start, None))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::reconcile::Status;
    use crate::source::{SimConfig, SimSource};
    use crate::store::StoreOptions;

    fn scan_to_end(store: &mut Store, c: &Contract) -> (Option<RunId>, RunId, Status) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (writer, start, continued) = continue_or_begin(store, c, "sim:records=300").unwrap();
        let mut source = SimSource::new(SimConfig::default().with_records(300));
        let done = rt.block_on(start.run(c, writer, &mut source)).unwrap();
        (continued, done.meta.run_id, done.reconciler.status())
    }

    #[test]
    fn a_run_left_unfinished_is_continued_and_a_finished_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.redb"), StoreOptions::new()).unwrap();
        store.record_source("sim:records=300");
        let c = Contract::new("sim");
        // An empty store: a new run, scanned to its end.
        let (continued, first, status) = scan_to_end(&mut store, &c);
        assert_eq!((continued, status), (None, Status::Verified));
        // A finished, verified run is not continued: the next command begins another.
        let (continued, second, _) = scan_to_end(&mut store, &c);
        assert_eq!(continued, None);
        assert_ne!(second, first);
        // A run begun and dropped (a killed command) is continued, under its own name.
        let (writer, start, _) = continue_or_begin(&mut store, &c, "sim:records=300").unwrap();
        assert!(matches!(start, ScanStart::Begin(..)));
        let left = writer.run();
        drop(writer);
        let (continued, run, status) = scan_to_end(&mut store, &c);
        assert_eq!(
            (continued, run, status),
            (Some(left), left, Status::Verified)
        );
        // Another source's unfinished run is not.
        let (writer, _, _) = continue_or_begin(&mut store, &c, "sim:records=300").unwrap();
        drop(writer);
        let (_, _, none) = continue_or_begin(&mut store, &c, "sim:records=301").unwrap();
        assert_eq!(none, None);
    }
}
