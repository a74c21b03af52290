//! The shards section of a merged run's report: what `merge` took from each shard of the
//! plan, from the receipt's `shards` list. Pure.
//!
//! Bounded: a plan has up to 4,096 shards, so a table of every one could outweigh the rest of
//! the document. The shards that are not merged and verified come first (those are what a
//! reviewer must look at; up to `UNSETTLED_MAX`), then merged and verified ones until
//! `ROWS_MAX` rows, then a count of the rest and the command that lists them all.

use std::fmt::Write;

use super::text::{more, plural, show, thousands};
use crate::receipt::{Receipt, ShardEntry};
use crate::reconcile::Status;

/// Rows the table shows when most shards are merged and verified.
const ROWS_MAX: usize = 64;
/// Shards not merged and verified the table shows at most.
const UNSETTLED_MAX: usize = 256;

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The section, for a run `merge` wrote; nothing for any other run.
pub(super) fn section(h: &mut String, r: &Receipt) {
    let Some(shards) = &r.shards else {
        return;
    };
    let unsettled = shards.iter().filter(|e| !e.clean()).count();
    h.push_str("<h2 id=\"shards\">Shards</h2>");
    let _ = write!(
        h,
        "<p>Merged from {} of plan <code>{}</code>: {}.</p>",
        plural(count(shards.len()), "shard"),
        show(r.plan_digest.as_deref().unwrap_or("—")),
        if unsettled == 0 {
            "every one merged and verified".to_owned()
        } else {
            format!("{unsettled} not merged and verified, listed first")
        }
    );
    h.push_str(
        "<table><thead><tr><th>shard</th><th>key range</th><th>finding</th><th>store</th>\
         <th>run</th><th>status</th><th>unique IDs</th><th>merkle root</th></tr></thead><tbody>",
    );
    let shown: Vec<&ShardEntry> = shards
        .iter()
        .filter(|e| !e.clean())
        .chain(shards.iter().filter(|e| e.clean()))
        .take(unsettled.clamp(ROWS_MAX, UNSETTLED_MAX))
        .collect();
    for e in &shown {
        let _ = write!(
            h,
            "<tr><td class=\"num\">{}</td><td class=\"num\">[{}, {}{}</td><td><code>{}</code></td>\
             <td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td><code>{}</code></td></tr>",
            e.index,
            thousands(e.key_range.lo),
            thousands(e.key_range.hi),
            // To the end of the ID space, 2^64 - 1 included.
            if e.key_range.hi == u64::MAX { "]" } else { ")" },
            e.finding.as_str(),
            show(e.store.as_deref().unwrap_or("—")),
            show(e.run_id.as_deref().unwrap_or("—")),
            e.coverage_status.map_or("—", Status::as_str),
            thousands(e.unique_ids_observed),
            show(e.merkle_root.as_deref().unwrap_or("—")),
        );
    }
    h.push_str("</tbody></table>");
    let rest = shards.len().saturating_sub(shown.len());
    if rest > 0 {
        let _ = write!(
            h,
            "<p class=\"note\">{}, merged and verified, are not shown; \
             <code>scanledger receipt {} --json</code> lists every shard.</p>",
            more(count(rest), "shard"),
            show(&r.run_id)
        );
    }
}
