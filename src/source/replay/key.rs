//! The request key of a replay line, read without parsing the rest of the line: what the
//! indexing pass needs of every line when a file is opened.
//!
//! [`scan`] reads the line's top-level members up to its first `"cursor"` or `"after"` and
//! answers only when that key is plain: `"cursor": null`, or a `"cursor"` or `"after"`
//! string without escapes or control characters. Anything else (an escape in a member name,
//! an integer `after`, a line that is not an object, no key before the end) is `None`, and
//! the caller parses the line in full ([`super::line::parse`]), which gives the key or the
//! line's error. So for a well-formed line the key is the one the full parse gives (the
//! tests and the `replay_line` fuzz target hold the two to it); a line malformed after its
//! key is refused in full when it is served (`ReplaySource::take_line`), never answered.

use super::line::Key;

/// The line's request key when it can be read without parsing the line in full.
pub(super) fn scan(line: &[u8]) -> Option<Key> {
    let mut at = skip_ws(line, 0);
    if line.get(at) != Some(&b'{') {
        return None;
    }
    loop {
        at = skip_ws(line, at + 1);
        let (name, end) = plain_string(line, at)?;
        at = skip_ws(line, end);
        if line.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(line, at + 1);
        match name {
            b"cursor" => {
                if line.get(at..at + 4) == Some(b"null") {
                    return ends_value(line, at + 4).then_some(Key::Cursor(None));
                }
                let (value, end) = plain_string(line, at)?;
                let value = std::str::from_utf8(value).ok()?;
                return ends_value(line, end).then(|| Key::Cursor(Some(value.to_owned())));
            }
            b"after" => {
                let (value, end) = plain_string(line, at)?;
                let value = std::str::from_utf8(value).ok()?;
                return ends_value(line, end).then(|| Key::After(value.to_owned()));
            }
            _ => {
                at = skip_ws(line, skip_value(line, at)?);
                if line.get(at) != Some(&b',') {
                    return None;
                }
            }
        }
    }
}

/// JSON's whitespace from `at`.
fn skip_ws(line: &[u8], mut at: usize) -> usize {
    while matches!(line.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Whether a value ending at `at` is followed by what may follow a member's value.
fn ends_value(line: &[u8], at: usize) -> bool {
    matches!(line.get(skip_ws(line, at)), Some(b',' | b'}'))
}

/// The string starting at `at` (its opening quote) when it has no escape and no control
/// character: its bytes and the index past its closing quote.
fn plain_string(line: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let rest = line.get(at + 1..)?;
    let len = rest
        .iter()
        .position(|b| *b == b'"' || *b == b'\\' || *b < 0x20)?;
    if rest[len] != b'"' {
        return None;
    }
    Some((&rest[..len], at + 1 + len + 1))
}

/// The index past the value starting at `at`. Lenient (a scalar is read to its delimiter, a
/// container to its matching close, strings skipped with their escapes): the member is
/// checked in full when its line is served, and only finding the key depends on this.
fn skip_value(line: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    loop {
        match *line.get(i)? {
            b'"' => i = skip_string(line, i)?,
            b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                i += 1;
            }
            b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(i),
            _ => i += 1,
        }
        if depth == 0 && i > at && matches!(line.get(i - 1), Some(b'"' | b']' | b'}')) {
            return Some(i);
        }
    }
}

/// The index past the string whose opening quote is at `at`, skipping escapes.
fn skip_string(line: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        let rest = line.get(i..)?;
        let n = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[n] == b'"' {
            return Some(i + n + 1);
        }
        i += n + 2;
    }
}
