//! Converting Arrow batches back to row values (tests, model checks, small outputs).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};

use crate::error::{CoreError, CoreResult};
use crate::value::{Row, Value};

/// The value at `row` of `array`.
pub fn value_at(array: &dyn Array, row: usize) -> CoreResult<Value> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    Ok(match array.data_type() {
        DataType::Boolean => Value::Boolean(array.as_boolean().value(row)),
        DataType::Int16 => Value::Int16(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Value::Int32(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Value::Int64(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => Value::Float32(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Value::Float64(array.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => Value::Utf8(array.as_string::<i32>().value(row).into()),
        DataType::Binary => Value::Binary(array.as_binary::<i32>().value(row).to_vec()),
        DataType::Date32 => Value::Date32(array.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Value::TimestampMicros(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Decimal128(_, _) => Value::Decimal128(array.as_primitive::<Decimal128Type>().value(row)),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Value::TimestampNanos(array.as_primitive::<TimestampNanosecondType>().value(row))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            Value::Time64Micros(array.as_primitive::<Time64MicrosecondType>().value(row))
        }
        DataType::Time64(TimeUnit::Nanosecond) => Value::Time64Nanos(array.as_primitive::<Time64NanosecondType>().value(row)),
        other => {
            return Err(CoreError::Storage(format!("cannot convert a {other} column to row values")));
        }
    })
}

/// All rows of `batches`, in order.
pub fn rows_of(batches: &[RecordBatch]) -> CoreResult<Vec<Row>> {
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            rows.push(batch.columns().iter().map(|c| value_at(c.as_ref(), row)).collect::<CoreResult<Row>>()?);
        }
    }
    Ok(rows)
}
