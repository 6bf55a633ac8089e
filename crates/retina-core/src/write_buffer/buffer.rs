//! `WriteBuffer`: one shard's append-only buffer for one table.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;

use super::{BlockBuilder, VirtualFile};
use crate::schema::TableSchema;
use crate::types::Ts;
use crate::value::Value;

/// Pieces of the active block at least this large are not merged before the block
/// is sealed (see `WriteBuffer::merge_small_pieces`).
const MERGE_PIECES_BELOW: usize = 256;
/// A block sealed from at most this many pieces keeps them as they are. Such pieces
/// are group-commit batches of a busy replay (pieces below [`MERGE_PIECES_BELOW`]
/// rows are merged as they come), and concatenating them copied the whole block
/// into fresh memory for nothing (about a fifth of a shard's time in `retina
/// ingest` of 4-KB Debezium rows). More pieces than this are still concatenated.
const SEALED_PIECES_KEPT: usize = 4;

/// The writer side of a virtual file: the active block's builders, its published
/// pieces, and the immutable blocks before it.
///
/// Rows become readable only when [`WriteBuffer::publish`] runs, which the shard does
/// once per group-commit batch, before it reports the batch as applied. So readers
/// see whole batches, and the per-row path touches no shared state.
pub struct WriteBuffer {
    schema: Arc<TableSchema>,
    block_rows: usize,
    builder: BlockBuilder,
    /// Published blocks, in row order; the last `active_pieces` form the active block,
    /// few of them small (`merge_small_pieces`).
    blocks: Vec<RecordBatch>,
    active_pieces: usize,
    active_rows: usize,
    file: Arc<VirtualFile>,
    /// Rows appended to `file`, published or not.
    appended: usize,
}

impl WriteBuffer {
    pub fn new(schema: Arc<TableSchema>, block_rows: usize, file: Arc<VirtualFile>) -> Self {
        let block_rows = block_rows.max(1);
        Self {
            builder: BlockBuilder::new(Arc::clone(&schema), block_rows),
            schema,
            block_rows,
            blocks: Vec::new(),
            active_pieces: 0,
            active_rows: 0,
            file,
            appended: 0,
        }
    }

    pub fn file(&self) -> &Arc<VirtualFile> {
        &self.file
    }

    pub fn is_full(&self) -> bool {
        self.appended >= self.file.capacity()
    }

    pub fn has_unpublished_rows(&self) -> bool {
        !self.builder.is_empty()
    }

    /// Appends a row (already validated against the schema) and returns its offset in
    /// the virtual file. The caller checks [`Self::is_full`] first.
    pub fn append(&mut self, row: &[Value], ts: Ts) -> u32 {
        debug_assert!(!self.is_full());
        self.builder.append(row, ts);
        let offset = self.appended as u32;
        self.appended += 1;
        offset
    }

    /// Makes every appended row readable; seals the active block when it is full.
    pub fn publish(&mut self) {
        if self.builder.is_empty() {
            return;
        }
        let piece = self.builder.finish();
        self.active_rows += piece.num_rows();
        self.active_pieces += 1;
        self.blocks.push(piece);
        if self.active_rows >= self.block_rows || self.is_full() {
            self.seal_active_block();
        } else {
            self.merge_small_pieces();
        }
        self.file.set_blocks(self.blocks.clone());
    }

    /// Merges small pieces of the active block geometrically (a piece is merged into
    /// the one before while that one is below [`MERGE_PIECES_BELOW`] rows and not more
    /// than twice as large). A trickle of small commits (a few rows per table per
    /// batch) would otherwise leave thousands of one-row batches for every scan to
    /// walk; this way a block has at most `block_rows / MERGE_PIECES_BELOW +
    /// log2(MERGE_PIECES_BELOW)` pieces, a row is copied at most
    /// `log2(MERGE_PIECES_BELOW)` times, and the large pieces of a busy replay are
    /// not copied at all before the block is sealed.
    fn merge_small_pieces(&mut self) {
        while self.active_pieces >= 2 {
            let count = self.blocks.len();
            let previous = self.blocks[count - 2].num_rows();
            if previous >= MERGE_PIECES_BELOW || self.blocks[count - 1].num_rows() * 2 < previous {
                break;
            }
            let merged = concat_batches(&self.schema.stored_schema(), &self.blocks[count - 2..])
                .expect("pieces of the active block share the stored schema");
            self.blocks.truncate(count - 2);
            self.blocks.push(merged);
            self.active_pieces -= 1;
        }
    }

    /// Makes the active block's pieces immutable, merged into one unless there are
    /// few of them ([`SEALED_PIECES_KEPT`]).
    fn seal_active_block(&mut self) {
        if self.active_pieces > SEALED_PIECES_KEPT {
            let start = self.blocks.len() - self.active_pieces;
            let merged = concat_batches(&self.schema.stored_schema(), &self.blocks[start..])
                .expect("pieces share the stored schema");
            self.blocks.truncate(start);
            self.blocks.push(merged);
        }
        self.active_pieces = 0;
        self.active_rows = 0;
    }

