//! `IdCodec::encode` on arbitrary IDs for each kind: an `Err` (never a panic, never a silent
//! coercion), or an ID whose rendering is the original text and parses back to it.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::{IdCodec, IdCodecKind, RawId};
use scanledger_fuzz::Bounded;

#[derive(Arbitrary, Debug)]
struct Input {
    kind: u8,
    prefix: Option<String>,
    strings: Bounded<String, 16>,
    ints: Bounded<u64, 4>,
    others: Bounded<String, 2>,
}

fuzz_target!(|input: Input| {
    let kind = match input.kind % 3 {
        0 => IdCodecKind::Int,
        1 => IdCodecKind::Prefixed,
        _ => IdCodecKind::String,
    };
    let mut codec = IdCodec::new(kind, input.prefix.clone());
    for s in &input.strings.0 {
        let Ok(id) = codec.encode(&RawId::Str(s.clone())) else {
            continue;
        };
        assert_ne!(kind, IdCodecKind::Int, "the int codec took a string");
        let shown = codec.render(id);
        assert_eq!(&shown, s, "render is not the original form");
        assert_eq!(codec.parse_existing(&shown), Some(id), "parse_existing");
        assert_eq!(
            codec.clone().encode(&RawId::Str(shown)).ok(),
            Some(id),
            "re-encoding the rendering gave another ID"
        );
        if kind == IdCodecKind::Prefixed {
            assert!(codec.prefix().is_some(), "a prefixed ID without a prefix");
        }
    }
    for n in &input.ints.0 {
        match codec.encode(&RawId::Int(*n)) {
            Ok(id) => {
                assert_eq!(kind, IdCodecKind::Int, "a string codec took an integer");
                assert_eq!(id, *n);
                assert_eq!(codec.render(id), n.to_string());
                assert_eq!(codec.parse_existing(&n.to_string()), Some(id));
            }
            Err(e) => {
                assert_ne!(kind, IdCodecKind::Int);
                drop(e.to_string());
            }
        }
    }
    for s in &input.others.0 {
        let r = codec.encode(&RawId::Other(s.clone()));
        assert!(r.is_err(), "a codec took a non-ID");
    }
    // The interner hands out dense IDs in order of first appearance.
    let interner = codec.interner();
    for i in 0..interner.len() as u64 {
        let s = interner.lookup(i).expect("dense interner");
        assert_eq!(codec.parse_existing(s), Some(i));
    }
});
