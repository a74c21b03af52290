//! A receipt for people: the library's one layout (`Receipt::text_with`), with the status and
//! the violation kinds in colour (dropped off a terminal by `anstream`).

use scanledger::{Emphasis, Receipt};

use super::output::{bold, status_style, styled};

/// The receipt as text, without a trailing newline.
pub(crate) fn receipt_text(r: &Receipt) -> String {
    r.text_with(&|part, text| match part {
        Emphasis::Status(s) | Emphasis::Violation(s) => styled(status_style(s), text),
        _ => bold(text),
    })
}
