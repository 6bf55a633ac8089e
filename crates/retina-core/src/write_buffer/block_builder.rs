//! Column builders for the rows of a block that are not yet published.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder,
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, Time64MicrosecondBuilder, Time64NanosecondBuilder,
    TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef, TimeUnit};

use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::types::Ts;
use crate::value::Value;

/// One typed Arrow builder per column.
enum ColumnBuilder {
    Boolean(BooleanBuilder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Utf8(StringBuilder),
    Binary(BinaryBuilder),
    Date32(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    TimestampNanos(TimestampNanosecondBuilder),
    Time64Micros(Time64MicrosecondBuilder),
    Time64Nanos(Time64NanosecondBuilder),
    Decimal128(Decimal128Builder),
}

impl ColumnBuilder {
    /// A builder for `capacity` values, and `bytes` bytes of them for a variable-width type.
    fn new(data_type: &DataType, capacity: usize, bytes: usize) -> Self {
        match data_type {
            DataType::Boolean => Self::Boolean(BooleanBuilder::with_capacity(capacity)),
            DataType::Int16 => Self::Int16(Int16Builder::with_capacity(capacity)),
            DataType::Int32 => Self::Int32(Int32Builder::with_capacity(capacity)),
            DataType::Int64 => Self::Int64(Int64Builder::with_capacity(capacity)),
            DataType::Float32 => Self::Float32(Float32Builder::with_capacity(capacity)),
            DataType::Float64 => Self::Float64(Float64Builder::with_capacity(capacity)),
            DataType::Utf8 => Self::Utf8(StringBuilder::with_capacity(capacity, bytes)),
            DataType::Binary => Self::Binary(BinaryBuilder::with_capacity(capacity, bytes)),
            DataType::Date32 => Self::Date32(Date32Builder::with_capacity(capacity)),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Self::Timestamp(TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone_opt(tz.clone()))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                Self::TimestampNanos(TimestampNanosecondBuilder::with_capacity(capacity).with_timezone_opt(tz.clone()))
            }
            DataType::Time64(TimeUnit::Microsecond) => Self::Time64Micros(Time64MicrosecondBuilder::with_capacity(capacity)),
            DataType::Time64(TimeUnit::Nanosecond) => Self::Time64Nanos(Time64NanosecondBuilder::with_capacity(capacity)),
            DataType::Decimal128(precision, scale) => Self::Decimal128(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(*precision, *scale)
                    .expect("TableSchema::new validated the decimal type"),
            ),
            other => unreachable!("TableSchema::new rejects unsupported type {other}"),
        }
    }

    /// Appends a value already checked by [`Value::fits`].
    fn append(&mut self, value: &Value) {
        match (self, value) {
            (Self::Boolean(b), Value::Boolean(v)) => b.append_value(*v),
            (Self::Int16(b), Value::Int16(v)) => b.append_value(*v),
            (Self::Int32(b), Value::Int32(v)) => b.append_value(*v),
            (Self::Int64(b), Value::Int64(v)) => b.append_value(*v),
            (Self::Float32(b), Value::Float32(v)) => b.append_value(*v),
            (Self::Float64(b), Value::Float64(v)) => b.append_value(*v),
            (Self::Utf8(b), Value::Utf8(v)) => b.append_value(v),
            (Self::Binary(b), Value::Binary(v)) => b.append_value(v),
            (Self::Date32(b), Value::Date32(v)) => b.append_value(*v),
            (Self::Timestamp(b), Value::TimestampMicros(v)) => b.append_value(*v),
            (Self::Decimal128(b), Value::Decimal128(v)) => b.append_value(*v),
            (Self::TimestampNanos(b), Value::TimestampNanos(v)) => b.append_value(*v),
            (Self::Time64Micros(b), Value::Time64Micros(v)) => b.append_value(*v),
            (Self::Time64Nanos(b), Value::Time64Nanos(v)) => b.append_value(*v),
            (Self::TimestampNanos(b), Value::Null) => b.append_null(),
            (Self::Time64Micros(b), Value::Null) => b.append_null(),
            (Self::Time64Nanos(b), Value::Null) => b.append_null(),
            (Self::Boolean(b), Value::Null) => b.append_null(),
            (Self::Int16(b), Value::Null) => b.append_null(),
            (Self::Int32(b), Value::Null) => b.append_null(),
            (Self::Int64(b), Value::Null) => b.append_null(),
            (Self::Float32(b), Value::Null) => b.append_null(),
            (Self::Float64(b), Value::Null) => b.append_null(),
            (Self::Utf8(b), Value::Null) => b.append_null(),
            (Self::Binary(b), Value::Null) => b.append_null(),
            (Self::Date32(b), Value::Null) => b.append_null(),
            (Self::Timestamp(b), Value::Null) => b.append_null(),
            (Self::Decimal128(b), Value::Null) => b.append_null(),
            _ => unreachable!("values are type-checked before they are appended"),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Boolean(b) => Arc::new(b.finish()),
            Self::Int16(b) => Arc::new(b.finish()),
            Self::Int32(b) => Arc::new(b.finish()),
            Self::Int64(b) => Arc::new(b.finish()),
            Self::Float32(b) => Arc::new(b.finish()),
            Self::Float64(b) => Arc::new(b.finish()),
            Self::Utf8(b) => Arc::new(b.finish()),
            Self::Binary(b) => Arc::new(b.finish()),
            Self::Date32(b) => Arc::new(b.finish()),
            Self::Timestamp(b) => Arc::new(b.finish()),
            Self::Decimal128(b) => Arc::new(b.finish()),
            Self::TimestampNanos(b) => Arc::new(b.finish()),
            Self::Time64Micros(b) => Arc::new(b.finish()),
            Self::Time64Nanos(b) => Arc::new(b.finish()),
        }
    }

}

/// Builds the rows appended since the last [`BlockBuilder::finish`] into one
/// `RecordBatch` of the table's stored schema (user columns + `_create_ts`).
///
/// Invariant: all column builders always have the same length, because a row is
/// validated completely before any of its values is appended.
pub struct BlockBuilder {
    schema: Arc<TableSchema>,
    stored_schema: SchemaRef,
    columns: Vec<ColumnBuilder>,
    create_ts: Int64Builder,
}

impl BlockBuilder {
    pub fn new(schema: Arc<TableSchema>, capacity: usize) -> Self {
        let columns = schema.columns().fields().iter().map(|f| ColumnBuilder::new(f.data_type(), capacity, capacity * 16)).collect();
        Self { stored_schema: schema.stored_schema(), schema, columns, create_ts: Int64Builder::with_capacity(capacity) }
    }

