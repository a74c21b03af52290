//! `Reconciler::observe`: one page through the rules, one small step per rule group.
//!
//! The order matters and is part of the contract: a page is first checked whole (bounds R16,
//! snapshot R5, query R6, completion flags R7) and refused before anything is counted; then
//! its IDs and labels are decoded (R16) before any set changes, so a bad page changes nothing;
//! then it is ingested (R4 duplicates, counts, the cursor chain); then its cursor (R3) and its
//! truncation warning (R9) are checked; last, the end of the traversal is decided (R1, R2, R8,
//! the end checks R10 and R11, the budgets R12).

use std::collections::HashSet;

use crate::contract::{
    EndSignal, Page, SnapshotPolicy, CURSOR_LEN_MAX, ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX,
    LABELS_PER_RUN_MAX, LABEL_LEN_MAX, PAGES_PER_RUN_MAX, PAGE_SIZE_BYTES_MAX,
};
use crate::digest;
use crate::idset::{partition_of, IdSet};

use super::{
    same_query, Delta, Observation, PageLog, Reconciler, Request, Step, ViolationKind,
    DETAIL_IDS_MAX,
};

impl Reconciler {
    /// Observes one page: says what to do next and returns what the page changed.
    ///
    /// # Panics
    /// If the run is already finished: feeding a finished run is a bug of the caller.
    pub fn observe(&mut self, page: &Page) -> Observation {
        assert!(!self.progress.finished, "observe on a finished run");
        let page_idx = self.progress.pages_observed.saturating_add(1);
        let interned_before = self.codec.interner().len();
        let mut delta = Delta::default();
        let refused = self
            .check_bounds(page, page_idx)
            .or_else(|| self.check_snapshot(page, page_idx))
            .or_else(|| self.check_query(page, page_idx))
            .or_else(|| self.check_completion_flags(page, page_idx));
        let step = match refused {
            Some(step) => step,
            None => match self.decode(page, page_idx) {
                Err(step) => step,
                Ok(ids) => {
                    self.ingest(page, page_idx, &ids, &mut delta);
                    self.scratch_ids = ids;
                    match self.check_cursor(page, page_idx) {
                        Some(step) => step,
                        None => {
                            self.check_truncation(page, page_idx);
                            self.decide_end(page, page_idx)
                        }
                    }
                }
            },
        };
        // Every string interned, even for a page refused half-way, goes to the store, so the
        // dictionary's IDs stay dense.
        delta.interned = self.codec.interner().since(interned_before);
        // What this page could break, checked in debug builds and tests (release keeps the
        // cost off the hot path; the fuzz targets check everything after every step).
        if cfg!(debug_assertions) {
            self.check_step(&delta);
        }
        Observation { step, delta }
    }

    /// R16: the page's size bounds.
    fn check_bounds(&mut self, page: &Page, page_idx: u32) -> Option<Step> {
        let detail = if page.items.len() as u64 > u64::from(ITEMS_PER_PAGE_MAX) {
            format!(
                "{} items exceed the bound of {ITEMS_PER_PAGE_MAX} per page",
                page.items.len()
            )
        } else if page.size_bytes > PAGE_SIZE_BYTES_MAX {
            format!(
                "{} bytes exceed the bound of {PAGE_SIZE_BYTES_MAX} per page",
                page.size_bytes
            )
        } else if page.next.as_ref().is_some_and(|c| c.len() > CURSOR_LEN_MAX) {
            format!(
                "a cursor of {} bytes exceeds the bound of {CURSOR_LEN_MAX}",
                page.next.as_ref().map_or(0, String::len)
            )
        } else if page.next.as_ref().is_some_and(String::is_empty) {
            "an empty string is not a cursor".to_owned()
        } else if page_idx > PAGES_PER_RUN_MAX {
            format!("more than {PAGES_PER_RUN_MAX} pages in one run")
        } else {
            return None;
        };
        Some(self.stop(ViolationKind::InvalidPage, page_idx, detail))
    }

