//! SQL over Retina snapshots (ARCHITECTURE.md §3.6, paper §5).
//!
//! - [`provider::RetinaTable`]: a DataFusion `TableProvider` for one Retina table;
//! - [`exec::RetinaScanExec`]: its `ExecutionPlan`, one partition per scan split (a
//!   flushed file's row group or a write buffer's virtual file), each read with
//!   vectorized filter-on-read (Algorithm 1) on a blocking thread;
//! - [`split_pruning`]: simple filters pushed into the scan (inexactly) to skip
//!   splits whose column statistics ([`split_statistics`], recorded in the catalog
//!   at flush) rule them out;
//! - [`snapshot::QuerySnapshot`]: the one snapshot a query reads at, shared by every
//!   table it scans and released when the query's last stream is dropped;
//! - [`sql_catalog`]: schemas and tables resolved from the engine at planning time, plus
//!   the `retina` system schema ([`system`]);
//! - [`session::RetinaSession`]: parse, plan and run SQL; read-only; per-query
//!   memory limit; query metrics ([`metrics`]).

pub mod cancellation;
pub mod client_settings;
pub mod error;
pub mod exec;
pub mod export;
pub mod figures;
pub mod metrics;
pub mod page_bounds;
mod pg_age;
pub mod pg_column_names;
pub mod pg_compat;
pub mod pg_functions;
mod pg_arithmetic;
mod pg_casts;
pub mod pg_interval_functions;
pub mod pg_intervals;
mod pg_literals;
pub mod pg_keys;
pub mod pg_overrides;
pub mod pg_rewrite;
mod pg_select_list;
pub mod pg_time_zone;
mod plan_rewrite;
pub mod provider;
mod result_types;
pub mod statement_limits;
pub mod statement_policy;
pub mod scan_context;
pub mod session;
pub mod snapshot;
pub mod sources;
pub mod sql_catalog;
pub mod sql_parser;
pub mod split_pruning;
pub mod split_statistics;
mod sql_ast;
pub mod system;
mod to_char_pattern;
mod udf_result;
mod unique_names;

pub use error::{QueryError, QueryResult};
pub use figures::Figures;
pub use metrics::QueryMetrics;
pub use client_settings::ClientSettings;
pub use session::{QueryStream, RetinaSession, SessionOptions};
pub use snapshot::QuerySnapshot;
pub use sources::{SourceRegistry, SourceStatus};

/// Re-exported so callers (server, CLI) use the same DataFusion and Arrow versions.
pub use datafusion;
