//! IDs a user gives (an `--exclude` line, a `--range` bound): read in exactly the forms the
//! run's codec writes, and nothing else.
//!
//! `customer-7` and `7` are IDs; `customer-007`, `customer-+7`, `007` and `+7` are not, though
//! a lenient number parser would take them for the same ID: a declaration in another form
//! could then excuse a difference it does not name. An ID is canonical when the codec renders
//! its number back to the very text given (`IdCodec::parse_existing`); a `string` ID is any
//! string, looked up in the scope's dictionary.

use crate::codec::IdCodec;
use crate::contract::IdCodecKind;
use crate::store::{ReadError, RunHeader, ScopeKey, Snapshot};

/// What a user's text is as an ID of a run's codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GivenId {
    /// The ID's number in the run's space.
    Known(u64),
    /// A `string` ID the scope's dictionary does not hold: no run of the scope has it.
    Unknown,
}

/// Why a user's text is not an ID of a run's codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdTextError {
    /// Not in the form the codec writes.
    #[error("{shown} {problem}")]
    NotCanonical {
        /// The text, quoted and shortened.
        shown: String,
        /// What it is not.
        problem: String,
    },
}

/// What a text in no form of `header`'s codec is not.
fn problem_of(header: &RunHeader, text: &str) -> String {
    const FORM: &str = "(decimal digits without a sign or a leading zero)";
    match (header.contract.id_codec, &header.id_prefix) {
        (IdCodecKind::Prefixed, Some(p)) if text.starts_with(p.as_str()) => {
            format!("is not an ID of this run's prefix {p:?} {FORM}")
        }
        (IdCodecKind::Prefixed, Some(p)) => format!("is not an ID of this run's prefix {p:?}"),
        (IdCodecKind::Prefixed, None) => "is not an ID: the run has learned no prefix".to_owned(),
        (IdCodecKind::String, _) => "is not an ID: a string ID is not empty".to_owned(),
        _ => format!("is not an integer from 0 to 2^64-1 as the codec writes it {FORM}"),
    }
}

/// Reads `text` as an ID of `header`'s run, in exactly the form its codec writes.
///
/// # Errors
/// `Ok(Err(..))` when the text is in no form the codec writes; `Err` when the store fails.
pub fn parse_given(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    text: &str,
) -> Result<Result<GivenId, IdTextError>, ReadError> {
    let kind = header.contract.id_codec;
    if kind == IdCodecKind::String && !text.is_empty() {
        let scope = ScopeKey::of(&header.contract);
        return Ok(Ok(match snap.interned_id(&scope, text)? {
            Some(id) => GivenId::Known(id),
            None => GivenId::Unknown,
        }));
    }
    let codec = IdCodec::new(kind, header.id_prefix.clone());
    Ok(match codec.parse_existing(text) {
        Some(id) => Ok(GivenId::Known(id)),
        None => {
            let shown: String = text.chars().take(64).collect();
            Err(IdTextError::NotCanonical {
                shown: format!("{shown:?}"),
                problem: problem_of(header, text),
            })
        }
    })
}
