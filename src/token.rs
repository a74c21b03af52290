//! Page tokens (docs/FORMAT.md §9): the continuation tokens `page` hands out over a recorded run.
//!
//! A token is opaque to its holder and bound by HMAC-SHA256, under a key kept in the store,
//! to the run, its tenant, its query digest, the position to continue from, the run's
//! version stamp and an expiry. A token replayed against another run, tenant or query, an
//! edited or forged token, an expired one, or one issued before the run changed is refused
//! with an error that says which. Pure: the caller supplies the key and the clock.
//! Layout and MAC input are specified in `docs/FORMAT.md` ("Page tokens").
//! The primitives come from well-kept crates, none is hand-written: `hmac` (over `sha2`)
//! computes the MAC and checks it in constant time (`verify_slice`), `base64` encodes the
//! text with its strict URL-safe engine.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::digest::Hash;
use crate::receipt::{rfc3339, RunId};

/// Version byte of the token layout this build issues and accepts.
pub const TOKEN_VERSION: u8 = 1;
/// The prefix of every token's text form.
pub const TOKEN_PREFIX: &str = "slpt1_";
/// Domain tag that starts the MAC input.
pub const TOKEN_DOMAIN: &[u8] = b"scanledger:page-token:v1";
/// How long a token lives unless told otherwise (seconds).
pub const TOKEN_TTL_SECONDS_DEFAULT: u64 = 15 * 60;
/// The longest lifetime a token may be given (seconds): one day.
pub const TOKEN_TTL_SECONDS_MAX: u64 = 24 * 3600;
/// Bytes of a decoded token: version, run, position, stamp, expiry, MAC.
pub const TOKEN_BYTES: usize = 1 + 8 + 8 + 4 + 8 + 32;
/// Characters of a token's text form; longer input is refused before it is decoded.
pub const TOKEN_CHARS_MAX: usize = 128;

const _: () = assert!(TOKEN_PREFIX.len() + TOKEN_BYTES.div_ceil(3) * 4 <= TOKEN_CHARS_MAX);
const _: () = assert!(TOKEN_TTL_SECONDS_DEFAULT <= TOKEN_TTL_SECONDS_MAX);

/// What a token says, besides its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims {
    /// The run the token pages through.
    pub run: RunId,
    /// The next page starts at the first ID at or above this one.
    pub position: u64,
    /// The run's pages observed when the token was issued: a run that was resumed since
    /// holds other IDs, so its old tokens are refused.
    pub stamp: u32,
    /// After this instant (ms since the epoch) the token is refused.
    pub expires_at_ms: u64,
}

/// What a token is bound to beyond its claims: the run's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The run's tenant.
    pub tenant: Option<&'a str>,
    /// The run's query digest (`sha256:` + hex).
    pub query_digest: &'a str,
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token of this format.
    #[error("the page token is malformed: {problem}")]
    Malformed {
        /// What is wrong.
        problem: &'static str,
    },
    /// The MAC does not check: edited, forged, or issued by another store.
    #[error("the page token was not issued for {run} by this store (edited, forged, or from another store)")]
    Forged {
        /// The run it was presented for.
        run: RunId,
    },
    /// A valid token of another run.
    #[error("the page token was issued for {issued_for} ({why}), not for {presented_for}; start {presented_for} again without --token")]
    OtherRun {
        /// The run it belongs to.
        issued_for: RunId,
        /// The run it was presented for.
        presented_for: RunId,
        /// How the runs differ: another tenant, another query, or another run of one scope.
        why: &'static str,
    },
    /// Past its expiry.
    #[error("the page token expired at {expired_at}; start again without --token")]
    Expired {
        /// RFC 3339.
        expired_at: String,
    },
    /// The run changed (was resumed) after the token was issued.
    #[error("{run} changed since the page token was issued ({stamp_then} pages then, {stamp_now} now); start again without --token")]
    Stale {
        /// The run.
        run: RunId,
        /// Its pages observed at issue.
        stamp_then: u32,
        /// Its pages observed now.
        stamp_now: u32,
    },
}

/// HMAC-SHA256 (RFC 2104), from the `hmac` crate.
type HmacSha256 = Hmac<Sha256>;

