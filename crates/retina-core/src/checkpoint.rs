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

/// Bumped whenever the checkpoint's encoding or meaning changes. Version 2 stores
/// delete bitmaps as Roaring ([`deleted_rows`]).
pub const CHECKPOINT_FORMAT_VERSION: u32 = 2;

/// The oldest version this build still reads; older and newer ones are refused.
pub const OLDEST_CHECKPOINT_FORMAT_VERSION: u32 = 1;

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
    /// Rows deleted at or before the checkpoint ts, bit `i` of word `i / 64`. Words
    /// past the last one with a deleted row may be left out (a file with no deleted
    /// rows has none).
    #[serde(with = "deleted_rows")]
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

/// A checkpoint's delete bitmaps in the manifest.
///
/// Format 2 writes `{"words": N, "roaring": BASE64}`: the set bits as a portable
/// Roaring bitmap (the serialization Delta and Iceberg deletion vectors use), so a
/// file with no deleted rows costs a few bytes and one with 1% deleted about a
/// sixth of its dense words. Format 1 wrote base64 of every word, 11 KB for each
/// 65,536-row file however few rows were deleted, so a checkpoint grew with the
/// table's rows. Both are read. `words` keeps the dense length, so what is read back
/// equals what was written.
mod deleted_rows {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use roaring::RoaringBitmap;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Compact {
        words: u64,
        roaring: String,
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Compact(Compact),
        /// Format 1: base64 of the little-endian words.
        Dense(String),
    }

    pub fn serialize<S: Serializer>(words: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        if words.len() > (u32::MAX as usize + 1) / 64 {
            return Err(serde::ser::Error::custom(format!("a delete bitmap of {} words is past 2^32 rows", words.len())));
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let bitmap = RoaringBitmap::from_lsb0_bytes(0, &bytes);
        let mut portable = Vec::with_capacity(bitmap.serialized_size());
        bitmap.serialize_into(&mut portable).map_err(serde::ser::Error::custom)?;
        Compact { words: words.len() as u64, roaring: STANDARD.encode(portable) }.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u64>, D::Error> {
        match Stored::deserialize(deserializer)? {
            Stored::Dense(text) => {
                let bytes = STANDARD.decode(text).map_err(|e| D::Error::custom(format!("a dense delete bitmap is not base64: {e}")))?;
                if bytes.len() % 8 != 0 {
                    return Err(D::Error::custom("bitmap length is not a whole number of 64-bit words"));
                }
                Ok(bytes.chunks_exact(8).map(|c| c.iter().rev().fold(0u64, |word, &b| word << 8 | b as u64)).collect())
            }
            Stored::Compact(Compact { words: count, roaring }) => {
                let count = usize::try_from(count).ok().filter(|&c| c <= (u32::MAX as usize + 1) / 64).ok_or_else(|| {
                    D::Error::custom(format!("a delete bitmap of {count} words is past 2^32 rows"))
                })?;
                let bytes = STANDARD.decode(roaring).map_err(|e| D::Error::custom(format!("a delete bitmap is not base64: {e}")))?;
                let bitmap = RoaringBitmap::deserialize_from(bytes.as_slice())
                    .map_err(|e| D::Error::custom(format!("a delete bitmap is not a portable Roaring bitmap: {e}")))?;
                let mut words = vec![0u64; count];
                for row in &bitmap {
                    let word = words.get_mut(row as usize / 64).ok_or_else(|| {
                        D::Error::custom(format!("a delete bitmap sets row {row}, past its {count} words"))
                    })?;
                    *word |= 1 << (row % 64);
                }
                Ok(words)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Wrapper {
        #[serde(with = "deleted_rows")]
        deleted: Vec<u64>,
    }

    fn encoded(deleted: &[u64]) -> String {
        serde_json::to_string(&Wrapper { deleted: deleted.to_vec() }).expect("encode")
    }

    fn decoded(json: &str) -> Result<Vec<u64>, serde_json::Error> {
        serde_json::from_str::<Wrapper>(json).map(|w| w.deleted)
    }

    #[test]
    fn bitmaps_round_trip_with_their_length() {
        let sparse: Vec<u64> = (0..1024).map(|i| if i % 7 == 0 { 1 << (i % 64) } else { 0 }).collect();
        for words in [vec![], vec![0u64], vec![0; 1024], vec![u64::MAX, 1, 1 << 63], (0..100).map(|i| i * 0x0101_0101).collect(), sparse] {
            assert_eq!(decoded(&encoded(&words)).expect("decode"), words);
        }
    }

    /// The point of format 2: the size follows the deleted rows, not the file's.
    #[test]
    fn a_file_with_few_deleted_rows_costs_few_bytes() {
        let words = 65_536 / 64;
        let clean = encoded(&vec![0; words]);
        assert!(clean.len() < 64, "{} bytes for no deleted row: {clean}", clean.len());
        let mut one_percent = vec![0u64; words];
        for row in (0..65_536).step_by(100) {
            one_percent[row / 64] |= 1 << (row % 64);
        }
        let dense = base64::engine::general_purpose::STANDARD.encode(one_percent.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>());
        let compact = encoded(&one_percent);
        assert!(compact.len() * 5 < dense.len(), "1% deleted: {} bytes against {} dense", compact.len(), dense.len());
    }

    /// Checkpoints written by format 1 (base64 of every word) are still read.
    #[test]
    fn format_one_dense_bitmaps_are_read() {
        let words = vec![u64::MAX, 1, 1 << 63, 0];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let json = format!(r#"{{"deleted":"{}"}}"#, base64::engine::general_purpose::STANDARD.encode(bytes));
        assert_eq!(decoded(&json).expect("format 1"), words);
        assert_eq!(decoded(r#"{"deleted":""}"#).expect("empty"), Vec::<u64>::new());
    }

    #[test]
    fn damaged_bitmaps_say_what_is_wrong() {
        let message = |json: &str| decoded(json).expect_err(json).to_string();
        assert!(message(r#"{"deleted":"!!!!"}"#).contains("not base64"));
        assert!(message(r#"{"deleted":"AAAA"}"#).contains("whole number of 64-bit words"));
        assert!(message(r#"{"deleted":{"words":1,"roaring":"AAAA"}}"#).contains("not a portable Roaring bitmap"));
        // Row 64 set, with room for one word only.
        let two_words = encoded(&[0, 1]).replace(r#""words":2"#, r#""words":1"#);
        assert!(message(&two_words).contains("sets row 64, past its 1 words"), "{}", message(&two_words));
        assert!(message(r#"{"deleted":{"words":99999999999,"roaring":""}}"#).contains("past 2^32 rows"));
    }
}
