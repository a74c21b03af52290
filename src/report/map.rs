//! The coverage map: one cell per partition (2^16 consecutive IDs), coloured and patterned by
//! state, with the counts on hover; past `CELLS_MAX` partitions, each cell aggregates a fixed
//! number of consecutive partitions and takes the most severe state inside it.
//!
//! Pure: `build` turns a `ReportInput` into a `CoverageMap`, `svg` draws it. One pass over the
//! sorted partition lists (run, source's expectation, reference, differing), so a million
//! partitions cost milliseconds, and the drawing has at most `CELLS_MAX` cells whatever the
//! span of partition indexes.
//! Invariants: cells are ascending, disjoint and cover `first..=last`; `state_counts` sums to
//! the number of partitions in the span.

use std::fmt::Write;

use super::text::{escape, thousands};
use super::ReportInput;
use crate::contract::IdCodecKind;
use crate::idset::PARTITION_BITS;

/// Cells drawn at most; past this, cells aggregate consecutive partitions.
pub(crate) const CELLS_MAX: u64 = 4096;

/// The state of a partition (or of a cell: the most severe of its partitions). Ordered from
/// least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CellState {
    /// No ID observed, none expected, none in the reference.
    Empty,
    /// IDs observed, matching every expectation.
    Present,
    /// IDs observed; the reference holds other IDs in this partition.
    Differing,
    /// The observed count is not the source's count for the partition (short, or over).
    Short,
    /// The reference has IDs here and the run has none.
    Missing,
}

impl CellState {
    /// Every state, least severe first.
    pub(crate) const ALL: [CellState; 5] = [
        CellState::Empty,
        CellState::Present,
        CellState::Differing,
        CellState::Short,
        CellState::Missing,
    ];

    /// The CSS class of its cells (one letter: a million-partition map has thousands).
    #[must_use]
    pub(crate) fn class(self) -> &'static str {
        match self {
            CellState::Empty => "e",
            CellState::Present => "p",
            CellState::Differing => "d",
            CellState::Short => "s",
            CellState::Missing => "m",
        }
    }

    /// Its name in the legend and the tooltips.
    #[must_use]
    pub(crate) fn label(self) -> &'static str {
        match self {
            CellState::Empty => "empty",
            CellState::Present => "present",
            CellState::Differing => "differs from the reference",
            CellState::Short => "off the source's count",
            CellState::Missing => "missing against the reference",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One cell: one partition, or a run of consecutive partitions when aggregated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cell {
    /// First partition index.
    pub first: u64,
    /// Last partition index (inclusive).
    pub last: u64,
    /// The most severe state inside.
    pub state: CellState,
    /// IDs the run holds in these partitions.
    pub observed: u64,
    /// IDs the source reported for them, when it reported per-partition counts.
    pub expected: Option<u64>,
    /// IDs the reference holds in them, when there is a reference.
    pub reference: Option<u64>,
    /// Partitions per state, indexed like `CellState::ALL`.
    pub states: [u64; 5],
}

/// The map of a run: its cells and what they add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CoverageMap {
    /// The cells, ascending.
    pub cells: Vec<Cell>,
    /// Partitions per cell (1 unless aggregated).
    pub per_cell: u64,
    /// First partition index of the span.
    pub first: u64,
    /// Last partition index of the span.
    pub last: u64,
    /// Partitions holding the run's IDs (the receipt's `partitions`).
    pub partitions_observed: u64,
    /// Partitions of the span per state, indexed like `CellState::ALL`.
    pub state_counts: [u64; 5],
}

impl CoverageMap {
    /// Partitions in the span `first..=last` (0 for an empty map).
    #[must_use]
    pub(crate) fn span(&self) -> u64 {
        if self.cells.is_empty() {
            0
        } else {
            (self.last - self.first).saturating_add(1)
        }
    }
}

fn state_of(
    observed: u64,
    expected: Option<u64>,
    reference: Option<u64>,
    differs: bool,
) -> CellState {
    if observed == 0 && reference.unwrap_or(0) > 0 {
        CellState::Missing
    } else if expected.is_some_and(|e| e != observed) {
        CellState::Short
    } else if differs {
        CellState::Differing
    } else if observed > 0 {
        CellState::Present
    } else {
        CellState::Empty
    }
}

/// A sorted copy of `(partition, count)` pairs unless they are sorted already.
fn sorted(v: &[(u64, u64)]) -> std::borrow::Cow<'_, [(u64, u64)]> {
    if v.windows(2).all(|w| w[0].0 < w[1].0) {
        std::borrow::Cow::Borrowed(v)
    } else {
        let mut owned = v.to_vec();
        owned.sort_unstable();
        owned.dedup_by_key(|(p, _)| *p);
        std::borrow::Cow::Owned(owned)
    }
}

