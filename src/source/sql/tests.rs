#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use super::dialect::{decide, Holding, Otherwise, Step, Want};
use super::key::{Key, KeyType, Span};
use super::rows::{Fed, PageRows};
use crate::content::{record_hash, ContentValue, RecordHasher};
use crate::contract::{IdCodecKind, KeyRange, RawId, Scope};

#[test]
fn the_snapshot_rules_are_those_of_every_sql_source() {
    let held = |served| {
        Some(Holding {
            id: "s1",
            replaces: Some("s0"),
            served,
        })
    };
    let open = Step::Open { replaces: None };
    let import = |n: &str, otherwise| Step::Import {
        named: n.to_owned(),
        otherwise,
    };
    for (want, h, step) in [
        // A count, the bounds: whatever is open, else a fresh snapshot.
        (Want::Side, held(true), Step::Keep),
        (Want::Side, None, open.clone()),
        // A first page: the snapshot a count opened, else a fresh one.
        (Want::First(None), held(false), Step::Keep),
        (Want::First(None), held(true), open.clone()),
        (Want::First(None), None, open.clone()),
        // A pinned first page or continuation: the named snapshot, or it expired.
        (Want::First(Some("s1")), held(true), Step::Keep),
        (Want::Next(Some("s1")), held(true), Step::Keep),
        (Want::Next(Some("s0")), held(true), Step::Keep),
        (
            Want::Next(Some("s9")),
            held(true),
            import("s9", Otherwise::Expired),
        ),
        (
            Want::Next(Some("s9")),
            None,
            import("s9", Otherwise::Expired),
        ),
        (
            Want::First(Some("s9")),
            None,
            import("s9", Otherwise::Expired),
        ),
        // A live continuation.
        (Want::Next(None), held(true), Step::Keep),
        (Want::Next(None), None, open.clone()),
        // high_water: the named snapshot if it can be had, else a fresh one replacing it.
        (Want::HighWater(Some("s1")), held(true), Step::Keep),
        (
            Want::HighWater(Some("s9")),
            held(true),
            import("s9", Otherwise::Open),
        ),
        (Want::HighWater(None), None, open),
    ] {
        assert_eq!(decide(want, h), step, "{want:?}");
    }
}

#[test]
fn keys_read_back_only_in_their_canonical_form_and_range() {
    let i16k = KeyType::signed(16);
    assert_eq!(Key::from_text(i16k, "-32768"), Some(Key::Int(-32768)));
    for bad in ["32768", "-32769", "+1", "01", "1.0", "", " 1", "1e3"] {
        assert_eq!(Key::from_text(i16k, bad), None, "{bad:?}");
    }
    let u64k = KeyType::unsigned(64);
    assert_eq!(
        Key::from_text(u64k, "18446744073709551615"),
        Some(Key::Int(i128::from(u64::MAX)))
    );
    assert_eq!(Key::from_text(u64k, "-1"), None);
    let u = "0B7E6F2C-1C6A-4D7E-9F1A-2B3C4D5E6F70";
    let Some(Key::Uuid(b)) = Key::from_text(KeyType::Uuid, u) else {
        panic!("{u}")
    };
    assert_eq!(super::key::uuid_text(&b), u.to_ascii_lowercase());
    for bad in [
        "0b7e6f2c1c6a-4d7e-9f1a-2b3c4d5e6f70-",
        "0b7e6f2c-1c6a-4d7e-9f1a-2b3c4d5e6f7",
        "0b7e6f2c-1c6a-4d7e-9f1a-2b3c4d5e6f7g",
        "é7e6f2c-1c6a-4d7e-9f1a-2b3c4d5e6f70",
    ] {
        assert_eq!(Key::from_text(KeyType::Uuid, bad), None, "{bad:?}");
    }
    assert_eq!(Key::Int(7).into_raw_id(), RawId::Int(7));
    assert_eq!(Key::Text("a".into()).into_raw_id(), RawId::Str("a".into()));
}

#[test]
fn a_span_binds_within_the_column_type_or_holds_nothing() {
    let span = |lo, last| Span { lo, last };
    let i16k = KeyType::signed(16);
    assert_eq!(span(Some(5), Some(9)).params(i16k), (Some(5), Some(9)));
    // An end past the type's excludes nothing: it is dropped.
    assert_eq!(span(Some(-40_000), Some(9)).params(i16k), (None, Some(9)));
    assert_eq!(span(Some(5), Some(40_000)).params(i16k), (Some(5), None));
    // A span the type cannot hold: the empty span max..=min.
    assert_eq!(
        span(Some(40_000), None).params(i16k),
        (Some(32767), Some(-32768))
    );
    assert_eq!(
        span(None, Some(-40_000)).params(i16k),
        (Some(32767), Some(-32768))
    );
    let mut scope = Scope::new("t");
    assert_eq!(super::key::span(&scope, IdCodecKind::Int), None);
    scope.key_range = KeyRange::new(10, 20);
    assert_eq!(
        super::key::span(&scope, IdCodecKind::Int),
        Some(span(Some(10), Some(19)))
    );
}

