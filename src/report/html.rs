//! The HTML document: layout, inline CSS, and the sections around the map and the timeline.
//!
//! Pure. The document references nothing outside itself: no script, no stylesheet, font or
//! image link, no URL; the Content-Security-Policy meta forbids any load but inline styles
//! (and `data:` images, of which there are none). Colours are the Okabe-Ito palette, each
//! state also has a pattern or a shape, and a `prefers-color-scheme: dark` block restyles it.
//! Every string from the input goes through `text::show` or `text::escape`.

use std::fmt::Write;

use super::map::{self, CellState};
use super::text::{self, escape, plural, show, thousands};
use super::verdict::{title, verdict};
use super::{timeline, RangeSummary, ReportInput};
use crate::contract::IdCodecKind;
use crate::reconcile::Status;

/// Ranges listed per label and per side of the comparison.
const RANGES_LISTED_MAX: usize = 8;
/// Differing partitions listed by index.
const PARTITIONS_LISTED_MAX: usize = 32;

const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

const CSS: &str = r#"
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--card:#f6f8fa;--border:#d1d9e0;
--present:#0072B2;--short:#E69F00;--missing:#D55E00;--differing:#CC79A7;--ok:#009E73;--warn:#E69F00;--bad:#D55E00;
--ink:#fff;--band:#eef1f4}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--card:#151b23;--border:#3d444d;
--present:#56B4E9;--ink:#0d1117;--band:#1c232c}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:980px;margin:0 auto;padding:28px 24px 40px}
header{display:flex;align-items:center;gap:14px;flex-wrap:wrap}
h1{font-size:22px;margin:0;font-weight:650}
h2{font-size:17px;margin:30px 0 8px;padding-bottom:6px;border-bottom:1px solid var(--border)}
.sub{color:var(--muted);font-size:13px}
.badge{display:inline-block;padding:3px 10px;border-radius:999px;font-weight:700;font-size:13px;letter-spacing:.04em;color:#000}
.badge.verified{background:var(--ok)}.badge.unknown{background:var(--warn)}.badge.failed{background:var(--bad)}
.verdict{margin:18px 0 0;padding:14px 18px;border:1px solid var(--border);border-left:6px solid var(--ok);border-radius:8px;background:var(--card)}
.verdict.unknown{border-left-color:var(--warn)}.verdict.failed{border-left-color:var(--bad)}
.verdict p{margin:0}.verdict #verdict{font-size:17px;font-weight:600}.verdict .caveat{margin-top:6px;color:var(--muted)}
.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(140px,1fr));gap:10px;margin-top:16px}
.fig{border:1px solid var(--border);border-radius:8px;padding:10px 14px;background:var(--card)}
.fig b{display:block;font-size:20px;font-variant-numeric:tabular-nums}.fig span{color:var(--muted);font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:10px 0 12px;padding:0;list-style:none;font-size:13px}
.legend li{display:flex;align-items:center;gap:6px}.legend svg{flex:none}
.map,.timeline{max-width:100%;height:auto;display:block}
.map rect:hover{stroke:var(--fg);stroke-width:2}
.p{fill:var(--present)}.s{fill:url(#pat-short)}.m{fill:url(#pat-missing)}.d{fill:url(#pat-differing)}
.e{fill:none;stroke:var(--border);stroke-width:1}
.fs{fill:var(--short)}.fm{fill:var(--missing)}.fd{fill:var(--differing)}.ink{fill:var(--ink)}.inks{stroke:var(--ink);stroke-width:1.4}
.axis{font-size:11px;fill:var(--muted);font-variant-numeric:tabular-nums}
.lane{font-size:12px;fill:var(--fg)}.lane .muted{fill:var(--muted)}
.band{fill:var(--band)}.grid{stroke:var(--border);stroke-dasharray:2 3}.axis-line{stroke:var(--muted)}
.mk-failed{fill:var(--bad);stroke:var(--fg);stroke-width:1}.mk-unknown{fill:var(--warn);stroke:var(--fg);stroke-width:1}
table{border-collapse:collapse;width:100%;font-size:14px}
thead th{width:auto}th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--border);vertical-align:top}
th{width:30%;font-weight:500;color:var(--muted)}thead th{font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}td code{white-space:nowrap}td.ranges code{white-space:normal;overflow-wrap:anywhere}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:14px 40px}.cols .wide{grid-column:1/-1}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:0;font-size:14px;align-content:start}
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
.note{color:var(--muted);font-size:13px}
footer{margin-top:34px;padding-top:10px;border-top:1px solid var(--border);color:var(--muted);font-size:12px}
"#;

