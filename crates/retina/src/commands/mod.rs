//! One module per `retina` subcommand.

pub mod bench;
pub mod bench_cdc;
pub mod bench_jobs;
pub mod bench_postgres;
pub mod bench_query;
pub mod bench_scan;
pub mod bench_scheduler;
pub mod demo;
pub mod ingest;
pub mod demo_sql;
pub mod file_compression;
pub mod jobs;
pub mod progress;
pub mod publishing;
pub mod serve;
pub mod serve_sources;
pub mod sql;
