//! Data-file reads that updates keeping columns (PostgreSQL's unchanged TOAST
//! values) take their previous values from, held while a shard applies one batch.
//!
//! A store decodes a file's columns whole, so a bulk update of rows in data files
//! read a 64K-row file once per row. Held here, the rows of a batch that live in one
//! file share its read. Data files never change, so a read stays right while its
//! file id, columns and schema match.

use std::sync::Arc;

use arrow_array::RecordBatch;
use hashbrown::HashMap;

use crate::schema::TableSchema;
use crate::types::FileId;

/// How many bytes of decoded columns a shard holds at most, beyond the read it is
/// using: past it, the held reads are dropped before the next is kept. A 64K-row
/// file's 1-KB text column decodes to ~70 MB, so this holds a few files' worth: a
/// bulk update over a table's last few files reads each once per batch.
const HELD_BYTES_BUDGET: usize = 256 << 20;

struct KeptColumnsRead {
    columns: Vec<usize>,
    schema: Arc<TableSchema>,
    batches: Vec<RecordBatch>,
    bytes: usize,
}

/// Invariant: `bytes` is the sum of the held reads' sizes.
#[derive(Default)]
pub(crate) struct KeptColumnsReads {
    held: HashMap<FileId, KeptColumnsRead>,
    bytes: usize,
}

impl KeptColumnsReads {
    /// The held read of `columns` (sorted, distinct) of `file` under `schema`.
    pub(crate) fn get(&self, file: FileId, columns: &[usize], schema: &Arc<TableSchema>) -> Option<&[RecordBatch]> {
        let read = self.held.get(&file)?;
        (read.columns == columns && Arc::ptr_eq(&read.schema, schema)).then_some(read.batches.as_slice())
    }

    /// Holds a read (replacing another of the same file), dropping the others first
    /// when it would go past the budget.
    pub(crate) fn keep(&mut self, file: FileId, columns: Vec<usize>, schema: Arc<TableSchema>, batches: Vec<RecordBatch>) -> &[RecordBatch] {
        let bytes = batches.iter().map(slice_bytes).sum();
        if let Some(old) = self.held.remove(&file) {
            self.bytes -= old.bytes;
        }
        if self.bytes + bytes > HELD_BYTES_BUDGET {
            self.clear();
        }
        self.bytes += bytes;
        let read = self.held.entry(file).insert(KeptColumnsRead { columns, schema, batches, bytes }).into_mut();
        read.batches.as_slice()
    }

    /// Drops every held read (the batch is applied).
    pub(crate) fn clear(&mut self) {
        self.held.clear();
        self.bytes = 0;
    }

    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.bytes
    }
}

/// The bytes of a batch's own rows: a store may hand out slices of one decoded
/// buffer, each of which `get_array_memory_size` counts whole.
fn slice_bytes(batch: &RecordBatch) -> usize {
    batch.columns().iter().map(|column| column.to_data().get_slice_memory_size().unwrap_or(0)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::DataType;

    fn schema() -> Arc<TableSchema> {
        Arc::new(TableSchema::from_columns("s.t", &[("id", DataType::Int64, false)], &["id"]).expect("schema"))
    }

    fn batch(rows: usize) -> Vec<RecordBatch> {
        let column = Arc::new(Int64Array::from_iter_values(0..rows as i64)) as _;
        vec![RecordBatch::try_from_iter([("id", column)]).expect("batch")]
    }

    #[test]
    fn a_read_is_found_only_under_its_file_columns_and_schema() {
        let (schema, other) = (schema(), schema());
        let mut reads = KeptColumnsReads::default();
        reads.keep(FileId(1), vec![0, 2], Arc::clone(&schema), batch(10));
        assert!(reads.get(FileId(1), &[0, 2], &schema).is_some());
        assert!(reads.get(FileId(2), &[0, 2], &schema).is_none(), "another file");
        assert!(reads.get(FileId(1), &[0], &schema).is_none(), "other columns");
        assert!(reads.get(FileId(1), &[0, 2], &other).is_none(), "a schema that changed since");
        reads.keep(FileId(1), vec![0], Arc::clone(&schema), batch(10));
        assert!(reads.get(FileId(1), &[0], &schema).is_some() && reads.get(FileId(1), &[0, 2], &schema).is_none());
        assert_eq!(reads.held_bytes(), slice_bytes(&batch(10)[0]), "the replaced read is no longer counted");
        reads.clear();
        assert!(reads.get(FileId(1), &[0], &schema).is_none());
        assert_eq!(reads.held_bytes(), 0);
    }

    #[test]
    fn slices_of_one_buffer_count_their_own_rows() {
        let whole = batch(1_000).remove(0);
        let slices: Vec<RecordBatch> = (0..10).map(|i| whole.slice(i * 100, 100)).collect();
        let mut reads = KeptColumnsReads::default();
        reads.keep(FileId(1), vec![0], schema(), slices);
        assert_eq!(reads.held_bytes(), 8_000, "1,000 eight-byte values, not ten times the buffer");
    }

    #[test]
    fn reads_past_the_budget_drop_the_others_first() {
        let schema = schema();
        let mut reads = KeptColumnsReads::default();
        let rows = (HELD_BYTES_BUDGET / 8) * 2 / 5; // each read ~40% of the budget
        reads.keep(FileId(1), vec![0], Arc::clone(&schema), batch(rows));
        reads.keep(FileId(2), vec![0], Arc::clone(&schema), batch(rows));
        assert!(reads.get(FileId(1), &[0], &schema).is_some() && reads.get(FileId(2), &[0], &schema).is_some());
        reads.keep(FileId(3), vec![0], Arc::clone(&schema), batch(rows));
        assert!(reads.get(FileId(1), &[0], &schema).is_none() && reads.get(FileId(2), &[0], &schema).is_none());
        assert!(reads.get(FileId(3), &[0], &schema).is_some());
        assert!(reads.held_bytes() <= HELD_BYTES_BUDGET);
    }
}