/// The patterns of the map's states, shared by the map and the legend (ids are document-wide).
const PATTERNS: &str = concat!(
    "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>",
    "<pattern id=\"pat-short\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"6\" height=\"6\" class=\"fs\"/><rect width=\"2\" height=\"6\" class=\"ink\"/></pattern>",
    "<pattern id=\"pat-missing\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">",
    "<rect width=\"6\" height=\"6\" class=\"fm\"/><path d=\"M0 0L6 6M6 0L0 6\" class=\"inks\"/></pattern>",
    "<pattern id=\"pat-differing\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\">",
    "<rect width=\"5\" height=\"5\" class=\"fd\"/><circle cx=\"2.5\" cy=\"2.5\" r=\"1.1\" class=\"ink\"/></pattern>",
    "</defs></svg>"
);

/// The legend's order: what is fine first, then what differs, worst last, then empty.
const LEGEND: [CellState; 5] = [
    CellState::Present,
    CellState::Differing,
    CellState::Short,
    CellState::Missing,
    CellState::Empty,
];

fn status_class(s: Status) -> &'static str {
    s.as_str()
}

/// The whole document.
pub(super) fn page(input: &ReportInput) -> String {
    let r = &input.receipt;
    let v = verdict(input);
    let cov = map::build(input);
    let mut h = String::with_capacity(cov.cells.len() * 200 + 32 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>{} {} · scanledger report</title><style>{CSS}</style></head><body>{PATTERNS}<main>",
        show(&r.run_id),
        title(r.coverage_status).to_uppercase()
    );
    let _ = write!(
        h,
        "<header><h1>Scan report · {}</h1><span class=\"badge {}\" id=\"status\">{}</span>\
         <span class=\"sub\">{} / {} · {}</span></header>",
        show(&r.run_id),
        status_class(r.coverage_status),
        match r.coverage_status {
            Status::Verified => "✓ VERIFIED",
            Status::Unknown => "? UNKNOWN",
            Status::Failed => "✗ FAILED",
        },
        show(&r.source),
        show(r.tenant.as_deref().unwrap_or("-")),
        r.snapshot_id.as_deref().map_or_else(
            || "no snapshot (live scan)".to_owned(),
            |s| format!("snapshot {}", show(s))
        )
    );
    let _ = write!(
        h,
        "<section class=\"verdict {}\"><p id=\"verdict\">{}</p><p class=\"caveat\" id=\"caveat\">{}</p></section>",
        status_class(v.status),
        show_long(&v.headline),
        show_long(&v.caveat)
    );
    if let Some(m) = &input.migration {
        super::migration::section(&mut h, m);
    }
    figures(&mut h, input);
    coverage(&mut h, input, &cov);
    if let Some(reference) = &input.reference {
        comparison(&mut h, input, reference);
    }
    super::shards::section(&mut h, r);
    violations(&mut h, input);
    labels(&mut h, input);
    receipt_fields(&mut h, input);
    let _ = write!(
        h,
        "<footer>Written by scanledger {} from the run's evidence in the store; every figure above is computed from it. \
         This file is self-contained: no script, no network access, nothing loaded from outside it. \
         <code>scanledger receipt {}</code> prints the same receipt; <code>scanledger verify</code> recomputes it.</footer>",
        show(&input.generator),
        show(&r.run_id)
    );
    h.push_str("</main></body></html>\n");
    h
}

/// A verdict sentence, escaped; the verdict clips each source string in it, and the sentence
/// is clipped as a whole too so that the size bound never depends on the verdict's wording.
fn show_long(s: &str) -> String {
    escape(&super::text::clip(s, 2_000))
}