/// Feeds `keys` (with the server's "equal to the bound" flags) to a page of `page_size`.
fn feed(
    page_size: usize,
    ty: KeyType,
    bound: Option<&Key>,
    keys: &[(Key, bool)],
) -> Result<(Vec<RawId>, bool), String> {
    let mut hasher = RecordHasher::new();
    let labels = [("l".to_owned(), String::new())];
    let content = ["c".to_owned()];
    let mut rows = PageRows::new(page_size, ty, bound, &labels, &content, &mut hasher);
    for (key, equal) in keys {
        match rows.row(key.clone(), *equal)? {
            Fed::Bound => {}
            Fed::Past => break,
            Fed::Item(mut r) => {
                r.label(0, true);
                r.value(&ContentValue::Int(1))?;
                r.end()?;
            }
        }
    }
    let built = rows.finish()?;
    assert!(built.items.iter().all(|i| i.content
        == Some(record_hash(&[ContentValue::Int(1)]).unwrap())
        && i.labels == ["l"]));
    Ok((built.items.into_iter().map(|i| i.id).collect(), built.more))
}

#[test]
fn a_page_reads_the_bound_again_and_refuses_a_key_equal_to_it() {
    let t = |s: &str| Key::Text(s.to_owned());
    let ids = |v: &[&str]| -> Vec<RawId> { v.iter().map(|s| RawId::Str((*s).into())).collect() };
    // The previous page's last key first (dropped), then the page, then one row past it.
    assert_eq!(
        feed(
            2,
            KeyType::Text,
            Some(&t("a")),
            &[
                (t("a"), true),
                (t("b"), false),
                (t("c"), false),
                (t("d"), false)
            ]
        ),
        Ok((ids(&["b", "c"]), true))
    );
    // The bound's row is gone (a live scan): the page is what follows.
    assert_eq!(
        feed(2, KeyType::Text, Some(&t("a")), &[(t("b"), false)]),
        Ok((ids(&["b"]), false))
    );
    // 'A' equal to 'a' under a case-insensitive order, after it or before it: refused, never
    // skipped.
    for keys in [
        vec![(t("a"), true), (t("A"), true), (t("b"), false)],
        vec![(t("A"), true), (t("a"), true), (t("b"), false)],
        vec![(t("A"), true), (t("b"), false)],
    ] {
        let e = feed(5, KeyType::Text, Some(&t("a")), &keys).unwrap_err();
        assert!(
            e.contains("equal to it in the order the pages are read in"),
            "{e}"
        );
    }
    // The same when the equal row lies past the page (it would begin the next one).
    let e = feed(
        1,
        KeyType::Text,
        Some(&t("a")),
        &[(t("a"), true), (t("b"), false), (t("B"), false)],
    );
    assert_eq!(e, Ok((ids(&["b"]), true)));
    let e = feed(
        1,
        KeyType::Text,
        Some(&t("a")),
        &[(t("a"), true), (t("A"), true)],
    )
    .unwrap_err();
    assert!(e.contains("1 row(s) after key \"a\""), "{e}");
}

#[test]
fn integer_and_uuid_keys_strictly_increase_from_the_bound_on() {
    let i64k = KeyType::signed(64);
    let k = |n: i128| (Key::Int(n), false);
    assert_eq!(
        feed(
            3,
            i64k,
            Some(&Key::Int(-5)),
            &[(Key::Int(-5), true), k(-1), k(0), k(7)]
        ),
        Ok((
            vec![RawId::Other("-1".into()), RawId::Int(0), RawId::Int(7)],
            false
        ))
    );
    // A repeated key, a key below the bound, a key out of order: refused.
    for keys in [
        vec![k(1), k(1)],
        vec![k(2), k(1)],
        vec![(Key::Int(-5), true), k(-6)],
    ] {
        let e = feed(9, i64k, Some(&Key::Int(-5)), &keys).unwrap_err();
        assert!(e.contains("do not strictly increase"), "{keys:?}: {e}");
    }
    let u = |b: u8| (Key::Uuid([b; 16]), false);
    assert!(feed(9, KeyType::Uuid, None, &[u(2), u(1)]).is_err());
    assert!(feed(9, KeyType::Uuid, None, &[u(1), u(2)]).is_ok());
}
