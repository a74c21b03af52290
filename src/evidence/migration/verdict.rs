//! The steps of a migration verdict: each adds its findings (a flag, a reason, a command to
//! run next) to one `Verdict`, which `finish` turns into the report.

use super::content::{ContentReport, Findings};
use super::exclusions::Exclusions;
use super::hints::Stores;
use super::streamed::StreamReport;
use super::{is_inventory, mode_word, IdFindings, MigrationReport, RunName, IDS_SHOWN_MAX};
use crate::collect::StreamedKeys;
use crate::evidence::lists::{Compared, Which};
use crate::evidence::Renderer;
use crate::idset::IdSet;
use crate::reconcile::Status;
use crate::store::{ReadError, RunHeader, RunState};

/// `1 ID`, `2 IDs`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn is_are(n: u64) -> &'static str {
    if n == 1 {
        "is"
    } else {
        "are"
    }
}

/// What the verdict has found so far.
pub(crate) struct Verdict {
    names: (RunName, RunName),
    stores: Stores,
    reasons: Vec<String>,
    next: Vec<String>,
    unknown: bool,
    failed: bool,
    /// Two kinds of evidence disagree: nothing can be concluded, not even `failed`.
    contradicted: bool,
}

/// The content half of a verdict, rendered.
pub(crate) struct ContentPart {
    report: ContentReport,
    changed_count: Option<u64>,
    changed_ids: Vec<serde_json::Value>,
    changed_columns: Vec<super::ChangedColumns>,
    changed_partitions: Vec<u64>,
}

impl Verdict {
    pub(crate) fn new(names: (RunName, RunName), stores: Stores) -> Verdict {
        Verdict {
            names,
            stores,
            reasons: Vec::new(),
            next: Vec::new(),
            unknown: false,
            failed: false,
            contradicted: false,
        }
    }

    /// Both runs must be finished, verified inventories; a run that stopped early says how to
    /// continue it, in its own store.
    pub(crate) fn inventories(&mut self, old: &RunHeader, new: &RunHeader) {
        for (h, role, name, new_side) in [
            (old, "--from", &self.names.0, false),
            (new, "--to", &self.names.1, true),
        ] {
            if is_inventory(h) {
                continue;
            }
            self.unknown = true;
            self.reasons.push(format!(
                "{role} {name} is not a verified inventory (state {}, status {}, mode {})",
                h.state.as_str(),
                h.coverage_status.as_str(),
                mode_word(&h.contract.mode)
            ));
            if matches!(h.state, RunState::Interrupted | RunState::Finished)
                && h.coverage_status == Status::Unknown
            {
                self.next.push(self.stores.resume(h.run_id, new_side));
            } else {
                self.next.push(format!(
                    "scan {} / {} again and verify the new run",
                    h.contract.scope.source,
                    h.contract.scope.tenant.as_deref().unwrap_or("-")
                ));
            }
        }
    }

    /// The ID sets: missing and extra IDs beyond the declared exclusions, and declarations
    /// that are no difference.
    pub(crate) fn ids(
        &mut self,
        cmp: &Compared<'_, '_>,
        ex: Option<&Exclusions>,
        all: bool,
    ) -> Result<IdFindings, ReadError> {
        // The declared IDs found among the differences, on each side.
        let (mut removed_ex, mut added_ex) = (IdSet::new(), IdSet::new());
        let t = cmp.tally(ex.map(|e| (&e.old, &e.new)), |step| {
            let Some(e) = ex else { return };
            for (declared, list, found) in [
                (&e.old, step.removed, &mut removed_ex),
                (&e.new, step.added, &mut added_ex),
            ] {
                if let Some(x) = declared.partition(step.partition) {
                    let hit = list & x;
                    if !hit.is_empty() {
                        found.set_partition(step.partition, hit);
                    }
                }
            }
        })?;
        let unmatched = ex
            .map(|e| e.unmatched(&removed_ex, &added_ex))
            .unwrap_or_default();
        let (missing, extra) = (t.removed.count(), t.added.count());
        let (old, new) = (&self.names.0, &self.names.1);
        if missing > 0 {
            self.failed = true;
            self.reasons.push(format!(
                "{} of {old} {} missing from {new}",
                count(missing, "ID", "IDs"),
                is_are(missing)
            ));
        }
        if extra > 0 {
            self.failed = true;
            self.reasons.push(format!(
                "{} {} only in {new} (extra)",
                count(extra, "ID", "IDs"),
                is_are(extra)
            ));
        }
        let n = unmatched.len() as u64;
        if n > 0 {
            self.failed = true;
            self.reasons.push(format!(
                "{} declared in --exclude {} not a difference",
                count(n, "ID", "IDs"),
                is_are(n)
            ));
        }
        if missing > 0 || extra > 0 {
            self.next
                .push(self.stores.missing(cmp.old.run_id, cmp.new.run_id));
        }
        Ok(IdFindings {
            all: (
                missing.saturating_add(removed_ex.len()),
                extra.saturating_add(added_ex.len()),
            ),
            missing: t.removed,
            extra: t.added,
            excluded_count: ex.map_or(0, |e| e.entries.len() as u64),
            unmatched_count: n,
            unmatched: unmatched
                .into_iter()
                .take(if all { usize::MAX } else { IDS_SHOWN_MAX })
                .map(str::to_owned)
                .collect(),
        })
    }

