//! The smallest and largest value of each column of a data file, recorded in the
//! catalog when the file is written, so a query can skip files whose range cannot
//! match its predicate without reading them (and after a restart, too).
//!
//! The range covers every row version in the file, deleted ones included: a
//! superset of what any snapshot sees, so it is safe for all of them. Recorded for
//! the types whose order is plain: integers, dates, times and timestamps (as their
//! i64 encoding), booleans, and strings up to [`MAX_TEXT_BYTES`]. Floats are left out
//! (NaN and -0.0 order differently in min/max and in comparisons), and so are
//! decimals (their i128 does not fit the catalog's JSON numbers).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Int16Type, Int32Type, Int64Type, Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::schema::TableSchema;

/// Longest string bound kept, in bytes (one entry per file and column).
pub const MAX_TEXT_BYTES: usize = 64;

/// A bound of a [`ColumnRange`], in the column's own encoding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RangeValue {
    /// Integers, and dates, times and timestamps as their i64 encoding.
    Int(i64),
    Bool(bool),
    Text(String),
}

/// Min, max and null count of one column over every row version of a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnRange {
    pub column: String,
    pub min: RangeValue,
    pub max: RangeValue,
    pub null_count: u64,
}

/// The ranges of the user columns of `batches` (in `schema`'s stored layout) that
/// have a usable type and at least one non-null value. Runs at every flush: no
/// allocation per value.
pub fn column_ranges(schema: &TableSchema, batches: &[RecordBatch]) -> Vec<ColumnRange> {
    let mut ranges = Vec::new();
    for (index, field) in schema.columns().fields().iter().enumerate() {
        let arrays: Vec<&ArrayRef> = batches.iter().filter(|b| index < b.num_columns()).map(|b| b.column(index)).collect();
        if let Some((min, max)) = range_of(&arrays, field.data_type()) {
            let null_count = arrays.iter().map(|array| array.null_count() as u64).sum();
            ranges.push(ColumnRange { column: field.name().clone(), min, max, null_count });
        }
    }
    ranges
}

/// Min and max of the non-null values, or `None` (no such value, a type left out, a
/// string too long).
fn range_of(arrays: &[&ArrayRef], data_type: &DataType) -> Option<(RangeValue, RangeValue)> {
    fn fold<T: Copy + Ord>(values: impl Iterator<Item = T>) -> Option<(T, T)> {
        values.fold(None, |range, v| Some(range.map_or((v, v), |(lo, hi): (T, T)| (lo.min(v), hi.max(v)))))
    }
    macro_rules! ints {
        ($type:ty) => {{
            let (lo, hi) = fold(arrays.iter().flat_map(|a| a.as_primitive::<$type>().iter().flatten().map(i64::from)))?;
            Some((RangeValue::Int(lo), RangeValue::Int(hi)))
        }};
    }
    match data_type {
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::Date32 => ints!(Date32Type),
        DataType::Time64(TimeUnit::Microsecond) => ints!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => ints!(Time64NanosecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => ints!(TimestampNanosecondType),
        DataType::Boolean => {
            let (lo, hi) = fold(arrays.iter().flat_map(|a| a.as_boolean().iter().flatten()))?;
            Some((RangeValue::Bool(lo), RangeValue::Bool(hi)))
        }
        DataType::Utf8 => {
            let (lo, hi) = fold(arrays.iter().flat_map(|a| a.as_string::<i32>().iter().flatten()))?;
            if lo.len() > MAX_TEXT_BYTES || hi.len() > MAX_TEXT_BYTES {
                return None;
            }
            Some((RangeValue::Text(lo.to_string()), RangeValue::Text(hi.to_string())))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Float64Array, Int32Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn ranges_of_ordered_types_only_and_over_all_batches() {
        let schema = TableSchema::from_columns(
            "t",
            &[("id", DataType::Int32, false), ("name", DataType::Utf8, true), ("w", DataType::Float64, true), ("empty", DataType::Int32, true)],
            &["id"],
        )
        .expect("schema");
        let batch = |ids: Vec<i32>, names: Vec<Option<&str>>| {
            let n = ids.len();
            RecordBatch::try_new(
                schema.stored_schema(),
                vec![
                    Arc::new(Int32Array::from(ids)),
                    Arc::new(StringArray::from(names)),
                    Arc::new(Float64Array::from(vec![1.0; n])),
                    Arc::new(Int32Array::from(vec![None; n])),
                    Arc::new(Int64Array::from(vec![1; n])),
                ],
            )
            .expect("batch")
        };
        let ranges = column_ranges(&schema, &[batch(vec![5, -2], vec![Some("m"), None]), batch(vec![9], vec![Some("b")])]);
        assert_eq!(
            ranges,
            vec![
                ColumnRange { column: "id".into(), min: RangeValue::Int(-2), max: RangeValue::Int(9), null_count: 0 },
                ColumnRange { column: "name".into(), min: RangeValue::Text("b".into()), max: RangeValue::Text("m".into()), null_count: 1 },
            ],
            "floats and all-NULL columns have no range"
        );
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let ranges = column_ranges(&schema, &[batch(vec![1], vec![Some(long.as_str())])]);
        assert!(ranges.iter().all(|r| r.column != "name"), "long strings are left out");
        let json = serde_json::to_string(&ranges[0]).expect("json");
        assert_eq!(serde_json::from_str::<ColumnRange>(&json).expect("back"), ranges[0]);
    }
}
