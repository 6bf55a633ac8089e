//! Decoding one JSON column value into a [`Value`] by its [`DebeziumType`], straight from
//! the JSON tokens (no intermediate JSON tree: this is the hot path of the decoder).

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use retina_core::Value;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use super::array_text::{array_text, sparse_vector_text};
use super::image::Scalar;
use super::time;
use super::types::DebeziumType;

/// Deserializes one value of `kind`. On a type or range problem it fails with a
/// message that the row decoder turns into an error naming the column.
pub struct ValueSeed<'k>(pub &'k DebeziumType);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(KindVisitor(self.0))
    }
}

#[derive(Clone, Copy)]
struct KindVisitor<'k>(&'k DebeziumType);

/// Converts a scalar tokenized by [`super::image::Image`] to a value of `kind`.
pub fn value_of(kind: &DebeziumType, scalar: &Scalar<'_>) -> Result<Value, String> {
    type E = de::value::Error;
    let visitor = KindVisitor(kind);
    let result: Result<Value, E> = match scalar {
        Scalar::Null => visitor.visit_unit(),
        Scalar::Bool(v) => visitor.visit_bool(*v),
        Scalar::I64(v) => visitor.visit_i64(*v),
        Scalar::U64(v) => visitor.visit_u64(*v),
        Scalar::F64(v) => visitor.visit_f64(*v),
        Scalar::Str(v) => visitor.visit_str(v),
        // A table typed by its catalog (schemaless events, a restart) knows these
        // only by their stored types: text and bytes.
        Scalar::VariableDecimal { scale, value } => match kind {
            DebeziumType::VariableScaleDecimal | DebeziumType::Utf8 => {
                decimal_from_base64(value).and_then(|u| variable_decimal_text(u, *scale)).map(|text| Value::Utf8(text.into())).map_err(de::Error::custom)
            }
            _ => Err(de::Error::invalid_type(de::Unexpected::Map, &visitor)),
        },
        Scalar::Geometry(geometry) => match kind {
            DebeziumType::Geometry | DebeziumType::Binary => {
                geometry_value(geometry.wkb.as_deref(), geometry.srid, geometry.x, geometry.y).map_err(de::Error::custom)
            }
            _ => Err(de::Error::invalid_type(de::Unexpected::Map, &visitor)),
        },
        Scalar::Array(text) | Scalar::Map(text) => match kind {
            DebeziumType::Utf8 => Ok(Value::Utf8(text.as_ref().into())),
            DebeziumType::Array(element) if matches!(scalar, Scalar::Array(_)) => array_text(element, text, value_of).map_err(de::Error::custom),
            DebeziumType::SparseVector if matches!(scalar, Scalar::Map(_)) => sparse_vector_text(text).map_err(de::Error::custom),
            _ => {
                let what = if matches!(scalar, Scalar::Array(_)) { "an array" } else { "an object" };
                Err(de::Error::custom(format_args!("{what} where {} was expected", expected(kind))))
            }
        },
        Scalar::Nested(what) => Err(de::Error::custom(format_args!("{what} where {} was expected", expected(kind)))),
    };
    result.map_err(|e| e.to_string())
}

fn expected(kind: &DebeziumType) -> &'static str {
    match kind {
        DebeziumType::Boolean => "a boolean",
        DebeziumType::Int16 | DebeziumType::Int32 | DebeziumType::Int64 => "an integer",
        DebeziumType::Float32 | DebeziumType::Float64 => "a number",
        DebeziumType::Utf8 => "a string",
        DebeziumType::Binary => "base64 bytes",
        DebeziumType::Date => "days since 1970-01-01 or YYYY-MM-DD",
        DebeziumType::TimeMillis | DebeziumType::TimeMicros | DebeziumType::TimeNanos => "a time of day as an integer",
        DebeziumType::TimestampMillis { .. } | DebeziumType::TimestampMicros { .. } | DebeziumType::TimestampNanos => {
            "an epoch timestamp as an integer or ISO-8601 text"
        }
        DebeziumType::ZonedTimestamp | DebeziumType::ZonedTimestampNanos => "ISO-8601 timestamp text with an offset",
        DebeziumType::ZonedTime => "ISO-8601 time-of-day text with an offset",
        DebeziumType::Geometry => "{\"wkb\": base64, \"srid\": int} (a point may give x and y)",
        DebeziumType::Decimal { .. } => "a decimal as base64 unscaled bytes, text or a number",
        DebeziumType::VariableScaleDecimal => "{\"scale\": int, \"value\": base64}",
        DebeziumType::Array(_) => "an array",
        DebeziumType::SparseVector => "{\"dimensions\": int, \"vector\": [[index, value], ...]}",
    }
}