    /// R5: the echoed snapshot against the one the run follows.
    fn check_snapshot(&mut self, page: &Page, page_idx: u32) -> Option<Step> {
        let echoed = page.snapshot.as_ref()?;
        let p = &mut self.progress;
        match &p.serving_snapshot {
            // The first page pins the run when it is taken in (`ingest`): a page refused whole
            // changes nothing but its finding. A snapshot first echoed on a later page does
            // not pin, since the pages before it were not served from it: the run stays live.
            None => None,
            Some(serving) if serving == echoed => {
                if p.high_water_unconfirmed && !p.spliced {
                    // The continuation was served from the pinned snapshot after all.
                    p.high_water_unconfirmed = false;
                }
                None
            }
            Some(_) if p.high_water_unconfirmed => {
                // The first page of a `high_water` continuation may come from a newer
                // collection state: not a defect (R5), but the run now spans two states and
                // follows the new one, whose own changes are R5 again.
                p.serving_snapshot = Some(echoed.clone());
                p.spliced = true;
                p.high_water_unconfirmed = false;
                None
            }
            Some(_) => {
                let detail = "the echoed snapshot differs from the pinned one".to_owned();
                if self.settings.on_snapshot_change == SnapshotPolicy::Restart {
                    self.record(ViolationKind::SnapshotChanged, page_idx, detail);
                    self.progress.finished = true;
                    self.progress.next = None;
                    return Some(Step::Restart);
                }
                Some(self.stop(ViolationKind::SnapshotChanged, page_idx, detail))
            }
        }
    }

    /// R6: the echoed query against the contract's.
    fn check_query(&mut self, page: &Page, page_idx: u32) -> Option<Step> {
        let echoed = page.query.as_ref()?;
        if same_query(&self.settings.query, echoed) {
            return None;
        }
        let detail = format!(
            "the page echoes query {}, the contract's digest is {}",
            digest::display(&digest::sha256(digest::canonical_json(echoed).as_bytes())),
            self.query_digest
        );
        Some(self.stop(ViolationKind::QueryChanged, page_idx, detail))
    }

    /// R7: the completion flag against the cursor.
    fn check_completion_flags(&mut self, page: &Page, page_idx: u32) -> Option<Step> {
        let detail = match (page.complete, page.next.is_some()) {
            (Some(true), true) => "complete: true together with a next cursor",
            (Some(false), false) => "complete: false with no cursor to continue from",
            _ => return None,
        };
        Some(self.stop(
            ViolationKind::ContradictoryCompletion,
            page_idx,
            detail.to_owned(),
        ))
    }

    /// R16: every ID through the codec and every label through the bounds, before any set
    /// changes.
    fn decode(&mut self, page: &Page, page_idx: u32) -> Result<Vec<u64>, Step> {
        let mut ids = std::mem::take(&mut self.scratch_ids);
        ids.clear();
        let mut new_labels: Vec<&str> = Vec::new();
        for (i, item) in page.items.iter().enumerate() {
            match self.codec.encode(&item.id) {
                Ok(id) => {
                    if let Some(r) = self.settings.key_range.filter(|r| !r.contains(id)) {
                        self.scratch_ids = ids;
                        let detail = format!(
                            "item {i}: ID {} is outside the contract's key range {}",
                            self.codec.render(id),
                            r.shown()
                        );
                        return Err(self.stop(ViolationKind::InvalidPage, page_idx, detail));
                    }
                    ids.push(id);
                }
                Err(e) => {
                    self.scratch_ids = ids;
                    return Err(self.stop(
                        ViolationKind::InvalidPage,
                        page_idx,
                        format!("item {i}: {e}"),
                    ));
                }
            }
            if let Some(detail) = self.check_labels(&item.labels, i, &mut new_labels) {
                self.scratch_ids = ids;
                return Err(self.stop(ViolationKind::InvalidPage, page_idx, detail));
            }
        }
        self.progress.id_prefix = self.codec.prefix().map(str::to_owned);
        Ok(ids)
    }

