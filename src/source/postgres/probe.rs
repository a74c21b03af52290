//! The PostgreSQL catalogue: the key column's type and nullability, every unique index on
//! exactly that column with the collation it proves uniqueness under, the inheritance children
//! a query of the table also reads, and the content columns' types.
//!
//! Never reads a row of the table. What the core decides from it is `sql::plan::decide`.

use tokio_postgres::types::Type;

use super::value::{self, ContentKind};
use super::{call, drive, Failure, PgDialect};
use crate::source::sql::dialect::{Catalogue, Target, UniqueOrder};
use crate::source::sql::quantiles::{self, Quantiles};
use crate::source::FetchError;

/// The key column: its type, nullability and type name, and the table's inheritance children
/// (a partitioned table's partitions are not listed: its unique indexes cover them). `$1` is
/// the quoted table name (resolved by `regclass`, so the search path applies as in psql), `$2`
/// the column name.
const COLUMN: &str = "SELECT a.atttypid::oid, a.attnotnull, \
     pg_catalog.format_type(a.atttypid, a.atttypmod), \
     ARRAY(SELECT h.inhrelid::regclass::text FROM pg_catalog.pg_inherits h \
       WHERE h.inhparent = a.attrelid AND c.relkind <> 'p' ORDER BY 1 LIMIT 8), \
     (SELECT count(*) FROM pg_catalog.pg_inherits h \
       WHERE h.inhparent = a.attrelid AND c.relkind <> 'p') \
     FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
     WHERE a.attrelid = $1::text::regclass AND a.attname = $2 \
       AND a.attnum > 0 AND NOT a.attisdropped";

/// Every valid, non-partial unique index whose one key column is the key: its name, whether it
/// is the primary key, the collation it orders by when that is not the column's own (as SQL),
/// and whether its equality is its collation's (a deterministic collation, or the type's
/// default operator class), so that it proves uniqueness under that order.
const UNIQUE: &str = "SELECT ic.relname::text, i.indisprimary, \
     CASE WHEN i.indcollation[0] = a.attcollation THEN NULL \
       ELSE pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(co.collname) END, \
     COALESCE(co.collisdeterministic, true) OR oc.opcdefault \
     FROM pg_catalog.pg_index i \
     JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid \
     JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
     JOIN pg_catalog.pg_opclass oc ON oc.oid = i.indclass[0] \
     LEFT JOIN pg_catalog.pg_collation co ON co.oid = i.indcollation[0] \
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = co.collnamespace \
     WHERE i.indrelid = $1::text::regclass AND a.attname = $2 \
       AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indnkeyatts = 1 \
     ORDER BY 1";

/// The key's histogram bounds as an integer array's text (`{1,5,9}`), from `pg_stats` (the
/// statistics ANALYZE keeps; the ones over inheritance children first). `$1` and `$2` as in
/// `COLUMN`. No row: the table was never analyzed.
const HISTOGRAM: &str = "SELECT s.histogram_bounds::text \
     FROM pg_catalog.pg_stats s \
     JOIN pg_catalog.pg_namespace n ON n.nspname = s.schemaname \
     JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename \
     WHERE c.oid = $1::text::regclass AND s.attname = $2 AND s.histogram_bounds IS NOT NULL \
     ORDER BY s.inherited DESC LIMIT 1";

impl PgDialect {
    /// Shard cuts from the key's `pg_stats` histogram (`Dialect::quantiles`).
    pub(super) async fn histogram_cuts(
        &mut self,
        target: Target<'_>,
        lo: i128,
        hi: i128,
        n: u32,
    ) -> Result<Option<Quantiles>, FetchError> {
        let table = crate::source::sql::config::SqlConfig::table_of::<PgDialect>(target.table);
        let key = target.key.to_owned();
        let rows = call!(self, "reading the key's statistics", |c| c
            .query(HISTOGRAM, &[&table, &key]))?;
        let bounds = rows
            .first()
            .and_then(|r| r.try_get::<_, Option<String>>(0).ok().flatten())
            .and_then(|text| quantiles::pg_int_array(&text));
        Ok(bounds
            .and_then(|b| quantiles::equi_depth(&b, lo, hi, n))
            .map(|keys| Quantiles {
                by: "histogram",
                keys,
            }))
    }

    /// Reads the catalogue about `target`.
    pub(super) async fn catalogue(&mut self, target: Target<'_>) -> Result<Catalogue, FetchError> {
        let table = crate::source::sql::config::SqlConfig::table_of::<PgDialect>(target.table);
        let key = target.key.to_owned();
        let rows = call!(self, "reading the table's columns", |c| c
            .query(COLUMN, &[&table, &key]))?;
        let Some(row) = rows.first() else {
            return Ok(Catalogue {
                type_name: None,
                key_type: None,
                nullable: true,
                unique: Vec::new(),
                uncovered: Vec::new(),
                content: Vec::new(),
            });
        };
        let oid: u32 = row.get(0);
        let not_null: bool = row.get(1);
        let type_name: String = row.get(2);
        let mut uncovered: Vec<String> = row.get(3);
        let children: i64 = row.get(4);
        if children > 8 {
            uncovered.push(format!("{} more", children.saturating_sub(8)));
        }
        let key_type = Type::from_oid(oid).as_ref().and_then(value::key_type);
        self.key_bits = key_type.map_or(64, value::int_bits);

        let rows = call!(self, "reading the key's unique indexes", |c| c
            .query(UNIQUE, &[&table, &key]))?;
        let unique = rows
            .iter()
            .map(|r| UniqueOrder {
                name: r.get(0),
                primary: r.get(1),
                collation: r.get(2),
                exact: r.get(3),
            })
            .collect();

        let mut content = Vec::new();
        self.kinds.clear();
        if !target.content.is_empty() {
            let cols: Vec<String> = target
                .content
                .iter()
                .map(|c| super::connect::quote_ident(c))
                .collect();
            let probe = format!("SELECT {} FROM {table} LIMIT 0", cols.join(", "));
            let stmt = call!(self, "content", |c| c.prepare(&probe))?;
            for (col, name) in stmt.columns().iter().zip(target.content) {
                let kind = ContentKind::of(col.type_());
                self.kinds.push(kind);
                content.push(kind.select(name));
            }
        }
        Ok(Catalogue {
            type_name: Some(type_name),
            key_type,
            nullable: !not_null,
            unique,
            uncovered,
            content,
        })
    }
}
