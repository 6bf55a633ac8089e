//! Per-file column statistics (min, max, null count) for pruning splits.
//!
//! Files flushed or rewritten by this version have their statistics in the catalog
//! (`DataFileMeta::column_ranges`, recorded at write time; [`FileStatistics::recorded`]),
//! so they prune from the first query on and after restarts. For older files:
//! a flushed file is immutable and its Parquet footer
//! holds exactly these statistics, but neither the footer nor statistics in
//! `DataFileMeta` are reachable through `retina_core::storage::LakeStore` today (its
//! only read is a whole-column decode). Reading each footer would cost one more
//! object-store request per file and query. What costs nothing extra is to learn the
//! statistics from the decode a scan does anyway: [`crate::recording_store`] sees a
//! file's columns *before* the visibility mask, so the min/max it records cover every
//! stored version — a superset of what any snapshot can see, hence safe for all
//! snapshots, earlier and later. A file's statistics are learned the first time a
//! query reads a column of it, then reused until the file leaves the table (storage
//! GC writes new files under new ids). The catch is that a cold file is never
//! pruned. Recording them at flush in `DataFileMeta` would remove that and survive
//! restarts; the pruning here would read them unchanged.
//!
//! Kept out on purpose: floating-point columns (NaN and -0.0 order differently in
//! min/max kernels and in comparisons, so a range could wrongly exclude a row) and
//! strings longer than [`MAX_STRING_BYTES`] (memory: one entry per file and column).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use parking_lot::Mutex;
use retina_core::catalog::DataFileMeta;
use retina_core::column_ranges::RangeValue;
use retina_core::{FileId, TableId};

/// Longest string min/max kept, in bytes.
pub const MAX_STRING_BYTES: usize = 64;

/// One column of one file.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnStatistics {
    /// Smallest non-null value (a typed NULL when every value is NULL).
    pub min: ScalarValue,
    /// Largest non-null value (a typed NULL when every value is NULL).
    pub max: ScalarValue,
    pub null_count: u64,
}

/// The columns learned so far of one file. `None` for a column that was read but
/// has no usable statistics (so it is not computed again).
#[derive(Clone, Debug, Default)]
pub struct FileStatistics {
    /// The file these belong to, checked on every lookup: a file id never names two
    /// different contents, but the check costs nothing.
    path: String,
    row_count: u64,
    columns: HashMap<String, Option<ColumnStatistics>>,
}

impl FileStatistics {
    /// The statistics the catalog recorded when the file was written
    /// (`DataFileMeta::column_ranges`), typed by `schema`; `None` if it recorded none.
    pub fn recorded(file: &DataFileMeta, schema: &datafusion::arrow::datatypes::Schema) -> Option<Self> {
        if file.column_ranges.is_empty() {
            return None;
        }
        let columns = file
            .column_ranges
            .iter()
            .filter_map(|range| {
                let field = schema.field_with_name(&range.column).ok()?;
                let min = scalar_of(&range.min, field.data_type())?;
                let max = scalar_of(&range.max, field.data_type())?;
                Some((range.column.clone(), Some(ColumnStatistics { min, max, null_count: range.null_count })))
            })
            .collect();
        Some(Self { path: file.path.clone(), row_count: file.row_count, columns })
    }

    /// The statistics of column `name`, if learned and usable as `data_type`.
    pub fn column(&self, name: &str, data_type: &DataType) -> Option<&ColumnStatistics> {
        self.columns.get(name)?.as_ref().filter(|stats| &stats.min.data_type() == data_type)
    }

    pub fn row_count(&self) -> u64 {
        self.row_count
    }
}

/// Learned statistics of every table a session reads, by table and file.
#[derive(Debug, Default)]
pub struct SplitStatistics {
    tables: Mutex<HashMap<TableId, HashMap<FileId, Arc<FileStatistics>>>>,
}

impl SplitStatistics {
    pub fn new() -> Self {
        Self::default()
    }

    /// What is known of `file` now.
    pub fn file(&self, table: TableId, file: &DataFileMeta) -> Option<Arc<FileStatistics>> {
        let tables = self.tables.lock();
        let stats = tables.get(&table)?.get(&file.file_id)?;
        (stats.path == file.path && stats.row_count == file.row_count).then(|| Arc::clone(stats))
    }

