//! The replay engine (paper §4.2; see ARCHITECTURE.md): mirror transactions split by
//! primary-key shard and applied by shard threads that own their keys' index
//! entries, write buffers and tiles, so the hot path takes no locks.
//!
//! By concern:
//! - `engine`: the public [`Engine`], its start-up and its threads;
//! - `hot_path`: shard threads, the operations they apply, routing by key, group
//!   commit;
//! - `durability`: the flusher, checkpoints, recovery, source positions;
//! - `gc`: memory GC (visibility and index) and storage GC (file rewrites);
//! - `messages`: what these threads hand each other, and `shared`: the state they
//!   share (`config` and `stats` beside).

mod config;
mod durability;
mod engine;
mod gc;
mod hot_path;
mod messages;
mod shared;
mod stats;

pub use config::EngineConfig;
pub use durability::checkpointer::CheckpointReport;
pub use durability::recovery::RecoveryReport;
pub use durability::source_progress::SourcePosition;
pub use engine::Engine;
pub use gc::storage::StorageGcReport;
pub use hot_path::operation::RowChange;
pub use crate::index::shard_of;
pub use stats::EngineStats;
