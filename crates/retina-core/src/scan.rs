//! Snapshot scan: vectorized-filter-on-read (paper §5, Algorithm 1).
//!
//! A table is scanned as splits: one per flushed file (one row group each) and one per
//! virtual file of the write buffer. Each split is read and masked on its own, so a
//! query engine can run splits in parallel.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use arrow_buffer::{BooleanBuffer, Buffer};

use crate::error::CoreResult;
use crate::keep_rows::keep_rows_into;
use crate::schema::TableSchema;
use crate::storage::{DataFiles, PageBound};
use crate::table::{FlushedFile, TableFiles, TableRuntime};
use crate::types::Ts;
use crate::visibility::DeleteBitmap;
use crate::write_buffer::VirtualFile;

/// One independently readable part of a table.
#[derive(Clone)]
pub enum ScanSplit {
    /// A flushed Parquet file.
    File(FlushedFile),
    /// A write buffer's virtual file: in-memory blocks.
    Virtual(Arc<VirtualFile>),
}

/// The splits of a table, from one consistent view of its files.
pub fn table_splits(table: &TableRuntime) -> Vec<ScanSplit> {
    splits_of(&table.files())
}

/// The splits of a given view of a table's files.
pub fn splits_of(files: &TableFiles) -> Vec<ScanSplit> {
    files
        .flushed
        .iter()
        .cloned()
        .map(ScanSplit::File)
        .chain(files.virtual_files.iter().cloned().map(ScanSplit::Virtual))
        .collect()
}

/// Every visible row of `table` at `qts`, columns in `projection` order.
pub fn scan_table(
    table: &TableRuntime,
    store: &dyn DataFiles,
    qts: Ts,
    projection: Option<&[usize]>,
) -> CoreResult<Vec<RecordBatch>> {
    scan_table_timed(table, store, qts, projection, &mut |_, _| {})
}

/// [`scan_table`] that tells `per_split` how long each split took to read, for
/// benchmarks that show where a scan's time goes (files or the write buffer).
pub fn scan_table_timed(
    table: &TableRuntime,
    store: &dyn DataFiles,
    qts: Ts,
    projection: Option<&[usize]>,
    per_split: &mut dyn FnMut(&ScanSplit, std::time::Duration),
) -> CoreResult<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for split in table_splits(table) {
        let start = std::time::Instant::now();
        out.extend(read_split(&table.schema(), &split, store, qts, projection)?);
        per_split(&split, start.elapsed());
    }
    Ok(out)
}

/// Reads one split and keeps only the versions visible at `qts`.
pub fn read_split(
    schema: &TableSchema,
    split: &ScanSplit,
    store: &dyn DataFiles,
    qts: Ts,
    projection: Option<&[usize]>,
) -> CoreResult<Vec<RecordBatch>> {
    read_split_pruned(schema, split, store, qts, projection, &[]).map(|read| read.batches)
}

/// The visible rows of a split, and what reading them cost.
#[derive(Debug, Default)]
pub struct SplitRead {
    pub batches: Vec<RecordBatch>,
    /// Rows the page index let the store leave out.
    pub rows_skipped: u64,
    /// Bytes fetched from storage ([`crate::storage::DecodedRows::bytes_fetched`]).
    pub bytes_fetched: u64,
}

