//! The replay engine (DESIGN.md §3.4, paper §4.2): mirror transactions split by
//! primary-key shard and applied by shard threads that own their keys' index
//! entries, write buffers and tiles, so the hot path takes no locks.

mod background;
mod checkpointer;
mod commit_group;
mod config;
mod engine;
mod flusher;
mod operation;
mod recovery;
mod routing;
mod shard;
mod shared;
mod source_progress;
mod startup;
mod stats;
mod storage_gc;

pub use checkpointer::CheckpointReport;
pub use config::EngineConfig;
pub use engine::Engine;
pub use recovery::RecoveryReport;
pub use stats::EngineStats;
pub use storage_gc::StorageGcReport;
pub use operation::RowChange;
pub use routing::shard_of;
pub use source_progress::SourcePosition;