/// A TIME value, which a Time64 column holds only within one day: a MySQL TIME is a
/// duration (-838:59:59 to 838:59:59) and PostgreSQL allows 24:00:00, and a
/// Parquet TIME outside the day is read back wrapped or not at all.
fn time_of_day<E: de::Error>(value: Value) -> Result<Value, E> {
    const DAY: i128 = 86_400 * 1_000_000_000;
    let nanos = match value {
        Value::Time64Micros(v) => i128::from(v) * 1000,
        Value::Time64Nanos(v) => i128::from(v),
        other => return Ok(other),
    };
    if (0..DAY).contains(&nanos) {
        return Ok(value);
    }
    let shown = match i64::try_from(nanos.abs()) {
        Ok(magnitude) => format!("{}{}", if nanos < 0 { "-" } else { "" }, time::iso_time_of_day(magnitude)),
        Err(_) => format!("{nanos} ns"),
    };
    Err(E::custom(format_args!(
        "time {shown} is not a time of day (00:00:00 to 23:59:59.999999), and a TIME column holds only those: \
         a MySQL TIME used as a duration, or PostgreSQL's 24:00:00, cannot be stored in it"
    )))
}

/// A timestamp a reader can show, or an error saying why it is not one; never a
/// sentinel stored as a date.
fn timestamp_in_range<E: de::Error>(value: Value) -> Result<Value, E> {
    let Value::TimestampMicros(micros) = value else { return Ok(value) };
    if time::timestamp_micros_in_range(micros) {
        return Ok(value);
    }
    let infinity = if micros.unsigned_abs() > 9_000_000_000_000_000_000 {
        "; PostgreSQL's 'infinity' and '-infinity' arrive as such values, and a timestamp column cannot hold them"
    } else {
        ""
    };
    Err(E::custom(format_args!(
        "timestamp {micros} µs since 1970 is outside the years a timestamp column holds (-262144 to 262143){infinity}"
    )))
}

fn range_error<E: de::Error>(kind: &DebeziumType, value: impl fmt::Display) -> E {
    E::custom(format_args!("value {value} is out of range for {kind:?}"))
}

