#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::Path;

use super::items::{prefixed, Items, ITEMS_KEPT_MAX};
use super::line::{self, Mode};
use super::*;
use crate::contract::{RawId, LABELS_PER_ITEM_MAX};

fn source(text: &str) -> ReplaySource {
    ReplaySource::parse(Path::new("t.jsonl"), text).unwrap()
}

/// A source whose every key hashes alike, so every lookup goes through collision handling.
fn colliding_source(text: &str) -> ReplaySource {
    ReplaySource::parse_with(
        Path::new("t.jsonl"),
        text,
        KeyHasher::Constant,
        REPLAY_LINE_BYTES_MAX,
    )
    .unwrap()
}

#[track_caller]
fn open_err(text: &str) -> String {
    match ReplaySource::parse(Path::new("t.jsonl"), text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

/// How a file is refused: at open (a line without a readable key), or when its first
/// request is served (a line checked in full then).
#[track_caller]
fn refusal(text: &str) -> String {
    let mut s = match ReplaySource::parse(Path::new("t.jsonl"), text) {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    match s.answer(&Request::First) {
        Err(FetchError::Fatal(e @ SourceError::Replay { .. })) => e.to_string(),
        other => panic!("served {:?}: {text}", other.map(|p| p.items.len())),
    }
}

fn cursor(c: &str) -> Request {
    Request::Cursor(c.to_owned())
}

/// What a request gets, in a comparable form: the IDs of a page, or the failure.
fn answer(s: &mut ReplaySource, r: &Request) -> Result<Vec<RawId>, String> {
    match s.answer(r) {
        Ok(page) => Ok(page.items.into_iter().map(|i| i.id).collect()),
        Err(FetchError::Timeout) => Err("timeout".into()),
        Err(FetchError::Fatal(SourceError::Unanswered { .. })) => Err("unanswered".into()),
        Err(e) => Err(format!("{e:?}")),
    }
}

fn ints(ids: &[u64]) -> Result<Vec<RawId>, String> {
    Ok(ids.iter().map(|n| RawId::Int(*n)).collect())
}

const RETRIES: &str = concat!(
    "{\"cursor\": null, \"error\": \"timeout\"}\n",
    "{\"cursor\": null, \"items\": [1], \"next\": \"c1\"}\n",
    "{\"cursor\": \"c1\", \"items\": [2]}\n",
    "\n",
    "{\"after\": 5, \"items\": [6]}\n",
    "{\"cursor\": \"c1\", \"items\": [3]}\n",
);

#[test]
fn successive_requests_take_successive_lines_and_the_last_repeats() {
    // The same answers whether keys have hashes of their own or all share one (the path that
    // re-reads lines to tell keys apart).
    for mut s in [source(RETRIES), colliding_source(RETRIES)] {
        assert_eq!(s.lines(), 5);
        assert_eq!(answer(&mut s, &Request::First), Err("timeout".into()));
        assert_eq!(answer(&mut s, &Request::First), ints(&[1]));
        assert_eq!(answer(&mut s, &Request::First), ints(&[1]));
        assert_eq!(answer(&mut s, &cursor("c1")), ints(&[2]));
        assert_eq!(answer(&mut s, &cursor("c1")), ints(&[3]));
        assert_eq!(answer(&mut s, &cursor("c1")), ints(&[3]));
        assert_eq!(answer(&mut s, &Request::After("5".into())), ints(&[6]));
        assert_eq!(
            answer(&mut s, &Request::After("6".into())),
            Err("unanswered".into())
        );
        assert_eq!(answer(&mut s, &cursor("c9")), Err("unanswered".into()));
        assert_eq!(answer(&mut s, &cursor("")), Err("unanswered".into()));
    }
}

#[test]
fn a_key_sharing_the_hash_of_a_single_line_is_unanswered() {
    let mut s = colliding_source("{\"cursor\": null, \"items\": [1], \"next\": \"c1\"}\n");
    assert_eq!(answer(&mut s, &cursor("c1")), Err("unanswered".into()));
    assert_eq!(answer(&mut s, &Request::First), ints(&[1]));
}

#[test]
fn generators_expand_only_their_page_and_stop_at_the_top_of_u64() {
    let range = |lo, hi, prefix: Option<&str>| Items::Range {
        lo,
        hi,
        prefix: prefix.map(str::to_owned),
    };
    let ids =
        |items: Items| -> Vec<RawId> { items.into_items().into_iter().map(|i| i.id).collect() };
    // `lo..lo + n` once wrapped to `lo..0` here: an empty page, and a verified receipt.
    assert_eq!(
        ids(range(u64::MAX - 2, u64::MAX, None)),
        vec![
            RawId::Int(u64::MAX - 2),
            RawId::Int(u64::MAX - 1),
            RawId::Int(u64::MAX)
        ]
    );
    assert_eq!(
        ids(range(u64::MAX, u64::MAX, None)),
        vec![RawId::Int(u64::MAX)]
    );
    assert_eq!(
        ids(range(u64::MAX - 1, u64::MAX, Some("c-"))),
        vec![
            RawId::Str("c-18446744073709551614".into()),
            RawId::Str("c-18446744073709551615".into())
        ]
    );
    for (lo, hi) in [(0, u64::MAX), (u64::MAX - 100_000, u64::MAX), (5, 100_005)] {
        let got = ids(range(lo, hi, None));
        assert_eq!(got.len(), ITEMS_KEPT_MAX, "{lo}..={hi}");
        assert_eq!(got[0], RawId::Int(lo));
        assert_eq!(
            got[ITEMS_KEPT_MAX - 1],
            RawId::Int(lo + (ITEMS_KEPT_MAX as u64 - 1))
        );
    }
    assert_eq!(ids(range(5, 100_004, None)).len(), ITEMS_KEPT_MAX - 1);
    // Through a line: the page bound holds however wide the range.
    let mut s = source("{\"cursor\": null, \"items\": {\"range\": [0, 18446744073709551615]}}");
    assert_eq!(
        s.answer(&Request::First).unwrap().items.len(),
        ITEMS_KEPT_MAX
    );
}

#[test]
fn prefixed_ids_are_the_prefix_and_the_decimal_digits() {
    for n in [0, 7, 10, 99, 100, 4100, u64::MAX / 3, u64::MAX] {
        assert_eq!(prefixed("customer-", n), format!("customer-{n}"));
        assert_eq!(prefixed("", n), n.to_string());
    }
}

#[test]
fn lists_keep_one_item_and_one_label_past_their_bounds() {
    let many: Vec<String> = (0..ITEMS_KEPT_MAX as u64 + 5)
        .map(|n| n.to_string())
        .collect();
    let line = format!("{{\"cursor\": null, \"items\": [{}]}}", many.join(","));
    let page = source(&line).answer(&Request::First).unwrap();
    assert_eq!(page.items.len(), ITEMS_KEPT_MAX);
    assert_eq!(page.size_bytes, line.len() as u64);
    let labels: Vec<String> = (0..LABELS_PER_ITEM_MAX + 5)
        .map(|n| format!("\"l{n}\""))
        .collect();
    let line = format!(
        "{{\"cursor\": null, \"items\": [{{\"id\": 1, \"labels\": [{}]}}]}}",
        labels.join(",")
    );
    let page = source(&line).answer(&Request::First).unwrap();
    assert_eq!(page.items[0].labels.len(), LABELS_PER_ITEM_MAX + 1);
}

#[test]
fn ids_of_other_json_types_are_kept_for_the_codec_to_refuse() {
    // A negative integer is an integer ID (the `signed` codec takes it, `int` refuses it);
    // one below -2^63 is a float to JSON, and kept as another type.
    let line = r#"{"cursor": null, "items": [-9223372036854775809, -9223372036854775808, -1, 1.5, true, null, [1, [2]], {"id": {"x": [1]}}, {"id": "a", "labels": null}, 100000000000000000000]}"#;
    let page = source(line).answer(&Request::First).unwrap();
    let ids: Vec<RawId> = page.items.into_iter().map(|i| i.id).collect();
    let other = |s: &str| RawId::Other(s.to_owned());
    assert_eq!(
        ids,
        vec![
            other("-9.223372036854776e+18"),
            RawId::Neg(i64::MIN),
            RawId::Neg(-1),
            other("1.5"),
            other("true"),
            other("null"),
            other("[…]"),
            other("{…}"),
            RawId::Str("a".into()),
            other("1e+20"),
        ]
    );
}

#[test]
fn page_fields_are_read_as_written() {
    let line = r#"{"snapshot": "s", "query": {"a": [1, -2]}, "complete": false, "truncated": true, "next": "n", "cursor": "c", "items": null, "delay_ms": 5}"#;
    let mut s = source(line);
    let page = s.answer(&cursor("c")).unwrap();
    assert_eq!(page.next.as_deref(), Some("n"));
    assert_eq!(page.complete, Some(false));
    assert_eq!(page.snapshot.as_deref(), Some("s"));
    assert_eq!(page.query, Some(serde_json::json!({"a": [1, -2]})));
    assert!(page.truncated);
    assert!(page.items.is_empty());
    let nulls = r#"{"cursor": null, "next": null, "complete": null, "snapshot": null, "query": null, "truncated": null, "delay_ms": null}"#;
    let page = source(nulls).answer(&Request::First).unwrap();
    assert_eq!(
        (
            page.next,
            page.complete,
            page.snapshot,
            page.query,
            page.truncated
        ),
        (None, None, None, None, false)
    );
}

/// Lines refused, with the exact message: file, line, column and the problem, once.
#[test]
fn bad_lines_are_refused_naming_line_column_and_field() {
    let mut mismatches = Vec::new();
    for (text, want) in [
        // Duplicate keys, wherever they are.
        (r#"{"cursor": null, "cursor": null}"#, "t.jsonl:1:25: duplicate key \"cursor\""),
        (r#"{"cursor": null, "items": [], "items": []}"#, "t.jsonl:1:37: duplicate key \"items\""),
        (r#"{"cursor": null, "items": [{"id": 1, "id": 2}]}"#, "t.jsonl:1:41: items[0]: duplicate key \"id\""),
        (r#"{"cursor": null, "items": [1, {"id": 1, "labels": [], "labels": []}]}"#, "t.jsonl:1:62: items[1]: duplicate key \"labels\""),
        (r#"{"cursor": null, "items": {"range": [1, 2], "range": [1, 2]}}"#, "t.jsonl:1:51: items: duplicate key \"range\""),
        (r#"{"cursor": null, "query": {"a": 1, "a": 2}}"#, "t.jsonl:1:38: field \"query\": duplicate key \"a\""),
        (r#"{"cursor": null, "items": [{"id": {"a": 1, "a": 2}}]}"#, "t.jsonl:1:46: duplicate key \"a\""),
        (r#"{"cursor": null, "items": [[{"b": 1, "b": 2}]]}"#, "t.jsonl:1:40: duplicate key \"b\""),
        // Unknown keys.
        (r#"{"cursor": null, "nxt": null}"#, "t.jsonl:1:22: unknown key \"nxt\"; did you mean \"next\"?"),
        (r#"{"cursor": null, "items": [{"id": 1, "tags": []}]}"#, "t.jsonl:1:43: items[0]: unknown key \"tags\" (known: id, labels)"),
        (r#"{"cursor": null, "items": {"range": [1, 2], "step": 2}}"#, "t.jsonl:1:50: items: unknown key \"step\" (known: range, prefix)"),
        // Types and bounds.
        (r#"{"cursor": 5}"#, "t.jsonl:1:13: field \"cursor\" must be a string or null"),
        (r#"{"after": 1.5}"#, "t.jsonl:1:14: field \"after\" must be a string or an integer"),
        (r#"{"items": []}"#, "t.jsonl:1:13: a line needs a \"cursor\" (or \"after\") key"),
        (r#"{"cursor": null, "after": 1}"#, "t.jsonl:1:28: a line has either \"cursor\" or \"after\", not both"),
        (r#"{"cursor": null, "next": ["x"]}"#, "t.jsonl:1:26: field \"next\" must be a string or null"),
        (r#"{"cursor": null, "complete": "yes"}"#, "t.jsonl:1:35: field \"complete\" must be a boolean or null"),
        (r#"{"cursor": null, "delay_ms": 3600001}"#, "t.jsonl:1:37: field \"delay_ms\" must be an integer from 0 to 3600000"),
        (r#"{"cursor": null, "error": "teapot"}"#, "t.jsonl:1:35: field \"error\" must be \"timeout\", \"server_error\", \"expired_cursor\" or \"forbidden\""),
        (r#"{"cursor": null, "items": 5}"#, "t.jsonl:1:27: invalid type: integer `5`, expected field \"items\" to be an array or a {\"range\": [LO, HI]} object"),
        (r#"{"cursor": null, "items": [{"labels": []}]}"#, "t.jsonl:1:41: items[0]: an item object needs an \"id\""),
        (r#"{"cursor": null, "items": [{"id": 1, "labels": [3]}]}"#, "t.jsonl:1:50: items[0]: field \"labels\" must be an array of strings"),
        (r#"{"cursor": null, "items": [{"id": 1, "labels": "a"}]}"#, "t.jsonl:1:50: items[0]: field \"labels\" must be an array of strings"),
        (r#"{"cursor": null, "items": {"range": [5, 1]}}"#, "t.jsonl:1:42: items.range: HI is below LO"),
        (r#"{"cursor": null, "items": {"range": [1]}}"#, "t.jsonl:1:39: items.range must be [LO, HI]"),
        (r#"{"cursor": null, "items": {"range": [1, 2, 3]}}"#, "t.jsonl:1:45: items.range must be [LO, HI]"),
        (r#"{"cursor": null, "items": {"range": [-1, 2]}}"#, "t.jsonl:1:41: items.range: LO must be an integer from 0 to 2^64 - 1"),
        (r#"{"cursor": null, "items": {"prefix": "p"}}"#, "t.jsonl:1:41: items.range must be [LO, HI]"),
        (r#"{"cursor": null, "query": {"n": 1.5}}"#, "t.jsonl:1:37: field \"query\": a number that is not an integer in [-2^63, 2^64) (a fraction, an exponent, -0 or a larger integer) cannot be represented exactly"),
        // Syntax.
        (r#"[1, 2]"#, "t.jsonl:1:1: invalid type: sequence, expected a JSON object (a replay line)"),
        (r#"{"cursor": null, "items": [2,, 3]}"#, "t.jsonl:1:30: malformed JSON: expected value"),
        (r#"{"cursor": null} {}"#, "t.jsonl:1:18: malformed JSON: trailing characters"),
    ] {
        let got = refusal(text);
        if got != want {
            mismatches.push(format!("{text}\n  got:  {got}\n  want: {want}"));
        }
        assert!(!got.contains(" at line "), "{text}");
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    let long_prefix = format!(
        r#"{{"cursor": null, "items": {{"range": [1, 2], "prefix": "{}"}}}}"#,
        "p".repeat(129)
    );
    assert_eq!(
        refusal(&long_prefix),
        "t.jsonl:1:186: items.prefix: 129 bytes, longer than the bound of 128"
    );
    assert_eq!(refusal("\n  \n"), "t.jsonl: the file has no lines");
    // A line malformed past its key opens, and is refused when served, naming its line.
    let mut s = source("{\"cursor\": null}\n\n{\"cursor\": \"\u{fffd}\", \"x\": 1}");
    assert_eq!(answer(&mut s, &Request::First), ints(&[]));
    match s.answer(&cursor("\u{fffd}")) {
        Err(FetchError::Fatal(e)) => assert_eq!(
            e.to_string(),
            "t.jsonl:3:21: unknown key \"x\" (known: cursor, after, items, next, complete, snapshot, query, truncated, delay_ms, error)"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_line_that_is_not_utf8_is_refused_at_its_column() {
    let e = line::parse(b"{\"cursor\": \"a\xff\"}", Mode::Validate).unwrap_err();
    assert_eq!(
        (e.column, e.problem.as_str()),
        (14, "the line is not UTF-8")
    );
}

#[test]
fn validation_and_collection_accept_the_same_lines() {
    // The indexing pass validates without keeping; a fetch collects. They must agree on
    // every line, or a file that opened could fail mid-scan.
    for text in [
        r#"{"cursor": null, "items": [1, "a", {"id": 2, "labels": ["x"]}, [1], {"id": [{}]}]}"#,
        r#"{"cursor": null, "items": {"range": [1, 3], "prefix": null}}"#,
        r#"{"cursor": null, "items": [{"id": 1, "id": 2}]}"#,
        r#"{"cursor": null, "items": [{"id": 1, "labels": [1]}]}"#,
        r#"{"after": "k", "error": "forbidden", "items": [1]}"#,
        r#"{"cursor": null, "items": [{"id": {"a": 1, "a": 2}}]}"#,
        r#"{"cursor": null, "items": [1,]}"#,
        r#"{"cursor": null, "query": {"a": [1, {"b": null}]}}"#,
    ] {
        let validated = line::parse(text.as_bytes(), Mode::Validate);
        let collected = line::parse(text.as_bytes(), Mode::Collect);
        assert_eq!(validated.as_ref().err(), collected.as_ref().err(), "{text}");
        if let (Ok(v), Ok(c)) = (validated, collected) {
            assert_eq!(v.key, c.key, "{text}");
            assert_eq!(v.delay_ms, c.delay_ms, "{text}");
        }
    }
}

#[test]
fn blank_lines_count_and_crlf_is_not_part_of_the_page() {
    let text = "{\"cursor\": null, \"items\": [1], \"next\": \"c\"}\r\n\r\n   \n{\"cursor\": \"c\", \"items\": [2]}\r\n";
    let mut s = source(text);
    assert_eq!(s.lines(), 2);
    let page = s.answer(&Request::First).unwrap();
    let first_line = text.split("\r\n").next().unwrap();
    assert_eq!(page.size_bytes, first_line.len() as u64);
    assert_eq!(answer(&mut s, &cursor("c")), ints(&[2]));
    let e = open_err("{\"cursor\": null}\r\n\r\n{\"cursor\": 1}\r\n");
    assert_eq!(e, "t.jsonl:3:13: field \"cursor\" must be a string or null");
}

#[test]
fn a_line_over_the_bound_is_refused_naming_it() {
    let text = format!(
        "{{\"cursor\": null}}\n{{\"cursor\": \"{}\"}}\n",
        "x".repeat(100)
    );
    let e =
        ReplaySource::parse_with(Path::new("t.jsonl"), &text, KeyHasher::Constant, 64).unwrap_err();
    assert_eq!(e.to_string(), "t.jsonl:2: the line is longer than 64 bytes");
    assert!(
        ReplaySource::parse_with(Path::new("t.jsonl"), &text, KeyHasher::Constant, 120).is_ok()
    );
}

#[test]
fn a_file_changed_after_opening_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.jsonl");
    let first = "{\"cursor\": null, \"items\": [1], \"next\": \"c\"}\n";
    let second = "{\"cursor\": \"c\", \"items\": [2]}\n";
    std::fs::write(&p, format!("{first}{second}")).unwrap();
    let mut s = ReplaySource::open(&p).unwrap();
    assert_eq!(answer(&mut s, &Request::First), ints(&[1]));

    // Rewritten in place, same size: the line no longer parses; the error names its line.
    std::fs::write(
        &p,
        format!("{first}{{\"cursor\": \"c\", \"items\": [2}}}}\n"),
    )
    .unwrap();
    match s.answer(&cursor("c")) {
        Err(FetchError::Fatal(e)) => {
            let want = format!("{}:2:28: malformed JSON: expected `,` or `]`", p.display());
            assert_eq!(e.to_string(), want);
        }
        other => panic!("{other:?}"),
    }
    // Grown: refused before any line is read.
    std::fs::write(&p, format!("{first}{second}{second}")).unwrap();
    match s.answer(&cursor("c")) {
        Err(FetchError::Fatal(SourceError::File(FileError::Changed {
            was_bytes,
            now_bytes,
            ..
        }))) => assert!(now_bytes > was_bytes),
        other => panic!("{other:?}"),
    }
}

#[cfg(unix)]
#[test]
fn only_regular_files_are_replayed() {
    let e = ReplaySource::open(Path::new("/dev/zero")).unwrap_err();
    assert!(
        matches!(e, SourceError::File(FileError::NotRegular { .. })),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let e = ReplaySource::open(dir.path()).unwrap_err();
    assert!(
        matches!(e, SourceError::File(FileError::Directory { .. })),
        "{e}"
    );
}

#[test]
fn a_line_without_a_valid_key_is_refused_at_open_naming_the_first() {
    let line = |i: usize| {
        format!(
            "{{\"cursor\": \"c{i}\", \"items\": [{i}], \"next\": \"c{}\"}}\n",
            i + 1
        )
    };
    let mut lines: Vec<String> = (0..30_000).map(line).collect();
    lines[0] = "{\"cursor\": null, \"items\": [0], \"next\": \"c1\"}\n".to_owned();
    let mut s = source(&lines.concat());
    assert_eq!(s.lines(), 30_000);
    assert_eq!(answer(&mut s, &cursor("c29999")), ints(&[29_999]));
    lines[25_000] = "{\"cursor\": 1}\n".to_owned();
    lines[7_000] = "{\"cursor\": 2}\n".to_owned();
    assert_eq!(
        open_err(&lines.concat()),
        "t.jsonl:7001:13: field \"cursor\" must be a string or null"
    );
    // Whatever the key's spelling the full parse reads (an escape, an integer `after`), or
    // when it is missing, or when the line is not an object.
    lines[7_000] = "{\"items\": [1], \"next\": null}\n".to_owned();
    assert_eq!(
        open_err(&lines.concat()),
        "t.jsonl:7001:28: a line needs a \"cursor\" (or \"after\") key"
    );
    lines[7_000] = "[{\"cursor\": \"c7000\"}]\n".to_owned();
    assert_eq!(
        open_err(&lines.concat()),
        "t.jsonl:7001:1: invalid type: sequence, expected a JSON object (a replay line)"
    );
    lines[7_000] = "{\"cursor\": \"c7\\u0030\", \"cursor\": null}\n".to_owned();
    assert_eq!(
        open_err(&lines.concat()),
        "t.jsonl:7001:31: duplicate key \"cursor\""
    );
}

/// A file of `n` pages keyed `null`, `c1`, ... whose line `bad` (0-based) is `bad_line`.
fn pages_with(n: usize, bad: usize, bad_line: &str) -> String {
    let mut text = String::new();
    for i in 0..n {
        let key = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"c{i}\"")
        };
        if i == bad {
            text.push_str(bad_line);
        } else {
            text.push_str(&format!(
                "{{\"cursor\": {key}, \"items\": [\"customer-{i}\", {{\"id\": \"x{i}\", \"labels\": [\"a\"]}}], \"next\": \"c{}\"}}",
                i + 1
            ));
        }
        text.push('\n');
    }
    text
}

#[test]
fn a_line_malformed_past_its_key_is_refused_when_served_naming_its_line() {
    // In the middle of the file: the pages before it are served, then it is refused, naming
    // its line and column, on its first request and on a retry; it is never answered.
    for (bad, n) in [(1_500, 3_000), (2_999, 3_000)] {
        let bad_line = format!("{{\"cursor\": \"c{bad}\", \"items\": [1, 2 3]}}");
        let text = pages_with(n, bad, &bad_line);
        for text in [
            text.clone(),
            text.trim_end().to_owned(),
            text.replace('\n', "\r\n"),
        ] {
            let mut s = source(&text);
            assert_eq!(s.lines(), n);
            assert_eq!(
                s.answer(&cursor(&format!("c{}", bad - 1)))
                    .unwrap()
                    .items
                    .len(),
                2
            );
            for _ in 0..2 {
                match s.answer(&cursor(&format!("c{bad}"))) {
                    Err(FetchError::Fatal(e)) => assert_eq!(
                        e.to_string(),
                        format!(
                            "t.jsonl:{}:36: malformed JSON: expected `,` or `]`",
                            bad + 1
                        )
                    ),
                    other => panic!("{other:?}"),
                }
            }
        }
    }
    // The same through a file opened from disk (the line is read again by its offset).
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.jsonl");
    std::fs::write(
        &p,
        pages_with(3_000, 2_000, "{\"cursor\": \"c2000\", \"nxt\": null}"),
    )
    .unwrap();
    let mut s = ReplaySource::open(&p).unwrap();
    assert_eq!(s.answer(&cursor("c1999")).unwrap().items.len(), 2);
    match s.answer(&cursor("c2000")) {
        Err(FetchError::Fatal(e)) => assert_eq!(
            e.to_string(),
            format!(
                "{}:2001:25: unknown key \"nxt\"; did you mean \"next\"?",
                p.display()
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lines_are_found_alike_whatever_the_reader_buffer() {
    // Lines that span fills of the reader's buffer are carried over; offsets, lengths and
    // keys are those of one pass over the whole text.
    let text = format!(
        "{}\r\n\n   \n{{\"after\": 7, \"items\": [1]}}\n{{\"items\": [\"}}\\\"\"], \"cursor\": \"k\"}}",
        pages_with(40, 99, "")
    );
    let whole = index::index(
        Path::new("t.jsonl"),
        text.as_bytes(),
        &KeyHasher::Constant,
        REPLAY_LINE_BYTES_MAX,
    )
    .unwrap();
    assert_eq!(whole.len(), 42);
    for capacity in [1, 2, 3, 7, 64, 100, 1000] {
        let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
        let got = index::index(
            Path::new("t.jsonl"),
            reader,
            &KeyHasher::Constant,
            REPLAY_LINE_BYTES_MAX,
        )
        .unwrap();
        assert_eq!(got, whole, "buffer of {capacity}");
    }
    let mut s = source(&text);
    assert_eq!(answer(&mut s, &Request::After("7".into())), ints(&[1]));
    assert_eq!(
        answer(&mut s, &cursor("k")),
        Ok(vec![RawId::Str("}\"".into())])
    );
    // The bound holds on a line split across fills, and on the last line without a break.
    for capacity in [1, 5, 64, 1000] {
        for (text, max, want) in [
            (
                "{\"cursor\": null}\n{\"cursor\": \"xxxxxxxxxx\"}\n",
                20,
                Some(2),
            ),
            (
                "{\"cursor\": null}\n{\"cursor\": \"xxxxxxxxxx\"}",
                20,
                Some(2),
            ),
            ("{\"cursor\": \"xxxxxxxxxxxxxxxxxxxx\"}\n", 20, Some(1)),
            ("{\"cursor\": null}\n{\"cursor\": \"x\"}", 16, None),
        ] {
            let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
            let got = index::index(Path::new("t.jsonl"), reader, &KeyHasher::Constant, max);
            match want {
                Some(line) => assert_eq!(
                    got.unwrap_err().to_string(),
                    format!("t.jsonl:{line}: the line is longer than {max} bytes"),
                    "{text:?} in a buffer of {capacity}"
                ),
                None => assert_eq!(got.unwrap().len(), 2, "{text:?} in a buffer of {capacity}"),
            }
        }
    }
}

#[test]
fn the_key_read_at_open_is_the_key_the_full_parse_reads() {
    for text in [
        r#"{"cursor": null, "items": [1]}"#,
        r#"  {  "cursor"  :  "c 1"  , "items": []}  "#,
        r#"{"cursor": "c1"}"#,
        r#"{"items": [{"cursor": "inner"}, "]\"", [[{}]]], "next": null, "cursor": "outer"}"#,
        r#"{"query": {"cursor": "q", "a": [1, {"after": 2}]}, "after": "k"}"#,
        r#"{"delay_ms": 5, "complete": true, "truncated": null, "after": "k"}"#,
        r#"{"after": 17, "items": []}"#,
        r#"{"after": -3}"#,
        r#"{"cursor": "c\u0031"}"#,
        r#"{"curs\u006fr": "c1"}"#,
        r#"{"cursor": "é", "next": "ü"}"#,
        r#"{"cursor":null}"#,
        r#"{"cursor": nul}"#,
        r#"{"cursor": null "items": []}"#,
        r#"{"cursor": "a" "items": []}"#,
        r#"{"cursor": null, "cursor": "b"}"#,
        r#"{"items": [1, 2 3], "cursor": "c"}"#,
        r#"{"items": "unterminated, "cursor": "c"}"#,
        r#"{"items": [1, 2], "cursor": "c", "x": }"#,
        "{\"cursor\": \"tab\there\"}",
        r#"{}"#,
        r#"{"#,
        r#"""#,
        r#"{"cursor""#,
        r#"{"cursor": "#,
    ] {
        assert!(ReplaySource::key_scan_agrees(text.as_bytes()), "{text}");
    }
    // Where it answers, it answers what the full parse does; where it is unsure, nothing.
    assert_eq!(
        key::scan(br#"{"items": [{"cursor": "inner"}], "cursor": "outer"}"#),
        Some(line::Key::Cursor(Some("outer".into())))
    );
    assert_eq!(key::scan(br#"{"cursor": "c\u0031"}"#), None);
    assert_eq!(key::scan(br#"{"curs\u006fr": "c1"}"#), None);
    assert_eq!(key::scan(br#"{"after": 17}"#), None);
    assert_eq!(key::scan(b"{\"cursor\": \"a\tb\"}"), None);
    assert_eq!(key::scan(br#"{"cursor": nullx}"#), None);
}
