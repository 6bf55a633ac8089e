//! Workloads over Retina's core, shared by the sources (the `generator:chbench`
//! source), the tests and the benchmarks, so none of them depends on another for
//! its input:
//!
//! - [`chbench`]: the CH-benCHmark-like schema, its seeded change generator, and its
//!   analytical queries, both on the snapshot-scan API and as SQL;
//! - [`crash_stream`]: the same stream as numbered, restartable transactions for
//!   crash tests.

pub mod chbench;
pub mod crash_stream;
