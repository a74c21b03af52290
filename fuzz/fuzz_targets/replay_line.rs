//! One replay line, as the indexing pass and a fetch parse it: the two agree on every input
//! (a line that opened must parse when fetched, with the same error otherwise), neither
//! panics, and a page never keeps more than one item past the page bound or one label past
//! the item bound, whatever a generator's range or a list's length; and the key the indexing
//! pass reads without parsing the line is, when it reads one, the key the full parse gives.

#![no_main]

use libfuzzer_sys::fuzz_target;
use scanledger::{ReplaySource, ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX};

fuzz_target!(|line: &[u8]| {
    assert!(
        ReplaySource::key_scan_agrees(line),
        "the key read at open differs from the parsed one"
    );
    let (validated, collected) = ReplaySource::parse_line_both_ways(line);
    match (&validated, &collected) {
        (Ok(()), Ok(page)) => {
            if let Some(page) = page {
                assert!(page.items.len() <= ITEMS_PER_PAGE_MAX as usize + 1);
                for item in &page.items {
                    assert!(item.labels.len() <= LABELS_PER_ITEM_MAX + 1);
                }
            }
        }
        (Err(v), Err(c)) => assert_eq!(v, c, "the two passes refuse a line differently"),
        _ => panic!(
            "validation {validated:?} but collection {:?}",
            collected.map(|_| ())
        ),
    }
});
