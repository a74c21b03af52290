//! R16: the bounds of a page (sizes, lengths, codecs, key ranges).

use super::*;

// R16 -------------------------------------------------------------------------------------------

#[track_caller]
fn check_invalid(c: &Contract, bad: Ev, needle: &str) {
    let r = check(
        c,
        &[p(&[], Some("first")), bad],
        Status::Failed,
        &[K::InvalidPage],
    );
    let v = &r.progress().violations[0];
    assert_eq!(v.page, 2);
    assert!(v.detail.contains(needle), "{:?} lacks {needle:?}", v.detail);
    assert_eq!(
        r.progress().pages_observed,
        1,
        "the bad page changes nothing"
    );
    assert_eq!(r.ids().len(), 0);
    assert!(r.labels().is_empty());
}

#[test]
fn int_codec_refuses_strings_negatives_and_floats() {
    let c = Contract::new("s");
    let id = |raw: RawId| {
        items_page(
            vec![
                Item::int(1),
                Item {
                    id: raw,
                    labels: Vec::new(),
                    content: None,
                },
            ],
            None,
        )
    };
    check_invalid(&c, id(RawId::Str("7".into())), "item 1");
    check_invalid(&c, id(RawId::Other("-5".into())), "-5");
    check_invalid(&c, id(RawId::Other("1.5".into())), "1.5");
}

#[test]
fn prefixed_codec_refuses_leading_zeros_and_other_prefixes() {
    let c = contract(|c| c.id_codec = IdCodecKind::Prefixed);
    check_invalid(
        &c,
        Ev::Page(strings(&["customer-007"], None)),
        "leading zeros",
    );
    check_invalid(
        &c,
        Ev::Page(strings(&["customer-1", "client-2"], None)),
        "item 1",
    );
    check_invalid(&c, Ev::Page(strings(&["customer-"], None)), "item 0");
    check_invalid(&c, p(&[5], None), "item 0");
    let c = contract(|c| {
        c.id_codec = IdCodecKind::Prefixed;
        c.id_prefix = Some("customer-".into());
    });
    check_invalid(&c, Ev::Page(strings(&["order-5"], None)), "prefix");
}

#[test]
fn string_codec_bounds_the_id_length() {
    let c = contract(|c| c.id_codec = IdCodecKind::String);
    let long = "x".repeat(ID_LEN_MAX + 1);
    check_invalid(&c, Ev::Page(strings(&[&long], None)), "exceeds the bound");
    check_invalid(&c, Ev::Page(strings(&[""], None)), "empty");
    let at_bound = "x".repeat(ID_LEN_MAX);
    check(
        &c,
        &[Ev::Page(strings(&[&at_bound], None))],
        Status::Verified,
        &[],
    );
}

#[test]
fn cursor_length_is_bounded() {
    let c = Contract::new("s");
    let long = format!("SECRET-{}", "x".repeat(CURSOR_LEN_MAX - 6));
    check_invalid(&c, p(&[1], Some(&long)), "exceeds the bound");
    check_invalid(&c, p(&[1], Some("")), "empty");
    let at_bound = "x".repeat(CURSOR_LEN_MAX);
    check(
        &c,
        &[p(&[1], Some(&at_bound)), p(&[2], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn labels_per_item_are_bounded() {
    let c = Contract::new("s");
    let names: Vec<String> = (0..=LABELS_PER_ITEM_MAX).map(|i| format!("l{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    check_invalid(
        &c,
        items_page(vec![Item::int(1), labelled(2, &refs)], None),
        "item 1: 17 labels",
    );
    let r = check(
        &c,
        &[items_page(
            vec![labelled(1, &refs[..LABELS_PER_ITEM_MAX])],
            None,
        )],
        Status::Verified,
        &[],
    );
    assert_eq!(r.labels().len(), LABELS_PER_ITEM_MAX);
}

#[test]
fn label_names_are_bounded() {
    let c = Contract::new("s");
    check_invalid(&c, items_page(vec![labelled(1, &[""])], None), "label name");
    let long = "l".repeat(LABEL_LEN_MAX + 1);
    check_invalid(
        &c,
        items_page(vec![labelled(1, &[&long])], None),
        "label name",
    );
}

#[test]
fn distinct_labels_per_run_are_bounded_across_pages() {
    let names: Vec<String> = (0..=LABELS_PER_RUN_MAX).map(|i| format!("l{i}")).collect();
    let first: Vec<Item> = (0..LABELS_PER_RUN_MAX)
        .map(|i| labelled(i as u64, &[&names[i]]))
        .collect();
    let r = check(
        &Contract::new("s"),
        &[
            items_page(first, Some("a")),
            items_page(vec![labelled(100, &[&names[LABELS_PER_RUN_MAX]])], None),
        ],
        Status::Failed,
        &[K::InvalidPage],
    );
    assert_eq!(r.labels().len(), LABELS_PER_RUN_MAX);
}

/// The bound on distinct labels per run holds within one page too: a page that would bring the
/// run from 40 to 65 labels is `invalid_page` and leaves the run unchanged (a bug found by this
/// test's earlier, pinned version).
#[test]
fn distinct_labels_per_run_within_one_page() {
    let first: Vec<Item> = (0..40).map(|i| labelled(i, &[&format!("a{i}")])).collect();
    let second: Vec<Item> = (0..25)
        .map(|i| labelled(100 + i, &[&format!("b{i}")]))
        .collect();
    let r = check(
        &Contract::new("s"),
        &[items_page(first, Some("a")), items_page(second, None)],
        Status::Failed,
        &[K::InvalidPage],
    );
    assert_eq!(r.labels().len(), 40);
}

#[test]
fn items_per_page_are_bounded() {
    let c = Contract::new("s");
    let n = u64::from(ITEMS_PER_PAGE_MAX);
    let ids: Vec<u64> = (0..=n).collect();
    check_invalid(&c, p(&ids, None), "items exceed the bound");
    check(&c, &[p(&ids[..ids.len() - 1], None)], Status::Verified, &[]);
}

#[test]
fn page_bytes_are_bounded() {
    let c = Contract::new("s");
    check_invalid(
        &c,
        with(page(&[1], None), |p| p.size_bytes = PAGE_SIZE_BYTES_MAX + 1),
        "bytes exceed the bound",
    );
}