    /// A stream that disagrees with the stored evidence: the verdict cannot say which is right.
    pub(crate) fn stream_disagrees(&mut self, why: &str) {
        self.unknown = true;
        self.contradicted = true;
        self.reasons.push(format!(
            "the rows compared as they were scanned disagree with the stored evidence: {why}"
        ));
        self.next
            .push("scan both collections again and verify the new runs".into());
    }

    /// The content: digests that differ with the same IDs are changed records; with a re-read
    /// or a whole stream (`stream`, judged), the changed IDs themselves (`less`: the declared
    /// exclusions, never counted as changed).
    pub(crate) fn content(
        &mut self,
        cmp: &Compared<'_, '_>,
        found: Findings,
        less: &IdSet,
        all: bool,
        stream: Option<&StreamedKeys>,
    ) -> Result<ContentPart, ReadError> {
        let report = found.report(cmp, less, all)?;
        let mut part = ContentPart {
            changed_count: None,
            changed_ids: Vec::new(),
            changed_columns: Vec::new(),
            changed_partitions: Vec::new(),
            report,
        };
        if !(found.cd.old_has_content && found.cd.new_has_content) {
            self.unknown = true;
            for (name, has) in [
                (&self.names.0, found.cd.old_has_content),
                (&self.names.1, found.cd.new_has_content),
            ] {
                if !has {
                    self.reasons.push(format!(
                        "{name} has no content digests: its source config names no content columns"
                    ));
                }
            }
            self.next.push(
                "name the same `content` columns in both source configs and scan again".into(),
            );
            return Ok(part);
        }
        if found.cd.leaves_differing.is_empty() {
            part.changed_count = Some(0);
            return Ok(part);
        }
        part.changed_partitions = found.pure.clone();
        match (&found.reread, &part.report.reread) {
            (Some(r), Some(rr)) => {
                self.reread_findings(r);
                if rr.changed_count > 0 {
                    self.failed = true;
                    self.reasons.push(format!(
                        "{} changed between {} and {}",
                        count(rr.changed_count, "record", "records"),
                        self.names.0,
                        self.names.1
                    ));
                }
                if r.is_exact() {
                    part.changed_count = Some(rr.changed_count);
                    if let Some(s) = stream {
                        self.stream_against_reread(s, r);
                    }
                }
                part.changed_ids = rr.changed_ids.clone();
                part.changed_columns = rr.changed_columns.clone();
            }
            _ => match stream {
                Some(s) => self.streamed_changes(cmp, s, &found, less, all, &mut part)?,
                None => self.digests_only(cmp, &found),
            },
        }
        Ok(part)
    }

    /// The changed records a whole stream named (it agrees with the digests: `judge`); the
    /// partitions whose IDs differ too still need what the rules ask of them.
    fn streamed_changes(
        &mut self,
        cmp: &Compared<'_, '_>,
        s: &StreamedKeys,
        found: &Findings,
        less: &IdSet,
        all: bool,
        part: &mut ContentPart,
    ) -> Result<(), ReadError> {
        let changed = s.changed.difference(less);
        let n = changed.len();
        let cap = if all { usize::MAX } else { IDS_SHOWN_MAX };
        let (_, new_at) = cmp.at();
        let rn = Renderer::for_ids(new_at.snap, &cmp.new, changed.iter().take(cap))?;
        part.changed_ids = changed.iter().take(cap).map(|id| rn.json(id)).collect();
        part.changed_columns = super::content::ColumnNames::of(cmp).entries(
            &rn,
            changed.iter().take(cap),
            &s.changed_columns,
        );
        part.changed_count = Some(n);
        if n > 0 {
            self.failed = true;
            self.reasons.push(format!(
                "{} changed between {} and {}",
                count(n, "record", "records"),
                self.names.0,
                self.names.1
            ));
        }
        let with_ids = found.with_ids.len() as u64;
        if with_ids > 0 && !self.failed {
            self.unknown = true;
            self.reasons.push(format!(
                "the content of {} with excluded IDs cannot be checked by digest",
                count(with_ids, "partition", "partitions")
            ));
            self.next
                .push(self.stores.reread(cmp.old.run_id, cmp.new.run_id));
        }
        Ok(())
    }

