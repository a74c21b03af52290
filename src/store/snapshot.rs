//! A consistent view of the store: every read of one command goes through one read transaction,
//! so a command never sees a state torn between two commits of a concurrent scan.
//!
//! Values are copied out of redb under `Engine::contain` and decoded outside it, so a damaged
//! value is reported as such and a bug in our decoding still panics as a bug.

use redb::{ReadTransaction, ReadableTable};
use roaring::RoaringBitmap;

use super::engine::Engine;
use super::error::{Failure, ReadError};
use super::records::{self, RunRecord, StoredState, CURSOR_KEY_LEN};
use super::schema::{
    CONTENT, CURSORS, CURSOR_KEYS, IDS, INTERN, INTERN_REV, LABELS, LEAVES, META,
    META_JOURNAL_BASE, META_TOKEN_KEY, PAGES, RUNS, TOKEN_KEY_LEN,
};
use super::{LoadedRun, RunHeader, RunState, RunSummary, ScopeKey};
use crate::codec::{IdCodec, Interner};
use crate::contract::{Contract, IdCodecKind};
use crate::digest::{self, Hash};
use crate::idset::{partition_of, IdSet, PARTITION_BITS};
use crate::receipt::{rfc3339, RunId, RunMeta};
use crate::reconcile::{PageLog, Reconciler, Request};

use super::keys::KeyMap;

/// A read view of a store: one read transaction.
pub struct Snapshot<'s> {
    pub(super) engine: &'s Engine,
    pub(super) txn: ReadTransaction,
    /// The per-run cursor keys of the key file beside the store (`keys.rs`).
    keys: KeyMap,
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("path", &self.engine.path())
            .finish_non_exhaustive()
    }
}

impl<'s> Snapshot<'s> {
    pub(crate) fn new(engine: &'s Engine) -> Result<Snapshot<'s>, ReadError> {
        let txn = engine
            .begin_read()
            .map_err(|f| f.into_read(engine.path()))?;
        Ok(Snapshot {
            engine,
            txn,
            keys: KeyMap::default(),
        })
    }

    /// This view with the key file's keys, to open sealed requests with.
    pub(crate) fn with_keys(mut self, keys: KeyMap) -> Snapshot<'s> {
        self.keys = keys;
        self
    }

    /// The engine and the read transaction, for the store's modules that read their own
    /// tables (`stops`).
    pub(super) fn parts(&self) -> (&'s Engine, &ReadTransaction) {
        (self.engine, &self.txn)
    }

    pub(super) fn fail(&self, f: Failure) -> ReadError {
        f.into_read(self.engine.path())
    }

    pub(crate) fn damaged(&self, table: &str, run: Option<RunId>, what: &str) -> ReadError {
        let what = match run {
            Some(r) => format!("table {table}, {r}: {what}"),
            None => format!("table {table}: {what}"),
        };
        self.fail(Failure::damaged(what))
    }

