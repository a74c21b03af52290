//! Where a key is in a JSON text: the line and column of `"limits": {"max_pages": ...}`'s
//! `max_pages`, so that a contract error can point at it.
//!
//! The text has already been parsed strictly by the library (valid JSON, no duplicate key,
//! nesting bounded), so this walk only tracks strings, objects and arrays; it never allocates
//! more than the nesting depth and the key being read. Anything unexpected gives `None`:
//! the error is then reported without a position, never with a wrong one.

/// Nesting this walk follows; the library refuses deeper texts anyway.
const DEPTH_MAX: usize = 64;

enum Frame {
    /// An object: whether the next string is a key, and the current key.
    Object {
        expect_key: bool,
        key: String,
    },
    Array,
}

/// The 1-based (line, column) of the key `field` names: a top-level key, or a dotted path
/// (`limits.max_pages`). A key with a dot in its own name is tried whole first.
pub(crate) fn locate_key(text: &str, field: &str) -> Option<(usize, usize)> {
    let whole = [field];
    if let Some(at) = find(text, &whole) {
        return Some(position(text, at));
    }
    let path: Vec<&str> = field.split('.').collect();
    if path.len() > 1 {
        return find(text, &path).map(|at| position(text, at));
    }
    None
}

/// The byte offset of the opening quote of the key at `path`.
fn find(text: &str, path: &[&str]) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                let end = string_end(bytes, i)?;
                i = end + 1;
                if let Some(Frame::Object { expect_key, key }) = stack.last_mut() {
                    if *expect_key {
                        let k: String = serde_json::from_str(&text[start..=end]).ok()?;
                        *expect_key = false;
                        *key = k;
                        if matches_path(&stack, path) {
                            return Some(start);
                        }
                    }
                }
                continue;
            }
            b'{' => {
                if stack.len() >= DEPTH_MAX {
                    return None;
                }
                stack.push(Frame::Object {
                    expect_key: true,
                    key: String::new(),
                });
            }
            b'[' => {
                if stack.len() >= DEPTH_MAX {
                    return None;
                }
                stack.push(Frame::Array);
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(Frame::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Whether the keys of the open objects (arrays break the path) spell `path`.
fn matches_path(stack: &[Frame], path: &[&str]) -> bool {
    if stack.len() != path.len() {
        return false;
    }
    stack.iter().zip(path).all(|(frame, want)| match frame {
        Frame::Object { key, .. } => key == want,
        Frame::Array => false,
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

    #[test]
    fn keys_are_found_at_their_place() {
        let text =
            "{\n  \"source\": \"s\",\n  \"page_sise\": 5,\n  \"limits\": {\"max_page\": 1}\n}";
        assert_eq!(locate_key(text, "page_sise"), Some((3, 3)));
        assert_eq!(locate_key(text, "limits.max_page"), Some((4, 14)));
        assert_eq!(locate_key(text, "limits"), Some((4, 3)));
        assert_eq!(locate_key(text, "nope"), None);
        // A value that looks like a key is not a key; nor is a key inside an array.
        let text = r#"{"query": {"x": ["page_size", {"page_size": 1}]}, "page_size": 0}"#;
        assert_eq!(locate_key(text, "page_size"), Some((1, 51)));
        // Escapes in strings do not end them.
        let text = r#"{"a": "x\"}{", "b.c": 1}"#;
        assert_eq!(locate_key(text, "b.c"), Some((1, 16)));
    }
}
