//! Version visibility (DESIGN.md §3.2, paper §4.1 and Figure 7).
//!
//! A stored row version is visible at snapshot `qts` when its `_create_ts <= qts`
//! (a column of the data) and it was not deleted at or before `qts` (this module).

mod delete_ts_block;
mod row_group;
mod tile;

pub use row_group::{RgVisibility, RgWriter};
pub use tile::{TileVisibility, TileWriter, TILE_ROWS, TILE_WORDS};

/// A deleted-rows bitmap: bit `i` (word `i / 64`, bit `i % 64`) set means row `i`
/// is deleted at the snapshot the bitmap was taken for.
pub type DeleteBitmap = Vec<u64>;
