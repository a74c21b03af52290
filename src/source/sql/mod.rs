//! The SQL keyset core: one table read in keyset pages inside one snapshot, whatever the
//! server. `postgres`, `mysql` and `sqlite` are dialects of it ([`dialect::Dialect`]); the core owns the
//! key-order rule (`plan`), the statements, the cursors, the page checks (`rows`), the content
//! digests, count mode, labels as predicates, a shard's key bounds (`key::span`, the one place
//! that reads a contract's `key_range`) and the key ranges of a re-read.
//!
//! It never decides completeness (the reconciler does), never retries (the collector does)
//! and never writes to the database. It spawns no task.
//!
//! Invariants:
//! - A scan reads nothing before the catalogue proved the key unique under the order its
//!   pages are read in, in every relation the query reads (`plan::decide`); otherwise it is
//!   refused, saying why.
//! - A page after a key reads from `key >= last`, and every row equal to `last` under the page
//!   order but `last`'s own is an `invalid_page` (R16): an equal key is never skipped silently.
//! - The end of the scan is a page statement that found no row past the page, never a short
//!   page.
//! - A page echoes the snapshot it was read in (the dialect's `Held`), and a continuation is
//!   served only from the snapshot it names (`dialect::decide`).
//! - The DSN's password never reaches a log, an error, a receipt or `Debug`.

pub(crate) mod config;
pub(crate) mod dialect;
pub(crate) mod key;
pub(crate) mod passfile;
pub(crate) mod plan;
pub(crate) mod quantiles;
pub(crate) mod rows;
pub(crate) mod spec;
#[cfg(test)]
mod tests;

use std::path::Path;

use self::config::SqlConfig;
use self::dialect::{Dialect, Fatal, Held, Target, Want};
use self::key::{Key, Span};
use self::plan::Plan;
use self::rows::PageRows;
use crate::content::RecordHasher;
use crate::contract::{IdCodecKind, KeyRange, Page, Scope};
use crate::error::SourceError;
use crate::reconcile::Request;
use crate::source::{FetchError, PageRequest};

/// How long `preflight` waits for the catalogue before leaving the checks to the run.
const PREFLIGHT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A table of a SQL server as a page source, in dialect `D`.
pub(crate) struct SqlSource<D: Dialect> {
    config: SqlConfig,
    dialect: D,
    /// The contract's codec, when the source was opened for a contract: a key column whose
    /// keys the codec cannot take is refused before anything is read.
    codec: Option<IdCodecKind>,
    /// The scope's key bounds (a shard's).
    span: Option<Span>,
    plan: Option<Plan>,
    /// The snapshot generation whose NULL keys were checked.
    nulls_checked: Option<u64>,
    hasher: RecordHasher,
    pages_served: u64,
    /// Keep the items' encoded content values (`PageSource::digest_columns`, `Page::columns`).
    pub(crate) digest_columns: bool,
}