    /// Whether some of `names` are not learned yet for `file`.
    pub fn lacks_any(&self, table: TableId, file: &DataFileMeta, names: &[&str]) -> bool {
        // Recorded at write time: nothing to learn (the same types are left out).
        if !file.column_ranges.is_empty() {
            return false;
        }
        match self.file(table, file) {
            Some(stats) => names.iter().any(|name| !stats.columns.contains_key(*name)),
            None => !names.is_empty(),
        }
    }

    /// Learns the columns of `batches`: every row of `file`, unmasked.
    pub fn record(&self, table: TableId, file: &DataFileMeta, batches: &[RecordBatch]) {
        let Some(first) = batches.first() else { return };
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows as u64 != file.row_count {
            return; // not the whole file: min/max would not cover it
        }
        let schema = first.schema();
        let learned: Vec<(String, Option<ColumnStatistics>)> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, field)| field.name() != retina_core::schema::CREATE_TS_COLUMN)
            .map(|(index, field)| {
                let arrays: Vec<ArrayRef> = batches.iter().map(|batch| Arc::clone(batch.column(index))).collect();
                (field.name().clone(), column_statistics(field.data_type(), &arrays))
            })
            .collect();
        let mut tables = self.tables.lock();
        let files = tables.entry(table).or_default();
        let entry = files.entry(file.file_id).or_default();
        if entry.path != file.path || entry.row_count != file.row_count {
            *entry = Arc::new(FileStatistics { path: file.path.clone(), row_count: file.row_count, columns: HashMap::new() });
        }
        Arc::make_mut(entry).columns.extend(learned);
    }

    /// Forgets the files of `table` that are not in `current` (merged away by
    /// storage GC), so the cache stays as large as the tables' file lists.
    pub fn retain_files(&self, table: TableId, current: &HashSet<FileId>) {
        if let Some(files) = self.tables.lock().get_mut(&table) {
            files.retain(|id, _| current.contains(id));
        }
    }

    /// Files with learned statistics, over all tables (for tests and figures).
    pub fn file_count(&self) -> usize {
        self.tables.lock().values().map(HashMap::len).sum()
    }
}

/// Min, max and null count of one column over `arrays`, or `None` when the type is
/// left out (see the module doc) or the kernels cannot order it.
fn column_statistics(data_type: &DataType, arrays: &[ArrayRef]) -> Option<ColumnStatistics> {
    if data_type.is_floating() || !(data_type.is_primitive() || is_supported_non_primitive(data_type)) {
        return None;
    }
    let mut min = MinAccumulator::try_new(data_type).ok()?;
    let mut max = MaxAccumulator::try_new(data_type).ok()?;
    // `update_batch` takes the argument columns of one call: one array at a time.
    for array in arrays {
        min.update_batch(std::slice::from_ref(array)).ok()?;
        max.update_batch(std::slice::from_ref(array)).ok()?;
    }
    let (min, max) = (min.evaluate().ok()?, max.evaluate().ok()?);
    let too_long = |value: &ScalarValue| match value {
        ScalarValue::Utf8(Some(text)) | ScalarValue::LargeUtf8(Some(text)) | ScalarValue::Utf8View(Some(text)) => {
            text.len() > MAX_STRING_BYTES
        }
        _ => false,
    };
    if too_long(&min) || too_long(&max) {
        return None;
    }
    let null_count = arrays.iter().map(|array| array.null_count() as u64).sum();
    Some(ColumnStatistics { min, max, null_count })
}

