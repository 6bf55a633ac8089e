//! What a checkpoint records (ARCHITECTURE.md §3.7, paper §4.3): the state at a committed
//! ts C from which replay can resume with the source position of C.
//!
//! Flushed data files are not copied: the catalog manifest lists them, and their
//! visibility at C is stored here as a bitmap. Rows still in write buffers at C are
//! written to Parquet files under the checkpoint. The primary index is not stored:
//! recovery rebuilds it from the visible rows (it is derivable, and storing it would
//! double the checkpoint's I/O for what a scan of the key columns gives back).

use serde::{Deserialize, Serialize};

use crate::catalog::DataFileMeta;
use crate::replay::SourcePosition;
use crate::schema::TableSchema;
use crate::types::{FileId, RowId, TableId, Ts};

/// Bumped whenever the checkpoint's meaning changes; other versions are refused.
pub const CHECKPOINT_FORMAT_VERSION: u32 = 1;

/// A complete checkpoint at `ts`. Written last, atomically, after every file it
/// names; so it is either wholly there or the previous one stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointManifest {
    pub format_version: u32,
    /// Every transaction with a ts at or below this is in the checkpoint.
    pub ts: Ts,
    /// Shard count: key ownership (and so single-writer tiles) depends on it.
    pub shards: usize,
    pub next_file_id: u64,
    pub tables: Vec<CheckpointTable>,
    /// Per source, the position of its newest transaction at or below `ts`.
    pub sources: Vec<SourcePosition>,
}

impl CheckpointManifest {
    /// Paths of every segment the checkpoint needs.
    pub fn referenced_paths(&self) -> std::collections::HashSet<&str> {
        self.tables
            .iter()
            .flat_map(|t| &t.files)
            .flat_map(|f| &f.segments)
            .map(|segment| segment.path.as_str())
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointTable {
    pub id: TableId,
    pub schema: TableSchema,
    pub next_row_id: u64,
    pub files: Vec<CheckpointFile>,
}

/// One data file's state at the checkpoint ts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointFile {
    pub file_id: FileId,
    pub first_row_id: RowId,
    /// Row capacity of the file's row group (its visibility's size).
    pub capacity: u64,
    /// Rows covered by `deleted` (for buffered files: the rows of `segments`).
    pub rows: u64,
    /// Rows deleted at or before the checkpoint ts, bit `i` of word `i / 64`.
    #[serde(with = "bitmap_base64")]
    pub deleted: Vec<u64>,
    /// For a file still in a write buffer: its rows as consecutive segments, each
    /// written by the checkpoint that first saw them (so a checkpoint writes only the
    /// rows that arrived since the previous one). Empty for flushed files.
    pub segments: Vec<RowSegment>,
    /// For a flushed file: its catalog entry as of the checkpoint (the catalog may
    /// have replaced it since, by storage GC).
    #[serde(default)]
    pub meta: Option<DataFileMeta>,
}

impl CheckpointFile {
    /// Whether the file's rows live in checkpoint segments (it was not flushed).
    pub fn is_buffered(&self) -> bool {
        !self.segments.is_empty()
    }
}

/// Consecutive rows of a buffered file, as one Parquet file under `checkpoints/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowSegment {
    pub path: String,
    pub rows: u64,
}

/// Bitmaps as base64 of little-endian words: a third of the size of a JSON array.
mod bitmap_base64 {
    use serde::{Deserialize, Deserializer, Serializer};

    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn serialize<S: Serializer>(words: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let n = (chunk[0] as u32) << 16 | (*chunk.get(1).unwrap_or(&0) as u32) << 8 | *chunk.get(2).unwrap_or(&0) as u32;
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        serializer.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u64>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let mut bytes = Vec::with_capacity(text.len() / 4 * 3);
        let value = |c: u8| -> Result<u32, D::Error> {
            ALPHABET
                .iter()
                .position(|&a| a == c)
                .map(|p| p as u32)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid base64 character {:?} in a bitmap", c as char)))
        };
        for chunk in text.as_bytes().chunks(4) {
            if chunk.len() != 4 {
                return Err(serde::de::Error::custom("truncated base64 bitmap"));
            }
            let padding = chunk.iter().filter(|&&c| c == b'=').count();
            let mut n = 0u32;
            for &c in &chunk[..4 - padding] {
                n = n << 6 | value(c)?;
            }
            n <<= 6 * padding as u32;
            let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            bytes.extend_from_slice(&decoded[..3 - padding]);
        }
        if bytes.len() % 8 != 0 {
            return Err(serde::de::Error::custom("bitmap length is not a whole number of 64-bit words"));
        }
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8"))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Wrapper {
        #[serde(with = "bitmap_base64")]
        words: Vec<u64>,
    }

    #[test]
    fn bitmaps_round_trip_through_base64() {
        for words in [vec![], vec![0u64], vec![u64::MAX, 1, 1 << 63], (0..100).map(|i| i * 0x0101_0101).collect()] {
            let json = serde_json::to_string(&Wrapper { words: words.clone() }).expect("encode");
            let back: Wrapper = serde_json::from_str(&json).expect("decode");
            assert_eq!(back.words, words);
        }
        let bad: Result<Wrapper, _> = serde_json::from_str(r#"{"words":"!!!!"}"#);
        assert!(bad.expect_err("invalid").to_string().contains("invalid base64"));
    }
}