fn figures(h: &mut String, input: &ReportInput) {
    let r = &input.receipt;
    let expected = r
        .records_expected
        .map_or_else(String::new, |e| format!(" · {} expected", thousands(e)));
    let violations = (r.violations.len() as u64).saturating_add(r.violations_dropped);
    // Each label agrees with its figure: "1 partition", "3 partitions".
    let noun =
        |n: u64, one: &str, many: &str| (thousands(n), if n == 1 { one } else { many }.to_owned());
    let (ids, ids_label) = noun(r.unique_ids_observed, "unique ID", "unique IDs");
    let cards = [
        (ids, format!("{ids_label}{expected}")),
        noun(
            u64::from(r.pages_observed),
            "page observed",
            "pages observed",
        ),
        if strings(input) {
            noun(
                r.partitions,
                "bucket of the strings' digests",
                "buckets of the strings' digests",
            )
        } else {
            noun(r.partitions, "partition", "partitions")
        },
        noun(r.duplicate_ids, "duplicate ID", "duplicate IDs"),
        noun(violations, "violation", "violations"),
        noun(r.labels.len() as u64, "label", "labels"),
    ];
    h.push_str("<div class=\"figures\">");
    for (value, what) in cards {
        let _ = write!(
            h,
            "<div class=\"fig\"><b>{value}</b><span>{what}</span></div>"
        );
    }
    h.push_str("</div>");
}

fn swatch(state: CellState) -> String {
    format!(
        "<svg width=\"16\" height=\"16\" aria-hidden=\"true\"><rect class=\"{}\" x=\"1\" y=\"1\" width=\"14\" height=\"14\" rx=\"2\"/></svg>",
        state.class()
    )
}

fn coverage(h: &mut String, input: &ReportInput, cov: &map::CoverageMap) {
    h.push_str("<h2 id=\"coverage\">Coverage map</h2>");
    let _ = write!(
        h,
        "<p id=\"map-summary\">{}</p>",
        map::summary(cov, strings(input))
    );
    if strings(input) && !cov.cells.is_empty() {
        h.push_str("<p class=\"note\">These are string IDs: each is numbered by the collection's dictionary in the order the dictionary first saw it, so a partition is not a range of the strings (neither alphabetical nor by length). The receipt's buckets are another thing: buckets of the strings' digests, which its Merkle root is computed over.</p>");
    }
    if cov.cells.is_empty() {
        return;
    }
    h.push_str("<ul class=\"legend\">");
    for state in LEGEND {
        // States that cannot occur without a reference or per-partition counts are left out.
        let possible = match state {
            CellState::Missing | CellState::Differing => input.reference.is_some(),
            CellState::Short => input.expected_partitions.is_some(),
            _ => true,
        };
        if !possible {
            continue;
        }
        let _ = write!(
            h,
            "<li>{}<span>{} <span class=\"sub\">({})</span></span></li>",
            swatch(state),
            state.label(),
            plural(cov.state_counts[state as usize], "partition")
        );
    }
    h.push_str("</ul>");
    if let Some(svg) = map::svg(input, cov) {
        h.push_str(&svg);
    }
    let mut notes = Vec::new();
    if input.expected_partitions.is_none() {
        notes.push("The source reported no per-partition counts, so no cell can be short of one.");
    }
    if input.reference.is_none() {
        notes.push("No reference run was given (<code>--against RUN</code>), so nothing is shown as missing or differing.");
    }
    if !notes.is_empty() {
        let _ = write!(h, "<p class=\"note\">{}</p>", notes.join(" "));
    }
}

/// `"X..X"` shown as `"X"`; any other range as it is.
fn singleton(range: &str) -> &str {
    let k = range.len().saturating_sub(2) / 2;
    match (range.get(..k), range.get(k..k + 2), range.get(k + 2..)) {
        (Some(a), Some(".."), Some(b)) if a == b && !a.is_empty() => a,
        _ => range,
    }
}

/// Whether the run's IDs are strings (numbered by the collection's dictionary, so ranges of
/// them are not ranges of the strings).
fn strings(input: &ReportInput) -> bool {
    input.id_codec == IdCodecKind::String
}

/// The first ranges of a list (for string IDs, which `gather` lists one by one: the first
/// IDs), then how many more `noun`s.
fn range_list(s: &RangeSummary, noun: &str) -> String {
    if s.ranges_total == 0 {
        return "—".to_owned();
    }
    let shown: Vec<String> = s
        .ranges
        .iter()
        .take(RANGES_LISTED_MAX)
        .map(|r| format!("<code>{}</code>", show(singleton(r))))
        .collect();
    let more = s.ranges_total.saturating_sub(shown.len() as u64);
    let mut out = shown.join(", ");
    if more > 0 {
        let _ = write!(
            out,
            " <span class=\"note\">and {}</span>",
            text::more(more, noun)
        );
    }
    out
}