/// Builds the map of a report's input.
#[must_use]
pub(crate) fn build(input: &ReportInput) -> CoverageMap {
    let observed = sorted(&input.partitions);
    let expected = input.expected_partitions.as_deref().map(sorted);
    let reference = input.reference.as_ref().map(|r| sorted(&r.partitions));
    let mut differing: Vec<u64> = input
        .reference
        .as_ref()
        .map(|r| r.partitions_differing.clone())
        .unwrap_or_default();
    differing.sort_unstable();
    differing.dedup();
    let empty: &[(u64, u64)] = &[];
    let lists = [
        &observed[..],
        expected.as_deref().unwrap_or(empty),
        reference.as_deref().unwrap_or(empty),
    ];
    let first = lists
        .iter()
        .filter_map(|l| l.first().map(|x| x.0))
        .chain(differing.first().copied())
        .min();
    let last = lists
        .iter()
        .filter_map(|l| l.last().map(|x| x.0))
        .chain(differing.last().copied())
        .max();
    let (Some(first), Some(last)) = (first, last) else {
        return CoverageMap {
            cells: Vec::new(),
            per_cell: 1,
            first: 0,
            last: 0,
            partitions_observed: 0,
            state_counts: [0; 5],
        };
    };
    let span = (last - first).saturating_add(1);
    let per_cell = span.div_ceil(CELLS_MAX).max(1);
    let n_cells = span.div_ceil(per_cell);
    let cell_of = |p: u64| usize::try_from((p - first) / per_cell).unwrap_or(usize::MAX);
    let mut cells: Vec<Cell> = (0..n_cells)
        .map(|i| {
            let lo = first.saturating_add(i.saturating_mul(per_cell));
            Cell {
                first: lo,
                last: lo.saturating_add(per_cell - 1).min(last),
                state: CellState::Empty,
                observed: 0,
                expected: expected.as_ref().map(|_| 0),
                reference: reference.as_ref().map(|_| 0),
                states: [0; 5],
            }
        })
        .collect();
    // A merge of the sorted lists: each step consumes the smallest head, so it ends after at
    // most the sum of their lengths.
    let mut heads = [0usize; 3];
    let mut d = 0usize;
    let mut state_counts = [0u64; 5];
    loop {
        let next = lists
            .iter()
            .zip(heads)
            .filter_map(|(l, h)| l.get(h).map(|x| x.0))
            .chain(differing.get(d).copied())
            .min();
        let Some(p) = next else { break };
        let mut counts = [None; 3];
        for (k, list) in lists.iter().enumerate() {
            if let Some(&(q, n)) = list.get(heads[k]) {
                if q == p {
                    counts[k] = Some(n);
                    heads[k] += 1;
                }
            }
        }
        let differs = differing.get(d) == Some(&p);
        if differs {
            d += 1;
        }
        let obs = counts[0].unwrap_or(0);
        // With per-partition counts, a partition the source did not list is expected empty.
        let exp = expected.as_ref().map(|_| counts[1].unwrap_or(0));
        let refc = reference.as_ref().map(|_| counts[2].unwrap_or(0));
        let state = state_of(obs, exp, refc, differs);
        state_counts[state.index()] += 1;
        let Some(cell) = cells.get_mut(cell_of(p)) else {
            continue;
        };
        cell.observed = cell.observed.saturating_add(obs);
        cell.expected = cell.expected.zip(exp).map(|(a, b)| a.saturating_add(b));
        cell.reference = cell.reference.zip(refc).map(|(a, b)| a.saturating_add(b));
        cell.states[state.index()] += 1;
        cell.state = cell.state.max(state);
    }
    for cell in &mut cells {
        let listed: u64 = cell.states.iter().sum();
        let width = (cell.last - cell.first).saturating_add(1);
        cell.states[CellState::Empty.index()] += width.saturating_sub(listed);
    }
    let listed: u64 = state_counts.iter().sum();
    state_counts[CellState::Empty.index()] += span.saturating_sub(listed);
    CoverageMap {
        cells,
        per_cell,
        first,
        last,
        partitions_observed: observed.len() as u64,
        state_counts,
    }
}

/// How a partition range's IDs read: `IDs 0–65,535`, with the prefix for `prefixed` IDs; none
/// for `string` IDs, whose numbers are interned and mean nothing to a reader.
fn id_range(input: &ReportInput, first: u64, last: u64) -> String {
    let lo = first.checked_shl(PARTITION_BITS).unwrap_or(u64::MAX);
    let hi = last
        .checked_shl(PARTITION_BITS)
        .map_or(u64::MAX, |b| b | ((1 << PARTITION_BITS) - 1));
    match input.id_codec {
        IdCodecKind::Int => format!(" · IDs {lo}–{hi}"),
        IdCodecKind::Signed => format!(
            " · IDs {}–{}",
            crate::codec::signed_of(lo),
            crate::codec::signed_of(hi)
        ),
        IdCodecKind::Prefixed => {
            let pre = escape(&super::text::clip(
                input.id_prefix.as_deref().unwrap_or(""),
                40,
            ));
            format!(" · IDs {pre}{lo}–{pre}{hi}")
        }
        IdCodecKind::String => String::new(),
    }
}

