//! The page journal inside the store: where it lives, the stamp every commit writes, and who
//! folds what (journal format in `journal.rs`, docs/FORMAT.md §10a).
//!
//! - A writer of either mode, when it opens a store, folds the records that continue the
//!   store's last commit (a killed writer's) in one commit, before anything else is written.
//! - A writer in the shared mode journals its checkpoints and folds them every so often;
//!   `Store::settle` folds what a dropped run writer left, before the next run begins, a run
//!   resumes or a run is deleted, and when the store closes.
//! - A reader never writes the file: when records continue the store's last commit and no
//!   writer is alive to fold them, it folds them into a private copy and reads that.
//!
//! Every commit of the store goes through `Store::commit`, which stamps it; a journal whose
//! header names another stamp never applies.

use std::path::{Path, PathBuf};

use redb::{ReadableTable, StorageBackend, WriteTransaction};

use super::backend::FileHandle;
use super::engine::Engine;
use super::error::{Failure, WriteError};
use super::journal::{self, Header, JournalFiles, Merged, Stamp};
use super::records::{self, CURSOR_KEY_LEN, PAGE_RECORD_LEN};
use super::schema::{
    CONTENT, CURSORS, CURSOR_KEYS, IDS, INTERN, INTERN_REV, LABELS, META, META_JOURNAL_BASE, PAGES,
    RUNS,
};
use super::snapshot::Snapshot;
use super::Store;
use crate::content::CONTENT_ACC_LEN;

/// The journal beside a store file: the store's name with `.journal` appended.
pub(crate) struct FileJournal {
    path: PathBuf,
}

impl FileJournal {
    pub(crate) fn beside(store: &Path) -> FileJournal {
        FileJournal::named(store, ".journal")
    }

    /// The key file beside a store (`keys.rs`): the store's name with `.keys` appended.
    pub(crate) fn keys_beside(store: &Path) -> FileJournal {
        FileJournal::named(store, ".keys")
    }

    fn named(store: &Path, suffix: &str) -> FileJournal {
        let mut name = store.as_os_str().to_owned();
        name.push(suffix);
        FileJournal {
            path: PathBuf::from(name),
        }
    }
}

fn boxed(file: std::fs::File) -> std::io::Result<Box<dyn StorageBackend>> {
    let handle = FileHandle::new(file).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(Box::new(handle.backend()))
}

impl JournalFiles for FileJournal {
    fn open(&self, write: bool) -> std::io::Result<Option<Box<dyn StorageBackend>>> {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .open(&self.path)
        {
            Ok(f) => boxed(f).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create(&self) -> std::io::Result<(Box<dyn StorageBackend>, u64)> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&self.path)?;
        // The new name must survive a power cut before any record relies on it.
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        std::fs::File::open(dir)?.sync_all()?;
        Ok((boxed(file)?, 1))
    }

    fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn set_aside(&self) -> std::io::Result<String> {
        let mut aside = self.path.clone().into_os_string();
        aside.push(".stale");
        std::fs::rename(&self.path, &aside)?;
        Ok(PathBuf::from(aside).display().to_string())
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

/// The journal's tag for a store and the stamp of its last commit (`None`: never stamped).
pub(crate) fn identity(engine: &Engine) -> Result<([u8; 16], Option<Stamp>), Failure> {
    let wrap = |what: &str, e: super::ReadError| Failure::Damaged {
        what: what.to_owned(),
        source: Some(Box::new(e)),
    };
    let snap = Snapshot::new(engine).map_err(|e| wrap("cannot read the store", e))?;
    let key = snap
        .page_token_key()
        .map_err(|e| wrap("cannot read the store's key", e))?;
    let base = snap
        .journal_base()
        .map_err(|e| wrap("cannot read the store's commit stamp", e))?;
    Ok((journal::tag_of(&key), base))
}

/// Reads the records of the journal in `files` that continue `engine`'s last commit; sets a
/// foreign journal aside when `may_move` (a writer), and only warns otherwise.
pub(crate) fn recover(
    engine: &Engine,
    files: &dyn JournalFiles,
    may_move: bool,
) -> Result<Merged, Failure> {
    let (tag, base) = identity(engine)?;
    let Some(file) = files
        .open(false)
        .map_err(|e| io("open the page journal", e))?
    else {
        return Ok(Merged::default());
    };
    let found = journal::read(file.as_ref(), &tag, base.as_ref())?;
    drop(file);
    match found.header {
        Header::Foreign if may_move => {
            let aside = files
                .set_aside()
                .map_err(|e| io("move aside the page journal of another store", e))?;
            tracing::warn!(journal = %files.name(), moved_to = %aside, "the page journal beside the store belongs to another store (one deleted and created again here); moved aside, never applied");
        }
        Header::Foreign => {
            tracing::warn!(journal = %files.name(), "the page journal beside the store belongs to another store; ignored");
        }
        Header::Current if found.ignored_bytes > 0 => {
            tracing::debug!(journal = %files.name(), bytes = found.ignored_bytes, "bytes past the page journal's last record ignored (zeros kept for the next records, records of older generations, or a torn append that was never acknowledged)");
        }
        _ => {}
    }
    Merged::of(found.records)
}

/// Folds into a reader's private copy the journal records that continue the copy's last
/// commit (the journal itself is only read).
pub(crate) fn fold_copy(copy: &Engine, files: &dyn JournalFiles) -> Result<(), Failure> {
    let merged = recover(copy, files, false)?;
    if !merged.is_empty() {
        fold_into(copy, &merged)?;
    }
    Ok(())
}

fn io(op: &'static str, e: std::io::Error) -> Failure {
    Failure::Io {
        op,
        source: Box::new(e),
    }
}

/// Folds `merged` into a writable engine in one stamped commit; returns the stamp.
pub(crate) fn fold_into(engine: &Engine, merged: &Merged) -> Result<Stamp, Failure> {
    let txn = engine
        .begin_write()?
        .ok_or_else(|| Failure::damaged("the store was opened read-only"))?;
    apply(engine, &txn, merged)?;
    let stamp = journal::fresh_stamp()?;
    stamp_txn(engine, &txn, &stamp)?;
    engine.contain("commit the folded page journal", || txn.commit())?;
    Ok(stamp)
}

/// Writes a commit's stamp into its transaction.
pub(crate) fn stamp_txn(
    engine: &Engine,
    txn: &WriteTransaction,
    stamp: &Stamp,
) -> Result<(), Failure> {
    engine.contain("stamp the commit", || -> Result<(), redb::Error> {
        txn.open_table(META)?
            .insert(META_JOURNAL_BASE, stamp.as_slice())?;
        Ok(())
    })
}

impl Store {
    /// Commits a write transaction of this store, stamped: every journal record written
    /// before it is covered by it, and none applies to the state it makes.
    pub(super) fn commit(&self, txn: WriteTransaction) -> Result<(), WriteError> {
        let stamp = journal::fresh_stamp().map_err(|f| self.poison(f))?;
        stamp_txn(&self.engine, &txn, &stamp).map_err(|f| self.poison(f))?;
        self.engine
            .contain("commit", || txn.commit())
            .map_err(|f| self.poison(f))?;
        self.with_journal(|j| j.committed(stamp));
        Ok(())
    }

    /// Appends a checkpoint's record to the journal and syncs it. `Ok(false)`: not journaled
    /// (no journal, or a record too large for one): commit the store instead.
    pub(super) fn append_journal(&self, mut record: journal::Record) -> Result<bool, WriteError> {
        if self.engine.closed() {
            // The file is released: another process may be writing it, and its journal.
            return Err(WriteError::Closed {
                path: self.path().to_owned(),
            });
        }
        if self.poisoned.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(WriteError::Poisoned {
                path: self.path().to_owned(),
            });
        }
        match self.with_journal(|j| j.append(&mut record)) {
            Some(Ok(done)) => Ok(done),
            Some(Err(f)) => Err(self.poison(f)),
            None => Ok(false),
        }
    }

    pub(super) fn fold_due(&self) -> bool {
        self.with_journal(|j| j.fold_due()).unwrap_or(false)
    }

    /// Folds the journal records a dropped run writer left, in one commit (none while a
    /// writer is alive, since it borrows the store mutably).
    pub(super) fn settle(&self) -> Result<(), WriteError> {
        if !self.with_journal(|j| j.has_records()).unwrap_or(false) {
            return Ok(());
        }
        let read = self
            .with_journal(|j| j.read_back())
            .unwrap_or_else(|| Ok(journal::Recovered::default()))
            .map_err(|f| self.poison(f))?;
        let wrote = self.with_journal(|j| j.records()).unwrap_or(0);
        if read.records.len() != wrote as usize {
            return Err(self.poison(Failure::damaged(format!(
                "the page journal lost records this process wrote and synced (read {}, wrote {wrote})",
                read.records.len()
            ))));
        }
        let merged = Merged::of(read.records).map_err(|f| self.poison(f))?;
        let txn = self.write_txn()?;
        apply(&self.engine, &txn, &merged).map_err(|f| self.poison(f))?;
        self.commit(txn)
    }
}

/// Writes what journal records hold (merged) into a write transaction: the redo of the
/// checkpoints since the commit they continue. IDs and label IDs are added to the stored
/// partitions; everything else is written as the last record left it.
pub(crate) fn apply(
    engine: &Engine,
    txn: &WriteTransaction,
    merged: &Merged,
) -> Result<(), Failure> {
    if merged.is_empty() {
        return Ok(());
    }
    check(merged)?;
    let (id_rows, label_rows) = unions(engine, txn, merged)?;
    let string_rows: Vec<(&[u8], u64, &str, Vec<u8>)> = merged
        .strings
        .iter()
        .map(|(scope, id, s)| {
            (
                scope.as_slice(),
                *id,
                s.as_str(),
                records::encode_interned(s),
            )
        })
        .collect();
    engine.contain("fold the page journal", || -> Result<(), redb::Error> {
        {
            let mut t = txn.open_table(PAGES)?;
            for (key, bytes) in &merged.pages {
                t.insert(*key, bytes.as_slice())?;
            }
        }
        {
            let mut t = txn.open_table(IDS)?;
            for (key, bytes) in &id_rows {
                t.insert(*key, bytes.as_slice())?;
            }
        }
        {
            let mut t = txn.open_table(LABELS)?;
            for (key, bytes) in &label_rows {
                t.insert(*key, bytes.as_slice())?;
            }
        }
        if !merged.content.is_empty() {
            let mut t = txn.open_table(CONTENT)?;
            for (key, acc) in &merged.content {
                t.insert(*key, acc.as_slice())?;
            }
        }
        if !string_rows.is_empty() {
            let mut fwd = txn.open_table(INTERN)?;
            let mut rev = txn.open_table(INTERN_REV)?;
            for (scope, id, s, bytes) in &string_rows {
                fwd.insert((*scope, s.as_bytes()), *id)?;
                rev.insert((*scope, *id), bytes.as_slice())?;
            }
        }
        {
            let mut c = txn.open_table(CURSORS)?;
            let mut k = txn.open_table(CURSOR_KEYS)?;
            for (run, op) in &merged.cursors {
                match op {
                    Some((sealed, key)) => {
                        c.insert(*run, sealed.as_slice())?;
                        // A record of a format 3 writer carries the key: it goes where format
                        // 3 kept it, and the next writer moves it to the key file.
                        if !key.is_empty() {
                            k.insert(*run, key.as_slice())?;
                        }
                    }
                    None => {
                        c.remove(*run)?;
                    }
                }
            }
        }
        let mut t = txn.open_table(RUNS)?;
        for (run, bytes) in &merged.runs {
            t.insert(*run, bytes.as_slice())?;
        }
        Ok(())
    })
}

/// The stored bitmaps of the partitions `merged` adds to, each united with what it adds:
/// the rows of `ids` and `labels` to write. Read first, then united: our own work stays
/// outside the engine calls.
#[allow(clippy::type_complexity)] // Two lists of (table key, encoded bitmap).
fn unions(
    engine: &Engine,
    txn: &WriteTransaction,
    merged: &Merged,
) -> Result<(Vec<((u64, u64), Vec<u8>)>, Vec<((u64, u32, u64), Vec<u8>)>), Failure> {
    let (ids_before, labels_before) = engine.contain(
        "read partitions for the page journal",
        || -> Result<_, redb::Error> {
            let ids = txn.open_table(IDS)?;
            let mut a = Vec::with_capacity(merged.ids.len());
            for key in merged.ids.keys() {
                a.push(ids.get(*key)?.map(|v| v.value().to_vec()));
            }
            let labels = txn.open_table(LABELS)?;
            let mut b = Vec::with_capacity(merged.labels.len());
            for key in merged.labels.keys() {
                b.push(labels.get(*key)?.map(|v| v.value().to_vec()));
            }
            Ok((a, b))
        },
    )?;
    let union = |before: Option<Vec<u8>>, add: &roaring::RoaringBitmap, what: String| {
        let mut b = match before {
            Some(bytes) => records::decode_bitmap(&bytes).ok_or_else(|| {
                Failure::damaged(format!("{what}: the stored bitmap does not decode"))
            })?,
            None => roaring::RoaringBitmap::new(),
        };
        b |= add;
        Ok::<_, Failure>(records::encode_bitmap(&b))
    };
    let mut id_rows = Vec::with_capacity(merged.ids.len());
    for ((key, add), before) in merged.ids.iter().zip(ids_before) {
        let what = format!("table ids, run-{} partition {}", key.0, key.1);
        id_rows.push((*key, union(before, add, what)?));
    }
    let mut label_rows = Vec::with_capacity(merged.labels.len());
    for ((key, add), before) in merged.labels.iter().zip(labels_before) {
        let what = format!(
            "table labels, run-{} label {} partition {}",
            key.0, key.1, key.2
        );
        label_rows.push((*key, union(before, add, what)?));
    }
    Ok((id_rows, label_rows))
}

/// Every value a record carries has the shape of the table it goes to: a record that passed
/// its check but does not is damage, reported before anything is written.
fn check(merged: &Merged) -> Result<(), Failure> {
    let bad = |what: String| Err(Failure::damaged(format!("page journal: {what}")));
    for (run, bytes) in &merged.runs {
        if records::decode_run(bytes).is_none() {
            return bad(format!("the run record of run-{run} does not decode"));
        }
    }
    for ((run, idx), bytes) in &merged.pages {
        if *idx == 0 || bytes.len() != PAGE_RECORD_LEN {
            return bad(format!("run-{run} page {idx}: not a page record"));
        }
    }
    for ((run, leaf), acc) in &merged.content {
        if acc.len() != CONTENT_ACC_LEN {
            return bad(format!("run-{run} content leaf {leaf}: not an accumulator"));
        }
    }
    for (run, op) in &merged.cursors {
        if let Some((sealed, key)) = op {
            let opens = if key.is_empty() {
                records::sealed_well_formed(sealed)
            } else {
                <[u8; CURSOR_KEY_LEN]>::try_from(key.as_slice())
                    .ok()
                    .and_then(|k| records::open_request(sealed, &k))
                    .is_some()
            };
            if !opens {
                return bad(format!(
                    "run-{run}: a sealed request that its key does not open"
                ));
            }
        }
    }
    Ok(())
}
