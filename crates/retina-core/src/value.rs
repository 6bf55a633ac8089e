//! Row values as they arrive from a decoder, and the primary-key byte encoding.

use arrow_schema::{DataType, TimeUnit};
/// `Value::Utf8`'s payload, re-exported so callers can name it without depending on
/// `compact_str` themselves.
pub use compact_str::CompactString;

/// One column value of a row image. The variant must match the column's Arrow type
/// (checked when the row is appended to a write buffer).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    /// Inline up to 24 bytes. A decoded row is built on a decoding thread and dropped
    /// on a shard after its values are copied into the write buffer; with `String`
    /// each short text value was one allocation there and one cross-thread free here.
    Utf8(CompactString),
    Binary(Vec<u8>),
    /// Days since 1970-01-01.
    Date32(i32),
    /// Microseconds since the Unix epoch.
    TimestampMicros(i64),
    /// Unscaled value; the scale is the column's.
    Decimal128(i128),
    /// Microseconds since midnight (Debezium `Time` / `MicroTime`).
    Time64Micros(i64),
    /// Nanoseconds since midnight (Debezium `NanoTime`).
    Time64Nanos(i64),
    /// Nanoseconds since the Unix epoch (Debezium `NanoTimestamp`).
    TimestampNanos(i64),
}

/// A full row image in column order.
pub type Row = Vec<Value>;

impl Value {
    /// Whether this value can be stored in a column of `data_type`.
    pub fn fits(&self, data_type: &DataType) -> bool {
        matches!(
            (self, data_type),
            (Value::Null, _)
                | (Value::Boolean(_), DataType::Boolean)
                | (Value::Int16(_), DataType::Int16)
                | (Value::Int32(_), DataType::Int32)
                | (Value::Int64(_), DataType::Int64)
                | (Value::Float32(_), DataType::Float32)
                | (Value::Float64(_), DataType::Float64)
                | (Value::Utf8(_), DataType::Utf8)
                | (Value::Binary(_), DataType::Binary)
                | (Value::Date32(_), DataType::Date32)
                | (Value::TimestampMicros(_), DataType::Timestamp(TimeUnit::Microsecond, _))
                | (Value::TimestampNanos(_), DataType::Timestamp(TimeUnit::Nanosecond, _))
                | (Value::Time64Micros(_), DataType::Time64(TimeUnit::Microsecond))
                | (Value::Time64Nanos(_), DataType::Time64(TimeUnit::Nanosecond))
                | (Value::Decimal128(_), DataType::Decimal128(_, _))
        )
    }