fn comparison(h: &mut String, input: &ReportInput, reference: &super::Reference) {
    let r = &input.receipt;
    let (run, other) = (show(&r.run_id), show(&reference.run_id));
    let _ = write!(h, "<h2 id=\"against\">Against {other}</h2>");
    let (added, removed) = (reference.added.count, reference.removed.count);
    let noun = if strings(input) { "ID" } else { "range" };
    let sentence = match (added, removed) {
        (0, 0) => format!(
            "{run} and {other} hold the same {} IDs.",
            thousands(r.unique_ids_observed)
        ),
        (a, 0) => format!(
            "{run} holds every ID of {other}, plus {} that {other} lacks.",
            plural(a, "ID")
        ),
        (0, m) => format!(
            "{run} lacks {} that {other} has, and holds nothing it lacks.",
            plural(m, "ID")
        ),
        (a, m) => format!(
            "{run} lacks {} that {other} has, and holds {} that {other} lacks.",
            plural(m, "ID"),
            plural(a, "ID")
        ),
    };
    let _ = write!(
        h,
        "<p id=\"against-summary\">{sentence} {}.</p>",
        match reference.partitions_differing.len() {
            0 => "No partition differs".to_owned(),
            1 => "1 partition differs".to_owned(),
            n => format!("{} partitions differ", thousands(n as u64)),
        }
    );
    let snapshot = reference.snapshot_id.as_deref().map_or_else(
        || "no snapshot".to_owned(),
        |s| format!("snapshot {}", show(s)),
    );
    let parts: Vec<String> = reference
        .partitions_differing
        .iter()
        .take(PARTITIONS_LISTED_MAX)
        .map(|p| thousands(*p))
        .collect();
    let parts_more =
        (reference.partitions_differing.len() as u64).saturating_sub(parts.len() as u64);
    let _ = write!(
        h,
        "<table><tbody>\
         <tr><th>reference</th><td colspan=\"2\">{other} · {} · {snapshot} · {} IDs</td></tr>\
         <tr><th>in {other}, not in {run}</th><td class=\"num\">{}</td><td class=\"ranges\">{}</td></tr>\
         <tr><th>in {run}, not in {other}</th><td class=\"num\">{}</td><td class=\"ranges\">{}</td></tr>\
         <tr><th>partitions differing</th><td class=\"num\">{}</td><td class=\"mono\">{}{}</td></tr>\
         </tbody></table>",
        reference.coverage_status.as_str(),
        thousands(reference.unique_ids),
        thousands(removed),
        range_list(&reference.removed, noun),
        thousands(added),
        range_list(&reference.added, noun),
        thousands(reference.partitions_differing.len() as u64),
        if parts.is_empty() { "—".to_owned() } else { parts.join(", ") },
        if parts_more > 0 { format!(" and {} more", thousands(parts_more)) } else { String::new() }
    );
    if reference.coverage_status != Status::Verified {
        let _ = write!(
            h,
            "<p class=\"note\">{other} is {}: it is not a complete inventory, so \"missing\" means missing against what it read.</p>",
            reference.coverage_status.as_str()
        );
    }
}

fn violations(h: &mut String, input: &ReportInput) {
    let r = &input.receipt;
    h.push_str("<h2 id=\"violations\">Violations by page</h2>");
    let Some(svg) = timeline::svg(r) else {
        let open = matches!(input.state.as_str(), "running" | "interrupted");
        let _ = write!(
            h,
            "<p>No violation over {}: every page {}passed every rule.{}</p>",
            plural(u64::from(r.pages_observed), "page"),
            if open { "read so far " } else { "" },
            if open {
                format!(
                    " The run has not reached its end (it is {}), so the pages after these were checked by no rule.",
                    show(&input.state)
                )
            } else {
                String::new()
            }
        );
        return;
    };
    h.push_str("<p class=\"note\">One lane per kind; a diamond forces <b>failed</b>, a circle forces <b>unknown</b>. Hover a marker for its detail.</p>");
    h.push_str(&svg);
    h.push_str("<table><thead><tr><th>page</th><th>kind</th><th>forces</th><th>detail</th></tr></thead><tbody>");
    for v in &r.violations {
        let _ = write!(
            h,
            "<tr><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            if v.page == 0 {
                "run".to_owned()
            } else {
                thousands(v.page)
            },
            v.kind.as_str(),
            v.kind.status().as_str(),
            show(&v.detail)
        );
    }
    h.push_str("</tbody></table>");
    if r.violations_dropped > 0 {
        let _ = write!(
            h,
            "<p class=\"note\">{} more were counted and not kept.</p>",
            plural(r.violations_dropped, "violation")
        );
    }
}