impl<D: Dialect> std::fmt::Debug for SqlSource<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlSource")
            .field("kind", &D::KIND)
            .field("config", &self.config)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect> SqlSource<D> {
    /// A source for a parsed config; connects only on the first request.
    pub(crate) fn new(config: SqlConfig, connect: D::Connect) -> SqlSource<D> {
        let fatal = Fatal {
            path: config.path.clone(),
            table: config.table_sql::<D>(),
        };
        SqlSource {
            dialect: D::new(connect, fatal),
            config,
            codec: None,
            span: None,
            plan: None,
            nulls_checked: None,
            hasher: RecordHasher::new(),
            pages_served: 0,
            digest_columns: false,
        }
    }

    /// Reads a config file.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable, `SourceError::ConfigFile` naming the key that is wrong.
    pub(crate) fn open(path: &Path) -> Result<SqlSource<D>, SourceError> {
        let (config, connect) = config::open::<D>(path)?;
        Ok(SqlSource::new(config, connect))
    }

    /// Opens a spec of this dialect's kind: a config file (`KIND:CONFIG.json`) or an inline
    /// spec (`postgres://...?table=T&key=K`, `sqlite:PATH?...`), whose password, if any, comes
    /// from the environment (`sql::spec`).
    ///
    /// # Errors
    /// As [`SqlSource::open`]; an inline spec's errors name it without a password.
    pub(crate) fn open_spec(spec: &str) -> Result<SqlSource<D>, SourceError> {
        if crate::source::inline_kind(spec).is_some() {
            let (config, connect) = spec::parse::<D>(spec, |v| std::env::var(v).ok())?;
            return Ok(SqlSource::new(config, connect));
        }
        let path = spec.split_once(':').map_or(spec, |(_, p)| p);
        SqlSource::open(Path::new(path))
    }

    /// Narrows the scope to integer keys in `ranges` (ascending, disjoint, inclusive, IDs of
    /// the `int` codec): the config's `where`, `AND` the ranges (a re-read).
    #[must_use]
    pub(crate) fn narrowed(mut self, ranges: &[(u64, u64)]) -> SqlSource<D> {
        self.config.narrow_to_keys::<D>(ranges);
        self
    }

    /// Reads a config file and narrows its scope to integer keys in `ranges` (ascending,
    /// disjoint, inclusive, IDs of the `int` codec): the config's `where`, `AND` the ranges.
    ///
    /// # Errors
    /// As [`SqlSource::open`].
    // Each of these is used by one dialect's callers only: with one SQL feature alone the
    // other's are unused.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn open_key_ranges(
        path: &Path,
        ranges: &[(u64, u64)],
    ) -> Result<SqlSource<D>, SourceError> {
        let (mut config, connect) = config::open::<D>(path)?;
        config.narrow_to_keys::<D>(ranges);
        Ok(SqlSource::new(config, connect))
    }

    /// Serves the scope of a contract: its key range (a shard's, open at the plan's outer
    /// ends) under its codec, which the key column's type is checked against.
    #[must_use]
    pub(crate) fn for_scope(mut self, scope: &Scope, codec: IdCodecKind) -> SqlSource<D> {
        self.codec = Some(codec);
        self.span = key::span(scope, codec);
        self
    }

    /// Serves only the keys of `range` (IDs of the `int` codec).
    #[must_use]
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn with_key_range(self, range: Option<KeyRange>) -> SqlSource<D> {
        let mut scope = Scope::new("-");
        scope.key_range = range;
        let codec = self.codec.unwrap_or(IdCodecKind::Int);
        let mut s = self.for_scope(&scope, codec);
        s.codec = None;
        s
    }

    /// The dialect (its own operations: a held snapshot, a keep-alive).
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn dialect_mut(&mut self) -> &mut D {
        &mut self.dialect
    }

    /// The dialect, to read.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn dialect(&self) -> &D {
        &self.dialect
    }

    fn fatal(&self, problem: impl std::fmt::Display) -> FetchError {
        Fatal {
            path: self.config.path.clone(),
            table: self.config.table_sql::<D>(),
        }
        .error(problem)
    }

    /// Reads the catalogue and decides the order, once per source.
    async fn plan(&mut self) -> Result<(), FetchError> {
        if self.plan.is_some() {
            return Ok(());
        }
        let target = Target {
            table: &self.config.table,
            key: &self.config.key,
            content: &self.config.content,
        };
        let cat = self.dialect.probe(target).await?;
        let (key_type, order) =
            plan::decide::<D>(&cat, &self.config.key, self.span).map_err(|p| self.fatal(p))?;
        if let Some(problem) = self.codec.and_then(|c| codec_problem(c, key_type)) {
            return Err(self.fatal(format!(
                "key: column {} {problem}",
                D::quote(&self.config.key)
            )));
        }
        if let Some(check) = plan::where_check::<D>(&self.config) {
            self.dialect.check(&check, "where").await?;
        }
        for (name, predicate) in &self.config.labels {
            let check = plan::label_check::<D>(&self.config, predicate);
            self.dialect
                .check(&check, &format!("labels.{name}"))
                .await?;
        }
        self.plan = Some(plan::plan::<D>(
            &self.config,
            &cat,
            key_type,
            order,
            self.span,
        ));
        Ok(())
    }

    /// Checks the config against the catalogue before a run begins (`AnySource::prepare`): a
    /// table, column, predicate or key the server refuses is an error now, so nothing is
    /// recorded for a scan that could never read a page. A failure that may heal (the server
    /// unreachable, busy, slow, or refusing access) is left to the run, which retries and
    /// records it; so is a check that takes longer than `PREFLIGHT_TIMEOUT`.
    pub(crate) async fn preflight(&mut self) -> Result<(), SourceError> {
        match tokio::time::timeout(PREFLIGHT_TIMEOUT, self.plan()).await {
            Ok(Err(FetchError::Fatal(e))) => Err(e),
            _ => Ok(()),
        }
    }

    /// Refuses a snapshot whose scope holds rows with a NULL key (no page can reach them),
    /// once per snapshot.
    async fn check_nulls(&mut self, held: &Held) -> Result<(), FetchError> {
        let Some(plan) = &self.plan else {
            return Ok(());
        };
        if !plan.nullable || self.nulls_checked == Some(held.generation) {
            return Ok(());
        }
        let texts = self
            .dialect
            .texts(&plan.nulls, plan.params(&plan.nulls, None, 0))
            .await?;
        let n: u64 = texts
            .first()
            .and_then(|t| t.as_deref()?.parse().ok())
            .unwrap_or(0);
        if n > 0 {
            return Err(FetchError::InvalidPage {
                detail: format!(
                    "{n} row(s) of the scope have a NULL key {}: keyset pages cannot reach them, so the scan could never be complete",
                    D::quote(&self.config.key)
                ),
            });
        }
        self.nulls_checked = Some(held.generation);
        Ok(())
    }

    /// The key a request continues after.
    fn bound(&self, plan: &Plan, request: &Request) -> Result<Option<Key>, FetchError> {
        Ok(match request {
            Request::First => None,
            Request::Cursor(c) => Some(
                c.strip_prefix(D::CURSOR_TAG)
                    .and_then(|text| Key::from_text(plan.key_type, text))
                    .ok_or_else(|| FetchError::InvalidPage {
                        detail:
                            "the stored cursor was not issued by this source for this key column"
                                .to_owned(),
                    })?,
            ),
            Request::After(k) => {
                Some(
                    Key::from_text(plan.key_type, k).ok_or_else(|| FetchError::InvalidPage {
                        detail: format!(
                            "the high-water key {:?} is not a value of key column {}",
                            k.chars().take(64).collect::<String>(),
                            D::quote(&self.config.key)
                        ),
                    })?,
                )
            }
        })
    }

    /// Serves one page.
    pub(crate) async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        if !self.config.page_delay.is_zero() {
            tokio::time::sleep(self.config.page_delay).await;
        }
        if !self.config.pause.is_zero() && self.pages_served > 0 {
            tokio::time::sleep(self.config.pause).await;
        }
        self.plan().await?;
        let held = self
            .dialect
            .snapshot(Want::of(&req.request, req.snapshot.as_deref()))
            .await?;
        self.check_nulls(&held).await?;
        let plan = self.plan.as_ref().ok_or(FetchError::ServerError)?;
        let bound = self.bound(plan, &req.request)?;
        let page_size = req.page_size.max(1);
        let stmt = if bound.is_some() {
            &plan.after
        } else {
            &plan.first
        };
        let limit = PageRows::limit(page_size, bound.is_some());
        let params = plan.params(stmt, bound.as_ref(), limit);
        let mut rows = PageRows::new(
            usize::try_from(page_size).unwrap_or(usize::MAX),
            plan.key_type,
            bound.as_ref(),
            &self.config.labels,
            &self.config.content,
            &mut self.hasher,
        )
        .with_columns(self.digest_columns);
        self.dialect.page(stmt, params, &mut rows).await?;
        let built = rows.finish().map_err(|detail| FetchError::InvalidPage {
            detail: format!("{detail} (pages follow index {})", plan.order.name),
        })?;
        self.pages_served = self.pages_served.saturating_add(1);
        let last = built
            .items
            .last()
            .filter(|_| built.more)
            .map(|i| key::id_text(&i.id));
        let next = last.as_ref().map(|k| format!("{}{k}", D::CURSOR_TAG));
        match last.and_then(|k| Key::from_text(plan.key_type, &k)) {
            Some(k)
                if self.config.prefetch
                    && self.config.page_delay.is_zero()
                    && self.config.pause.is_zero() =>
            {
                let limit = PageRows::limit(page_size, true);
                let params = plan.params(&plan.after, Some(&k), limit);
                self.dialect.ahead(&plan.after, params).await;
            }
            _ => {}
        }
        if next.is_none() {
            self.dialect.end().await;
        }
        Ok(Page {
            items: built.items,
            complete: Some(next.is_none()),
            next,
            snapshot: held.echo,
            query: None,
            truncated: false,
            total: None,
            size_bytes: built.size_bytes,
            columns: built.columns,
        })
    }

    /// An authorized server-side count of the scope, in the snapshot pages are read from.
    pub(crate) async fn count(&mut self) -> Option<u64> {
        // Any failure means "no server count": the collector then traverses fully.
        self.plan().await.ok()?;
        self.dialect.snapshot(Want::Side).await.ok()?;
        let plan = self.plan.as_ref()?;
        let params = plan.params(&plan.count, None, 0);
        let texts = self.dialect.texts(&plan.count, params).await.ok()?;
        texts.first()?.as_deref()?.parse().ok()
    }

    /// The snapshot the source holds now (a fresh one if none), as pages would echo it.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) async fn hold(&mut self) -> Result<Option<String>, FetchError> {
        Ok(self.dialect.snapshot(Want::Side).await?.echo)
    }

    /// The smallest and largest ID of the scope under the source's codec (`int` when opened
    /// without a contract), for `plan`; `None` for an empty scope or a key that is not an
    /// integer. A key below the codec's IDs counts as the first ID, one above as the last.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses the query.
    pub(crate) async fn key_bounds(&mut self) -> Result<Option<(u64, u64)>, FetchError> {
        self.plan().await?;
        self.dialect.snapshot(Want::Side).await?;
        let Some(plan) = &self.plan else {
            return Ok(None);
        };
        if !plan.key_type.is_int() {
            return Ok(None);
        }
        let params = plan.params(&plan.bounds, None, 0);
        let texts = self.dialect.texts(&plan.bounds, params).await?;
        let int = |i: usize| -> Option<i128> { texts.get(i)?.as_deref()?.parse().ok() };
        let codec = self.codec.unwrap_or(IdCodecKind::Int);
        Ok(match (int(0), int(1)) {
            (Some(lo), Some(hi)) => id_bounds(codec, lo, hi),
            _ => None,
        })
    }
}