/// [`read_split`] that lets the store skip pages of a flushed file whose statistics
/// prove no row is within `bounds` (see [`DataFiles::read_file`]); the rows it
/// returns may still be outside them.
pub fn read_split_pruned(
    schema: &TableSchema,
    split: &ScanSplit,
    store: &dyn DataFiles,
    qts: Ts,
    projection: Option<&[usize]>,
    bounds: &[PageBound],
) -> CoreResult<SplitRead> {
    let all: Vec<usize>;
    let projection = match projection {
        Some(p) => p,
        None => {
            all = (0..schema.column_count()).collect();
            &all
        }
    };
    let create_ts = schema.create_ts_index();
    match split {
        ScanSplit::File(file) => {
            let meta = &file.meta;
            if meta.row_count == 0 || qts < meta.min_create_ts {
                return Ok(SplitRead::default()); // Algorithm 1, lines 3-4
            }
            let filter_ts = qts < meta.max_create_ts;
            let mut columns: Vec<usize> = projection.to_vec();
            if filter_ts {
                columns.push(create_ts);
            }
            columns.sort_unstable();
            columns.dedup();
            let deleted = file.visibility.bitmap_at(qts, meta.row_count as usize);
            let any_deleted = deleted.iter().any(|&word| word != 0);
            // Measured on `retina bench scan` (1M rows, 1% scattered deletes): skipping
            // deleted rows through a Parquet RowSelection cost 1.35x a clean scan,
            // decoding everything and then keeping the visible rows ([`keep_rows_into`])
            // 1.10-1.13x. So a store that can leaves the deleted rows out as it decodes
            // (`read_file_dropping`: 1.04x, stop 44); otherwise the mask is applied here.
            let decoded = match any_deleted {
                true => store.read_file_dropping(schema, meta, &columns, bounds, &deleted)?,
                false => store.read_file(schema, meta, &columns, bounds)?,
            };
            let deleted = match (&decoded.selected, any_deleted && !decoded.dropped_left_out) {
                (_, false) => None,
                (None, true) => Some(deleted),
                (Some(selected), true) => Some(deleted_among(&deleted, selected)),
            };
            let output: Vec<usize> = projection
                .iter()
                .map(|c| columns.binary_search(c).expect("projection columns are read"))
                .collect();
            // Skipped pages leave a subsequence of the rows: `_create_ts` still never
            // decreases, so the cut below stays a prefix cut.
            let ts_column = filter_ts.then(|| columns.binary_search(&create_ts).expect("read above"));
            Ok(SplitRead {
                batches: mask_batches(&decoded.batches, deleted.as_deref(), ts_column, &output, qts)?,
                rows_skipped: decoded.skipped_rows(),
                bytes_fetched: decoded.bytes_fetched,
            })
        }
        ScanSplit::Virtual(file) => {
            let batches = VirtualRows::new(schema, file, qts, projection.to_vec()).collect::<CoreResult<_>>()?;
            Ok(SplitRead { batches, ..SplitRead::default() })
        }
    }
}

/// The visible rows of a write buffer's virtual file, masked one block at a time as
/// they are pulled: a query that consumes each block as it comes never holds a copy
/// of the whole split (a write buffer holds up to a file's rows per shard). On
/// `retina bench scan`'s query (1% stale versions) the time is the same either way
/// within the noise (5 interleaved pairs: ratio medians 0.974 before, 1.017 after).
pub struct VirtualRows {
    /// The reader's schema, when some block was stored with other columns.
    conform_to: Option<TableSchema>,
    blocks: Arc<Vec<RecordBatch>>,
    next_block: usize,
    mask: RowMask,
    ready: std::collections::VecDeque<RecordBatch>,
    /// Reused for each block's output, which `keep_rows_into` appends to a `Vec`.
    scratch: Vec<RecordBatch>,
}

impl VirtualRows {
    /// The rows of `file` visible at `qts`, columns in `projection` order.
    pub fn new(schema: &TableSchema, file: &VirtualFile, qts: Ts, projection: Vec<usize>) -> Self {
        let blocks = file.blocks();
        let rows: usize = blocks.iter().map(RecordBatch::num_rows).sum();
        let deleted = file.visibility().bitmap_at(qts, rows);
        let create_ts = schema.create_ts_index();
        // Blocks written before a column was added (or after, for a reader that
        // started before) are conformed to the reader's schema.
        let conform_to = blocks.iter().any(|b| b.num_columns() != create_ts + 1).then(|| schema.clone());
        Self {
            conform_to,
            blocks,
            next_block: 0,
            // In-memory blocks hold rows of transactions above the snapshot too.
            mask: RowMask::new(Some(&deleted), Some(create_ts), projection, qts),
            ready: Default::default(),
            scratch: Vec::new(),
        }
    }