    /// Checks that `row` fits the table: arity, types, nullability.
    pub fn validate(&self, row: &[Value]) -> CoreResult<()> {
        validate_row(&self.schema, row)
    }

    /// Appends a validated row created at `ts`.
    pub fn append(&mut self, row: &[Value], ts: Ts) {
        debug_assert!(self.validate(row).is_ok());
        for (builder, value) in self.columns.iter_mut().zip(row) {
            builder.append(value);
        }
        self.create_ts.append_value(ts.0 as i64);
    }

    pub fn len(&self) -> usize {
        self.create_ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the appended rows as a batch and resets the builders, sized for a next
    /// piece like this one: an Arrow builder's `finish` leaves it without capacity,
    /// and growing from nothing by doubling copied the values again and faulted in
    /// fresh memory at every step (a sixth of a shard's time in `retina ingest` of
    /// 4-KB Debezium rows).
    pub fn finish(&mut self) -> RecordBatch {
        let rows = self.len();
        let mut arrays: Vec<ArrayRef> = self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        for ((builder, field), array) in self.columns.iter_mut().zip(self.schema.columns().fields()).zip(&arrays) {
            *builder = ColumnBuilder::new(field.data_type(), rows, value_bytes(array));
        }
        arrays.push(Arc::new(self.create_ts.finish()));
        self.create_ts = Int64Builder::with_capacity(rows);
        RecordBatch::try_new(Arc::clone(&self.stored_schema), arrays)
            .expect("builders produce the stored schema's types with equal lengths")
    }

}

/// The value bytes of a variable-width array (0 for other types).
fn value_bytes(array: &ArrayRef) -> usize {
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value_data().len(),
        DataType::Binary => array.as_binary::<i32>().value_data().len(),
        _ => 0,
    }
}

/// Checks arity, value types and nullability of a row image against a schema.
pub fn validate_row(schema: &TableSchema, row: &[Value]) -> CoreResult<()> {
    let fields = schema.columns().fields();
    if row.len() != fields.len() {
        return Err(CoreError::ArityMismatch {
            table: schema.name().to_string(),
            expected: fields.len(),
            actual: row.len(),
        });
    }
    for (field, value) in fields.iter().zip(row) {
        if matches!(value, Value::Null) {
            if !field.is_nullable() {
                return Err(CoreError::NullViolation {
                    table: schema.name().to_string(),
                    column: field.name().clone(),
                });
            }
        } else if !value.fits(field.data_type()) {
            return Err(CoreError::TypeMismatch {
                table: schema.name().to_string(),
                column: field.name().clone(),
                expected: field.data_type().to_string(),
                actual: value.type_name(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;

    fn schema() -> Arc<TableSchema> {
        Arc::new(
            TableSchema::from_columns(
                "s.t",
                &[
                    ("id", DataType::Int64, false),
                    ("name", DataType::Utf8, true),
                    ("price", DataType::Decimal128(12, 2), true),
                    ("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
                ],
                &["id"],
            )
            .expect("schema"),
        )
    }

    #[test]
    fn builds_stored_batches_and_resets() {
        let mut builder = BlockBuilder::new(schema(), 16);
        let row = vec![Value::Int64(1), Value::Utf8("a".into()), Value::Decimal128(1234), Value::TimestampMicros(5)];
        builder.validate(&row).expect("valid");
        builder.append(&row, Ts(7));
        builder.append(&[Value::Int64(2), Value::Null, Value::Null, Value::Null], Ts(8));
        builder.append(&[Value::Int64(3), Value::Utf8("".into()), Value::Null, Value::Null], Ts(9));
        let batch = builder.finish();
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.num_columns(), 5);
        let create_ts = batch.column(4).as_primitive::<Int64Type>();
        assert_eq!(create_ts.values().to_vec(), vec![7, 8, 9]);
        assert!(builder.is_empty());
    }

    #[test]
    fn stores_time_and_nanosecond_columns_and_reads_them_back() {
        let schema = Arc::new(
            TableSchema::from_columns(
                "s.times",
                &[
                    ("id", DataType::Int64, false),
                    ("t_us", DataType::Time64(TimeUnit::Microsecond), true),
                    ("t_ns", DataType::Time64(TimeUnit::Nanosecond), true),
                    ("at_ns", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
                ],
                &["id"],
            )
            .expect("schema"),
        );
        let mut builder = BlockBuilder::new(schema, 4);
        let row = vec![Value::Int64(1), Value::Time64Micros(3_600_000_000), Value::Time64Nanos(7), Value::TimestampNanos(-9)];
        builder.validate(&row).expect("valid");
        builder.append(&row, Ts(1));
        builder.append(&[Value::Int64(2), Value::Null, Value::Null, Value::Null], Ts(2));
        let batch = builder.finish();
        let rows = crate::rows::rows_of(&[batch.project(&[0, 1, 2, 3]).expect("projection")]).expect("rows");
        assert_eq!(rows[0], row);
        assert_eq!(rows[1], vec![Value::Int64(2), Value::Null, Value::Null, Value::Null]);
        let wrong = builder.validate(&[Value::Int64(3), Value::Time64Nanos(1), Value::Null, Value::Null]);
        assert!(wrong.expect_err("unit mismatch").to_string().contains("t_us"));
    }

    #[test]
    fn validation_names_table_and_column() {
        let builder = BlockBuilder::new(schema(), 4);
        let wrong_type = builder.validate(&[Value::Utf8("x".into()), Value::Null, Value::Null, Value::Null]);
        let message = wrong_type.expect_err("type mismatch").to_string();
        assert!(message.contains("s.t") && message.contains("column id"), "{message}");
        let null = builder.validate(&[Value::Null, Value::Null, Value::Null, Value::Null]);
        assert!(matches!(null, Err(CoreError::NullViolation { .. })));
        let arity = builder.validate(&[Value::Int64(1)]);
        assert!(matches!(arity, Err(CoreError::ArityMismatch { expected: 4, actual: 1, .. })));
    }
}
