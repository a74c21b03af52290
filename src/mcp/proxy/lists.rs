//! The upstream's lists, whole: `tools/list`, `resources/list`, `resources/templates/list` and
//! `prompts/list` followed page by page, so a client that never follows a cursor (many do
//! not) still sees every item, in one page.
//!
//! Following is bounded (`LIST_PAGES_MAX` pages, `max_items` items, the caller's deadline) and
//! guarded against loops by the cursors already followed, kept as digests. A cursor seen
//! again is asked once more and the page compared with what it brought the first time:
//! - the same items: the upstream's cursor does not advance (a known server bug). The list
//!   ends there, whole as far as the upstream can tell, with a warning in the log (stderr,
//!   shown at the default level; `Whole::warning`);
//! - other items: the list loops, and no partial list may pass for the whole one. The caller
//!   answers the client's request with an error saying so (`ListError`).
//!
//! A whole list is cached per session and kind until the upstream says `list_changed`
//! (`Cache::invalidate`); a list read while a change arrived is served but not cached.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ErrorCode, PaginatedRequestParams, Prompt, Resource, ResourceTemplate, Tool};
use rmcp::{ErrorData, RoleClient, ServiceError};
use serde::Serialize;

use crate::digest::{cursor_hash, sha256, Hash};

/// Pages of one list the proxy follows.
pub(crate) const LIST_PAGES_MAX: u32 = 1000;
/// Tools one list may hold.
pub(crate) const TOOLS_MAX: usize = 10_000;
/// Resources, templates or prompts one list may hold.
pub(crate) const ITEMS_MAX: usize = 100_000;

/// One of the protocol's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl Kind {
    /// The method, as errors and logs name it.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Kind::Tools => "tools/list",
            Kind::Resources => "resources/list",
            Kind::Templates => "resources/templates/list",
            Kind::Prompts => "prompts/list",
        }
    }

    fn max_items(self) -> usize {
        match self {
            Kind::Tools => TOOLS_MAX,
            _ => ITEMS_MAX,
        }
    }
}

/// One page as the upstream sent it.
pub(crate) struct PageOf<T> {
    pub(crate) items: Vec<T>,
    pub(crate) next: Option<String>,
}

/// A whole list.
#[derive(Debug, Clone)]
pub(crate) struct Whole<T> {
    pub(crate) items: Vec<T>,
    /// Pages read (the repeated one included).
    pub(crate) pages: u32,
    /// Set when the list ended on a cursor that did not advance.
    pub(crate) warning: Option<String>,
}

/// Why no whole list can be served.
#[derive(Debug)]
pub(crate) enum ListError {
    /// The upstream answered a JSON-RPC error (its own words and code, passed on as they are:
    /// `-32601` when it has no such list).
    Upstream(ErrorData),
    /// The list loops, is over a bound, or the session failed: the client gets `-32603`.
    Failed(String),
}

impl ListError {
    /// The JSON-RPC error the client's request is answered with.
    pub(crate) fn into_error(self, kind: Kind) -> ErrorData {
        match self {
            ListError::Upstream(e) => e,
            ListError::Failed(why) => ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!(
                    "{why}; the proxy serves no partial {} as whole",
                    kind.method()
                ),
                None,
            ),
        }
    }

    fn of_service(kind: Kind, e: ServiceError) -> ListError {
        match e {
            ServiceError::McpError(data) => ListError::Upstream(data),
            other => ListError::Failed(format!(
                "the upstream's {} failed: {}",
                kind.method(),
                crate::source::mapping::chain_text(&other)
            )),
        }
    }
}

/// Follows the list `kind` from its first page; `fetch` asks for one page.
///
/// # Errors
/// `ListError` when the upstream fails, a bound is passed, or the list loops.
pub(crate) async fn follow<T, F, Fut>(kind: Kind, mut fetch: F) -> Result<Whole<T>, ListError>
where
    T: Serialize,
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<PageOf<T>, ListError>>,
{
    let mut items: Vec<T> = Vec::new();
    // What each followed cursor brought: its items' digest.
    let mut followed: HashMap<Hash, Hash> = HashMap::new();
    let mut cursor: Option<String> = None;
    for pages in 1..=LIST_PAGES_MAX {
        let page = fetch(cursor.clone()).await?;
        let brought = digest_of(&page.items);
        if let Some(c) = &cursor {
            let key = cursor_hash(Some(c));
            if let Some(before) = followed.get(&key) {
                if *before != brought {
                    return Err(ListError::Failed(format!(
                        "the upstream's {} loops: a cursor it gave again brought other items than the first time (after {} pages, {} items)",
                        kind.method(),
                        pages,
                        items.len()
                    )));
                }
                let warning = format!(
                    "the upstream's {} gave a cursor it had given before, and the same page again (a cursor that does not advance): the list ends there, with {} items from {} pages",
                    kind.method(),
                    items.len(),
                    pages - 1
                );
                return Ok(Whole {
                    items,
                    pages,
                    warning: Some(warning),
                });
            }
            followed.insert(key, brought);
        }
        items.extend(page.items);
        if items.len() > kind.max_items() {
            return Err(ListError::Failed(format!(
                "the upstream's {} has more than {} items",
                kind.method(),
                kind.max_items()
            )));
        }
        match page.next {
            Some(c) if !c.is_empty() => {
                // A cursor followed before is asked once more, to tell a cursor that does
                // not advance from a loop.
                cursor = Some(c);
            }
            _ => {
                return Ok(Whole {
                    items,
                    pages,
                    warning: None,
                })
            }
        }
    }
    Err(ListError::Failed(format!(
        "the upstream's {} has more than {LIST_PAGES_MAX} pages",
        kind.method()
    )))
}