fn labels(h: &mut String, input: &ReportInput) {
    let r = &input.receipt;
    h.push_str("<h2 id=\"labels\">Labels</h2>");
    if r.labels.is_empty() {
        h.push_str("<p>No item carried a label.</p>");
        return;
    }
    let _ = write!(
        h,
        "<table><thead><tr><th>label</th><th>IDs</th><th>share</th><th>{}</th></tr></thead><tbody>",
        if strings(input) { "which" } else { "ID ranges" }
    );
    for (name, l) in &r.labels {
        let share = if r.unique_ids_observed == 0 {
            "—".to_owned()
        } else {
            // Per mille, in integers: no float formatting of input-derived values.
            let pm = u128::from(l.count) * 1000 / u128::from(r.unique_ids_observed);
            format!("{}.{}%", pm / 10, pm % 10)
        };
        let ranges = if strings(input) {
            // Ranges of dictionary numbers would read as alphabetical ranges of the strings.
            format!(
                "<span class=\"note\"><code>scanledger export {} --label {}</code> lists them</span>",
                show(&r.run_id),
                show(name)
            )
        } else {
            range_list(
                &RangeSummary {
                    count: l.count,
                    ranges: l.ranges.clone(),
                    ranges_total: l.ranges_total,
                },
                "range",
            )
        };
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{share}</td><td class=\"ranges\">{}</td></tr>",
            show(name),
            thousands(l.count),
            ranges
        );
    }
    h.push_str("</tbody></table>");
}

fn receipt_fields(h: &mut String, input: &ReportInput) {
    let r = &input.receipt;
    let opt = |v: Option<&str>| v.map_or_else(|| "—".to_owned(), show);
    let num = |v: Option<u64>| v.map_or_else(|| "—".to_owned(), thousands);
    let yes = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let mut scope: Vec<(&str, String)> = vec![
        ("run", show(&r.run_id)),
        ("coverage status", r.coverage_status.as_str().to_owned()),
        ("conclusion scope", show(r.conclusion_scope.as_str())),
        ("state", show(&input.state)),
        (
            "source / tenant",
            format!("{} / {}", show(&r.source), opt(r.tenant.as_deref())),
        ),
        ("snapshot", opt(r.snapshot_id.as_deref())),
        ("mode", show(&r.mode)),
        ("rejected", yes(r.rejected)),
        ("restarts", thousands(r.restarts)),
        ("restarted from", opt(r.restarted_from.as_deref())),
        ("superseded by", opt(r.superseded_by.as_deref())),
    ];
    if let Some(stop) = &input.stopped_by {
        scope.insert(4, ("stopped by", show_long(&stop.sentence())));
    }
    let counts: Vec<(&str, String)> = vec![
        ("pages observed", thousands(r.pages_observed)),
        ("terminal page observed", yes(r.terminal_cursor_observed)),
        ("records observed", thousands(r.records_observed)),
        ("unique IDs", thousands(r.unique_ids_observed)),
        ("duplicate IDs", thousands(r.duplicate_ids)),
        ("records expected", num(r.records_expected)),
        ("count total", num(r.count_total)),
        (
            if strings(input) {
                "buckets (strings' digests)"
            } else {
                "partitions"
            },
            thousands(r.partitions),
        ),
        (
            "limits hit",
            if r.limits_hit.is_empty() {
                "—".to_owned()
            } else {
                show(&r.limits_hit.join(", "))
            },
        ),
        ("started", show(&r.started_at)),
        ("finished", opt(r.finished_at.as_deref())),
    ];
    let evidence: Vec<(&str, String)> = vec![
        (
            "query digest",
            format!("<code>{}</code>", show(&r.query_digest)),
        ),
        (
            "merkle root",
            format!("<code>{}</code>", show(&r.merkle_root)),
        ),
        (
            "cursor chain digest",
            format!("<code>{}</code>", show(&r.cursor_chain_digest)),
        ),
        ("receipt format", format!("v{}", r.format_version)),
    ];
    h.push_str("<h2 id=\"receipt\">Receipt</h2><div class=\"cols\">");
    // What was scanned and what was counted side by side; the digests below, full width.
    for (class, group) in [("", scope), ("", counts), ("wide", evidence)] {
        let _ = write!(h, "<dl class=\"{class}\">");
        for (k, v) in group {
            let _ = write!(h, "<dt>{k}</dt><dd>{v}</dd>");
        }
        h.push_str("</dl>");
    }
    h.push_str("</div>");
}