impl<D: Dialect> SqlSource<D> {
    /// IDs that cut the scope's rows with IDs in `lo..=last` into `n` parts of about equal
    /// counts, from the server's statistics of the key or a sample of it
    /// (`Dialect::quantiles`), and how they were found; `Ok(None)` when there are none (or the key is not an integer). The table's
    /// `where` is not applied: statistics describe the whole table.
    ///
    /// # Errors
    /// `FetchError` when the server cannot be reached or refuses.
    pub(crate) async fn key_cuts(
        &mut self,
        lo: u64,
        last: u64,
        n: u32,
    ) -> Result<Option<(&'static str, Vec<u64>)>, FetchError> {
        self.plan().await?;
        self.dialect.snapshot(Want::Side).await?;
        let Some(plan) = &self.plan else {
            return Ok(None);
        };
        if !plan.key_type.is_int() || n < 2 {
            return Ok(None);
        }
        let codec = self.codec.unwrap_or(IdCodecKind::Int);
        let key = |id: u64| -> i128 {
            match codec {
                IdCodecKind::Signed => i128::from(crate::codec::signed_of(id)),
                _ => i128::from(id),
            }
        };
        let target = Target {
            table: &self.config.table,
            key: &self.config.key,
            content: &[],
        };
        let Some(q) = self
            .dialect
            .quantiles(target, key(lo), key(last), n)
            .await?
        else {
            return Ok(None);
        };
        let mut ids: Vec<u64> = q
            .keys
            .iter()
            .filter_map(|k| id_bounds(codec, *k, *k).map(|(id, _)| id))
            .collect();
        ids.sort_unstable();
        Ok((ids.len() + 1 == n as usize).then_some((q.by, ids)))
    }
}

