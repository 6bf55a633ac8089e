//! Values and keys as people read them in errors: `id=1004, code="a"`, a date as
//! 2024-03-01, a decimal with its scale; neither the Debug form (`Int32(1004)`) nor
//! the key's byte encoding, which name no column and need decoding by hand.

use std::fmt;

use arrow_array::temporal_conversions::{
    date32_to_datetime, time64ns_to_time, time64us_to_time, timestamp_ns_to_datetime, timestamp_us_to_datetime,
};
use arrow_array::types::{Decimal128Type, DecimalType};
use arrow_schema::DataType;

use crate::schema::TableSchema;
use crate::value::{decode_key, Value};

/// A value shown as its column's type reads it; see [`Value::text`].
pub struct ValueText<'a> {
    value: &'a Value,
    data_type: Option<&'a DataType>,
}

impl Value {
    /// This value for an error message. `data_type` (the column's) gives a decimal its
    /// scale; without it the unscaled integer is shown and says so.
    pub fn text<'a>(&'a self, data_type: Option<&'a DataType>) -> ValueText<'a> {
        ValueText { value: self, data_type }
    }
}

impl fmt::Display for ValueText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A value outside chrono's range is shown as its raw number and unit.
        fn or_raw(f: &mut fmt::Formatter<'_>, shown: Option<impl fmt::Display>, raw: i64, unit: &str) -> fmt::Result {
            match shown {
                Some(shown) => write!(f, "{shown}"),
                None => write!(f, "{raw} {unit}"),
            }
        }
        match self.value {
            Value::Null => f.write_str("NULL"),
            Value::Boolean(v) => write!(f, "{v}"),
            Value::Int16(v) => write!(f, "{v}"),
            Value::Int32(v) => write!(f, "{v}"),
            Value::Int64(v) => write!(f, "{v}"),
            Value::Float32(v) => write!(f, "{v}"),
            Value::Float64(v) => write!(f, "{v}"),
            Value::Utf8(v) => write!(f, "{v:?}"),
            Value::Binary(v) => {
                f.write_str("0x")?;
                v.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
            Value::Date32(v) => or_raw(f, date32_to_datetime(*v).map(|d| d.date()), i64::from(*v), "days since 1970-01-01"),
            Value::TimestampMicros(v) => {
                or_raw(f, timestamp_us_to_datetime(*v), *v, "µs since the epoch")?;
                self.zone_suffix(f)
            }
            Value::TimestampNanos(v) => {
                or_raw(f, timestamp_ns_to_datetime(*v), *v, "ns since the epoch")?;
                self.zone_suffix(f)
            }
            Value::Time64Micros(v) => or_raw(f, time64us_to_time(*v), *v, "µs since midnight"),
            Value::Time64Nanos(v) => or_raw(f, time64ns_to_time(*v), *v, "ns since midnight"),
            Value::Decimal128(v) => match self.data_type {
                Some(DataType::Decimal128(precision, scale)) => {
                    f.write_str(&Decimal128Type::format_decimal(*v, *precision, *scale))
                }
                _ => write!(f, "{v} (unscaled)"),
            },
        }
    }
}

impl ValueText<'_> {
    /// A timestamp column with a zone stores UTC instants (Debezium's
    /// `ZonedTimestamp`): say so, or the text reads as a local time.
    fn zone_suffix(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.data_type {
            Some(DataType::Timestamp(_, Some(zone))) => write!(f, " {zone}"),
            _ => Ok(()),
        }
    }
}

/// `col=value, …` of a row's primary key from its encoding (see
/// [`encode_key`](crate::value::encode_key)), in the table's key order; the encoding
/// in hex when it does not decode to the table's key columns.
pub fn key_text(schema: &TableSchema, key: &[u8]) -> String {
    let fields = schema.columns().fields();
    let columns: Vec<_> = schema.primary_key().iter().filter_map(|&i| fields.get(i)).collect();
    match decode_key(key) {
        Some(values) if values.len() == columns.len() => columns
            .iter()
            .zip(&values)
            .map(|(field, value)| format!("{}={}", field.name(), value.text(Some(field.data_type()))))
            .collect::<Vec<_>>()
            .join(", "),
        _ => format!("0x{}", key.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

#[cfg(test)]
mod tests {
    use arrow_schema::{Field, Schema, TimeUnit};

    use super::*;
    use crate::value::encode_key;

    #[test]
    fn values_read_as_their_types() {
        let decimal = DataType::Decimal128(10, 2);
        let shown = |value: Value, data_type: Option<&DataType>| value.text(data_type).to_string();
        assert_eq!(shown(Value::Int32(1004), None), "1004");
        assert_eq!(shown(Value::Utf8("a \"b\"".into()), None), r#""a \"b\"""#);
        assert_eq!(shown(Value::Decimal128(-1205), Some(&decimal)), "-12.05");
        assert_eq!(shown(Value::Decimal128(-1205), None), "-1205 (unscaled)");
        assert_eq!(shown(Value::Date32(19_783), None), "2024-03-01");
        assert_eq!(shown(Value::TimestampMicros(1_709_251_200_000_001), None), "2024-03-01 00:00:00.000001");
        let zoned = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        assert_eq!(shown(Value::TimestampMicros(1_709_251_200_000_001), Some(&zoned)), "2024-03-01 00:00:00.000001 UTC");
        assert_eq!(shown(Value::Time64Micros(3_600_000_000), None), "01:00:00");
        assert_eq!(shown(Value::Binary(vec![0, 171]), None), "0x00ab");
        assert_eq!(shown(Value::Null, None), "NULL");
        assert_eq!(shown(Value::TimestampMicros(i64::MAX), None), format!("{} µs since the epoch", i64::MAX));
    }

    #[test]
    fn keys_name_their_columns() {
        let fields = vec![
            Field::new("w_id", DataType::Int32, false),
            Field::new("note", DataType::Utf8, true),
            Field::new("day", DataType::Date32, false),
            Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ];
        let schema = TableSchema::new("s.t", Schema::new(fields), vec![2, 0]).expect("schema");
        let key = encode_key(&[Value::Date32(19_783), Value::Int32(7)]);
        assert_eq!(key_text(&schema, &key), "day=2024-03-01, w_id=7");
        assert_eq!(key_text(&schema, &[3, 0]), "0x0300", "not an encoding");
        assert_eq!(key_text(&schema, &encode_key(&[Value::Int32(7)])), "0x0300000007", "one value for two columns");
    }
}
