//! The primary index (ARCHITECTURE.md §3.3, paper §3.5): a single-point index from primary
//! key to row id, versioned by ts, and a main index from row-id ranges to locations.
//! Each replayer shard owns the index entries of the keys that hash to it.

mod key;
mod main_index;
mod single_point;

pub use key::{shard_of, stable_key_hash, HashedKey};
pub use main_index::{MainIndex, MainIndexEntry};
pub use single_point::{KeyVersions, SinglePointIndex, Version, INDEX_PARTS};
