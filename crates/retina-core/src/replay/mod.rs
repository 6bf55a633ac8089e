//! The replay engine (DESIGN.md §3.4, paper §4.2): mirror transactions split by
//! primary-key shard and applied by shard threads that own their keys' index
//! entries, write buffers and tiles, so the hot path takes no locks.

mod commit_group;
mod engine;
mod flusher;
mod operation;
mod routing;
mod shard;
mod source_progress;

pub use engine::{Engine, EngineConfig, EngineStats};
pub use operation::RowChange;
pub use routing::shard_of;
pub use source_progress::SourcePosition;