    fn mask_next_block(&mut self) -> CoreResult<()> {
        let Some(block) = self.blocks.get(self.next_block) else { return Ok(()) };
        self.next_block += 1;
        let conformed;
        let block = match &self.conform_to {
            Some(schema) => {
                conformed = crate::schema_evolution::conform_batch(schema, block)?;
                &conformed
            }
            None => block,
        };
        if !self.mask.keep_visible(block, &mut self.scratch)? {
            self.next_block = self.blocks.len(); // later blocks are newer still
        }
        self.ready.extend(self.scratch.drain(..));
        Ok(())
    }
}

impl Iterator for VirtualRows {
    type Item = CoreResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.ready.is_empty() && self.next_block < self.blocks.len() {
            if let Err(error) = self.mask_next_block() {
                self.next_block = self.blocks.len();
                return Some(Err(error));
            }
        }
        self.ready.pop_front().map(Ok)
    }
}

/// The rows of consecutive batches of one row group created at or before `ts`: a
/// prefix, because `_create_ts` never decreases in row order.
pub(crate) fn created_at_or_before(batches: &[RecordBatch], column: usize, ts: Ts) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for batch in batches {
        let cut = created_prefix_len(batch, column, ts);
        if cut == 0 && batch.num_rows() > 0 {
            break;
        }
        out.push(batch.slice(0, cut));
        if cut < batch.num_rows() {
            break;
        }
    }
    out
}

/// Rows at the start of `batch` whose `_create_ts` (column `column`) is at most `ts`.
fn created_prefix_len(batch: &RecordBatch, column: usize, ts: Ts) -> usize {
    let created = batch.column(column).as_primitive::<Int64Type>().values();
    debug_assert!(created.windows(2).all(|w| w[0] <= w[1]), "_create_ts must not decrease in a row group");
    created.partition_point(|&created| created <= ts.0 as i64)
}

/// The bits of `deleted` (one per row of a file) for the rows `selected` keeps, in
/// their order: the delete bitmap of a read that left pages out.
fn deleted_among(deleted: &DeleteBitmap, selected: &[bool]) -> DeleteBitmap {
    let kept = selected.iter().filter(|&&keep| keep).count();
    let mut out = vec![0u64; kept.div_ceil(64)];
    for (at, (row, _)) in selected.iter().enumerate().filter(|(_, &keep)| keep).enumerate() {
        if deleted.get(row / 64).is_some_and(|word| word >> (row % 64) & 1 == 1) {
            out[at / 64] |= 1 << (at % 64);
        }
    }
    out
}

/// Leaves out the rows whose bit is set in `deleted` from consecutive batches of one
/// row group.
pub(crate) fn drop_deleted_rows(batches: &[RecordBatch], deleted: &[u64]) -> CoreResult<Vec<RecordBatch>> {
    let all: Vec<usize> = match batches.first() {
        Some(batch) => (0..batch.num_columns()).collect(),
        None => return Ok(Vec::new()),
    };
    mask_batches(batches, Some(deleted), None, &all, Ts::MAX)
}

/// Applies the visibility mask to consecutive batches of one row group: a row is kept
/// when it is not deleted at `qts` and (if `ts_column` is given) its `_create_ts` is
/// at or below `qts`. Output has the columns `output` of each batch.
fn mask_batches(
    batches: &[RecordBatch],
    deleted: Option<&[u64]>,
    ts_column: Option<usize>,
    output: &[usize],
    qts: Ts,
) -> CoreResult<Vec<RecordBatch>> {
    let mut mask = RowMask::new(deleted, ts_column, output.to_vec(), qts);
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        if !mask.keep_visible(batch, &mut out)? {
            break;
        }
    }
    Ok(out)
}

