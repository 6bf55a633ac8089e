//! Every benchmark of Retina, on top of the crates it measures (the CLI's `retina
//! bench` and `retina demo` run them); no product crate depends on this one.
//!
//! - engine: [`replay`] (decoded changes), [`scan`] (stale versions), [`txn`]
//!   (timestamps), [`durability`] (checkpoint cost);
//! - sources: [`debezium_replay`] (`--format debezium[-envelope]`, `retina bench
//!   freshness`), [`nats_replay`] (`--source nats`), [`kafka_replay`] (`--source
//!   kafka`), [`postgres`] (`retina bench postgres`);
//! - [`live`]: the live workload behind `retina demo` (replay at a rate while
//!   queries run), fed directly or through the Debezium ingest path;
//! - [`scheduler`]: the meta-scheduler's planning experiment; [`jobs`]: pipeline
//!   jobs executed for real on Delta tables under each schedule;
//! - [`measure`]: percentiles and CPU time, shared by all of them.
//!
//! The workloads themselves (the CH-benCHmark-like generator and its queries) are in
//! `retina-workload`, so sources and tests use them without depending on this crate.

pub mod debezium_replay;
pub mod durability;
pub mod jobs;
pub mod kafka_replay;
pub mod live;
pub mod measure;
pub mod nats_replay;
pub mod postgres;
pub mod progress;
pub mod publish;
pub mod replay;
pub mod scan;
pub mod scheduler;
pub mod txn;