impl<'de> Visitor<'de> for KindVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(expected(self.0))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        match self.0 {
            DebeziumType::Boolean => Ok(Value::Boolean(v)),
            _ => Err(E::invalid_type(de::Unexpected::Bool(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            Err(_) => match self.0 {
                DebeziumType::Float32 => Ok(Value::Float32(v as f32)),
                DebeziumType::Float64 => Ok(Value::Float64(v as f64)),
                DebeziumType::Decimal { scale, .. } => decimal_from_text(&v.to_string(), *scale).map_err(E::custom),
                kind => Err(range_error(kind, v)),
            },
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        let kind = self.0;
        let narrow = |value: Option<Value>| value.ok_or_else(|| range_error::<E>(kind, v));
        match kind {
            DebeziumType::Int16 => narrow(i16::try_from(v).ok().map(Value::Int16)),
            DebeziumType::Int32 => narrow(i32::try_from(v).ok().map(Value::Int32)),
            DebeziumType::Int64 => Ok(Value::Int64(v)),
            DebeziumType::Float32 => Ok(Value::Float32(v as f32)),
            DebeziumType::Float64 => Ok(Value::Float64(v as f64)),
            DebeziumType::Date => narrow(i32::try_from(v).ok().map(Value::Date32)),
            DebeziumType::TimeMillis => narrow(v.checked_mul(1000).map(Value::Time64Micros)).and_then(time_of_day),
            DebeziumType::TimeMicros => time_of_day(Value::Time64Micros(v)),
            DebeziumType::TimeNanos => time_of_day(Value::Time64Nanos(v)),
            DebeziumType::TimestampMillis { .. } => narrow(v.checked_mul(1000).map(Value::TimestampMicros)).and_then(timestamp_in_range),
            DebeziumType::TimestampMicros { .. } => timestamp_in_range(Value::TimestampMicros(v)),
            DebeziumType::TimestampNanos => Ok(Value::TimestampNanos(v)),
            DebeziumType::Decimal { scale, precision } => {
                let unscaled = rescale(v as i128, 0, *scale).ok_or_else(|| range_error::<E>(kind, v))?;
                check_precision(unscaled, *precision).map_err(E::custom)
            }
            _ => Err(E::invalid_type(de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        match self.0 {
            DebeziumType::Float32 => Ok(Value::Float32(v as f32)),
            DebeziumType::Float64 => Ok(Value::Float64(v)),
            // A decimal as a JSON number (JsonConverter's decimal.format=numeric, or
            // decimal.handling.mode=double into a decimal column): through the shortest
            // text, which is the number's own digits as long as it has at most 15
            // significant digits. Beyond that a double may have changed it already, so
            // it is refused rather than stored altered.
            DebeziumType::Decimal { scale, precision } => {
                let exact_below = 10f64.powi(15 - i32::from(*scale));
                if !v.is_finite() || (*precision > 15 && v.abs() >= exact_below) {
                    return Err(E::custom(format_args!(
                        "decimal {v} of a DECIMAL({precision},{scale}) column arrived as a JSON number, which holds only \
                         15 significant digits exactly; send decimals as bytes (decimal.format=base64, the default) \
                         or text (decimal.handling.mode=string)"
                    )));
                }
                decimal_from_text(&v.to_string(), *scale).and_then(|d| match d {
                    Value::Decimal128(u) => check_precision(u, *precision),
                    other => Ok(other),
                }).map_err(E::custom)
            }
            _ => Err(E::invalid_type(de::Unexpected::Float(v), &self)),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        match self.0 {
            DebeziumType::Utf8 => Ok(Value::Utf8(v.into())),
            DebeziumType::Binary => BASE64.decode(v).map(Value::Binary).map_err(|e| E::custom(format_args!("invalid base64: {e}"))),
            DebeziumType::Float32 | DebeziumType::Float64 => {
                let float = match v {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => return Err(E::invalid_type(de::Unexpected::Str(v), &self)),
                };
                Ok(if matches!(self.0, DebeziumType::Float32) { Value::Float32(float as f32) } else { Value::Float64(float) })
            }
            DebeziumType::Decimal { precision, scale } => {
                let unscaled = match decimal_from_base64(v) {
                    Ok(unscaled) => unscaled,
                    Err(base64_error) => match decimal_from_text(v, *scale) {
                        Ok(Value::Decimal128(unscaled)) => unscaled,
                        _ => return Err(E::custom(base64_error)),
                    },
                };
                check_precision(unscaled, *precision).map_err(E::custom)
            }
            DebeziumType::Date => time::parse_date(v).map(Value::Date32).map_err(E::custom),
            DebeziumType::ZonedTimestamp | DebeziumType::TimestampMicros { .. } | DebeziumType::TimestampMillis { .. } => {
                let nanos = time::parse_timestamp_nanos(v).map_err(E::custom)?;
                if nanos % 1000 != 0 {
                    return Err(E::custom(format_args!(
                        "timestamp {v:?} has digits below a microsecond, which this microsecond column would cut off \
                         (a column of a connector with finer zoned timestamps, SQL Server or Oracle, gets nanoseconds \
                         when it is created)"
                    )));
                }
                Ok(Value::TimestampMicros(nanos / 1000))
            }
            DebeziumType::TimestampNanos | DebeziumType::ZonedTimestampNanos => {
                time::parse_timestamp_nanos(v).map(Value::TimestampNanos).map_err(E::custom)
            }
            DebeziumType::ZonedTime => time::parse_zoned_time_micros(v).map(Value::Time64Micros).map_err(E::custom),
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        let scalar = super::image::struct_scalar(map)?;
        value_of(self.0, &scalar).map_err(de::Error::custom)
    }
}

/// Well-known binary of a Debezium geometry value; with an SRID, PostGIS EWKB (the
/// SRID flag set in the type word and the SRID after it), so the SRID is kept. A
/// point given only by `x` and `y` becomes a little-endian WKB point.
pub fn geometry_value(wkb: Option<&str>, srid: Option<i64>, x: Option<f64>, y: Option<f64>) -> Result<Value, String> {
    let wkb = match (wkb, x, y) {
        (Some(text), _, _) => BASE64.decode(text).map_err(|e| format!("invalid base64 wkb: {e}"))?,
        (None, Some(x), Some(y)) => {
            let mut point = vec![1u8, 1, 0, 0, 0];
            point.extend_from_slice(&x.to_le_bytes());
            point.extend_from_slice(&y.to_le_bytes());
            point
        }
        _ => return Err("a geometry needs wkb (or a point x and y)".into()),
    };
    let Some(srid) = srid else { return Ok(Value::Binary(wkb)) };
    let srid = u32::try_from(srid).map_err(|_| format!("srid {srid} is out of range"))?;
    let (Some(&order), Some(type_bytes)) = (wkb.first(), wkb.get(1..5)) else {
        return Err(format!("wkb of {} bytes is too short for a geometry", wkb.len()));
    };
    let mut word = [0u8; 4];
    word.copy_from_slice(type_bytes);
    let (kind, encode): (u32, fn(u32) -> [u8; 4]) = match order {
        0 => (u32::from_be_bytes(word), u32::to_be_bytes),
        1 => (u32::from_le_bytes(word), u32::to_le_bytes),
        other => return Err(format!("wkb byte order {other} is neither 0 nor 1")),
    };
    const EWKB_SRID: u32 = 0x2000_0000;
    if kind & EWKB_SRID != 0 {
        return Ok(Value::Binary(wkb)); // already EWKB with its SRID
    }
    let mut out = Vec::with_capacity(wkb.len() + 4);
    out.push(order);
    out.extend_from_slice(&encode(kind | EWKB_SRID));
    out.extend_from_slice(&encode(srid));
    out.extend_from_slice(&wkb[5..]);
    Ok(Value::Binary(out))
}

/// Why a decimal of more than 38 digits is refused, and what to do about it.
const WIDER_THAN_DECIMAL128: &str = "more digits than the 38 a Decimal128 column holds (Retina's widest decimal); \
    to mirror NUMERIC columns wider than 38 digits exactly, set the connector's decimal.handling.mode=string (stored as text)";

/// Big-endian two's-complement bytes (Connect's Decimal) to an i128.
pub fn decimal_from_base64(text: &str) -> Result<i128, String> {
    let bytes = BASE64.decode(text).map_err(|e| format!("invalid base64 decimal {text:?}: {e}"))?;
    if bytes.is_empty() {
        return Ok(0);
    }
    if bytes.len() > 16 {
        return Err(format!("a decimal of {} bytes: {WIDER_THAN_DECIMAL128}", bytes.len()));
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xFF } else { 0 };
    let mut buffer = [fill; 16];
    buffer[16 - bytes.len()..].copy_from_slice(&bytes);
    Ok(i128::from_be_bytes(buffer))
}

/// The shortest big-endian two's-complement bytes of `unscaled`, base64 (the encoder's
/// side of [`decimal_from_base64`]).
pub fn decimal_to_base64(unscaled: i128) -> String {
    let bytes = unscaled.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (byte, next) = (bytes[start], bytes[start + 1]);
        let redundant = (byte == 0 && next & 0x80 == 0) || (byte == 0xFF && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    BASE64.encode(&bytes[start..])
}

/// Decimal text like `-12.5` or `3e2` as an unscaled value at `scale`. Fails rather
/// than round when digits would be lost.
pub fn decimal_from_text(text: &str, scale: i8) -> Result<Value, String> {
    let bad = || format!("{text:?} is not a decimal number");
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().map_err(|_| bad())?),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let mut unscaled: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        unscaled = unscaled.checked_mul(10).and_then(|u| u.checked_add((b - b'0') as i128)).ok_or_else(|| format!("{text:?}: {WIDER_THAN_DECIMAL128}"))?;
    }
    let from_scale = fraction.len() as i64 - exponent as i64;
    let value = rescale(unscaled, from_scale, scale).ok_or_else(|| format!("{text:?} does not fit scale {scale} without rounding"))?;
    Ok(Value::Decimal128(if negative { -value } else { value }))
}

/// `value * 10^(to - from)`, failing on overflow or when non-zero digits would be cut.
fn rescale(value: i128, from: i64, to: i8) -> Option<i128> {
    let shift = to as i64 - from;
    if shift >= 0 {
        10i128.checked_pow(u32::try_from(shift).ok()?).and_then(|f| value.checked_mul(f))
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-shift).ok()?)?;
        (value % divisor == 0).then(|| value / divisor)
    }
}

fn check_precision(unscaled: i128, precision: u8) -> Result<Value, String> {
    let limit = 10i128.checked_pow(precision.min(38) as u32).unwrap_or(i128::MAX);
    if unscaled.unsigned_abs() >= limit.unsigned_abs() {
        if precision >= 38 {
            return Err(format!("unscaled decimal {unscaled}: {WIDER_THAN_DECIMAL128}"));
        }
        return Err(format!("unscaled decimal {unscaled} exceeds precision {precision}"));
    }
    Ok(Value::Decimal128(unscaled))
}

/// The largest `VariableScaleDecimal` scale taken (either sign): PostgreSQL's numeric
/// has at most 131072 digits before the point and 16383 after, so this admits every
/// real value, while a corrupt scale cannot become a string of billions of zeros.
pub const MAX_VARIABLE_SCALE: u64 = 131_072;

/// [`decimal_text`] of a `VariableScaleDecimal`, whose scale comes from the message.
fn variable_decimal_text(unscaled: i128, scale: i64) -> Result<String, String> {
    if scale.unsigned_abs() > MAX_VARIABLE_SCALE {
        return Err(format!("decimal scale {scale} is out of range"));
    }
    Ok(decimal_text(unscaled, scale))
}

/// Exact decimal text of `unscaled * 10^-scale`.
pub fn decimal_text(unscaled: i128, scale: i64) -> String {
    let negative = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let text = if scale <= 0 {
        let zeros = usize::try_from(scale.unsigned_abs()).unwrap_or(0);
        if unscaled == 0 { "0".to_string() } else { format!("{digits}{}", "0".repeat(zeros)) }
    } else {
        let scale = scale as usize;
        let padded = if digits.len() <= scale { format!("{}{digits}", "0".repeat(scale + 1 - digits.len())) } else { digits };
        let (whole, fraction) = padded.split_at(padded.len() - scale);
        format!("{whole}.{fraction}")
    };
    if negative { format!("-{text}") } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both paths: the streaming seed, and tokenizing first (the decoder's path);
    /// they must agree.
    fn decode(kind: &DebeziumType, json: &str) -> Result<Value, String> {
        let mut deserializer = serde_json::Deserializer::from_str(json);
        let streamed = ValueSeed(kind).deserialize(&mut deserializer).map_err(|e| e.to_string());
        let scalar: Scalar = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let tokenized = value_of(kind, &scalar);
        assert_eq!(streamed.is_ok(), tokenized.is_ok(), "{json}: {streamed:?} vs {tokenized:?}");
        if streamed.is_ok() {
            assert_eq!(streamed, tokenized, "{json}");
        }
        tokenized
    }

    #[test]
    fn debezium_time_types_convert_units() {
        assert_eq!(decode(&DebeziumType::Date, "19000"), Ok(Value::Date32(19000)));
        assert_eq!(decode(&DebeziumType::TimeMillis, "1500"), Ok(Value::Time64Micros(1_500_000)));
        assert_eq!(decode(&DebeziumType::TimeNanos, "7"), Ok(Value::Time64Nanos(7)));
        assert_eq!(decode(&DebeziumType::TimestampMillis { timezone: None }, "1000"), Ok(Value::TimestampMicros(1_000_000)));
        assert_eq!(decode(&DebeziumType::TimestampNanos, "-5"), Ok(Value::TimestampNanos(-5)));
        assert_eq!(
            decode(&DebeziumType::ZonedTimestamp, "\"1970-01-01T01:00:00.5+01:00\""),
            Ok(Value::TimestampMicros(500_000))
        );
    }

    /// PostgreSQL's `infinity` / `-infinity` as Debezium sends a MicroTimestamp: values
    /// no reader can show as a date, so they are refused, not stored; the last
    /// instants readers show are kept.
    #[test]
    fn timestamps_beyond_the_years_readers_show_are_refused() {
        let micros = DebeziumType::TimestampMicros { timezone: None };
        for sentinel in ["9223372036825200000", "-9223372036832400000"] {
            let error = decode(&micros, sentinel).expect_err(sentinel);
            assert!(error.contains("outside the years") && error.contains("'infinity'"), "{error}");
        }
        let last = (time::days_from_civil(262_143, 12, 31) + 1) * 86_400_000_000 - 1;
        let first = time::days_from_civil(-262_144, 1, 1) * 86_400_000_000;
        assert_eq!(decode(&micros, &last.to_string()), Ok(Value::TimestampMicros(last)));
        assert_eq!(decode(&micros, &first.to_string()), Ok(Value::TimestampMicros(first)));
        let beyond = decode(&micros, &(last + 1).to_string()).expect_err("one past the last");
        assert!(!beyond.contains("'infinity'"), "{beyond}");
        let millis = DebeziumType::TimestampMillis { timezone: None };
        assert!(decode(&millis, &(last / 1000 + 1).to_string()).is_err(), "milliseconds past the range");
        assert!(decode(&millis, "9223372036825200").is_err(), "milliseconds past the range");
    }

    #[test]
    fn decimals_from_base64_text_and_numbers() {
        let kind = DebeziumType::Decimal { precision: 10, scale: 2 };
        // 12345 = 0x3039 -> "MDk="
        assert_eq!(decode(&kind, "\"MDk=\""), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "\"123.45\""), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "123.45"), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "7"), Ok(Value::Decimal128(700)));
        assert!(decode(&kind, "\"1.234\"").is_err(), "would round");
        assert!(decode(&kind, "\"99999999999\"").is_err(), "exceeds precision");
        let variable = DebeziumType::VariableScaleDecimal;
        assert_eq!(decode(&variable, r#"{"scale":3,"value":"MDk="}"#), Ok(Value::Utf8("12.345".into())));
        assert_eq!(decode(&variable, r#"{"scale":0,"value":"/w=="}"#), Ok(Value::Utf8("-1".into())));
    }

    #[test]
    fn integers_beyond_i64_and_numeric_decimals() {
        let unsigned = DebeziumType::Decimal { precision: 20, scale: 0 };
        assert_eq!(decode(&unsigned, "18446744073709551615"), Ok(Value::Decimal128(18_446_744_073_709_551_615)));
        assert_eq!(decode(&unsigned, "\"AP//////////\""), Ok(Value::Decimal128(18_446_744_073_709_551_615)));
        // Beyond u64 serde_json hands over a double: refused, not rounded.
        let error = decode(&unsigned, "18446744073709551616").expect_err("beyond u64");
        assert!(error.contains("JSON number"), "{error}");
        assert!(decode(&DebeziumType::Int64, "9223372036854775808").expect_err("beyond i64").contains("out of range"));
        // decimal.format=numeric: exact up to 15 significant digits.
        let wide = DebeziumType::Decimal { precision: 38, scale: 2 };
        assert_eq!(decode(&wide, "1234567890123.45"), Ok(Value::Decimal128(123_456_789_012_345)));
        assert!(decode(&wide, "12345678901234.56").is_err(), "16 digits may have been altered by the double");
        // 39 digits, past i128 (a real PostgreSQL NUMERIC(39,6) value) and within it:
        // refused, saying what to change.
        let beyond = decode(&wide, "\"AIAAAAAAAAAAAAAAAAAAAAA=\"").expect_err("2^127, 17 bytes");
        assert!(beyond.contains("17 bytes") && beyond.contains("decimal.handling.mode=string"), "{beyond}");
        let within = decode(&wide, &format!("\"{}\"", decimal_to_base64(10i128.pow(38)))).expect_err("39 digits");
        assert!(within.contains("38 a Decimal128 column holds"), "{within}");
        // float32 values arrive widened to double.
        assert_eq!(decode(&DebeziumType::Float32, "3.140000104904175"), Ok(Value::Float32(3.14)));
    }

    #[test]
    fn geometries_become_wkb_or_ewkb() {
        let point = "AQEAAAAAAAAAAADwPwAAAAAAAABA";
        let mut wkb = vec![1u8, 1, 0, 0, 0];
        wkb.extend_from_slice(&1.0f64.to_le_bytes());
        wkb.extend_from_slice(&2.0f64.to_le_bytes());
        assert_eq!(decode(&DebeziumType::Geometry, &format!(r#"{{"wkb":"{point}","srid":null}}"#)), Ok(Value::Binary(wkb.clone())));
        assert_eq!(decode(&DebeziumType::Geometry, r#"{"x":1.0,"y":2.0,"wkb":null,"srid":null}"#), Ok(Value::Binary(wkb.clone())));
        let mut ewkb = vec![1u8, 1, 0, 0, 0x20];
        ewkb.extend_from_slice(&4326u32.to_le_bytes());
        ewkb.extend_from_slice(&wkb[5..]);
        assert_eq!(decode(&DebeziumType::Geometry, &format!(r#"{{"wkb":"{point}","srid":4326}}"#)), Ok(Value::Binary(ewkb)));
        // Big-endian WKB keeps its byte order.
        let big = geometry_value(Some("AAAAAAE/8AAAAAAAAEAAAAAAAAAA"), Some(3857), None, None).expect("big endian");
        assert_eq!(&big, &Value::Binary([&[0u8, 0x20, 0, 0, 1][..], &3857u32.to_be_bytes(), &[0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0]].concat()));
        assert!(decode(&DebeziumType::Geometry, r#"{"srid":4326}"#).is_err(), "no wkb");
        assert!(decode(&DebeziumType::Geometry, r#"{"wkb":"AQ==","srid":4326}"#).is_err(), "too short");
        assert!(decode(&DebeziumType::Binary, r#"{"k":"AQ=="}"#).is_err(), "a struct in a bytes column");
        // A geometry column known only by its stored type (a schemaless restart).
        assert_eq!(decode(&DebeziumType::Binary, &format!(r#"{{"wkb":"{point}","srid":null}}"#)), Ok(Value::Binary(wkb.clone())));
    }

    #[test]
    fn mistyped_and_out_of_range_values_fail() {
        assert!(decode(&DebeziumType::Int32, "\"x\"").expect_err("string for int").contains("integer"));
        assert!(decode(&DebeziumType::Int16, "70000").expect_err("range").contains("out of range"));
        assert!(decode(&DebeziumType::Boolean, "1").is_err());
        assert!(decode(&DebeziumType::Binary, "\"***\"").expect_err("base64").contains("base64"));
        assert_eq!(decode(&DebeziumType::Utf8, "null"), Ok(Value::Null));
    }

    /// The helper's round 6: MySQL's 838:59:59 and -12:00:00 and PostgreSQL's 24:00:00
    /// were stored as Parquet TIMEs outside the day (read back wrapped, or failing).
    #[test]
    fn times_outside_a_day_are_refused() {
        assert_eq!(decode(&DebeziumType::TimeMicros, "86399999999"), Ok(Value::Time64Micros(86_399_999_999)));
        let error = decode(&DebeziumType::TimeMicros, "3020399000000").expect_err("838:59:59");
        assert!(error.contains("time 838:59:59 is not a time of day"), "{error}");
        let error = decode(&DebeziumType::TimeMicros, "-43200000000").expect_err("-12:00:00");
        assert!(error.contains("time -12:00:00 is not"), "{error}");
        assert!(decode(&DebeziumType::TimeMillis, "86400000").expect_err("24:00:00").contains("24:00:00"));
        assert!(decode(&DebeziumType::TimeNanos, "86400000000000").is_err());
        assert!(decode(&DebeziumType::TimeMicros, &i64::MIN.to_string()).is_err());
    }

    /// SQL Server's `datetimeoffset(7)` and Oracle's `TIMESTAMP(9) WITH TIME ZONE`:
    /// kept whole in a nanosecond column, refused (never cut) by a microsecond one.
    #[test]
    fn zoned_timestamps_keep_every_digit_or_are_refused() {
        let text = "\"2024-01-01T08:00:00.1234567Z\"";
        assert_eq!(decode(&DebeziumType::ZonedTimestampNanos, text), Ok(Value::TimestampNanos(1_704_096_000_123_456_700)));
        let error = decode(&DebeziumType::ZonedTimestamp, text).expect_err("finer than µs");
        assert!(error.contains("below a microsecond"), "{error}");
        let micros = "\"2024-01-01T08:00:00.123456Z\"";
        assert_eq!(decode(&DebeziumType::ZonedTimestamp, micros), Ok(Value::TimestampMicros(1_704_096_000_123_456)));
    }

    proptest! {
        #[test]
        fn decimal_base64_round_trips(unscaled in any::<i128>()) {
            prop_assert_eq!(decimal_from_base64(&decimal_to_base64(unscaled)), Ok(unscaled));
        }

        #[test]
        fn decimal_text_round_trips(unscaled in -10i128.pow(30)..10i128.pow(30), scale in 0i8..12) {
            let text = decimal_text(unscaled, scale as i64);
            prop_assert_eq!(decimal_from_text(&text, scale), Ok(Value::Decimal128(unscaled)));
        }
    }
}

/// Found writing the debezium_message fuzz target (which reproduces them).
#[cfg(test)]
mod fuzz_regressions {
    use super::*;

    /// A huge `VariableScaleDecimal` scale ran out of memory building the text, and
    /// `i64::MIN` overflowed negating it; both are errors now.
    #[test]
    fn variable_scale_decimal_scale_is_bounded() {
        let kind = DebeziumType::VariableScaleDecimal;
        let with_scale = |scale: i64| value_of(&kind, &Scalar::VariableDecimal { scale, value: "AQ==".into() });
        for scale in [i64::MIN, -4_000_000_000, 4_000_000_000, i64::MAX] {
            assert!(with_scale(scale).expect_err("absurd scale").contains("out of range"), "{scale}");
        }
        assert_eq!(with_scale(3), Ok(Value::Utf8("0.001".into())));
        assert_eq!(with_scale(-2), Ok(Value::Utf8("100".into())));
        let widest = with_scale(MAX_VARIABLE_SCALE as i64).expect("PostgreSQL's widest scale");
        assert!(matches!(widest, Value::Utf8(text) if text.len() == MAX_VARIABLE_SCALE as usize + 2));
    }
}