/// The visibility mask of one row group, applied to its batches in row order.
///
/// Relies on the row-group invariant that `_create_ts` never decreases in row order
/// (a shard appends in ts order), so the create-ts filter is a prefix cut found by
/// binary search, not a per-row comparison.
struct RowMask {
    deleted: Option<Buffer>,
    ts_column: Option<usize>,
    output: Vec<usize>,
    qts: Ts,
    /// Row-group position of the next batch's first row.
    start: usize,
}

impl RowMask {
    fn new(deleted: Option<&[u64]>, ts_column: Option<usize>, output: Vec<usize>, qts: Ts) -> Self {
        let deleted = deleted.map(|words| Buffer::from_vec(words.iter().map(|w| w.to_le()).collect::<Vec<u64>>()));
        Self { deleted, ts_column, output, qts, start: 0 }
    }

    /// Appends the visible rows of the row group's next `batch` to `out`; false once
    /// the rows are past the snapshot, when later batches are newer still.
    fn keep_visible(&mut self, batch: &RecordBatch, out: &mut Vec<RecordBatch>) -> CoreResult<bool> {
        let len = batch.num_rows();
        let offset = self.start;
        self.start += len;
        if len == 0 {
            return Ok(true);
        }
        let visible_len = match self.ts_column {
            Some(column) => created_prefix_len(batch, column, self.qts),
            None => len,
        };
        if visible_len == 0 {
            return Ok(false);
        }
        let projected = batch.project(&self.output)?.slice(0, visible_len);
        let deleted_here = self.deleted.as_ref().map(|buffer| BooleanBuffer::new(buffer.clone(), offset, visible_len));
        match deleted_here {
            Some(deleted_here) if deleted_here.count_set_bits() > 0 => {
                keep_rows_into(&projected, &!&deleted_here, out)?;
            }
            _ => out.push(projected),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn batch(ids: Vec<i64>, created: Vec<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("_create_ts", DataType::Int64, false),
        ]));
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(names)), Arc::new(Int64Array::from(created))],
        )
        .expect("batch")
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
    }

    #[test]
    fn mask_applies_deletes_across_batch_boundaries_and_create_ts() {
        let batches = vec![batch(vec![0, 1, 2], vec![1, 1, 2]), batch(vec![3, 4, 5], vec![3, 4, 5])];
        let mut deleted = vec![0u64; 1];
        deleted[0] |= 1 << 1; // row 1
        deleted[0] |= 1 << 3; // row 3, first of the second batch
        let out = mask_batches(&batches, Some(deleted.as_slice()), Some(2), &[0, 1], Ts(4)).expect("mask");
        assert_eq!(ids(&out), vec![0, 2, 4]);
        assert_eq!(out[0].num_columns(), 2, "_create_ts is not in the output");
        let without_ts = mask_batches(&batches, Some(deleted.as_slice()), None, &[0], Ts(4)).expect("mask");
        assert_eq!(ids(&without_ts), vec![0, 2, 4, 5]);
        let nothing_deleted = mask_batches(&batches, None, None, &[1, 0], Ts(9)).expect("mask");
        let dropped = drop_deleted_rows(&batches, &deleted).expect("drop");
        assert_eq!(ids(&dropped), vec![0, 2, 4, 5]);
        assert_eq!(dropped[0].num_columns(), 3);
        assert_eq!(nothing_deleted[0].schema().field(0).name(), "name", "projection order is kept");
    }

    #[test]
    fn deleted_bits_follow_the_rows_a_pruned_read_kept() {
        // 70 rows, rows 3 and 66 deleted; the read kept rows 2..5 and 64..70.
        let mut deleted = vec![0u64; 2];
        deleted[0] |= 1 << 3;
        deleted[1] |= 1 << 2;
        let selected: Vec<bool> = (0..70).map(|row| (2..5).contains(&row) || row >= 64).collect();
        let aligned = deleted_among(&deleted, &selected);
        // kept rows: 2, 3, 4, 64, 65, 66, ...: row 3 is at 1, row 66 at 5.
        assert_eq!(aligned, vec![(1 << 1) | (1 << 5)]);
    }
}
