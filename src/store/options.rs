//! How a store is opened: its write mode, group commit, fold cadence and waits.

use super::journal;

/// How a store is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    pub(super) keep_cursors: bool,
    pub(super) checkpoint_every_pages: u32,
    pub(super) exclusive: bool,
    pub(super) fold_records: u32,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions::new()
    }
}

impl StoreOptions {
    /// The defaults: keep the (encrypted) request a resume needs, commit every page, share
    /// the file with readers in other processes.
    ///
    /// ```
    /// let o = scanledger::StoreOptions::new().checkpoint_every(10).exclusive(true);
    /// assert_eq!(o.checkpoint_every_pages(), 10);
    /// ```
    #[must_use]
    pub fn new() -> StoreOptions {
        StoreOptions {
            keep_cursors: true,
            checkpoint_every_pages: 1,
            exclusive: false,
            fold_records: journal::FOLD_RECORDS,
        }
    }

    /// Keep the raw request a resume needs (encrypted, erased once the run cannot resume).
    /// Without it, a run cannot be resumed. Default true.
    #[must_use]
    pub fn keep_cursors(mut self, keep: bool) -> StoreOptions {
        self.keep_cursors = keep;
        self
    }

    /// Commit durably every `pages` pages (at least 1) instead of every page; a crash then
    /// re-fetches at most `pages - 1` pages. Default 1.
    #[must_use]
    pub fn checkpoint_every(mut self, pages: u32) -> StoreOptions {
        self.checkpoint_every_pages = pages.max(1);
        self
    }

    /// Hold the file for this process alone while writing: other processes cannot read it
    /// until the writer closes it. Default false.
    #[must_use]
    pub fn exclusive(mut self, exclusive: bool) -> StoreOptions {
        self.exclusive = exclusive;
        self
    }

    /// Fold the page journal after at most `records` records (at least 1) instead of 64:
    /// the crash tests' way to put folds among few pages. Not part of the API.
    #[doc(hidden)]
    #[must_use]
    pub fn fold_every(mut self, records: u32) -> StoreOptions {
        self.fold_records = records.clamp(1, journal::FOLD_RECORDS);
        self
    }

    /// Pages per durable commit.
    #[must_use]
    pub fn checkpoint_every_pages(&self) -> u32 {
        self.checkpoint_every_pages
    }
}