    /// An exact re-read and a whole stream must name the same changed records in the
    /// partitions re-read.
    fn stream_against_reread(&mut self, s: &StreamedKeys, r: &super::reread::RereadOutcome) {
        let streamed: IdSet = s
            .changed
            .iter()
            .filter(|id| {
                r.partitions
                    .binary_search(&crate::idset::partition_of(*id))
                    .is_ok()
            })
            .collect();
        if streamed != r.changed {
            self.stream_disagrees(&format!(
                "the stream names {} changed records in the partitions re-read, the re-read {}",
                streamed.len(),
                r.changed.len()
            ));
        }
    }

    /// What a re-read that is not exact leaves unknown.
    fn reread_findings(&mut self, r: &super::reread::RereadOutcome) {
        if r.is_exact() {
            return;
        }
        self.unknown = true;
        let name = |side| match side {
            super::Side::Old => &self.names.0,
            super::Side::New => &self.names.1,
        };
        for (side, p) in &r.unreproduced {
            self.reasons.push(format!(
                "partition #{p} of {} re-read differently from its scan: the source changed since",
                name(*side)
            ));
        }
        for (side, why) in &r.failed {
            self.reasons.push(format!(
                "the re-read of {}'s source did not verify: {why}",
                name(*side)
            ));
        }
        self.next
            .push("scan both collections again and verify the new runs".into());
    }

    /// Digests without a re-read: a differing digest with the same IDs is a changed record; one
    /// whose IDs differ too cannot say.
    fn digests_only(&mut self, cmp: &Compared<'_, '_>, found: &Findings) {
        let (pure, with_ids) = (found.pure.len() as u64, found.with_ids.len() as u64);
        if pure > 0 {
            self.failed = true;
            self.reasons.push(format!(
                "the content digests of {} differ with the same IDs: a record there changed",
                count(pure, "partition", "partitions")
            ));
        }
        if with_ids > 0 && !self.failed {
            self.unknown = true;
            self.reasons.push(format!(
                "the content of {} with excluded IDs cannot be checked by digest",
                count(with_ids, "partition", "partitions")
            ));
        }
        if cmp.old.contract.id_codec == crate::contract::IdCodecKind::Int {
            self.next
                .push(self.stores.reread(cmp.old.run_id, cmp.new.run_id));
        }
    }

    /// The verdict: a difference is a defect of the migration only between two complete
    /// inventories (a run that stopped early may not have reached what it lacks).
    pub(crate) fn finish(
        self,
        cmp: &Compared<'_, '_>,
        ids: IdFindings,
        content: Option<ContentPart>,
        stream: Option<StreamReport>,
        inventories: bool,
    ) -> Result<MigrationReport, ReadError> {
        let verdict = if self.contradicted {
            Status::Unknown
        } else if self.failed && inventories {
            Status::Failed
        } else if self.unknown {
            Status::Unknown
        } else {
            Status::Verified
        };
        let (changed_count, changed_ids, changed_columns, changed_partitions, content) =
            match content {
                Some(c) => (
                    c.changed_count,
                    c.changed_ids,
                    c.changed_columns,
                    c.changed_partitions,
                    Some(c.report),
                ),
                None => (None, Vec::new(), Vec::new(), Vec::new(), None),
            };
        Ok(MigrationReport {
            verdict,
            from: cmp.old_side()?,
            to: cmp.new_side()?,
            missing_count: ids.missing.count(),
            extra_count: ids.extra.count(),
            changed_count,
            missing_ranges: cmp.render(Which::Removed, &ids.missing)?,
            missing_ranges_total: ids.missing.ranges_total,
            extra_ranges: cmp.render(Which::Added, &ids.extra)?,
            extra_ranges_total: ids.extra.ranges_total,
            changed_ids,
            changed_columns,
            changed_partitions,
            content_checked: content.is_some(),
            content,
            excluded_count: ids.excluded_count,
            exclusions_unmatched: ids.unmatched,
            exclusions_unmatched_count: ids.unmatched_count,
            stream,
            reasons: self.reasons,
            next: self.next,
            names: self.names,
        })
    }
}
