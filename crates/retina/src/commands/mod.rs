//! One module per `retina` subcommand.

pub mod bench;
pub mod bench_cdc;
pub mod bench_scheduler;
pub mod demo;
pub mod ingest;
pub mod jobs;
pub mod progress;
