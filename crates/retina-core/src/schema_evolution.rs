//! Reading data stored under another version of its table's schema.
//!
//! A table's schema only ever grows by nullable columns appended at the end
//! ([`crate::Engine::add_column`]). Data already written keeps its layout: Parquet
//! files, checkpoint segments and write-buffer blocks hold the user columns that
//! existed when they were written, then `_create_ts` last. Readers conform it to the
//! schema they read with: columns the data lacks read as NULL; columns it has beyond
//! that schema (a reader that started before a column was added) are left out.
//! Nothing is rewritten when a column is added.

use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch};
use arrow_schema::Schema;

use crate::error::CoreResult;
use crate::schema::TableSchema;

/// Where each requested column comes from in data of one stored width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredColumns {
    /// Stored column indexes to read, ascending (a Parquet projection returns them
    /// in file order).
    physical: Vec<usize>,
    /// Per requested column: its position among `physical`, or `None` for NULLs.
    sources: Vec<Option<usize>>,
}

impl StoredColumns {
    /// `logical` indexes `table`'s stored layout (user columns, then `_create_ts`);
    /// the data holds `stored_width` columns (its user columns, then `_create_ts`).
    pub fn plan(table: &TableSchema, stored_width: usize, logical: &[usize]) -> Self {
        let stored_user_columns = stored_width.saturating_sub(1);
        let create_ts = table.create_ts_index();
        let physical_of = |c: usize| -> Option<usize> {
            if c == create_ts {
                Some(stored_user_columns)
            } else if c < stored_user_columns {
                Some(c)
            } else {
                None
            }
        };
        let mut physical: Vec<usize> = logical.iter().filter_map(|&c| physical_of(c)).collect();
        physical.sort_unstable();
        physical.dedup();
        let sources = logical
            .iter()
            .map(|&c| physical_of(c).map(|p| physical.binary_search(&p).expect("collected above")))
            .collect();
        Self { physical, sources }
    }

    /// The stored columns to read.
    pub fn physical(&self) -> &[usize] {
        &self.physical
    }

    /// Whether the read batch already is the requested one.
    pub fn is_identity(&self) -> bool {
        self.sources.len() == self.physical.len() && self.sources.iter().enumerate().all(|(i, s)| *s == Some(i))
    }

    /// The requested columns, in request order, from a batch of the `physical` columns.
    pub fn assemble(&self, table: &TableSchema, logical: &[usize], read: &RecordBatch) -> CoreResult<RecordBatch> {
        let stored = table.stored_schema();
        let rows = read.num_rows();
        let mut fields = Vec::with_capacity(logical.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(logical.len());
        for (&column, source) in logical.iter().zip(&self.sources) {
            let field = stored.field(column);
            arrays.push(match source {
                Some(position) => Arc::clone(read.column(*position)),
                None => new_null_array(field.data_type(), rows),
            });
            fields.push(field.clone());
        }
        Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
    }
}

/// `batch` (a full stored row image of any schema version) in `table`'s full stored
/// layout. Cheap when it already matches: the same batch comes back.
pub fn conform_batch(table: &TableSchema, batch: &RecordBatch) -> CoreResult<RecordBatch> {
    let width = table.create_ts_index() + 1;
    if batch.num_columns() == width {
        return Ok(batch.clone());
    }
    let all: Vec<usize> = (0..width).collect();
    let plan = StoredColumns::plan(table, batch.num_columns(), &all);
    let read = batch.project(plan.physical())?;
    plan.assemble(table, &all, &read)
}

/// [`conform_batch`] over several batches.
pub fn conform_batches(table: &TableSchema, batches: &[RecordBatch]) -> CoreResult<Vec<RecordBatch>> {
    batches.iter().map(|batch| conform_batch(table, batch)).collect()
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::DataType;

    use super::*;

    fn schema(columns: &[(&str, DataType, bool)]) -> TableSchema {
        TableSchema::from_columns("t", columns, &["id"]).expect("schema")
    }

    fn old_batch() -> RecordBatch {
        let old = schema(&[("id", DataType::Int64, false)]);
        RecordBatch::try_new(old.stored_schema(), vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(Int64Array::from(vec![10, 11]))])
            .expect("batch")
    }

    #[test]
    fn narrower_data_reads_nulls_for_added_columns() {
        let new = schema(&[("id", DataType::Int64, false), ("note", DataType::Utf8, true)]);
        let widened = conform_batch(&new, &old_batch()).expect("conform");
        assert_eq!(widened.schema(), new.stored_schema());
        assert_eq!(widened.column(1).null_count(), 2, "the added column is NULL");
        assert_eq!(widened.column(2).as_primitive::<Int64Type>().values().to_vec(), vec![10, 11], "_create_ts kept");

        // A projection of the added column and `_create_ts` only.
        let plan = StoredColumns::plan(&new, 2, &[1, 2]);
        assert_eq!(plan.physical(), &[1]);
        let read = old_batch().project(plan.physical()).expect("project");
        let out = plan.assemble(&new, &[1, 2], &read).expect("assemble");
        assert_eq!(out.column(0).null_count(), 2);
        assert_eq!(out.column(1).as_primitive::<Int64Type>().value(0), 10);
    }

    #[test]
    fn wider_data_under_an_older_schema_drops_the_new_columns() {
        let new = schema(&[("id", DataType::Int64, false), ("note", DataType::Utf8, true)]);
        let wide = RecordBatch::try_new(
            new.stored_schema(),
            vec![Arc::new(Int64Array::from(vec![1])), Arc::new(StringArray::from(vec![Some("x")])), Arc::new(Int64Array::from(vec![5]))],
        )
        .expect("batch");
        let old = schema(&[("id", DataType::Int64, false)]);
        let narrowed = conform_batch(&old, &wide).expect("conform");
        assert_eq!(narrowed.schema(), old.stored_schema());
        assert_eq!(narrowed.column(1).as_primitive::<Int64Type>().value(0), 5, "_create_ts is the data's last column");
        assert!(StoredColumns::plan(&new, 3, &[0, 1, 2]).is_identity());
        assert!(!StoredColumns::plan(&new, 2, &[0, 1, 2]).is_identity());
    }
}
