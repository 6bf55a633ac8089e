//! Workloads and whole-system benchmarks for Retina.
//!
//! - [`chbench`]: the CH-benCHmark-like change stream that feeds benchmarks, tests and
//!   the demo;
//! - [`replay`], [`scan`], [`txn`], [`durability`]: the `retina bench` benchmarks,
//!   each returning a serializable report.

pub mod chbench;
pub mod crash_stream;
pub mod durability;
pub mod live;
pub mod progress;
pub mod queries;
pub mod replay;
pub mod scan;
pub mod txn;