    /// Short type name for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Int16(_) => "int16",
            Value::Int32(_) => "int32",
            Value::Int64(_) => "int64",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::Utf8(_) => "utf8",
            Value::Binary(_) => "binary",
            Value::Date32(_) => "date32",
            Value::TimestampMicros(_) => "timestamp",
            Value::Decimal128(_) => "decimal128",
            Value::Time64Micros(_) => "time64[us]",
            Value::Time64Nanos(_) => "time64[ns]",
            Value::TimestampNanos(_) => "timestamp[ns]",
        }
    }

    /// Appends a self-delimiting, type-tagged encoding of this value to `out`.
    /// Two keys are equal exactly when their encodings are equal.
    pub fn encode_key_part(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.push(0),
            Value::Boolean(v) => out.extend_from_slice(&[1, *v as u8]),
            Value::Int16(v) => {
                out.push(2);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Int32(v) => {
                out.push(3);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Int64(v) => {
                out.push(4);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Float32(v) => {
                out.push(5);
                out.extend_from_slice(&v.to_bits().to_be_bytes());
            }
            Value::Float64(v) => {
                out.push(6);
                out.extend_from_slice(&v.to_bits().to_be_bytes());
            }
            Value::Utf8(v) => {
                out.push(7);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v.as_bytes());
            }
            Value::Binary(v) => {
                out.push(8);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
            Value::Date32(v) => {
                out.push(9);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::TimestampMicros(v) => {
                out.push(10);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Decimal128(v) => {
                out.push(11);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Time64Micros(v) => {
                out.push(12);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::Time64Nanos(v) => {
                out.push(13);
                out.extend_from_slice(&v.to_be_bytes());
            }
            Value::TimestampNanos(v) => {
                out.push(14);
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
}

/// Encodes the primary key of a table from its key values, in key-column order.
pub fn encode_key<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
    // 24: four 32-bit key columns encode to 20 bytes, and growing costs a reallocation.
    let mut out = Vec::with_capacity(24);
    for value in values {
        value.encode_key_part(&mut out);
    }
    out
}

/// The values of an [`encode_key`] encoding; `None` when `bytes` is not one (cut short,
/// an unknown tag, text that is not UTF-8).
pub fn decode_key(mut bytes: &[u8]) -> Option<Vec<Value>> {
    fn fixed<const N: usize>(rest: &[u8]) -> Option<[u8; N]> {
        rest.get(..N)?.try_into().ok()
    }
    let mut values = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        let (value, used) = match tag {
            0 => (Value::Null, 0),
            1 => (Value::Boolean(*rest.first()? != 0), 1),
            2 => (Value::Int16(i16::from_be_bytes(fixed(rest)?)), 2),
            3 => (Value::Int32(i32::from_be_bytes(fixed(rest)?)), 4),
            4 => (Value::Int64(i64::from_be_bytes(fixed(rest)?)), 8),
            5 => (Value::Float32(f32::from_bits(u32::from_be_bytes(fixed(rest)?))), 4),
            6 => (Value::Float64(f64::from_bits(u64::from_be_bytes(fixed(rest)?))), 8),
            7 | 8 => {
                let length = u32::from_be_bytes(fixed(rest)?) as usize;
                let body = rest.get(4..4usize.checked_add(length)?)?;
                let value = match tag {
                    7 => Value::Utf8(std::str::from_utf8(body).ok()?.into()),
                    _ => Value::Binary(body.to_vec()),
                };
                (value, 4 + length)
            }
            9 => (Value::Date32(i32::from_be_bytes(fixed(rest)?)), 4),
            10 => (Value::TimestampMicros(i64::from_be_bytes(fixed(rest)?)), 8),
            11 => (Value::Decimal128(i128::from_be_bytes(fixed(rest)?)), 16),
            12 => (Value::Time64Micros(i64::from_be_bytes(fixed(rest)?)), 8),
            13 => (Value::Time64Nanos(i64::from_be_bytes(fixed(rest)?)), 8),
            14 => (Value::TimestampNanos(i64::from_be_bytes(fixed(rest)?)), 8),
            _ => return None,
        };
        values.push(value);
        bytes = &rest[used..];
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_key_decodes_back() {
        let key = vec![
            Value::Null,
            Value::Boolean(true),
            Value::Int16(-2),
            Value::Int32(-4),
            Value::Int64(9),
            Value::Float32(1.5),
            Value::Float64(-0.25),
            Value::Utf8("a b".into()),
            Value::Binary(vec![0, 255]),
            Value::Date32(19_000),
            Value::TimestampMicros(-1),
            Value::Decimal128(-12),
            Value::Time64Micros(5),
            Value::Time64Nanos(6),
            Value::TimestampNanos(7),
        ];
        assert_eq!(decode_key(&encode_key(&key)), Some(key));
        assert_eq!(decode_key(&[3, 0]), None, "cut short");
        assert_eq!(decode_key(&[7, 0xff, 0xff, 0xff, 0xff]), None, "a length past the end");
        assert_eq!(decode_key(&[99]), None, "an unknown tag");
    }

    #[test]
    fn key_encoding_is_injective_across_boundaries() {
        let a = encode_key(&[Value::Utf8("ab".into()), Value::Utf8("c".into())]);
        let b = encode_key(&[Value::Utf8("a".into()), Value::Utf8("bc".into())]);
        assert_ne!(a, b);
        let c = encode_key(&[Value::Int32(1)]);
        let d = encode_key(&[Value::Int64(1)]);
        assert_ne!(c, d);
        assert_eq!(encode_key(&[Value::Int64(7)]), encode_key(&[Value::Int64(7)]));
    }

    #[test]
    fn fits_checks_variant_against_type() {
        assert!(Value::Int64(1).fits(&DataType::Int64));
        assert!(!Value::Int64(1).fits(&DataType::Int32));
        assert!(Value::Null.fits(&DataType::Utf8));
        assert!(Value::Time64Micros(1).fits(&DataType::Time64(TimeUnit::Microsecond)));
        assert!(!Value::Time64Micros(1).fits(&DataType::Time64(TimeUnit::Nanosecond)));
        assert!(Value::TimestampNanos(1).fits(&DataType::Timestamp(TimeUnit::Nanosecond, None)));
        assert!(!Value::TimestampMicros(1).fits(&DataType::Timestamp(TimeUnit::Nanosecond, None)));
        assert_ne!(encode_key(&[Value::Time64Micros(5)]), encode_key(&[Value::TimestampNanos(5)]));
    }
}
