//! A replay file on arbitrary text: `ReplaySource::parse` gives an `Err` naming a line, or a
//! source whose every answer (the first page, then the cursors the pages give and a cursor
//! taken from the input) is a page within the bounds or an error; never a panic and never an
//! allocation past one page.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use scanledger::{ReplaySource, Request, ITEMS_PER_PAGE_MAX};

/// Requests one input may make: enough to follow a few pages and retries.
const REQUESTS_MAX: usize = 16;

fuzz_target!(|text: &str| {
    let mut source = match ReplaySource::parse(Path::new("fuzz.jsonl"), text) {
        Ok(source) => source,
        // Rendering the error is part of the contract: it must not panic either.
        Err(e) => return drop(e.to_string()),
    };
    let mut requests = vec![Request::First];
    if let Some(word) = text.split('"').nth(3) {
        requests.push(Request::Cursor(word.to_owned()));
        requests.push(Request::After(word.to_owned()));
    }
    let mut made = 0;
    while let Some(request) = requests.pop() {
        made += 1;
        if made > REQUESTS_MAX {
            break;
        }
        match source.answer(&request) {
            Ok(page) => {
                assert!(page.items.len() <= ITEMS_PER_PAGE_MAX as usize + 1);
                // The same request again (a retry takes the key's next line), after the page
                // the cursor points to.
                requests.push(request);
                if let Some(next) = page.next {
                    requests.push(Request::Cursor(next));
                }
            }
            Err(e) => drop(format!("{e:?}")),
        }
    }
});
