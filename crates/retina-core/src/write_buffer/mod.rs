//! The write buffer (ARCHITECTURE.md §3.2, paper §4.1): per table per shard, an append-only
//! active block in Arrow columnar layout and a queue of immutable blocks. The blocks
//! of a shard form a [`VirtualFile`] with a pre-assigned file id and one row group.

mod block_builder;
mod buffer;
mod virtual_file;

pub use block_builder::{validate_row, BlockBuilder};
pub use buffer::WriteBuffer;
pub use virtual_file::VirtualFile;
