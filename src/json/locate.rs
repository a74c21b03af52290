//! Where a key is in a JSON text: the line and column of `"limits": {"max_pages": ...}`'s
//! `max_pages`, so that an error about a field points at it.
//!
//! The text has already been parsed strictly (valid JSON, no duplicate key, nesting
//! bounded), so this walk only tracks strings, objects and arrays; it allocates no more than
//! the nesting depth and the key being read. Anything unexpected gives `None`: the error is
//! then reported without a position, never with a wrong one.

use super::config::Step;
use super::JSON_DEPTH_MAX;

enum Frame {
    /// An object: whether the next string is a key, and the current key.
    Object { expect_key: bool, key: String },
    /// An array: the index of the current element.
    Array { index: usize },
}

/// The 1-based (line, column) of the key at `path`, or of the first character of the array
/// element a path ending in an index names.
pub(super) fn locate(text: &str, path: &[Step]) -> Option<(usize, usize)> {
    find(text, path).map(|at| position(text, at))
}

/// The byte offset of the opening quote of the key at `path` (or of the element).
fn find(text: &str, path: &[Step]) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b':') {
            i += 1;
            continue;
        }
        // A value starts here in an array: is it the element the path names?
        if b != b']' && matches!(stack.last(), Some(Frame::Array { .. })) && matches(&stack, path) {
            return Some(i);
        }
        match b {
            b'"' => {
                let start = i;
                let end = string_end(bytes, i)?;
                i = end + 1;
                if let Some(Frame::Object { expect_key, key }) = stack.last_mut() {
                    if *expect_key {
                        let k: String = serde_json::from_str(&text[start..=end]).ok()?;
                        *expect_key = false;
                        *key = k;
                        if matches(&stack, path) {
                            return Some(start);
                        }
                    }
                }
                continue;
            }
            b'{' | b'[' => {
                if stack.len() > JSON_DEPTH_MAX as usize {
                    return None;
                }
                stack.push(if b == b'{' {
                    Frame::Object {
                        expect_key: true,
                        key: String::new(),
                    }
                } else {
                    Frame::Array { index: usize::MAX }
                });
                if b == b'[' {
                    // The first element, when there is one, is index 0.
                    if let Some(Frame::Array { index }) = stack.last_mut() {
                        *index = 0;
                    }
                }
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                Some(Frame::Array { index }) => *index = index.saturating_add(1),
                None => {}
            },
            _ => {
                // A number, true, false or null: skip to its end.
                while i < bytes.len()
                    && !matches!(bytes[i], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                {
                    i += 1;
                }
                continue;
            }
        }
        i += 1;
    }
    None
}

/// Whether the open objects and arrays spell `path`.
fn matches(stack: &[Frame], path: &[Step]) -> bool {
    if stack.len() != path.len() {
        return false;
    }
    stack
        .iter()
        .zip(path)
        .all(|(frame, want)| match (frame, want) {
            (Frame::Object { key, .. }, Step::Key(k)) => key == k,
            (Frame::Array { index }, Step::Index(n)) => index == n,
            _ => false,
        })
}

/// The index of the closing quote of the string opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// 1-based line and column (in characters) of a byte offset.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..at].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(path: &str) -> Vec<Step> {
        path.split('.').map(|k| Step::Key(k.to_owned())).collect()
    }

    #[test]
    fn keys_are_found_at_their_place() {
        let text =
            "{\n  \"source\": \"s\",\n  \"page_sise\": 5,\n  \"limits\": {\"max_page\": 1}\n}";
        assert_eq!(locate(text, &keys("page_sise")), Some((3, 3)));
        assert_eq!(locate(text, &keys("limits.max_page")), Some((4, 14)));
        assert_eq!(locate(text, &keys("limits")), Some((4, 3)));
        assert_eq!(locate(text, &keys("nope")), None);
        // A value that looks like a key is not a key; a key inside an array is found by index.
        let text = r#"{"query": {"x": ["page_size", {"page_size": 1}]}, "page_size": 0}"#;
        assert_eq!(locate(text, &keys("page_size")), Some((1, 51)));
        let path = [
            Step::Key("query".into()),
            Step::Key("x".into()),
            Step::Index(1),
            Step::Key("page_size".into()),
        ];
        assert_eq!(locate(text, &path), Some((1, 32)));
        assert_eq!(locate(text, &path[..3]), Some((1, 31)));
        // Escapes in strings do not end them; a key with a dot is one step.
        let text = r#"{"a": "x\"}{", "b.c": 1}"#;
        assert_eq!(locate(text, &[Step::Key("b.c".into())]), Some((1, 16)));
    }
}