/// A recorded bound as a value of the column's type (`None` if they do not match).
fn scalar_of(value: &RangeValue, data_type: &DataType) -> Option<ScalarValue> {
    use datafusion::arrow::datatypes::TimeUnit;
    Some(match (value, data_type) {
        (RangeValue::Int(v), DataType::Int16) => ScalarValue::Int16(Some(i16::try_from(*v).ok()?)),
        (RangeValue::Int(v), DataType::Int32) => ScalarValue::Int32(Some(i32::try_from(*v).ok()?)),
        (RangeValue::Int(v), DataType::Int64) => ScalarValue::Int64(Some(*v)),
        (RangeValue::Int(v), DataType::Date32) => ScalarValue::Date32(Some(i32::try_from(*v).ok()?)),
        (RangeValue::Int(v), DataType::Time64(TimeUnit::Microsecond)) => ScalarValue::Time64Microsecond(Some(*v)),
        (RangeValue::Int(v), DataType::Time64(TimeUnit::Nanosecond)) => ScalarValue::Time64Nanosecond(Some(*v)),
        (RangeValue::Int(v), DataType::Timestamp(TimeUnit::Microsecond, zone)) => ScalarValue::TimestampMicrosecond(Some(*v), zone.clone()),
        (RangeValue::Int(v), DataType::Timestamp(TimeUnit::Nanosecond, zone)) => ScalarValue::TimestampNanosecond(Some(*v), zone.clone()),
        (RangeValue::Bool(v), DataType::Boolean) => ScalarValue::Boolean(Some(*v)),
        (RangeValue::Text(v), DataType::Utf8) => ScalarValue::Utf8(Some(v.clone())),
        _ => return None,
    })
}

fn is_supported_non_primitive(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Boolean | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Float64Array, Int32Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use retina_core::{RowId, Ts};

    use super::*;

    fn meta(file_id: u64, rows: u64) -> DataFileMeta {
        DataFileMeta {
            file_id: FileId(file_id),
            path: format!("t/{file_id}.parquet"),
            row_count: rows,
            first_row_id: RowId(0),
            min_create_ts: Ts(1),
            max_create_ts: Ts(2),
            size_bytes: 0,
            replaces: Vec::new(),
            column_ranges: Vec::new(),
        }
    }

    fn batch(qty: Vec<Option<i32>>, name: Vec<&str>, weight: Vec<f64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("qty", DataType::Int32, true),
            Field::new("name", DataType::Utf8, false),
            Field::new("weight", DataType::Float64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Int32Array::from(qty)), Arc::new(StringArray::from(name)), Arc::new(Float64Array::from(weight))],
        )
        .expect("batch")
    }

    #[test]
    fn min_max_and_nulls_over_all_batches_of_a_file() {
        let stats = SplitStatistics::new();
        let table = TableId(1);
        let file = meta(7, 4);
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        stats.record(table, &file, &[batch(vec![Some(5), None], vec!["b", "a"], vec![1.0, 2.0]), batch(vec![Some(-3), Some(9)], vec!["c", &long], vec![0.5, f64::NAN])]);
        let learned = stats.file(table, &file).expect("learned");
        let qty = learned.column("qty", &DataType::Int32).expect("qty");
        assert_eq!((&qty.min, &qty.max, qty.null_count), (&ScalarValue::Int32(Some(-3)), &ScalarValue::Int32(Some(9)), 1));
        assert!(learned.column("qty", &DataType::Int64).is_none(), "another type is not comparable");
        assert!(learned.column("name", &DataType::Utf8).is_none(), "long strings are left out");
        assert!(learned.column("weight", &DataType::Float64).is_none(), "floats are left out");
        assert!(!stats.lacks_any(table, &file, &["qty", "name", "weight"]), "left-out columns are not recomputed");
        assert!(stats.lacks_any(table, &file, &["other"]));
    }

    #[test]
    fn partial_reads_and_other_files_under_the_same_id_are_not_trusted() {
        let stats = SplitStatistics::new();
        let table = TableId(1);
        stats.record(table, &meta(1, 3), &[batch(vec![Some(1), Some(2)], vec!["a", "b"], vec![1.0, 1.0])]);
        assert!(stats.file(table, &meta(1, 3)).is_none(), "2 of 3 rows: nothing learned");
        stats.record(table, &meta(1, 2), &[batch(vec![Some(1), Some(2)], vec!["a", "b"], vec![1.0, 1.0])]);
        assert!(stats.file(table, &meta(1, 2)).is_some());
        assert!(stats.file(table, &meta(1, 5)).is_none(), "same id, different file");
        stats.retain_files(table, &HashSet::from([FileId(2)]));
        assert_eq!(stats.file_count(), 0, "files no longer in the table are forgotten");
    }
}
