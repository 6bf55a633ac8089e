//! Per-file column statistics (min, max, null count) for pruning splits, as the
//! catalog recorded them when the file was written (`DataFileMeta::column_ranges`,
//! see `retina_core::column_ranges`): one source of statistics, present from the
//! first query on and after restarts. They cover every stored version of the file, a
//! superset of what any snapshot sees, so they are safe for all snapshots. Floats,
//! decimals and long strings are not recorded, so they never prune.

use std::collections::HashMap;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use retina_core::catalog::DataFileMeta;
use retina_core::column_ranges::RangeValue;

/// One column of one file.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnStatistics {
    /// Smallest non-null value.
    pub min: ScalarValue,
    /// Largest non-null value.
    pub max: ScalarValue,
    pub null_count: u64,
}

/// The recorded columns of one file.
#[derive(Clone, Debug, Default)]
pub struct FileStatistics {
    row_count: u64,
    columns: HashMap<String, ColumnStatistics>,
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
                Some((range.column.clone(), ColumnStatistics { min, max, null_count: range.null_count }))
            })
            .collect();
        Some(Self { row_count: file.row_count, columns })
    }

    /// The statistics of column `name`, if recorded and usable as `data_type`.
    pub fn column(&self, name: &str, data_type: &DataType) -> Option<&ColumnStatistics> {
        self.columns.get(name).filter(|stats| &stats.min.data_type() == data_type)
    }

    pub fn row_count(&self) -> u64 {
        self.row_count
    }
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

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{Field, Schema};
    use retina_core::column_ranges::ColumnRange;
    use retina_core::{FileId, RowId, Ts};

    use super::*;

    fn meta(ranges: Vec<ColumnRange>) -> DataFileMeta {
        DataFileMeta {
            file_id: FileId(7),
            path: "t/7.parquet".into(),
            row_count: 4,
            first_row_id: RowId(0),
            min_create_ts: Ts(1),
            max_create_ts: Ts(2),
            size_bytes: 0,
            replaces: Vec::new(),
            column_ranges: ranges,
        }
    }

    #[test]
    fn recorded_ranges_become_typed_statistics_and_mismatches_are_left_out() {
        let schema = Schema::new(vec![
            Field::new("qty", DataType::Int32, true),
            Field::new("name", DataType::Utf8, false),
            Field::new("big", DataType::Int16, false),
        ]);
        let range = |column: &str, min: RangeValue, max: RangeValue| ColumnRange { column: column.into(), min, max, null_count: 1 };
        let file = meta(vec![
            range("qty", RangeValue::Int(-3), RangeValue::Int(9)),
            range("name", RangeValue::Text("a".into()), RangeValue::Text("c".into())),
            range("big", RangeValue::Int(0), RangeValue::Int(1 << 20)),
            range("gone", RangeValue::Int(0), RangeValue::Int(1)),
        ]);
        let stats = FileStatistics::recorded(&file, &schema).expect("recorded");
        let qty = stats.column("qty", &DataType::Int32).expect("qty");
        assert_eq!((&qty.min, &qty.max, qty.null_count), (&ScalarValue::Int32(Some(-3)), &ScalarValue::Int32(Some(9)), 1));
        assert!(stats.column("qty", &DataType::Int64).is_none(), "another type is not comparable");
        assert_eq!(stats.column("name", &DataType::Utf8).map(|s| &s.max), Some(&ScalarValue::Utf8(Some("c".into()))));
        assert!(stats.column("big", &DataType::Int16).is_none(), "a bound outside the column's type is not trusted");
        assert!(stats.column("gone", &DataType::Int64).is_none(), "a column the schema no longer has");
        assert_eq!(stats.row_count(), 4);
        assert!(FileStatistics::recorded(&meta(Vec::new()), &schema).is_none(), "nothing recorded: nothing to prune with");
    }
}
