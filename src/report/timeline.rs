//! The violations on a page timeline: one lane per violation kind, one marker per violation at
//! the page it fired on, over the run's pages 1..=N.
//!
//! Pure: an SVG string from a receipt. The marker's shape says the status it forces (a diamond
//! for `failed`, a circle for `unknown`), so colour is never the only cue; each marker's
//! `<title>` carries the page and the detail, escaped. A receipt keeps at most 256 violations,
//! so the drawing is small whatever the run.

use std::fmt::Write;

use super::text::{show, thousands};
use crate::receipt::Receipt;
use crate::reconcile::{Status, ViolationKind};

const WIDTH: u64 = 920;
const LEFT: u64 = 230;
const RIGHT: u64 = 24;
const LANE: u64 = 28;
const AXIS: u64 = 34;

/// A round step for about five ticks over `n` pages: 1, 2 or 5 times a power of ten.
fn tick_step(n: u64) -> u64 {
    let raw = (n / 5).max(1);
    let mut p = 1u64;
    while p.saturating_mul(10) <= raw {
        p = p.saturating_mul(10);
    }
    [1, 2, 5, 10]
        .iter()
        .map(|m| p.saturating_mul(*m))
        .find(|s| *s >= raw)
        .unwrap_or(p)
}

/// The timeline as an SVG element, or `None` when the run has no violation.
#[must_use]
pub(super) fn svg(r: &Receipt) -> Option<String> {
    if r.violations.is_empty() {
        return None;
    }
    let mut kinds: Vec<ViolationKind> = Vec::new();
    for v in &r.violations {
        if !kinds.contains(&v.kind) {
            kinds.push(v.kind);
        }
    }
    let last_page = r
        .violations
        .iter()
        .map(|v| v.page)
        .max()
        .unwrap_or(0)
        .max(r.pages_observed)
        .max(1);
    let last = u64::from(last_page);
    let plot = WIDTH - LEFT - RIGHT;
    // Page 0 stands for the run as a whole (an end-of-run check): drawn at the last page.
    let x = |page: u32| {
        let page = u64::from(if page == 0 { last_page } else { page });
        if last <= 1 {
            LEFT + plot / 2
        } else {
            LEFT + (page - 1).saturating_mul(plot) / (last - 1)
        }
    };
    let lanes = kinds.len() as u64;
    let height = lanes * LANE + AXIS;
    let mut s = format!(
        "<svg class=\"timeline\" role=\"img\" aria-label=\"violations by page\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\">"
    );
    // The pages observed, as a band behind every lane.
    let _ = write!(
        s,
        "<rect class=\"band\" x=\"{LEFT}\" y=\"0\" width=\"{}\" height=\"{}\" rx=\"3\"/>",
        x(last_page) - LEFT + 1,
        lanes * LANE
    );
    for (i, kind) in kinds.iter().enumerate() {
        let y = i as u64 * LANE + LANE / 2;
        let status = match kind.status() {
            Status::Failed => "forces failed",
            _ => "forces unknown",
        };
        let _ = write!(
            s,
            "<text class=\"lane\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} <tspan class=\"muted\">({status})</tspan></text>",
            LEFT - 10,
            y + 4,
            kind.as_str()
        );
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\"/>",
            WIDTH - RIGHT
        );
    }
    for v in &r.violations {
        let lane = kinds.iter().position(|k| *k == v.kind).unwrap_or(0) as u64;
        let (cx, cy) = (x(v.page), lane * LANE + LANE / 2);
        let where_ = if v.page == 0 {
            "the run as a whole".to_owned()
        } else {
            format!("page {}", thousands(v.page))
        };
        let title = format!("{} on {where_}: {}", v.kind.as_str(), show(&v.detail));
        if v.kind.status() == Status::Failed {
            let _ = write!(
                s,
                "<path class=\"mk-failed\" d=\"M{cx} {} l7 7 l-7 7 l-7 -7 z\"><title>{title}</title></path>",
                cy - 7
            );
        } else {
            let _ = write!(
                s,
                "<circle class=\"mk-unknown\" cx=\"{cx}\" cy=\"{cy}\" r=\"6\"><title>{title}</title></circle>"
            );
        }
    }
    axis(&mut s, lanes * LANE + 6, last, x);
    s.push_str("</svg>");
    Some(s)
}

/// The page axis under the lanes at `axis_y`: a line to the last page, about ten ticks and
/// the word "page"; `x` places a page.
fn axis(s: &mut String, axis_y: u64, last: u64, x: impl Fn(u32) -> u64) {
    let last_page = u32::try_from(last).unwrap_or(u32::MAX);
    let _ = write!(
        s,
        "<line class=\"axis-line\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{axis_y}\" y2=\"{axis_y}\"/>",
        x(last_page)
    );
    let step = tick_step(last);
    let mut ticks = vec![1u64];
    let mut t = step;
    // At most about ten ticks: `step` is at least a fifth of `last`.
    while t < last {
        if t > 1 {
            ticks.push(t);
        }
        t = t.saturating_add(step);
    }
    if last > 1 {
        ticks.push(last);
    }
    for (i, t) in ticks.iter().enumerate() {
        // Skip an intermediate tick too close to the last one to be read.
        if i + 1 < ticks.len() && i > 0 && last - t < step / 2 {
            continue;
        }
        let tx = x(u32::try_from(*t).unwrap_or(u32::MAX));
        let _ = write!(
            s,
            "<line class=\"axis-line\" x1=\"{tx}\" x2=\"{tx}\" y1=\"{axis_y}\" y2=\"{}\"/><text class=\"axis\" x=\"{tx}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            axis_y + 5,
            axis_y + 18,
            thousands(*t)
        );
    }
    let _ = write!(
        s,
        "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"end\">page</text>",
        LEFT - 10,
        axis_y + 18
    );
}