/// The tooltip of a cell (escaped text).
fn tooltip(input: &ReportInput, c: &Cell) -> String {
    let mut s = if c.first == c.last {
        format!(
            "partition {}{}",
            thousands(c.first),
            id_range(input, c.first, c.last)
        )
    } else {
        format!(
            "partitions {}–{} ({}){}",
            thousands(c.first),
            thousands(c.last),
            thousands(c.last - c.first + 1),
            id_range(input, c.first, c.last)
        )
    };
    let _ = write!(s, "\n{} IDs observed", thousands(c.observed));
    if let Some(e) = c.expected {
        let _ = write!(s, " · source counts {}", thousands(e));
    }
    if let (Some(r), Some(reference)) = (c.reference, &input.reference) {
        let _ = write!(s, " · {} has {}", escape(&reference.run_id), thousands(r));
    }
    if c.first == c.last {
        let _ = write!(s, "\n{}", c.state.label());
    } else {
        let parts: Vec<String> = CellState::ALL
            .iter()
            .rev()
            .filter(|st| c.states[st.index()] > 0)
            .map(|st| format!("{} {}", thousands(c.states[st.index()]), st.label()))
            .collect();
        let _ = write!(s, "\n{}", parts.join(", "));
    }
    s
}

/// The map as an SVG element (with its `<title>` tooltips), or `None` for an empty map.
#[must_use]
pub(crate) fn svg(input: &ReportInput, map: &CoverageMap) -> Option<String> {
    if map.cells.is_empty() {
        return None;
    }
    let n = map.cells.len() as u64;
    let (cols, pitch) = if n <= 256 { (32u64, 26u64) } else { (64, 13) };
    let cols = cols.min(n);
    let rows = n.div_ceil(cols);
    let size = pitch - 2;
    // The gutter holds the first partition index of each row.
    let widest = thousands(map.cells[((rows - 1) * cols) as usize].first).len() as u64;
    let gutter = widest * 7 + 14;
    let width = gutter + cols * pitch;
    let height = rows * pitch;
    let mut s = String::with_capacity(map.cells.len() * 160 + 1024);
    let _ = write!(
        s,
        "<svg class=\"map\" role=\"img\" aria-labelledby=\"map-summary\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\">"
    );
    for row in 0..rows {
        let c = &map.cells[(row * cols) as usize];
        let _ = write!(
            s,
            "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            gutter - 8,
            row * pitch + size / 2 + 4,
            thousands(c.first)
        );
    }
    for (i, c) in map.cells.iter().enumerate() {
        let i = i as u64;
        let _ = write!(
            s,
            "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{size}\" height=\"{size}\" rx=\"2\"><title>{}</title></rect>",
            c.state.class(),
            gutter + (i % cols) * pitch,
            (i / cols) * pitch,
            tooltip(input, c)
        );
    }
    s.push_str("</svg>");
    Some(s)
}

/// The sentence under the map's title (escaped HTML): how many partitions, what a cell is
/// (for `strings`, a partition is of the dictionary's numbers, not of the strings).
#[must_use]
pub(crate) fn summary(map: &CoverageMap, strings: bool) -> String {
    if map.cells.is_empty() {
        return "<strong id=\"map-partitions\">0</strong> partitions: no ID was observed, none was expected and there is no reference, so the map is empty.".to_owned();
    }
    let mut s = format!(
        "<strong id=\"map-partitions\">{}</strong> partition{} hold this run's IDs (a partition is 65,536 consecutive {}), across partition indexes {}–{}.",
        thousands(map.partitions_observed),
        if map.partitions_observed == 1 { "" } else { "s" },
        if strings { "dictionary numbers of the strings" } else { "IDs" },
        thousands(map.first),
        thousands(map.last)
    );
    if map.per_cell == 1 {
        s.push_str(" One cell per partition; hover a cell for its counts.");
    } else {
        let _ = write!(
            s,
            " <strong>Aggregated:</strong> the {} partitions of the span are drawn as {} cells of {} partitions each; a cell shows the most severe state inside it, and its tooltip counts them all.",
            thousands(map.span()),
            thousands(map.cells.len() as u64),
            thousands(map.per_cell)
        );
    }
    s
}
