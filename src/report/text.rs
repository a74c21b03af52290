//! Text helpers of the report: HTML escaping, thousands separators, clipping.
//!
//! Pure. Every string that comes from a source, a contract or a receipt passes through
//! `escape` (usually via `show`, which also clips it) before it reaches the document.

/// Characters of one source string shown before it is cut with an ellipsis. Strings such as
/// IDs may be 512 bytes long; the cut keeps the document's size bounded.
pub(crate) const SHOWN_CHARS_MAX: usize = 160;

/// Escapes text for HTML element content and quoted attribute values: `& < > " '`
/// (`<a href="x">&'` becomes `&lt;a href=&quot;x&quot;&gt;&amp;&#39;`; the unit tests check it).
#[must_use]
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newline have no business in a report
            // and some are not allowed in HTML: show them as the replacement character.
            c if c.is_control() && c != '\t' && c != '\n' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A string from the source, clipped to `SHOWN_CHARS_MAX` characters and escaped.
pub(crate) fn show(s: &str) -> String {
    escape(&clip(s, SHOWN_CHARS_MAX))
}

/// The first `max` characters of `s`, with `…` when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

/// A number with thousands separators (`1,010,000`).
#[must_use]
pub(crate) fn thousands(n: impl Into<u128>) -> String {
    let digits = n.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` followed by the noun, plural unless `n` is 1: `plural(3, "page")` is "3 pages".
pub(crate) fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", thousands(n))
    }
}

/// "1 more range", "20 more ranges".
pub(crate) fn more(n: u64, noun: &str) -> String {
    format!(
        "{} more {noun}{}",
        thousands(n),
        if n == 1 { "" } else { "s" }
    )
}