/// The base64url engine of the token text: RFC 4648 §5 alphabet, no padding, and strict
/// decoding (padding and non-zero trailing bits are refused), so one token has one text.
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn hmac_keyed(key: &[u8]) -> HmacSha256 {
    // HMAC hashes a key longer than the block and pads a shorter one: every length is valid.
    <HmacSha256 as Mac>::new_from_slice(key).expect("invariant: HMAC takes keys of any length")
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
///
/// ```
/// // RFC 4231, test case 2.
/// let mac = scanledger::token::hmac_sha256(b"Jefe", b"what do ya want for nothing?");
/// assert_eq!(
///     scanledger::digest::hex(&mac),
///     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
/// );
/// ```
#[must_use]
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> Hash {
    let mut m = hmac_keyed(key);
    m.update(message);
    m.finalize().into_bytes().into()
}

fn put_str(m: &mut HmacSha256, s: &str) {
    // Tenants and query digests are far below 4 GiB; a longer one would saturate the length
    // and still bind its bytes, which follow.
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    m.update(&len.to_le_bytes());
    m.update(s.as_bytes());
}

/// The bytes of a token before its MAC: version, run, position, stamp, expiry (LE).
fn body(c: &Claims) -> [u8; TOKEN_BYTES - 32] {
    let mut b = [0u8; TOKEN_BYTES - 32];
    b[0] = TOKEN_VERSION;
    b[1..9].copy_from_slice(&c.run.0.to_le_bytes());
    b[9..17].copy_from_slice(&c.position.to_le_bytes());
    b[17..21].copy_from_slice(&c.stamp.to_le_bytes());
    b[21..29].copy_from_slice(&c.expires_at_ms.to_le_bytes());
    b
}

/// The MAC of claims under a binding:
/// `HMAC(key, domain || body || u8 has_tenant [|| u32le len || tenant] || u32le len || query_digest)`.
#[must_use]
pub fn mac(key: &[u8], claims: &Claims, binding: &Binding<'_>) -> Hash {
    mac_state(key, claims, binding)
        .finalize()
        .into_bytes()
        .into()
}

/// The HMAC state after the whole MAC input of `claims` under `binding`.
fn mac_state(key: &[u8], claims: &Claims, binding: &Binding<'_>) -> HmacSha256 {
    let mut m = hmac_keyed(key);
    m.update(TOKEN_DOMAIN);
    m.update(&body(claims));
    match binding.tenant {
        None => m.update(&[0]),
        Some(t) => {
            m.update(&[1]);
            put_str(&mut m, t);
        }
    }
    put_str(&mut m, binding.query_digest);
    m
}

/// Issues a token: `slpt1_` + base64url (no padding) of body || MAC.
///
/// ```
/// use scanledger::token::{self, Binding, Claims};
/// use scanledger::RunId;
/// let key = [7u8; 32];
/// let claims = Claims { run: RunId(1), position: 101, stamp: 2, expires_at_ms: 5_000 };
/// let b = Binding { tenant: Some("acme"), query_digest: "sha256:00" };
/// let t = token::issue(&key, &claims, &b);
/// assert_eq!(token::check(&key, &t, RunId(1), &b, 2, 4_999), Ok(claims));
/// assert!(token::check(&key, &t, RunId(1), &b, 2, 5_000).is_err());
/// ```
#[must_use]
pub fn issue(key: &[u8], claims: &Claims, binding: &Binding<'_>) -> String {
    let mut bytes = Vec::with_capacity(TOKEN_BYTES);
    bytes.extend_from_slice(&body(claims));
    bytes.extend_from_slice(&mac(key, claims, binding));
    format!("{TOKEN_PREFIX}{}", B64.encode(&bytes))
}

/// Decodes a token's claims and MAC without checking the MAC (to learn which run's binding
/// to check it against).
///
/// # Errors
/// `Malformed` when the text is not a token of this format.
pub fn decode(text: &str) -> Result<(Claims, Hash), TokenError> {
    if text.len() > TOKEN_CHARS_MAX {
        return Err(TokenError::Malformed {
            problem: "longer than any token",
        });
    }
    let b64 = text
        .strip_prefix(TOKEN_PREFIX)
        .ok_or(TokenError::Malformed {
            problem: "it does not start with slpt1_",
        })?;
    let bytes = B64.decode(b64).map_err(|_| TokenError::Malformed {
        problem: "not base64url",
    })?;
    if bytes.len() != TOKEN_BYTES {
        return Err(TokenError::Malformed {
            problem: "wrong length",
        });
    }
    if bytes[0] != TOKEN_VERSION {
        return Err(TokenError::Malformed {
            problem: "unknown token version",
        });
    }
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[i..i + 8]);
        u64::from_le_bytes(a)
    };
    let mut stamp = [0u8; 4];
    stamp.copy_from_slice(&bytes[17..21]);
    let mut mac = [0u8; 32];
    mac.copy_from_slice(&bytes[29..]);
    Ok((
        Claims {
            run: RunId(u64_at(1)),
            position: u64_at(9),
            stamp: u32::from_le_bytes(stamp),
            expires_at_ms: u64_at(21),
        },
        mac,
    ))
}

/// Whether `mac` is the MAC of `claims` under `binding`; compares in constant time
/// (`hmac`'s `verify_slice`).
#[must_use]
pub fn mac_matches(key: &[u8], claims: &Claims, binding: &Binding<'_>, mac_given: &Hash) -> bool {
    mac_state(key, claims, binding)
        .verify_slice(mac_given)
        .is_ok()
}