    /// Publishes what is left, completes the current virtual file and starts `next`.
    /// Returns the completed file, ready to be flushed.
    /// Switches to a newer schema of the table (a column was added). Rows appended so
    /// far are published and stay in blocks of the old layout; readers and the flush
    /// conform them ([`crate::schema_evolution`]). Publishing early is harmless:
    /// readers cut rows by `_create_ts`, so uncommitted rows stay invisible.
    pub fn adopt_schema(&mut self, schema: Arc<TableSchema>) {
        self.publish();
        if self.active_pieces > 0 {
            self.seal_active_block();
            self.file.set_blocks(self.blocks.clone());
        }
        self.builder = BlockBuilder::new(Arc::clone(&schema), self.block_rows);
        self.schema = schema;
    }

    pub fn rotate(&mut self, next: Arc<VirtualFile>) -> Arc<VirtualFile> {
        self.publish();
        if self.active_pieces > 0 {
            self.seal_active_block();
            self.file.set_blocks(self.blocks.clone());
        }
        self.file.mark_complete();
        self.blocks.clear();
        self.appended = 0;
        std::mem::replace(&mut self.file, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FileId, RowId, TableId};
    use arrow_schema::DataType;

    fn buffer(block_rows: usize, capacity: usize) -> WriteBuffer {
        let schema = Arc::new(TableSchema::from_columns("t", &[("id", DataType::Int64, false)], &["id"]).expect("schema"));
        let file = Arc::new(VirtualFile::new(TableId(0), FileId(1), RowId(0), capacity).0);
        WriteBuffer::new(schema, block_rows, file)
    }

    #[test]
    fn rows_are_readable_only_after_publish_and_blocks_seal() {
        let mut buffer = buffer(4, 16);
        for i in 0..3 {
            assert_eq!(buffer.append(&[Value::Int64(i)], Ts(1)), i as u32);
        }
        assert_eq!(buffer.file().published_rows(), 0, "not published yet");
        buffer.publish();
        assert_eq!(buffer.file().published_rows(), 3);
        buffer.append(&[Value::Int64(3)], Ts(2));
        buffer.append(&[Value::Int64(4)], Ts(2));
        buffer.publish();
        let blocks = buffer.file().blocks();
        assert_eq!(blocks.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [3, 2], "a block sealed from two pieces keeps them");
        // Six one-row commits: merged as they come (1+1, +1), so the next block seals
        // as pieces of 3 and 1, and the last two rows are one piece.
        for i in 5..11 {
            buffer.append(&[Value::Int64(i)], Ts(3));
            buffer.publish();
        }
        let sizes: Vec<usize> = buffer.file().blocks().iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, [3, 2, 3, 1, 2]);
    }

    /// More pieces than [`SEALED_PIECES_KEPT`] at sealing become one block.
    #[test]
    fn a_block_of_many_pieces_is_sealed_into_one() {
        let mut buffer = buffer(1000, 4096);
        let mut next = 0;
        // Pieces of 900, 60, 25, 10 and 5 rows: the first is past merging, and each
        // later one is less than half its predecessor, so none are merged as they come.
        for rows in [900, 60, 25, 10, 5] {
            for _ in 0..rows {
                buffer.append(&[Value::Int64(next)], Ts(1));
                next += 1;
            }
            buffer.publish();
        }
        // The fifth piece fills the block: sealed from five pieces.
        let blocks = buffer.file().blocks();
        assert_eq!(blocks.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [1000]);
    }

    /// One-row commits into a 4096-row block: readers see a handful of pieces, in
    /// row order, not one batch per commit.
    #[test]
    fn a_trickle_of_small_commits_is_merged_into_few_pieces() {
        let mut buffer = buffer(4096, 8192);
        for i in 0..1000 {
            buffer.append(&[Value::Int64(i)], Ts(i as u64 + 1));
            buffer.publish();
            let blocks = buffer.file().blocks();
            // 1000 rows: at most three pieces of 256+ rows and the geometric rest.
            assert!(blocks.len() <= 3 + 9, "{} pieces after {} commits", blocks.len(), i + 1);
            let sizes: Vec<usize> = blocks.iter().map(RecordBatch::num_rows).collect();
            let small = sizes.iter().skip_while(|&&rows| rows >= MERGE_PIECES_BELOW).copied().collect::<Vec<_>>();
            assert!(small.windows(2).all(|w| w[0] > w[1]), "small pieces shrink geometrically: {sizes:?}");
        }
        let ids: Vec<i64> = buffer
            .file()
            .blocks()
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().expect("ids").values().to_vec())
            .collect();
        assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn rotate_completes_the_file() {
        let mut buffer = buffer(4, 3);
        for i in 0..3 {
            buffer.append(&[Value::Int64(i)], Ts(1));
        }
        assert!(buffer.is_full());
        let next = Arc::new(VirtualFile::new(TableId(0), FileId(2), RowId(3), 3).0);
        let done = buffer.rotate(next);
        assert!(done.is_complete());
        assert_eq!(done.published_rows(), 3);
        assert_eq!(buffer.file().file_id(), FileId(2));
        assert!(!buffer.is_full());
    }
}