    /// Checks one item's labels; `new_labels` collects the names this page introduces, so
    /// that the per-run bound holds within a page too.
    fn check_labels<'p>(
        &self,
        labels: &'p [String],
        item: usize,
        new_labels: &mut Vec<&'p str>,
    ) -> Option<String> {
        if labels.len() > LABELS_PER_ITEM_MAX {
            return Some(format!(
                "item {item}: {} labels exceed the bound of {LABELS_PER_ITEM_MAX}",
                labels.len()
            ));
        }
        for l in labels {
            if l.is_empty() || l.len() > LABEL_LEN_MAX {
                return Some(format!(
                    "item {item}: a label name must be 1 to {LABEL_LEN_MAX} bytes"
                ));
            }
            if !self.progress.label_names.contains(l) && !new_labels.contains(&l.as_str()) {
                if self.progress.label_names.len() + new_labels.len() >= LABELS_PER_RUN_MAX {
                    return Some(format!(
                        "item {item}: more than {LABELS_PER_RUN_MAX} distinct labels in one run"
                    ));
                }
                new_labels.push(l);
            }
        }
        None
    }

    /// The page's IDs and labels into the sets, its counts, its link of the cursor chain, and
    /// R4 (an ID seen before in this run).
    fn ingest(&mut self, page: &Page, page_idx: u32, ids: &[u64], delta: &mut Delta) {
        if page.items.iter().any(|i| i.content.is_some()) {
            self.accumulate_content(page, ids, delta);
        }
        let mut dups = std::mem::take(&mut self.scratch_dups);
        dups.clear();
        self.ids.insert_many(ids, &mut dups, &mut delta.partitions);
        delta.partitions.sort_unstable();
        delta.partitions.dedup();
        delta.ids.extend_from_slice(ids);
        if !delta.ids.is_sorted() {
            delta.ids.sort_unstable();
        }
        delta.ids.dedup();
        for (item, id) in page.items.iter().zip(ids) {
            for name in &item.labels {
                if let Some(key) = self.add_label(name, *id) {
                    delta.label_partitions.push(key);
                    delta.label_ids.push((key.0, *id));
                }
            }
        }
        delta.label_partitions.sort_unstable();
        delta.label_partitions.dedup();
        let p = &mut self.progress;
        let n_items = ids.len() as u64;
        p.pages_observed = page_idx;
        p.records_observed = p.records_observed.saturating_add(n_items);
        p.bytes_observed = p.bytes_observed.saturating_add(page.size_bytes);
        p.duplicate_ids = p.duplicate_ids.saturating_add(dups.len() as u64);
        if let Some(last) = ids.last() {
            p.last_key = Some(*last);
        }
        if page.total.is_some() {
            p.echoed_total = page.total;
        }
        if page_idx == 1 {
            if p.serving_snapshot.is_none() {
                p.pinned_snapshot.clone_from(&page.snapshot);
                p.serving_snapshot.clone_from(&page.snapshot);
            }
            // The chain starts from the snapshot the run is pinned to, which the first page
            // may have just supplied, so that it recomputes from the receipt alone.
            p.chain = digest::chain_start(&self.query_digest, p.pinned_snapshot.as_deref());
        }
        let cursor_hash = digest::cursor_hash(page.next.as_deref());
        p.chain = digest::chain_next(&p.chain, &cursor_hash);
        delta.page = Some(PageLog {
            page_idx,
            cursor_hash,
            // At most ITEMS_PER_PAGE_MAX items (checked in `check_bounds`).
            n_items: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            size_bytes: page.size_bytes,
            at_ms: 0,
        });
        if !dups.is_empty() {
            let what = if dups.len() == 1 {
                "duplicate ID"
            } else {
                "duplicate IDs"
            };
            let detail = self.describe_ids(what, &dups);
            self.record(ViolationKind::DuplicateId, page_idx, detail);
        }
        self.scratch_dups = dups;
    }

    /// Adds the content of the page's first occurrences (a duplicate is R4 and its content
    /// is not counted twice) to their leaves' accumulators. Runs before the IDs are inserted.
    fn accumulate_content(&mut self, page: &Page, ids: &[u64], delta: &mut Delta) {
        // Strictly ascending IDs (every keyset source's) cannot repeat inside the page, so
        // only other pages' IDs are looked up; otherwise a set finds the page's repeats.
        let mut in_page = if ids.windows(2).all(|w| w[0] < w[1]) {
            None
        } else {
            Some(HashSet::with_capacity(ids.len()))
        };
        // The leaf being added to, and its accumulator: consecutive IDs mostly share one, so
        // the map is looked up once a run of them.
        let mut open: Option<(u64, crate::content::ContentAcc)> = None;
        for (item, id) in page.items.iter().zip(ids) {
            let Some(content) = &item.content else {
                continue;
            };
            let repeat = in_page.as_mut().is_some_and(|seen| !seen.insert(*id));
            if repeat || self.ids.contains(*id) {
                continue;
            }
            let (leaf, entry) = match &item.id {
                crate::contract::RawId::Str(s)
                    if self.codec.kind() == crate::contract::IdCodecKind::String =>
                {
                    let d = digest::string_id_digest(s);
                    (
                        digest::string_bucket(&d),
                        crate::content::entry(&d, content),
                    )
                }
                _ => (
                    partition_of(*id),
                    crate::content::entry(&id.to_le_bytes(), content),
                ),
            };
            match &mut open {
                Some((l, acc)) if *l == leaf => acc.add(&entry),
                _ => {
                    if let Some((l, acc)) = open.take() {
                        self.content.insert(l, acc);
                    }
                    let mut acc = self.content.get(&leaf).copied().unwrap_or_default();
                    acc.add(&entry);
                    open = Some((leaf, acc));
                    delta.content_leaves.push(leaf);
                }
            }
        }
        if let Some((l, acc)) = open {
            self.content.insert(l, acc);
        }
        delta.content_leaves.sort_unstable();
        delta.content_leaves.dedup();
    }

    fn add_label(&mut self, name: &str, id: u64) -> Option<(u32, u64)> {
        let idx = match self.progress.label_names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.progress.label_names.push(name.to_owned());
                self.labels.push(IdSet::new());
                self.labels.len() - 1
            }
        };
        // At most LABELS_PER_RUN_MAX labels (checked in `decode`), so the index fits a u32.
        let inserted = self.labels.get_mut(idx).is_some_and(|set| set.insert(id));
        inserted.then(|| (idx as u32, partition_of(id)))
    }

    /// R3: a cursor returned before in this traversal.
    fn check_cursor(&mut self, page: &Page, page_idx: u32) -> Option<Step> {
        let next = page.next.as_deref()?;
        if self
            .seen_cursors
            .insert(super::cursor_key(&digest::cursor_hash(Some(next))))
        {
            return None;
        }
        let detail = format!(
            "{} was returned before in this traversal",
            digest::cursor_fingerprint(Some(next))
        );
        Some(self.stop(ViolationKind::RepeatedCursor, page_idx, detail))
    }

    /// R9: a truncation warning is recorded and the traversal goes on.
    fn check_truncation(&mut self, page: &Page, page_idx: u32) {
        if page.truncated {
            self.record(
                ViolationKind::TruncatedPage,
                page_idx,
                "the source warned that this page was truncated".to_owned(),
            );
        }
    }

    /// R1, R2, R8 and the budgets (R12): is this page the last, and may the run go on.
    fn decide_end(&mut self, page: &Page, page_idx: u32) -> Step {
        let terminal = match self.settings.end_signal {
            EndSignal::CursorAbsent => page.next.is_none(),
            EndSignal::CompleteFlag => page.complete == Some(true),
            EndSignal::Both => page.next.is_none() && page.complete == Some(true),
            // Page-number and offset pagination: the position is the items observed so far.
            EndSignal::Total => page
                .total
                .is_some_and(|t| self.progress.records_observed >= t),
            EndSignal::EmptyPage => page.items.is_empty(),
        };
        if terminal {
            self.progress.terminal_observed = true;
            self.end_checks(page_idx);
            self.progress.finished = true;
            self.progress.next = None;
            return Step::Done;
        }
        let Some(cursor) = &page.next else {
            return self.stop(
                ViolationKind::MissingCompletionEvidence,
                page_idx,
                format!(
                    "the last page has no cursor and not the end signal the contract requires ({})",
                    end_signal_words(self.settings.end_signal)
                ),
            );
        };
        let next = Request::Cursor(cursor.clone());
        self.progress.next = Some(next.clone());
        if let Some(limit) = self.budget_exhausted() {
            self.stop_on_limit(limit);
            return Step::Done;
        }
        Step::Continue(next)
    }

    /// R10 and R11, at the terminal page.
    fn end_checks(&mut self, page_idx: u32) {
        let seen = self.ids.len();
        if let Some(total) = self.progress.echoed_total {
            // The source's own count of the scope: a record skipped or served twice by
            // drifting offsets shows up here.
            if seen != total {
                self.record(
                    ViolationKind::CountMismatch,
                    page_idx,
                    format!(
                        "the source echoed a total of {total} records, observed {seen} unique IDs"
                    ),
                );
            }
        }
        if let Some(expected) = self.settings.expected_count {
            if seen != expected {
                self.record(
                    ViolationKind::CountMismatch,
                    page_idx,
                    format!("expected {expected} unique IDs, observed {seen}"),
                );
            }
        }
        if let Some(detail) = self.partition_differences() {
            self.record(ViolationKind::PartitionMismatch, page_idx, detail);
        }
    }

    fn partition_differences(&self) -> Option<String> {
        const SHOWN_MAX: usize = 16;
        let expected = self.settings.expected_partitions.as_ref()?;
        let mut differing = Vec::new();
        let mut listed = HashSet::with_capacity(expected.len());
        for (p, n) in expected {
            listed.insert(*p);
            let seen = self
                .ids
                .partition(*p)
                .map_or(0, roaring::RoaringBitmap::len);
            if seen != *n {
                differing.push(format!("partition {p} (expected {n}, observed {seen})"));
            }
        }
        for (p, b) in self.ids.partitions() {
            if !listed.contains(&p) {
                differing.push(format!("partition {p} (expected 0, observed {})", b.len()));
            }
        }
        if differing.is_empty() {
            return None;
        }
        let total = differing.len();
        differing.truncate(SHOWN_MAX);
        let more = if total > SHOWN_MAX {
            format!(" and {} more", total - SHOWN_MAX)
        } else {
            String::new()
        };
        let noun = if total == 1 {
            "partition differs"
        } else {
            "partitions differ"
        };
        Some(format!("{total} {noun}: {}{more}", differing.join(", ")))
    }

    fn describe_ids(&self, what: &str, ids: &[u64]) -> String {
        let shown: Vec<String> = ids
            .iter()
            .take(DETAIL_IDS_MAX)
            .map(|id| self.codec.render(*id))
            .collect();
        let more = if ids.len() > DETAIL_IDS_MAX {
            format!(" and {} more", ids.len() - DETAIL_IDS_MAX)
        } else {
            String::new()
        };
        format!("{} {what}: {}{more}", ids.len(), shown.join(", "))
    }
}

fn end_signal_words(end: EndSignal) -> &'static str {
    match end {
        EndSignal::CursorAbsent => "a page without a cursor",
        EndSignal::CompleteFlag => "complete: true",
        EndSignal::Both => "no cursor and complete: true",
        EndSignal::Total => "the echoed total reached",
        EndSignal::EmptyPage => "an empty page",
    }
}
