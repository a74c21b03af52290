//! Integration tests: one binary, through the public API and the real `scanledger` binary.

mod cli_errors;
#[cfg(feature = "mcp")]
mod cli_mcp;
mod cli_surface;
mod cli_terminal;
mod compat;
mod crash;
mod creation;
mod demo;
mod docs;
mod evidence;
mod hostile_text;
#[cfg(feature = "http")]
mod http;
mod inputs;
mod journal;
mod library;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
#[cfg(all(feature = "mysql", feature = "postgres"))]
mod migration;
#[cfg(all(feature = "mysql", feature = "postgres"))]
mod migration_columns;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_resume;
mod props;
#[cfg(feature = "postgres")]
mod refused;
mod regressions;
mod report;
mod resume;
mod scenarios;
mod shards;
mod shards_checks;
mod shards_edges;
#[cfg(feature = "postgres")]
mod shards_hold;
#[cfg(feature = "postgres")]
mod shards_postgres;
mod shards_split;
mod shards_within;
#[cfg(feature = "postgres")]
mod slurm;
#[cfg(feature = "postgres")]
mod sqlcore;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod sqlite;
mod stdout;
mod stops;
mod store_files;
mod structure;
mod util;
