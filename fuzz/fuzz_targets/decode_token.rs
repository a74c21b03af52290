//! Page tokens: `token::decode` and `token::check` on arbitrary text never panic; a text that
//! decodes is the one canonical text of its bytes (re-encoded here independently, so a token
//! has one spelling: no padding, no stray trailing bits, no other alphabet); a token issued
//! for arbitrary claims decodes to those claims and checks as docs/REFERENCE.md says (valid before its
//! expiry and at its stamp, `Expired` from its expiry on, `Stale` at another stamp, `Forged`
//! under another key or binding).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::token::{self, Binding, Claims};
use scanledger::{RunId, TokenError};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    text: &'a str,
    key: [u8; 32],
    run: u64,
    position: u64,
    stamp: u32,
    expires_at_ms: u64,
    now_ms: u64,
    stamp_now: u32,
    tenant: Option<&'a str>,
    query_digest: &'a str,
}

/// The token text of `claims` and `mac` per docs/FORMAT.md §9, written without scanledger.
fn canonical_text(claims: &Claims, mac: &[u8; 32]) -> String {
    use base64::Engine as _;
    let mut bytes = vec![token::TOKEN_VERSION];
    bytes.extend_from_slice(&claims.run.0.to_le_bytes());
    bytes.extend_from_slice(&claims.position.to_le_bytes());
    bytes.extend_from_slice(&claims.stamp.to_le_bytes());
    bytes.extend_from_slice(&claims.expires_at_ms.to_le_bytes());
    bytes.extend_from_slice(mac);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    format!("{}{b64}", token::TOKEN_PREFIX)
}

fuzz_target!(|i: Input<'_>| {
    let binding = Binding {
        tenant: i.tenant,
        query_digest: i.query_digest,
    };
    if let Ok((claims, mac)) = token::decode(i.text) {
        let reissued = token::issue(&i.key, &claims, &binding);
        assert_eq!(token::decode(&reissued).map(|(c, _)| c), Ok(claims));
        assert_eq!(
            canonical_text(&claims, &mac),
            i.text,
            "a second spelling was accepted"
        );
    }
    let _ = token::check(
        &i.key,
        i.text,
        RunId(i.run),
        &binding,
        i.stamp_now,
        i.now_ms,
    )
    .map_err(|e| e.to_string());

    let claims = Claims {
        run: RunId(i.run),
        position: i.position,
        stamp: i.stamp,
        expires_at_ms: i.expires_at_ms,
    };
    let t = token::issue(&i.key, &claims, &binding);
    assert!(t.len() <= token::TOKEN_CHARS_MAX);
    let decoded = token::decode(&t).expect("an issued token decodes");
    assert_eq!(decoded.0, claims);
    let got = token::check(&i.key, &t, claims.run, &binding, i.stamp_now, i.now_ms);
    match got {
        Ok(c) => {
            assert_eq!(c, claims);
            assert!(i.now_ms < i.expires_at_ms);
            assert_eq!(i.stamp_now, i.stamp);
        }
        Err(TokenError::Expired { expired_at }) => {
            assert!(i.now_ms >= i.expires_at_ms);
            assert!(!expired_at.is_empty());
        }
        Err(TokenError::Stale { .. }) => assert_ne!(i.stamp_now, i.stamp),
        Err(e) => panic!("an issued token was refused: {e}"),
    }
    let mut other_key = i.key;
    other_key[0] ^= 1;
    assert!(matches!(
        token::check(&other_key, &t, claims.run, &binding, i.stamp, 0),
        Err(TokenError::Forged { .. })
    ));
});