/// Checks a token presented for `run` (whose binding and current stamp are given) at
/// `now_ms`, and returns its claims. A token of another run is refused with `Forged`
/// here; the caller that can look the other run up reports `OtherRun` instead.
///
/// # Errors
/// `Malformed`, `Forged`, `Expired` or `Stale`.
pub fn check(
    key: &[u8],
    text: &str,
    run: RunId,
    binding: &Binding<'_>,
    stamp_now: u32,
    now_ms: u64,
) -> Result<Claims, TokenError> {
    let (claims, mac_given) = decode(text)?;
    if claims.run != run || !mac_matches(key, &claims, binding, &mac_given) {
        return Err(TokenError::Forged { run });
    }
    if now_ms >= claims.expires_at_ms {
        return Err(TokenError::Expired {
            expired_at: rfc3339(claims.expires_at_ms),
        });
    }
    if claims.stamp != stamp_now {
        return Err(TokenError::Stale {
            run,
            stamp_then: claims.stamp,
            stamp_now,
        });
    }
    Ok(claims)
}

/// How two runs' bindings differ, for `OtherRun`.
#[must_use]
pub fn how_runs_differ(issued: &Binding<'_>, presented: &Binding<'_>) -> &'static str {
    if issued.tenant != presented.tenant {
        "another tenant"
    } else if issued.query_digest != presented.query_digest {
        "another query"
    } else {
        "another run of the same scope"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn binding() -> Binding<'static> {
        Binding {
            tenant: Some("acme"),
            query_digest: "sha256:abc",
        }
    }

    fn claims() -> Claims {
        Claims {
            run: RunId(3),
            position: 1 << 40,
            stamp: 9,
            expires_at_ms: 1_000,
        }
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 1: 20 bytes of 0x0b, "Hi There".
        assert_eq!(
            crate::digest::hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            crate::digest::hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn token_text_is_strict_base64url() {
        assert_eq!(
            B64.encode(b"\xfb\xff"),
            "-_8",
            "the URL-safe alphabet, no padding"
        );
        let key = [1u8; 32];
        let t = issue(&key, &claims(), &binding());
        assert!(decode(&t).is_ok());
        // 29 + 32 = 61 bytes: 81 characters whose last one carries 2 unused bits, which a
        // canonical text leaves zero; setting one gives a second text for the same bytes.
        let last = t.chars().last().unwrap();
        let pos = B64_ALPHABET.find(last).unwrap();
        assert_eq!(pos & 0b11, 0, "canonical text");
        let mut other = t[..t.len() - 1].to_owned();
        other.push(char::from(B64_ALPHABET.as_bytes()[pos | 1]));
        assert_eq!(
            decode(&other),
            Err(TokenError::Malformed {
                problem: "not base64url"
            }),
            "non-canonical trailing bits"
        );
        // Padding, a length no byte count has, and the standard alphabet's `+` are refused.
        let plus = format!("{TOKEN_PREFIX}+{}", &t[TOKEN_PREFIX.len() + 1..]);
        for bad in [format!("{t}="), format!("{t}A"), plus] {
            assert!(decode(&bad).is_err(), "{bad}");
        }
    }

    const B64_ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    #[test]
    fn a_token_checks_only_under_its_binding() {
        let key = [1u8; 32];
        let t = issue(&key, &claims(), &binding());
        assert!(t.len() <= TOKEN_CHARS_MAX);
        assert_eq!(check(&key, &t, RunId(3), &binding(), 9, 999), Ok(claims()));
        let other_tenant = Binding {
            tenant: Some("globex"),
            ..binding()
        };
        let other_query = Binding {
            query_digest: "sha256:abd",
            ..binding()
        };
        let no_tenant = Binding {
            tenant: None,
            ..binding()
        };
        for b in [other_tenant, other_query, no_tenant] {
            assert_eq!(
                check(&key, &t, RunId(3), &b, 9, 0),
                Err(TokenError::Forged { run: RunId(3) })
            );
        }
        assert!(matches!(
            check(&[2u8; 32], &t, RunId(3), &binding(), 9, 0),
            Err(TokenError::Forged { .. })
        ));
        assert!(matches!(
            check(&key, &t, RunId(4), &binding(), 9, 0),
            Err(TokenError::Forged { .. })
        ));
        assert!(matches!(
            check(&key, &t, RunId(3), &binding(), 9, 1_000),
            Err(TokenError::Expired { .. })
        ));
        assert!(matches!(
            check(&key, &t, RunId(3), &binding(), 10, 0),
            Err(TokenError::Stale { .. })
        ));
    }

    #[test]
    fn every_edited_character_is_refused() {
        let key = [1u8; 32];
        let t = issue(&key, &claims(), &binding());
        for i in TOKEN_PREFIX.len()..t.len() {
            let mut chars: Vec<char> = t.chars().collect();
            chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
            let edited: String = chars.into_iter().collect();
            assert!(
                check(&key, &edited, RunId(3), &binding(), 9, 0).is_err(),
                "edit at {i} accepted"
            );
        }
        for bad in ["", "slpt1_", "nope", &"x".repeat(1000)] {
            assert!(matches!(decode(bad), Err(TokenError::Malformed { .. })));
        }
    }
}
