//! One page request with the contract's per-page timeout and retries: the same request is
//! resent after a backoff (at least what a throttling source asks for), and no wait runs past
//! the deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::Error;
use crate::contract::{Contract, Page};
use crate::reconcile::FetchFailure;
use crate::source::{FetchError, PageRequest, PageSource};

/// First retry backoff; doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(50);
/// Longest backoff between two attempts (a source's `Retry-After` may ask for more).
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// How one request ended.
pub(super) enum Fetched {
    Page(Page),
    Failed(FetchFailure, String),
    Expired,
    Invalid(String),
    Deadline,
}

pub(super) async fn with_retries<S: PageSource>(
    contract: &Contract,
    source: &mut S,
    req: &PageRequest,
    deadline: Option<Instant>,
) -> Result<Fetched, Error> {
    let page_timeout = Duration::from_millis(contract.limits.page_timeout_ms());
    let attempts = contract.limits.retries().saturating_add(1);
    let mut last = FetchFailure::Timeout;
    let mut throttle = None;
    for attempt in 0..attempts {
        let mut timeout = page_timeout;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Fetched::Deadline);
            }
            timeout = timeout.min(left);
        }
        match tokio::time::timeout(timeout, source.fetch(req)).await {
            Ok(Ok(page)) => return Ok(Fetched::Page(page)),
            Ok(Err(FetchError::Fatal(e))) => return Err(Error::Source(e)),
            Ok(Err(FetchError::Forbidden)) => {
                return Ok(Fetched::Failed(
                    FetchFailure::Forbidden,
                    format!("access denied on {}", req.request.describe()),
                ))
            }
            Ok(Err(FetchError::ExpiredCursor)) => return Ok(Fetched::Expired),
            Ok(Err(FetchError::InvalidPage { detail })) => return Ok(Fetched::Invalid(detail)),
            Ok(Err(FetchError::ServerError)) => last = FetchFailure::ServerError,
            Ok(Err(FetchError::Throttled { retry_after })) => {
                last = FetchFailure::ServerError;
                throttle = Some(retry_after);
            }
            Ok(Err(FetchError::Timeout)) | Err(_) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Fetched::Deadline);
                }
                last = FetchFailure::Timeout;
            }
        }
        if attempt + 1 < attempts {
            let mut backoff = BACKOFF_BASE
                .saturating_mul(1u32 << attempt.min(16))
                .min(BACKOFF_MAX);
            if let Some(asked) = throttle.take() {
                backoff = backoff.max(asked);
            }
            // The wait never runs past the deadline.
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if backoff >= left {
                    tracing::info!(
                        "{}: attempt {} of {attempts} failed; the deadline comes before the next",
                        crate::receipt::terminal_safe(&req.request.describe()),
                        attempt + 1
                    );
                    tokio::time::sleep(left).await;
                    return Ok(Fetched::Deadline);
                }
            }
            // The request is described by its cursor's fingerprint, never the cursor.
            tracing::info!(
                "{}: attempt {} of {attempts} failed ({}); retrying in {} ms",
                crate::receipt::terminal_safe(&req.request.describe()),
                attempt + 1,
                match last {
                    FetchFailure::ServerError => "server error",
                    _ => "timeout",
                },
                backoff.as_millis()
            );
            tokio::time::sleep(backoff).await;
        }
    }
    let what = match last {
        FetchFailure::ServerError => "a server error",
        _ => "a timeout",
    };
    Ok(Fetched::Failed(
        last,
        format!(
            "{} failed with {what} after {attempts} attempt(s)",
            req.request.describe()
        ),
    ))
}