/// The digest of a page's items. They are protocol values (derived `Serialize`, string-keyed
/// maps only), which always serialize; were one not to, every page would digest alike and
/// read as a cursor that does not advance (a warning and the list's end), never as whole.
fn digest_of<T: Serialize>(items: &[T]) -> Hash {
    sha256(&serde_json::to_vec(items).unwrap_or_default())
}

fn params(cursor: Option<String>) -> Option<PaginatedRequestParams> {
    Some(PaginatedRequestParams::default().with_cursor(cursor))
}

/// Every tool of the upstream, within `deadline`.
pub(crate) async fn tools(
    peer: &rmcp::Peer<RoleClient>,
    deadline: Duration,
) -> Result<Whole<Tool>, ListError> {
    within(
        Kind::Tools,
        deadline,
        follow(Kind::Tools, |c| async move {
            let r = peer
                .list_tools(params(c))
                .await
                .map_err(|e| ListError::of_service(Kind::Tools, e))?;
            Ok(PageOf {
                items: r.tools,
                next: r.next_cursor,
            })
        }),
    )
    .await
}

/// Every resource of the upstream, within `deadline`.
pub(crate) async fn resources(
    peer: &rmcp::Peer<RoleClient>,
    deadline: Duration,
) -> Result<Whole<Resource>, ListError> {
    within(
        Kind::Resources,
        deadline,
        follow(Kind::Resources, |c| async move {
            let r = peer
                .list_resources(params(c))
                .await
                .map_err(|e| ListError::of_service(Kind::Resources, e))?;
            Ok(PageOf {
                items: r.resources,
                next: r.next_cursor,
            })
        }),
    )
    .await
}

/// Every resource template of the upstream, within `deadline`.
pub(crate) async fn templates(
    peer: &rmcp::Peer<RoleClient>,
    deadline: Duration,
) -> Result<Whole<ResourceTemplate>, ListError> {
    within(
        Kind::Templates,
        deadline,
        follow(Kind::Templates, |c| async move {
            let r = peer
                .list_resource_templates(params(c))
                .await
                .map_err(|e| ListError::of_service(Kind::Templates, e))?;
            Ok(PageOf {
                items: r.resource_templates,
                next: r.next_cursor,
            })
        }),
    )
    .await
}

/// Every prompt of the upstream, within `deadline`.
pub(crate) async fn prompts(
    peer: &rmcp::Peer<RoleClient>,
    deadline: Duration,
) -> Result<Whole<Prompt>, ListError> {
    within(
        Kind::Prompts,
        deadline,
        follow(Kind::Prompts, |c| async move {
            let r = peer
                .list_prompts(params(c))
                .await
                .map_err(|e| ListError::of_service(Kind::Prompts, e))?;
            Ok(PageOf {
                items: r.prompts,
                next: r.next_cursor,
            })
        }),
    )
    .await
}

async fn within<T>(
    kind: Kind,
    deadline: Duration,
    fut: impl Future<Output = Result<Whole<T>, ListError>>,
) -> Result<Whole<T>, ListError> {
    tokio::time::timeout(deadline, fut)
        .await
        .unwrap_or_else(|_| {
            Err(ListError::Failed(format!(
                "the upstream's {} did not end within {} ms",
                kind.method(),
                deadline.as_millis()
            )))
        })
}

/// One session's whole lists, until the upstream says they changed.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    /// Bumped by every `list_changed` of a kind.
    generations: [AtomicU64; 4],
    tools: Mutex<Option<Arc<Vec<Tool>>>>,
    resources: Mutex<Option<Arc<Vec<Resource>>>>,
    templates: Mutex<Option<Arc<Vec<ResourceTemplate>>>>,
    prompts: Mutex<Option<Arc<Vec<Prompt>>>>,
}

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Tools => 0,
        Kind::Resources => 1,
        Kind::Templates => 2,
        Kind::Prompts => 3,
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A list of one kind in the cache.
pub(crate) trait Cached: Sized + Clone {
    fn cell(cache: &Cache) -> &Mutex<Option<Arc<Vec<Self>>>>;
}