/// The IDs of keys `lo..=hi` under `codec`, clamped to what the codec can hold; `None` when no
/// key of the span is an ID.
fn id_bounds(codec: IdCodecKind, lo: i128, hi: i128) -> Option<(u64, u64)> {
    let (min, max) = match codec {
        IdCodecKind::Signed => (i128::from(i64::MIN), i128::from(i64::MAX)),
        _ => (0, i128::from(u64::MAX)),
    };
    if hi < min || lo > max {
        return None;
    }
    let id = |k: i128| -> Option<u64> {
        let k = k.clamp(min, max);
        match codec {
            IdCodecKind::Signed => i64::try_from(k).ok().map(crate::codec::signed_id),
            _ => u64::try_from(k).ok(),
        }
    };
    Some((id(lo)?, id(hi)?))
}

/// Why `codec` cannot take the keys of a column of type `ty`, or `None` when it can (a signed
/// column under `int` can: only a negative key is refused, as it is met).
fn codec_problem(codec: IdCodecKind, ty: key::KeyType) -> Option<&'static str> {
    match (codec, ty.is_int()) {
        (IdCodecKind::Int | IdCodecKind::Signed, true)
        | (IdCodecKind::String | IdCodecKind::Prefixed, false) => None,
        (IdCodecKind::Int | IdCodecKind::Signed, false) => Some(
            "holds text: its IDs need \"id_codec\": \"string\" (or \"prefixed\" for keys such as \"customer-42\")",
        ),
        (IdCodecKind::String | IdCodecKind::Prefixed, true) => Some(
            "is an integer: its IDs need \"id_codec\": \"int\" (keys from 0 to 2^64-1) or \"signed\" (from -2^63 to 2^63-1)",
        ),
    }
}
