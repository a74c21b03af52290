//! How an HTTP status becomes a fetch outcome, and how `Retry-After` is read.
//!
//! Pure: no IO; the clock is a parameter. The table (documented in docs/guide-http.md):
//! 2xx a page; 408 a timeout (retried); 429 throttled (retried after `Retry-After`, or the
//! collector's backoff); 503 with `Retry-After` throttled, other 5xx a server error (retried);
//! 401 and 403 access denied; 410, or a 400 whose body holds the config's `expired_marker`, an
//! expired cursor (the contract's policy decides); any other status (3xx, since redirects are
//! not followed, and 4xx) an invalid page naming the status, not retried.

use std::time::{Duration, SystemTime};

use crate::source::FetchError;

/// The longest wait a `Retry-After` may ask for; a longer one is cut to this (the collector
/// also never waits past the run's deadline).
pub(crate) const RETRY_AFTER_MAX: Duration = Duration::from_secs(15 * 60);

/// What a non-2xx status means, given the `Retry-After` header (if any), the time now, and
/// whether the body holds the expired marker (only read for a 400).
pub(super) fn classify(
    status: u16,
    retry_after: Option<&str>,
    now: SystemTime,
    expired_marker_found: bool,
) -> FetchError {
    match status {
        408 => FetchError::Timeout,
        429 => FetchError::Throttled {
            retry_after: retry_after
                .and_then(|v| parse_retry_after(v, now))
                .unwrap_or(Duration::ZERO),
        },
        503 => match retry_after.and_then(|v| parse_retry_after(v, now)) {
            Some(wait) => FetchError::Throttled { retry_after: wait },
            None => FetchError::ServerError,
        },
        500..=599 => FetchError::ServerError,
        401 | 403 => FetchError::Forbidden,
        410 => FetchError::ExpiredCursor,
        400 if expired_marker_found => FetchError::ExpiredCursor,
        300..=399 => FetchError::InvalidPage {
            detail: format!(
                "HTTP status {status}: redirects are not followed; configure the final URL"
            ),
        },
        _ => FetchError::InvalidPage {
            detail: format!("HTTP status {status}{}", reason(status)),
        },
    }
}

fn reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map_or_else(String::new, |r| format!(" ({r})"))
}

/// `Retry-After` as delta-seconds or an HTTP-date (RFC 9110 §10.2.3), capped at
/// [`RETRY_AFTER_MAX`]; a date in the past is no wait. `None` when unreadable.
pub(super) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    let wait = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Digits past u64 are a wait past any cap.
        Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(v).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn kind(e: &FetchError) -> String {
        match e {
            FetchError::Throttled { retry_after } => format!("throttled {}", retry_after.as_secs()),
            FetchError::InvalidPage { detail } => format!("invalid: {detail}"),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn statuses_are_classified_as_documented() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        for (status, retry_after, marker, want) in [
            (408, None, false, "Timeout"),
            (429, Some("7"), false, "throttled 7"),
            (429, None, false, "throttled 0"),
            (429, Some("soon"), false, "throttled 0"),
            (
                503,
                Some("Sun, 06 Nov 1994 08:49:47 GMT"),
                false,
                "throttled 10",
            ),
            (503, None, false, "ServerError"),
            (500, Some("5"), false, "ServerError"),
            (502, None, false, "ServerError"),
            (401, None, false, "Forbidden"),
            (403, None, false, "Forbidden"),
            (410, None, false, "ExpiredCursor"),
            (400, None, true, "ExpiredCursor"),
            (400, None, false, "invalid: HTTP status 400 (Bad Request)"),
            (404, None, false, "invalid: HTTP status 404 (Not Found)"),
            (
                302,
                None,
                false,
                "invalid: HTTP status 302: redirects are not followed; configure the final URL",
            ),
            (299, None, false, "invalid: HTTP status 299"),
        ] {
            assert_eq!(
                kind(&classify(status, retry_after, now, marker)),
                want,
                "{status} {retry_after:?}"
            );
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_is_capped() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37
        let secs = |v: &str| parse_retry_after(v, now).map(|d| d.as_secs());
        assert_eq!(secs("120"), Some(120));
        assert_eq!(secs(" 3 "), Some(3));
        assert_eq!(
            secs("99999999999999999999999"),
            Some(RETRY_AFTER_MAX.as_secs())
        );
        assert_eq!(secs("86400"), Some(RETRY_AFTER_MAX.as_secs()));
        assert_eq!(secs("Sun, 06 Nov 1994 08:50:37 GMT"), Some(60));
        assert_eq!(secs("Sun, 06 Nov 1994 08:00:00 GMT"), Some(0));
        assert_eq!(secs("-5"), None);
        assert_eq!(secs("1.5"), None);
        assert_eq!(secs(""), None);
    }
}
