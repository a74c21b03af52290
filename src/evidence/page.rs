//! Serving a recorded run's IDs in order, a page at a time, with page tokens of our own
//! (`token`): bound by a keyed MAC to the run, its tenant, its query digest and a position,
//! expiring, and refused when replayed against another run. Used by the `page` command and by
//! the MCP server's `page_run` tool.
//!
//! Reads through one `Snapshot`; no raw source cursor is involved (positions are our IDs).

use crate::contract::ITEMS_PER_PAGE_MAX;
use crate::digest;
use crate::receipt::RunId;
use crate::reconcile::Status;
use crate::store::{ReadError, Snapshot};
use crate::token::{self, Binding, Claims, TokenError, TOKEN_TTL_SECONDS_MAX};

use super::Renderer;

/// One page of a recorded run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunPage {
    /// The run.
    pub run: RunId,
    /// Its coverage status: a page of a run that is not verified is no inventory's page.
    pub coverage_status: Status,
    /// The IDs in their original form (numbers for the `int` codec, strings otherwise).
    pub ids: Vec<serde_json::Value>,
    /// The token of the next page, `None` after the last.
    pub next_token: Option<String>,
}

/// Why a page could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PageRunError {
    /// The page size is out of bounds.
    #[error("a page holds 1 to {ITEMS_PER_PAGE_MAX} IDs, not {size}")]
    Size {
        /// The size asked for.
        size: u32,
    },
    /// The token lifetime is out of bounds.
    #[error("a token lives at most {TOKEN_TTL_SECONDS_MAX} seconds, not {ttl_seconds}")]
    Ttl {
        /// The lifetime asked for.
        ttl_seconds: u64,
    },
    /// The token is not valid for this run now.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// The page of `run` that `token` points to (the first page without one), of at most `size`
/// IDs, with a next token living `ttl_seconds` from `now_ms`.
///
/// # Errors
/// `PageRunError`: bounds, a token forged, expired, stale or of another run, a store read.
pub fn page_of_run(
    snap: &Snapshot<'_>,
    run: RunId,
    token_text: Option<&str>,
    size: u32,
    ttl_seconds: u64,
    now_ms: u64,
) -> Result<RunPage, PageRunError> {
    if size == 0 || size > ITEMS_PER_PAGE_MAX {
        return Err(PageRunError::Size { size });
    }
    if ttl_seconds > TOKEN_TTL_SECONDS_MAX {
        return Err(PageRunError::Ttl { ttl_seconds });
    }
    let header = snap.header(run)?;
    let query_digest = digest::query_digest(&header.contract.scope);
    let binding = Binding {
        tenant: header.contract.scope.tenant.as_deref(),
        query_digest: &query_digest,
    };
    let position = match token_text {
        None => 0,
        Some(text) => {
            let key = snap.page_token_key()?;
            let (claims, mac) = token::decode(text)?;
            if claims.run != run {
                return Err(other_run_error(snap, &key, &claims, &mac, run, &binding).into());
            }
            token::check(&key, text, run, &binding, header.pages_observed, now_ms)?.position
        }
    };
    let size_n = size as usize;
    let mut ids = snap.ids_from(run, position, size_n + 1)?;
    let next_token = if ids.len() > size_n {
        let next = ids[size_n];
        ids.truncate(size_n);
        let key = snap.page_token_key()?;
        let claims = Claims {
            run,
            position: next,
            stamp: header.pages_observed,
            expires_at_ms: now_ms.saturating_add(ttl_seconds.saturating_mul(1000)),
        };
        Some(token::issue(&key, &claims, &binding))
    } else {
        None
    };
    let codec = Renderer::for_ids(snap, &header, ids.iter().copied())?;
    Ok(RunPage {
        run,
        coverage_status: header.coverage_status,
        ids: ids.iter().map(|id| codec.json(*id)).collect(),
        next_token,
    })
}

/// The error for a token of another run: `OtherRun` (naming how the runs differ) when the
/// token is genuine for the run it names, `Forged` otherwise.
fn other_run_error(
    snap: &Snapshot<'_>,
    key: &[u8; 32],
    claims: &Claims,
    mac: &digest::Hash,
    presented_for: RunId,
    presented: &Binding<'_>,
) -> TokenError {
    let forged = TokenError::Forged { run: presented_for };
    let Ok(issued) = snap.header(claims.run) else {
        return forged;
    };
    let issued_digest = digest::query_digest(&issued.contract.scope);
    let issued_binding = Binding {
        tenant: issued.contract.scope.tenant.as_deref(),
        query_digest: &issued_digest,
    };
    if !token::mac_matches(key, claims, &issued_binding, mac) {
        return forged;
    }
    TokenError::OtherRun {
        issued_for: claims.run,
        presented_for,
        why: token::how_runs_differ(&issued_binding, presented),
    }
}
