//! Result values that PostgreSQL writes in text otherwise than pgwire does, written
//! here before the rows are encoded: floats ([`super::float_text`]), timestamps,
//! times and durations ([`super::time_text`]). A replaced column keeps its PostgreSQL type in the
//! row description; only its text changes. Columns sent in binary are left alone.

use std::sync::Arc;

use pgwire::api::results::{FieldFormat, FieldInfo};
use retina_query::datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use retina_query::datafusion::arrow::datatypes::{
    ArrowPrimitiveType, ArrowTemporalType, ArrowTimestampType, DataType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType, Field, Float32Type, Float64Type,
    Schema, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use retina_query::datafusion::arrow::error::ArrowError;
use retina_query::datafusion::arrow::record_batch::RecordBatch;

use super::float_text::{float4_text, float8_text};
use super::time_text::{duration_text, time_text, timestamp_text};

/// `batch` with the columns that go out in text and that PostgreSQL writes
/// otherwise replaced by their text.
pub fn as_postgres_text(batch: RecordBatch, fields: &[FieldInfo]) -> Result<RecordBatch, ArrowError> {
    let in_text = |index: usize| fields.get(index).is_some_and(|field| field.format() == FieldFormat::Text);
    let schema = batch.schema();
    if !schema.fields().iter().enumerate().any(|(index, field)| rewritten_type(field.data_type()) && in_text(index)) {
        return Ok(batch);
    }
    let mut new_fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (index, (field, column)) in schema.fields().iter().zip(batch.columns()).enumerate() {
        let extra_float_digits = fields.get(index).map_or(1, |field| field.format_options().extra_float_digits);
        match in_text(index).then(|| text_of(column, extra_float_digits)).flatten() {
            Some(text) => {
                new_fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, field.is_nullable())));
                columns.push(text);
            }
            None => {
                new_fields.push(Arc::clone(field));
                columns.push(Arc::clone(column));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(new_fields, schema.metadata().clone())), columns)
}

fn rewritten_type(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Float32 | DataType::Float64 | DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_) | DataType::Duration(_)
    )
}

/// `column` as PostgreSQL's text; `None` for a type pgwire writes as PostgreSQL
/// does, or a value out of chrono's range (left to pgwire).
fn text_of(column: &ArrayRef, extra_float_digits: i8) -> Option<ArrayRef> {
    match column.data_type() {
        DataType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            texts(values, |row| Some(float8_text(values.value(row), extra_float_digits)))
        }
        DataType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            texts(values, |row| Some(float4_text(values.value(row), extra_float_digits)))
        }
        DataType::Timestamp(unit, zone) => {
            let with_zone = zone.is_some();
            match unit {
                TimeUnit::Second => timestamps::<TimestampSecondType>(column, with_zone),
                TimeUnit::Millisecond => timestamps::<TimestampMillisecondType>(column, with_zone),
                TimeUnit::Microsecond => timestamps::<TimestampMicrosecondType>(column, with_zone),
                TimeUnit::Nanosecond => timestamps::<TimestampNanosecondType>(column, with_zone),
            }
        }
        DataType::Time32(TimeUnit::Second) => times::<Time32SecondType>(column),
        DataType::Time32(_) => times::<Time32MillisecondType>(column),
        DataType::Time64(TimeUnit::Nanosecond) => times::<Time64NanosecondType>(column),
        DataType::Time64(_) => times::<Time64MicrosecondType>(column),
        DataType::Duration(TimeUnit::Second) => durations::<DurationSecondType>(column, 1_000_000_000),
        DataType::Duration(TimeUnit::Millisecond) => durations::<DurationMillisecondType>(column, 1_000_000),
        DataType::Duration(TimeUnit::Microsecond) => durations::<DurationMicrosecondType>(column, 1_000),
        DataType::Duration(TimeUnit::Nanosecond) => durations::<DurationNanosecondType>(column, 1),
        _ => None,
    }
}

fn timestamps<T: ArrowTimestampType>(column: &ArrayRef, with_zone: bool) -> Option<ArrayRef> {
    let values = column.as_primitive::<T>();
    texts(values, |row| values.value_as_datetime(row).map(|datetime| timestamp_text(datetime, with_zone)))
}

fn times<T: ArrowTemporalType>(column: &ArrayRef) -> Option<ArrayRef>
where
    i64: From<T::Native>,
{
    let values = column.as_primitive::<T>();
    texts(values, |row| values.value_as_time(row).map(time_text))
}

fn durations<T: ArrowPrimitiveType<Native = i64>>(column: &ArrayRef, nanos_per_unit: i128) -> Option<ArrayRef> {
    let values = column.as_primitive::<T>();
    texts(values, |row| Some(duration_text(i128::from(values.value(row)) * nanos_per_unit)))
}

/// A text column of `text(row)` for each row that is not null; `None` if any is.
fn texts(column: &dyn Array, text: impl Fn(usize) -> Option<String>) -> Option<ArrayRef> {
    let mut builder = StringBuilder::with_capacity(column.len(), column.len() * 8);
    for row in 0..column.len() {
        match column.is_null(row) {
            true => builder.append_null(),
            false => builder.append_value(text(row)?),
        }
    }
    Some(Arc::new(builder.finish()))
}

#[cfg(test)]
mod tests {
    use retina_query::datafusion::arrow::array::{Float64Array, Int32Array, TimestampMicrosecondArray};

    use super::*;

    /// Only the columns sent in text change; a binary one keeps its values.
    #[test]
    fn only_columns_in_text_are_replaced() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("i", DataType::Int32, false),
            Field::new("b", DataType::Float64, false),
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Float64Array::from(vec![Some(2.0), None])),
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(Float64Array::from(vec![2.0, 3.0])),
                Arc::new(TimestampMicrosecondArray::from(vec![0, 1_500_000]).with_timezone("UTC")),
            ],
        )
        .expect("batch");
        let field = |format| FieldInfo::new("x".into(), None, None, pgwire::api::Type::FLOAT8, format);
        let fields = [field(FieldFormat::Text), field(FieldFormat::Text), field(FieldFormat::Binary), field(FieldFormat::Text)];
        let out = as_postgres_text(batch, &fields).expect("text");
        let text = out.column(0).as_string::<i32>();
        assert_eq!((text.value(0), text.is_null(1)), ("2", true));
        assert_eq!(out.column(1).data_type(), &DataType::Int32);
        assert_eq!(out.column(2).data_type(), &DataType::Float64);
        let times = out.column(3).as_string::<i32>();
        assert_eq!((times.value(0), times.value(1)), ("1970-01-01 00:00:00+00", "1970-01-01 00:00:01.5+00"));
    }
}
