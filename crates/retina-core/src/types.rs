//! Identifiers shared by every component: timestamps, row ids, file ids, row locations.

use serde::{Deserialize, Serialize};

/// A mirror-transaction timestamp.
///
/// Invariant: `0 < ts <= Ts::MAX` for every allocated timestamp; `Ts(0)` is the
/// snapshot that sees nothing. Only 52 bits are usable because a delete-ts entry packs
/// the timestamp with a 12-bit row offset (ARCHITECTURE.md §3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ts(pub u64);

impl Ts {
    /// Number of usable bits in a timestamp.
    pub const BITS: u32 = 52;
    /// The largest timestamp that fits a delete-ts entry.
    pub const MAX: Ts = Ts((1 << Self::BITS) - 1);
    /// The first timestamp a transaction service hands out.
    pub const FIRST: Ts = Ts(1);

    pub fn next(self) -> Ts {
        Ts(self.0 + 1)
    }

    /// The timestamp just below `self`, saturating at zero.
    pub fn prev(self) -> Ts {
        Ts(self.0.saturating_sub(1))
    }
}

impl std::fmt::Display for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Identifies a table inside one Retina instance. Assigned by the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableId(pub u32);

/// A row id: unique and increasing per table. Consecutive rows of one file have
/// consecutive row ids, so the main index maps row-id *ranges* to location ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RowId(pub u64);

/// A data file id, pre-assigned to a virtual file and kept when it is flushed, so row
/// locations never change on flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FileId(pub u64);

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Index of a replayer shard.
pub type ShardId = usize;

/// Where a row version lives: file, row group inside it, offset inside the row group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RowLocation {
    pub file_id: FileId,
    pub row_group: u32,
    pub offset: u32,
}
