//! The answer of `missing RUN --range LO..HI`: the IDs of an interval a run lacks, found by
//! walking the run's partitions inside the interval a chunk at a time (hopping over empty
//! stretches of the ID space), so neither the interval's width nor the run's size sets the
//! memory.
//!
//! The bounds are IDs in exactly the form the run's codec writes (`ids`); `string` IDs have no
//! order a range could follow (their numbers are the dictionary's), so a range of them is
//! refused.

use super::ids::{parse_given, GivenId, IdTextError};
use super::lists::{MissingReport, RunAt};
use super::stream::{render_shown, walk_run, Coalesce, EmitError, RangeTally, RenderEach};
use crate::contract::IdCodecKind;
use crate::idset::partition_of;
use crate::receipt::RANGES_SHOWN_MAX;
use crate::store::{ReadError, RunHeader};

impl RangeError {
    /// What to do next: a range in the run's own form, or for string IDs a comparison with a
    /// run.
    #[must_use]
    pub fn hint(&self) -> Option<String> {
        match self {
            RangeError::Read(_) => None,
            RangeError::StringIds => Some(
                "for string IDs, compare with a run: `scanledger missing RUN --against OTHER_RUN`"
                    .into(),
            ),
            RangeError::Shape { example, .. }
            | RangeError::Id { example, .. }
            | RangeError::Reversed { example, .. } => {
                Some(format!("for example --range {example}"))
            }
        }
    }
}

/// Why `--range` cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RangeError {
    /// Not `LO..HI`.
    #[error("--range {text:?}: expected LO..HI")]
    Shape {
        /// The text given.
        text: String,
        /// A range in the run's form.
        example: String,
    },
    /// A bound is not an ID of the run's codec.
    #[error("--range: {source}")]
    Id {
        /// Why.
        source: IdTextError,
        /// A range in the run's form.
        example: String,
    },
    /// The run's IDs are strings: they have no order a range could follow.
    #[error("--range takes int or prefixed IDs: string IDs are numbered by a dictionary, not ordered, so no range of them means anything")]
    StringIds,
    /// `LO` is above `HI`.
    #[error("--range {text:?}: the first ID is above the last")]
    Reversed {
        /// The text given.
        text: String,
        /// A range in the run's form.
        example: String,
    },
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// An interval of a run's ID space, ready to be walked.
pub struct Gaps<'a, 's> {
    at: RunAt<'a, 's>,
    header: RunHeader,
    lo: u64,
    hi: u64,
}

/// Reads `LO..HI` for `at`'s run.
///
/// # Errors
/// `RangeError`.
pub fn gaps_of<'a, 's>(at: RunAt<'a, 's>, text: &str) -> Result<Gaps<'a, 's>, RangeError> {
    let header = at.snap.header(at.run)?;
    if header.contract.id_codec == IdCodecKind::String {
        return Err(RangeError::StringIds);
    }
    let example = match &header.id_prefix {
        Some(p) if header.contract.id_codec == IdCodecKind::Prefixed => format!("{p}1..{p}1000"),
        _ => "1..1000".to_owned(),
    };
    let (lo, hi) = text.split_once("..").ok_or_else(|| RangeError::Shape {
        text: text.to_owned(),
        example: example.clone(),
    })?;
    let bound = |s: &str| -> Result<u64, RangeError> {
        match parse_given(at.snap, &header, s)? {
            Ok(GivenId::Known(id)) => Ok(id),
            // Only a string ID can be unknown, and strings were refused above.
            Ok(GivenId::Unknown) => Err(RangeError::StringIds),
            Err(source) => Err(RangeError::Id {
                source,
                example: example.clone(),
            }),
        }
    };
    let (lo, hi) = (bound(lo)?, bound(hi)?);
    if lo > hi {
        return Err(RangeError::Reversed {
            text: text.to_owned(),
            example,
        });
    }
    Ok(Gaps { at, header, lo, hi })
}

impl Gaps<'_, '_> {
    /// Calls `gap` on every range of the interval the run lacks, ascending.
    fn each_gap<E: From<ReadError>>(
        &self,
        mut gap: impl FnMut(u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let (lo, hi) = (self.lo, self.hi);
        // The first ID not yet accounted for; None once past u64::MAX.
        let mut next = Some(lo);
        let mut present = |a: u64, b: u64| -> Result<(), E> {
            let (a, b) = (a.max(lo), b.min(hi));
            if a > b {
                return Ok(());
            }
            if let Some(n) = next.filter(|n| *n < a) {
                gap(n, a - 1)?;
            }
            next = b.checked_add(1);
            Ok(())
        };
        let mut c = Coalesce::new(true);
        let (first, last) = (partition_of(self.lo), partition_of(self.hi));
        walk_run(self.at.snap, self.header.run_id, first, last, |p, b| {
            c.push_bitmap(p, b, &mut present)
        })?;
        c.finish(&mut present)?;
        match next {
            Some(n) if n <= hi => gap(n, hi),
            _ => Ok(()),
        }
    }

    /// Hands on every missing range, rendered, ascending, as it is found.
    ///
    /// # Errors
    /// `EmitError`.
    pub fn each_range(
        &self,
        emit: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<(), EmitError> {
        let mut out = RenderEach::new(self.at.snap, &self.header, emit);
        self.each_gap(|a, b| out.push(a, b))?;
        out.finish()
    }

    /// The answer: the first ranges missing, with exact totals.
    ///
    /// # Errors
    /// `ReadError`.
    pub fn report(&self, text: &str) -> Result<MissingReport, ReadError> {
        let mut t = RangeTally::new(RANGES_SHOWN_MAX, true);
        self.each_gap(|a, b| -> Result<(), ReadError> {
            t.push(a, b);
            Ok(())
        })?;
        let t = t.finish();
        let run = self.header.run_id.to_string();
        Ok(MissingReport {
            words: super::text::Words {
                old: run.clone(),
                new: format!("the range {}", crate::receipt::terminal_safe(text)),
                names: (run, text.to_owned()),
                ..super::text::Words::default()
            },
            run_id: self.header.run_id.to_string(),
            reference: text.to_owned(),
            coverage_status: self.header.coverage_status,
            reference_coverage_status: None,
            missing_count: t.ids_total,
            missing_ranges: render_shown(self.at.snap, &self.header, &t.shown)?,
            missing_ranges_total: t.ranges_total,
            output: None,
            run: None,
            against: None,
        })
    }

    /// The run's header.
    #[must_use]
    pub fn header(&self) -> &RunHeader {
        &self.header
    }
}
