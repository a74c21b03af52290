//! `ReplaySource::parse` on arbitrary text: an `Err` naming a line, or a source; never a
//! panic and never an allocation past the declared bounds.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use scanledger::ReplaySource;

fuzz_target!(|text: &str| {
    match ReplaySource::parse(Path::new("fuzz.jsonl"), text) {
        Ok(source) => drop(source),
        // Rendering the error is part of the contract: it must not panic either.
        Err(e) => drop(e.to_string()),
    }
});
