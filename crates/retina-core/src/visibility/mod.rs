//! Version visibility (ARCHITECTURE.md §3.2, paper §4.1 and Figure 7).
//!
//! A stored row version is visible at snapshot `qts` when its `_create_ts <= qts`
//! (a column of the data) and it was not deleted at or before `qts` (this module).

mod delete_ts_block;
mod row_group;
mod tile;

pub use row_group::{RgVisibility, RgWriter};
pub use tile::{TileVisibility, TileWriter};

/// Rows per tile; a row offset inside a tile fits the entry's 12 bits.
pub const TILE_ROWS: usize = 4096;
/// u64 words in a tile's bitmap.
pub const TILE_WORDS: usize = TILE_ROWS / 64;

/// A deleted-rows bitmap: bit `i` (word `i / 64`, bit `i % 64`) set means row `i`
/// is deleted at the snapshot the bitmap was taken for.
pub type DeleteBitmap = Vec<u64>;