    /// Every run, newest first, with its state (`interrupted` when nobody writes a run that is
    /// recorded as running).
    ///
    /// # Errors
    /// `ReadError` when the store cannot be read or a record does not decode.
    pub fn runs(&self) -> Result<Vec<RunSummary>, ReadError> {
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain("read the runs table", || -> Result<_, redb::Error> {
                let table = self.txn.open_table(RUNS)?;
                let mut out = Vec::new();
                for entry in table.iter()?.rev() {
                    let (k, v) = entry?;
                    out.push((k.value(), v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        let stops = self.stops(None)?;
        let mut out = Vec::with_capacity(raw.len());
        for (run, bytes) in raw {
            let run = RunId(run);
            let rec = self.decode_run(run, &bytes)?;
            let contract = self.contract_of(run, &rec)?;
            let state = self.state_of(run, rec.state);
            out.push(RunSummary {
                run_id: run,
                source: contract.scope.source,
                tenant: contract.scope.tenant,
                stopped_by: super::stops::shown(
                    stops.get(&run.0),
                    state,
                    rec.progress.pages_observed,
                ),
                state,
                coverage_status: rec.status,
                pages_observed: rec.progress.pages_observed,
                unique_ids_observed: rec.unique_ids,
                started_at: rfc3339(rec.started_at_ms),
                finished_at: rec.finished_at_ms.map(rfc3339),
            });
        }
        Ok(out)
    }

    /// The newest run's ID, if any (the `latest` alias).
    ///
    /// # Errors
    /// `ReadError` when the store cannot be read.
    pub fn latest(&self) -> Result<Option<RunId>, ReadError> {
        self.engine
            .contain("read the runs table", || -> Result<_, redb::Error> {
                let table = self.txn.open_table(RUNS)?;
                let last = table.last()?.map(|(k, _)| RunId(k.value()));
                Ok(last)
            })
            .map_err(|f| self.fail(f))
    }

    fn state_of(&self, run: RunId, stored: StoredState) -> RunState {
        match stored {
            // An exclusive writer holds the whole file (its lock covers the liveness bytes,
            // which would read as held); and while a `Snapshot` of it exists, no run writer
            // of it does.
            StoredState::Running
                if !self.engine.exclusive()
                    && super::backend::is_live(self.engine.path(), run.0) =>
            {
                RunState::Running
            }
            StoredState::Running => RunState::Interrupted,
            StoredState::Finished => RunState::Finished,
            StoredState::Superseded => RunState::Superseded,
        }
    }

    fn decode_run(&self, run: RunId, bytes: &[u8]) -> Result<RunRecord, ReadError> {
        records::decode_run(bytes)
            .ok_or_else(|| self.damaged("runs", Some(run), "the run record does not decode"))
    }

    pub(super) fn contract_of(&self, run: RunId, rec: &RunRecord) -> Result<Contract, ReadError> {
        Contract::from_json(&rec.contract_json)
            .map_err(|e| self.damaged("runs", Some(run), &format!("the stored contract: {e}")))
    }

    pub(crate) fn record(&self, run: RunId) -> Result<RunRecord, ReadError> {
        let bytes = self
            .engine
            .contain("read a run record", || -> Result<_, redb::Error> {
                let table = self.txn.open_table(RUNS)?;
                Ok(table.get(run.0)?.map(|v| v.value().to_vec()))
            })
            .map_err(|f| self.fail(f))?
            .ok_or_else(|| ReadError::UnknownRun {
                path: self.engine.path().to_owned(),
                run,
            })?;
        self.decode_run(run, &bytes)
    }

    /// A run's header: contract, state, counts and stored root, without loading a bitmap.
    ///
    /// # Errors
    /// `UnknownRun`, or `ReadError` when unreadable or damaged.
    pub fn header(&self, run: RunId) -> Result<RunHeader, ReadError> {
        let rec = self.record(run)?;
        let contract = self.contract_of(run, &rec)?;
        let state = self.state_of(run, rec.state);
        let stops = self.stops(Some(run))?;
        Ok(RunHeader {
            run_id: run,
            stopped_by: super::stops::shown(stops.get(&run.0), state, rec.progress.pages_observed),
            id_prefix: rec
                .progress
                .id_prefix
                .clone()
                .or_else(|| contract.id_prefix.clone()),
            state,
            coverage_status: rec.status,
            pages_observed: rec.progress.pages_observed,
            unique_ids_observed: rec.unique_ids,
            partitions: rec.partitions,
            merkle_root: rec.merkle_root,
            snapshot_id: rec.progress.pinned_snapshot.clone(),
            source_spec: rec.source_spec.clone(),
            contract,
        })
    }

    /// The page log of a run, in page order.
    ///
    /// # Errors
    /// `ReadError` when unreadable or damaged (a record of the wrong length, a gap).
    pub fn page_log(&self, run: RunId) -> Result<Vec<PageLog>, ReadError> {
        let raw: Vec<(u32, Vec<u8>)> = self
            .engine
            .contain("read the page log", || -> Result<_, redb::Error> {
                let table = self.txn.open_table(PAGES)?;
                let mut out = Vec::new();
                for entry in table.range((run.0, 0)..=(run.0, u32::MAX))? {
                    let (k, v) = entry?;
                    out.push((k.value().1, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        let mut out = Vec::with_capacity(raw.len());
        for (idx, bytes) in raw {
            let log = records::decode_page(idx, &bytes).ok_or_else(|| {
                self.damaged("pages", Some(run), "a page record has the wrong length")
            })?;
            if idx as usize != out.len() + 1 {
                return Err(self.damaged("pages", Some(run), "the page log has a gap"));
            }
            out.push(log);
        }
        Ok(out)
    }

    /// The ID set of a run.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub fn ids(&self, run: RunId) -> Result<IdSet, ReadError> {
        self.partitions_between(run, 0, u64::MAX)
    }

    /// The partitions `first..=last` of a run's ID set.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub fn partitions_between(
        &self,
        run: RunId,
        first: u64,
        last: u64,
    ) -> Result<IdSet, ReadError> {
        let mut set = IdSet::new();
        if first > last {
            return Ok(set);
        }
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain("read ID bitmaps", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(IDS)?;
                let mut out = Vec::new();
                for entry in t.range((run.0, first)..=(run.0, last))? {
                    let (k, v) = entry?;
                    out.push((k.value().1, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        for (p, bytes) in raw {
            self.check_partition("ids", run, p)?;
            set.set_partition(p, self.bitmap("ids", run, &bytes)?);
        }
        Ok(set)
    }

    pub(super) fn bitmap(
        &self,
        table: &str,
        run: RunId,
        bytes: &[u8],
    ) -> Result<RoaringBitmap, ReadError> {
        records::decode_bitmap(bytes)
            .ok_or_else(|| self.damaged(table, Some(run), "a partition bitmap does not decode"))
    }

    /// A partition index past the u64 ID space is damage, not data.
    pub(super) fn check_partition(&self, table: &str, run: RunId, p: u64) -> Result<(), ReadError> {
        if p > u64::MAX >> PARTITION_BITS {
            return Err(self.damaged(table, Some(run), "a partition index past the ID space"));
        }
        Ok(())
    }

    /// Several partitions of a run (low 16 bits), in the order asked; `None` for an empty one.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub fn partitions_of(
        &self,
        run: RunId,
        indexes: &[u64],
    ) -> Result<Vec<(u64, Option<RoaringBitmap>)>, ReadError> {
        let raw: Vec<Option<Vec<u8>>> = self
            .engine
            .contain("read ID bitmaps", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(IDS)?;
                let mut out = Vec::with_capacity(indexes.len());
                for &p in indexes {
                    out.push(t.get((run.0, p))?.map(|v| v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        indexes
            .iter()
            .zip(raw)
            .map(|(&p, bytes)| match bytes {
                None => Ok((p, None)),
                Some(b) => Ok((p, Some(self.bitmap("ids", run, &b)?))),
            })
            .collect()
    }

    /// Up to `n_max` IDs of a run at or above `start`, ascending: one page of `page`. Reads
    /// partitions from `start`'s onward and stops as soon as it has enough.
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub fn ids_from(&self, run: RunId, start: u64, n_max: usize) -> Result<Vec<u64>, ReadError> {
        let mut out = Vec::with_capacity(n_max.min(1 << 16));
        let mut next_partition = Some(partition_of(start));
        // Reads a few partitions at a time, so a small page never loads the whole run.
        while let Some(first) = next_partition {
            if out.len() >= n_max {
                break;
            }
            let raw = self
                .engine
                .contain("read ID bitmaps", || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(IDS)?;
                    let mut got = Vec::new();
                    for entry in t.range((run.0, first)..=(run.0, u64::MAX))? {
                        let (k, v) = entry?;
                        got.push((k.value().1, v.value().to_vec()));
                        if got.len() >= 8 {
                            break;
                        }
                    }
                    Ok(got)
                })
                .map_err(|f| self.fail(f))?;
            next_partition = match raw.last() {
                Some((p, _)) if raw.len() >= 8 => p.checked_add(1),
                _ => None,
            };
            for (p, bytes) in raw {
                self.check_partition("ids", run, p)?;
                let b = self.bitmap("ids", run, &bytes)?;
                let base = p << PARTITION_BITS;
                for low in &b {
                    let id = base | u64::from(low);
                    if id < start {
                        continue;
                    }
                    if out.len() >= n_max {
                        break;
                    }
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// The IDs of a run that carry label `name` (empty when the run has no such label).
    ///
    /// # Errors
    /// `ReadError` when unreadable or a bitmap does not decode.
    pub fn label_ids(&self, run: RunId, name: &str) -> Result<IdSet, ReadError> {
        let rec = self.record(run)?;
        let Some(idx) = rec.progress.label_names.iter().position(|n| n == name) else {
            return Ok(IdSet::new());
        };
        let mut labels = self.labels(run, rec.progress.label_names.len())?;
        Ok(std::mem::take(&mut labels[idx]))
    }

    /// The label sets of a run, in the order of its label names.
    fn labels(&self, run: RunId, n_labels: usize) -> Result<Vec<IdSet>, ReadError> {
        let raw: Vec<(u32, u64, Vec<u8>)> = self
            .engine
            .contain("read label bitmaps", || -> Result<_, redb::Error> {
                let t = self.txn.open_table(LABELS)?;
                let mut out = Vec::new();
                for entry in t.range((run.0, 0, 0)..=(run.0, u32::MAX, u64::MAX))? {
                    let (k, v) = entry?;
                    let (_, label, p) = k.value();
                    out.push((label, p, v.value().to_vec()));
                }
                Ok(out)
            })
            .map_err(|f| self.fail(f))?;
        let mut labels = vec![IdSet::new(); n_labels];
        for (label, p, bytes) in raw {
            self.check_partition("labels", run, p)?;
            let b = self.bitmap("labels", run, &bytes)?;
            let slot = labels
                .get_mut(label as usize)
                .ok_or_else(|| self.damaged("labels", Some(run), "a label index without a name"))?;
            slot.set_partition(p, b);
        }
        Ok(labels)
    }

    /// The Merkle leaves of a run's ID partitions (the `diff` fast path): stored when the run
    /// finished, else computed from its partitions.
    ///
    /// # Errors
    /// `ReadError` when unreadable or damaged.
    pub fn leaves(&self, run: RunId) -> Result<Vec<(u64, Hash)>, ReadError> {
        let rec = self.record(run)?;
        if rec.merkle_root.is_some() {
            let raw: Vec<(u64, Vec<u8>)> = self
                .engine
                .contain("read the leaves", || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(LEAVES)?;
                    let mut out = Vec::new();
                    for entry in t.range((run.0, 0)..=(run.0, u64::MAX))? {
                        let (k, v) = entry?;
                        out.push((k.value().1, v.value().to_vec()));
                    }
                    Ok(out)
                })
                .map_err(|f| self.fail(f))?;
            let mut out = Vec::with_capacity(raw.len());
            for (p, bytes) in raw {
                let h: Hash = bytes.as_slice().try_into().map_err(|_| {
                    self.damaged("leaves", Some(run), "a leaf hash is not 32 bytes")
                })?;
                out.push((p, h));
            }
            if out.len() as u64 == rec.partitions {
                return Ok(out);
            }
        }
        Ok(digest::leaves(&self.ids(run)?))
    }

    /// The content accumulators of a run, by leaf (empty when its source gave no content).
    ///
    /// # Errors
    /// `ReadError` when unreadable or an accumulator has the wrong length.
    pub fn content(
        &self,
        run: RunId,
    ) -> Result<std::collections::BTreeMap<u64, crate::content::ContentAcc>, ReadError> {
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain(
                "read the content accumulators",
                || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(CONTENT)?;
                    let mut out = Vec::new();
                    for entry in t.range((run.0, 0)..=(run.0, u64::MAX))? {
                        let (k, v) = entry?;
                        out.push((k.value().1, v.value().to_vec()));
                    }
                    Ok(out)
                },
            )
            .map_err(|f| self.fail(f))?;
        raw.into_iter()
            .map(|(leaf, bytes)| {
                let acc = <[u8; crate::content::CONTENT_ACC_LEN]>::try_from(bytes.as_slice())
                    .map_err(|_| {
                        self.damaged("content", Some(run), "an accumulator is not 64 bytes")
                    })?;
                Ok((leaf, crate::content::ContentAcc(acc)))
            })
            .collect()
    }

    /// The stamp of the store's last commit (`None` in a store never stamped: format 2).
    pub(crate) fn journal_base(&self) -> Result<Option<super::journal::Stamp>, ReadError> {
        let v = self
            .engine
            .contain("read the meta table", || -> Result<_, redb::Error> {
                let meta = self.txn.open_table(META)?;
                Ok(meta.get(META_JOURNAL_BASE)?.map(|v| v.value().to_vec()))
            })
            .map_err(|f| self.fail(f))?;
        match v {
            None => Ok(None),
            Some(b) => <super::journal::Stamp>::try_from(b.as_slice())
                .map(Some)
                .map_err(|_| self.damaged("meta", None, "journal_base is not 16 bytes")),
        }
    }

    /// The key that signs this store's page tokens (made when the store was created).
    ///
    /// # Errors
    /// `ReadError` when unreadable or the key has the wrong length.
    pub fn page_token_key(&self) -> Result<[u8; TOKEN_KEY_LEN], ReadError> {
        let v = self
            .engine
            .contain("read the meta table", || -> Result<_, redb::Error> {
                let meta = self.txn.open_table(META)?;
                Ok(meta.get(META_TOKEN_KEY)?.map(|v| v.value().to_vec()))
            })
            .map_err(|f| self.fail(f))?;
        v.and_then(|b| <[u8; TOKEN_KEY_LEN]>::try_from(b.as_slice()).ok())
            .ok_or_else(|| self.damaged("meta", None, "page_token_key is missing or not 32 bytes"))
    }

    /// The strings of some string IDs of a scope, each checked against the digest kept with it
    /// (a damaged string is reported, never printed). Point lookups: the run's dictionary is
    /// never loaded whole for this.
    ///
    /// # Errors
    /// `ReadError` when unreadable, or an ID has no string or a damaged one.
    pub fn strings(&self, scope: &ScopeKey, ids: &[u64]) -> Result<Vec<String>, ReadError> {
        let raw: Vec<Option<Vec<u8>>> = self
            .engine
            .contain(
                "read the string dictionary",
                || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(INTERN_REV)?;
                    let mut out = Vec::with_capacity(ids.len());
                    for &id in ids {
                        out.push(t.get((scope.as_bytes(), id))?.map(|v| v.value().to_vec()));
                    }
                    Ok(out)
                },
            )
            .map_err(|f| self.fail(f))?;
        ids.iter()
            .zip(raw)
            .map(|(id, bytes)| {
                let bytes = bytes.ok_or_else(|| {
                    self.damaged(
                        "intern_rev",
                        None,
                        &format!("string ID #{id} has no string"),
                    )
                })?;
                records::decode_interned(&bytes)
                    .map(|(s, _)| s)
                    .ok_or_else(|| {
                        self.damaged(
                            "intern_rev",
                            None,
                            &format!("the string of ID #{id} does not match its digest"),
                        )
                    })
            })
            .collect()
    }

    /// Calls `f` with every (ID, string, digest) of the scope's dictionary whose ID is in
    /// `set`, ascending, reading the dictionary in chunks; every string is checked against its
    /// digest.
    ///
    /// # Errors
    /// `ReadError` when unreadable, or an ID of `set` has no string or a damaged one.
    pub fn for_each_string(
        &self,
        scope: &ScopeKey,
        set: &IdSet,
        mut f: impl FnMut(u64, &str, &Hash) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        const CHUNK: usize = 4096;
        let mut wanted = set.iter().peekable();
        while wanted.peek().is_some() {
            let chunk: Vec<u64> = wanted.by_ref().take(CHUNK).collect();
            let (Some(&first), Some(&last)) = (chunk.first(), chunk.last()) else {
                break;
            };
            // Dense chunks read the dictionary's range; sparse ones look up each ID.
            let dense = last - first < 4 * CHUNK as u64;
            let raw: Vec<(u64, Vec<u8>)> = self
                .engine
                .contain(
                    "read the string dictionary",
                    || -> Result<_, redb::Error> {
                        let t = self.txn.open_table(INTERN_REV)?;
                        let mut out = Vec::with_capacity(chunk.len());
                        if dense {
                            for entry in
                                t.range((scope.as_bytes(), first)..=(scope.as_bytes(), last))?
                            {
                                let (k, v) = entry?;
                                out.push((k.value().1, v.value().to_vec()));
                            }
                        } else {
                            for &id in &chunk {
                                if let Some(v) = t.get((scope.as_bytes(), id))? {
                                    out.push((id, v.value().to_vec()));
                                }
                            }
                        }
                        Ok(out)
                    },
                )
                .map_err(|f| self.fail(f))?;
            let mut raw = raw.into_iter().peekable();
            for id in chunk {
                while raw.peek().is_some_and(|(k, _)| *k < id) {
                    raw.next();
                }
                let Some((_, bytes)) = raw.next().filter(|(k, _)| *k == id) else {
                    return Err(self.damaged(
                        "intern_rev",
                        None,
                        &format!("string ID #{id} has no string"),
                    ));
                };
                let (s, d) = records::decode_interned(&bytes).ok_or_else(|| {
                    self.damaged(
                        "intern_rev",
                        None,
                        &format!("the string of ID #{id} does not match its digest"),
                    )
                })?;
                f(id, &s, &d)?;
            }
        }
        Ok(())
    }

    /// The string-tree Merkle root of a `string`-codec run's set, recomputed from the stored
    /// strings (every one checked against its digest), with its number of leaves.
    ///
    /// # Errors
    /// As [`Snapshot::for_each_string`].
    pub fn string_root(&self, scope: &ScopeKey, set: &IdSet) -> Result<(Hash, u64), ReadError> {
        let mut digests = Vec::with_capacity(usize::try_from(set.len()).unwrap_or(0).min(1 << 24));
        self.for_each_string(scope, set, |_, s, _| {
            digests.push(digest::string_id_digest(s));
            Ok(())
        })?;
        Ok(digest::string_root(&mut digests))
    }

    /// The whole dictionary of a scope, as the `string` codec needs it to intern new strings.
    pub(crate) fn interner(&self, scope: &ScopeKey) -> Result<Interner, ReadError> {
        let raw: Vec<(u64, Vec<u8>)> = self
            .engine
            .contain(
                "read the string dictionary",
                || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(INTERN_REV)?;
                    let mut out = Vec::new();
                    for entry in t.range((scope.as_bytes(), 0u64)..=(scope.as_bytes(), u64::MAX))? {
                        let (k, v) = entry?;
                        out.push((k.value().1, v.value().to_vec()));
                    }
                    Ok(out)
                },
            )
            .map_err(|f| self.fail(f))?;
        let mut strings = Vec::with_capacity(raw.len());
        for (id, bytes) in raw {
            if id != strings.len() as u64 {
                return Err(self.damaged("intern_rev", None, "interned IDs are not dense"));
            }
            let (s, _) = records::decode_interned(&bytes).ok_or_else(|| {
                self.damaged(
                    "intern_rev",
                    None,
                    &format!("the string of ID #{id} does not match its digest"),
                )
            })?;
            strings.push(s);
        }
        Interner::from_ordered(strings)
            .map_err(|_| self.damaged("intern_rev", None, "a string is interned twice"))
    }

    /// The ID the scope's dictionary gives a string, if it has one.
    ///
    /// # Errors
    /// `ReadError` when unreadable.
    pub fn interned_id(&self, scope: &ScopeKey, s: &str) -> Result<Option<u64>, ReadError> {
        self.engine
            .contain(
                "read the string dictionary",
                || -> Result<_, redb::Error> {
                    let t = self.txn.open_table(INTERN)?;
                    Ok(t.get((scope.as_bytes(), s.as_bytes()))?.map(|v| v.value()))
                },
            )
            .map_err(|f| self.fail(f))
    }

    /// Loads a run whole: contract, metadata, reconciler (ID and label sets, page-log cursor
    /// hashes, interner, and the request to continue from when kept).
    ///
    /// # Errors
    /// `ReadError` when unreadable, unknown or damaged.
    pub fn load(&self, run: RunId) -> Result<LoadedRun, ReadError> {
        let rec = self.record(run)?;
        let contract = self.contract_of(run, &rec)?;
        let ids = self.ids(run)?;
        let check = |ok: bool, table: &str, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(self.damaged(table, Some(run), what))
            }
        };
        check(
            ids.len() == rec.unique_ids,
            "ids",
            "the bitmaps' cardinality differs from the run record",
        )?;
        let labels = self.labels(run, rec.progress.label_names.len())?;
        let pages = self.page_log(run)?;
        check(
            pages.len() == rec.progress.pages_observed as usize,
            "pages",
            "the page log's length differs from the run record",
        )?;
        // The reconciler's invariants, checked here on decoded data: a damaged record must be
        // reported as such, not trip an assertion later.
        check(
            rec.progress.records_observed == ids.len().saturating_add(rec.progress.duplicate_ids),
            "runs",
            "records observed differ from unique plus duplicate IDs",
        )?;
        check(
            labels.iter().all(|l| l.difference(&ids).is_empty()),
            "labels",
            "a label holds an ID the run never observed",
        )?;
        check(
            !(rec.progress.terminal_observed && rec.next_kind != 0),
            "runs",
            "a run that saw its terminal page still has a request",
        )?;
        let scope = ScopeKey::of(&contract);
        let mut codec = IdCodec::new(contract.id_codec, contract.id_prefix.clone());
        if contract.id_codec == IdCodecKind::String {
            let interner = self.interner(&scope)?;
            check(
                ids.max().is_none_or(|max| max < interner.len() as u64),
                "intern_rev",
                "the run holds a string ID the dictionary does not have",
            )?;
            *codec.interner_mut() = interner;
        }
        let mut progress = rec.progress.clone();
        progress.next = match rec.next_kind {
            0 => None,
            1 => Some(Request::First),
            _ => self.stored_request(run)?,
        };
        let mut reconciler = Reconciler::restore(
            &contract,
            progress,
            ids,
            labels,
            pages.iter().map(|p| p.cursor_hash),
            codec,
        );
        reconciler.set_content(self.content(run)?);
        Ok(LoadedRun {
            meta: meta_of(run, &rec),
            state: self.state_of(run, rec.state),
            source_spec: rec.source_spec.clone(),
            stored_root: rec.merkle_root,
            pages,
            contract,
            reconciler,
        })
    }

    /// The run's cursor key, if it still has one: in the key file, or in the `cursor_keys`
    /// table of a store written before format 4.
    pub(crate) fn cursor_key(&self, run: RunId) -> Result<Option<[u8; CURSOR_KEY_LEN]>, ReadError> {
        if let Some(k) = self.keys.get(&run.0) {
            return Ok(Some(*k));
        }
        let key = self
            .engine
            .contain("read a cursor key", || -> Result<_, redb::Error> {
                let k = self.txn.open_table(CURSOR_KEYS)?;
                Ok(k.get(run.0)?.map(|v| v.value().to_vec()))
            })
            .map_err(|f| self.fail(f))?;
        key.map(|k| {
            <[u8; CURSOR_KEY_LEN]>::try_from(k.as_slice()).map_err(|_| {
                self.damaged("cursor_keys", Some(run), "the cursor key is not 32 bytes")
            })
        })
        .transpose()
    }

    /// The receipt of a run as stored, built from the run loaded whole (every set in memory):
    /// what [`Snapshot::receipt`] gives without loading them, kept as its reference.
    ///
    /// # Errors
    /// As [`Snapshot::load`].
    pub fn receipt_loaded(&self, run: RunId) -> Result<crate::receipt::Receipt, ReadError> {
        let l = self.load(run)?;
        Ok(crate::receipt::Receipt::build(
            &l.contract,
            &l.meta,
            &l.reconciler,
        ))
    }

    /// The request a resume continues from, decrypted; `None` when it was not kept.
    fn stored_request(&self, run: RunId) -> Result<Option<Request>, ReadError> {
        let sealed = self
            .engine
            .contain("read the resume request", || -> Result<_, redb::Error> {
                let c = self.txn.open_table(CURSORS)?;
                Ok(c.get(run.0)?.map(|v| v.value().to_vec()))
            })
            .map_err(|f| self.fail(f))?;
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        // The key is durable before any request sealed under it: a request without one is
        // damage (or a key file this reader could not read), never a run without a request.
        let Some(key) = self.cursor_key(run)? else {
            return Err(self.damaged(
                "cursors",
                Some(run),
                "the resume request's key is not in the key file beside the store",
            ));
        };
        records::open_request(&sealed, &key)
            .map(Some)
            .ok_or_else(|| self.damaged("cursors", Some(run), "the resume request does not decode"))
    }
}

/// The receipt's run metadata, from a run's record.
pub(super) fn meta_of(run: RunId, rec: &RunRecord) -> RunMeta {
    RunMeta {
        run_id: run,
        restarts: rec.restarts,
        started_at: rfc3339(rec.started_at_ms),
        finished_at: rec.finished_at_ms.map(rfc3339),
        restarted_from: rec.restarted_from.map(RunId),
        superseded_by: rec.superseded_by.map(RunId),
        server_count: rec.server_count,
        merged: rec.merged.as_ref().map(records::MergeRecord::to_receipt),
    }
}