impl Cached for Tool {
    fn cell(cache: &Cache) -> &Mutex<Option<Arc<Vec<Tool>>>> {
        &cache.tools
    }
}
impl Cached for Resource {
    fn cell(cache: &Cache) -> &Mutex<Option<Arc<Vec<Resource>>>> {
        &cache.resources
    }
}
impl Cached for ResourceTemplate {
    fn cell(cache: &Cache) -> &Mutex<Option<Arc<Vec<ResourceTemplate>>>> {
        &cache.templates
    }
}
impl Cached for Prompt {
    fn cell(cache: &Cache) -> &Mutex<Option<Arc<Vec<Prompt>>>> {
        &cache.prompts
    }
}

impl Cache {
    /// The upstream said the list of `kind` changed.
    pub(crate) fn invalidate(&self, kind: Kind) {
        self.generations[slot(kind)].fetch_add(1, Ordering::SeqCst);
        match kind {
            Kind::Tools => *locked(&self.tools) = None,
            Kind::Resources => *locked(&self.resources) = None,
            Kind::Templates => *locked(&self.templates) = None,
            Kind::Prompts => *locked(&self.prompts) = None,
        }
    }

    /// The cached list of `kind`, or the one `read` brings (cached unless the list changed
    /// meanwhile); a warning of `read` goes to stderr and the log.
    pub(crate) async fn get<T, Fut>(&self, kind: Kind, read: Fut) -> Result<Arc<Vec<T>>, ErrorData>
    where
        T: Cached,
        Fut: Future<Output = Result<Whole<T>, ListError>>,
    {
        if let Some(items) = locked(T::cell(self)).clone() {
            return Ok(items);
        }
        let generation = self.generations[slot(kind)].load(Ordering::SeqCst);
        let whole = read.await.map_err(|e| e.into_error(kind))?;
        tracing::debug!(
            list = kind.method(),
            pages = whole.pages,
            items = whole.items.len(),
            "followed the upstream's list whole"
        );
        if let Some(w) = &whole.warning {
            // The proxy's log is its stderr, where a warning shows at the default level.
            tracing::warn!("{w}");
        }
        let items = Arc::new(whole.items);
        if self.generations[slot(kind)].load(Ordering::SeqCst) == generation {
            *locked(T::cell(self)) = Some(Arc::clone(&items));
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    /// Serves pages from `routes` (cursor -> (items, next)); a cursor asked twice may get
    /// another answer the second time (`second`).
    async fn run(
        routes: &[(Option<&str>, &[u32], Option<&str>)],
        second: Option<(&str, &[u32], Option<&str>)>,
    ) -> Result<Whole<u32>, String> {
        let asked = std::cell::RefCell::new(HashMap::<Option<String>, u32>::new());
        follow(Kind::Resources, |c: Option<String>| {
            let n = {
                let mut a = asked.borrow_mut();
                let n = a.entry(c.clone()).or_default();
                *n += 1;
                *n
            };
            let page = match second {
                Some((cur, items, next)) if n > 1 && c.as_deref() == Some(cur) => {
                    Some((items.to_vec(), next.map(str::to_owned)))
                }
                _ => routes
                    .iter()
                    .find(|(cur, _, _)| *cur == c.as_deref())
                    .map(|(_, items, next)| (items.to_vec(), next.map(str::to_owned))),
            };
            async move {
                let (items, next) = page.ok_or_else(|| ListError::Failed("no such page".into()))?;
                Ok(PageOf { items, next })
            }
        })
        .await
        .map_err(|e| format!("{:?}", e.into_error(Kind::Resources).message))
    }

    #[tokio::test]
    async fn every_page_is_followed_and_a_cursor_that_does_not_advance_ends_the_list() {
        let w = run(
            &[
                (None, &[1, 2], Some("a")),
                (Some("a"), &[3], Some("b")),
                (Some("b"), &[4], None),
            ],
            None,
        )
        .await
        .unwrap();
        assert_eq!((w.items, w.pages, w.warning), (vec![1, 2, 3, 4], 3, None));
        // The codebase-memory-mcp shape: the second page names itself as the next.
        let w = run(
            &[(None, &[1, 2], Some("a")), (Some("a"), &[3, 4], Some("a"))],
            None,
        )
        .await
        .unwrap();
        assert_eq!((w.items.clone(), w.pages), (vec![1, 2, 3, 4], 3));
        assert!(w.warning.unwrap().contains("does not advance"));
    }

    #[tokio::test]
    async fn a_repeated_cursor_with_other_items_is_a_loop_and_no_list_is_served() {
        let e = run(
            &[
                (None, &[1], Some("a")),
                (Some("a"), &[2], Some("b")),
                (Some("b"), &[3], Some("a")),
            ],
            Some(("a", &[9], Some("b"))),
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("loops") && e.contains("no partial resources/list as whole"),
            "{e}"
        );
        // No page limit is reached by a cursor that is new every time but never ends.
        let endless = follow(Kind::Tools, |c: Option<String>| async move {
            let n: u32 = c.as_deref().map_or(0, |s| s.parse().unwrap());
            Ok(PageOf {
                items: vec![n],
                next: Some((n + 1).to_string()),
            })
        })
        .await
        .unwrap_err();
        assert!(format!("{:?}", endless.into_error(Kind::Tools).message)
            .contains("more than 1000 pages"));
    }
}
