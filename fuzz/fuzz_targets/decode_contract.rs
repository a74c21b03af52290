//! `Contract::from_json` on arbitrary text: an `Err` or a contract, never a panic, and a
//! contract survives its own round trip (`from_value(to_value(c)) == c`, as documented).

#![no_main]

use libfuzzer_sys::fuzz_target;
use scanledger::Contract;

fuzz_target!(|text: &str| {
    let Ok(c) = Contract::from_json(text) else {
        return;
    };
    let value = c.to_value();
    let again = Contract::from_value(&value).expect("a contract's own JSON is valid");
    assert_eq!(again, c, "the contract changed through to_value/from_value");
    let text_again = value.to_string();
    let again = Contract::from_json(&text_again).expect("a contract's own text is valid");
    assert_eq!(again, c, "the contract changed through its text");
});
