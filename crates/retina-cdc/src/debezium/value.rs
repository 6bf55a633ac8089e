//! Decoding one JSON column value into a [`Value`] by its [`ColumnKind`], straight from
//! the JSON tokens (no intermediate JSON tree: this is the hot path of the decoder).

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use retina_core::Value;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::image::Scalar;
use super::time;
use super::types::ColumnKind;

/// Deserializes one value of `kind`. On a type or range problem it fails with a
/// message that the row decoder turns into an error naming the column.
pub struct ValueSeed<'k>(pub &'k ColumnKind);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(KindVisitor(self.0))
    }
}

#[derive(Clone, Copy)]
struct KindVisitor<'k>(&'k ColumnKind);

/// Converts a scalar tokenized by [`super::image::Image`] to a value of `kind`.
pub fn value_of(kind: &ColumnKind, scalar: &Scalar<'_>) -> Result<Value, String> {
    type E = de::value::Error;
    let visitor = KindVisitor(kind);
    let result: Result<Value, E> = match scalar {
        Scalar::Null => visitor.visit_unit(),
        Scalar::Bool(v) => visitor.visit_bool(*v),
        Scalar::I64(v) => visitor.visit_i64(*v),
        Scalar::U64(v) => visitor.visit_u64(*v),
        Scalar::F64(v) => visitor.visit_f64(*v),
        Scalar::Str(v) => visitor.visit_str(v),
        Scalar::VariableDecimal { scale, value } => match kind {
            ColumnKind::VariableScaleDecimal => {
                decimal_from_base64(value).and_then(|u| variable_decimal_text(u, *scale)).map(Value::Utf8).map_err(de::Error::custom)
            }
            _ => Err(de::Error::invalid_type(de::Unexpected::Map, &visitor)),
        },
        Scalar::Nested(what) => Err(de::Error::custom(format_args!("{what} where {} was expected", expected(kind)))),
    };
    result.map_err(|e| e.to_string())
}

fn expected(kind: &ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Boolean => "a boolean",
        ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64 => "an integer",
        ColumnKind::Float32 | ColumnKind::Float64 => "a number",
        ColumnKind::Utf8 => "a string",
        ColumnKind::Binary => "base64 bytes",
        ColumnKind::Date => "days since 1970-01-01 or YYYY-MM-DD",
        ColumnKind::TimeMillis | ColumnKind::TimeMicros | ColumnKind::TimeNanos => "a time of day as an integer",
        ColumnKind::TimestampMillis { .. } | ColumnKind::TimestampMicros { .. } | ColumnKind::TimestampNanos => {
            "an epoch timestamp as an integer or ISO-8601 text"
        }
        ColumnKind::ZonedTimestamp => "ISO-8601 timestamp text with an offset",
        ColumnKind::Decimal { .. } => "a decimal as base64 unscaled bytes, text or a number",
        ColumnKind::VariableScaleDecimal => "{\"scale\": int, \"value\": base64}",
    }
}

fn range_error<E: de::Error>(kind: &ColumnKind, value: impl fmt::Display) -> E {
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
            ColumnKind::Boolean => Ok(Value::Boolean(v)),
            _ => Err(E::invalid_type(de::Unexpected::Bool(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            Err(_) => match self.0 {
                ColumnKind::Float32 => Ok(Value::Float32(v as f32)),
                ColumnKind::Float64 => Ok(Value::Float64(v as f64)),
                ColumnKind::Decimal { scale, .. } => decimal_from_text(&v.to_string(), *scale).map_err(E::custom),
                kind => Err(range_error(kind, v)),
            },
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        let kind = self.0;
        let narrow = |value: Option<Value>| value.ok_or_else(|| range_error::<E>(kind, v));
        match kind {
            ColumnKind::Int16 => narrow(i16::try_from(v).ok().map(Value::Int16)),
            ColumnKind::Int32 => narrow(i32::try_from(v).ok().map(Value::Int32)),
            ColumnKind::Int64 => Ok(Value::Int64(v)),
            ColumnKind::Float32 => Ok(Value::Float32(v as f32)),
            ColumnKind::Float64 => Ok(Value::Float64(v as f64)),
            ColumnKind::Date => narrow(i32::try_from(v).ok().map(Value::Date32)),
            ColumnKind::TimeMillis => narrow(v.checked_mul(1000).map(Value::Time64Micros)),
            ColumnKind::TimeMicros => Ok(Value::Time64Micros(v)),
            ColumnKind::TimeNanos => Ok(Value::Time64Nanos(v)),
            ColumnKind::TimestampMillis { .. } => narrow(v.checked_mul(1000).map(Value::TimestampMicros)),
            ColumnKind::TimestampMicros { .. } => Ok(Value::TimestampMicros(v)),
            ColumnKind::TimestampNanos => Ok(Value::TimestampNanos(v)),
            ColumnKind::Decimal { scale, precision } => {
                let unscaled = rescale(v as i128, 0, *scale).ok_or_else(|| range_error::<E>(kind, v))?;
                check_precision(unscaled, *precision).map_err(E::custom)
            }
            _ => Err(E::invalid_type(de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        match self.0 {
            ColumnKind::Float32 => Ok(Value::Float32(v as f32)),
            ColumnKind::Float64 => Ok(Value::Float64(v)),
            // decimal.handling.mode=double into a decimal column: through the shortest text.
            ColumnKind::Decimal { scale, precision } => {
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
            ColumnKind::Utf8 => Ok(Value::Utf8(v.to_string())),
            ColumnKind::Binary => BASE64.decode(v).map(Value::Binary).map_err(|e| E::custom(format_args!("invalid base64: {e}"))),
            ColumnKind::Float32 | ColumnKind::Float64 => {
                let float = match v {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => return Err(E::invalid_type(de::Unexpected::Str(v), &self)),
                };
                Ok(if matches!(self.0, ColumnKind::Float32) { Value::Float32(float as f32) } else { Value::Float64(float) })
            }
            ColumnKind::Decimal { precision, scale } => {
                let unscaled = match decimal_from_base64(v) {
                    Ok(unscaled) => unscaled,
                    Err(base64_error) => match decimal_from_text(v, *scale) {
                        Ok(Value::Decimal128(unscaled)) => unscaled,
                        _ => return Err(E::custom(base64_error)),
                    },
                };
                check_precision(unscaled, *precision).map_err(E::custom)
            }
            ColumnKind::Date => time::parse_date(v).map(Value::Date32).map_err(E::custom),
            ColumnKind::ZonedTimestamp | ColumnKind::TimestampMicros { .. } | ColumnKind::TimestampMillis { .. } => {
                time::parse_timestamp_nanos(v).map(|n| Value::TimestampMicros(n.div_euclid(1000))).map_err(E::custom)
            }
            ColumnKind::TimestampNanos => time::parse_timestamp_nanos(v).map(Value::TimestampNanos).map_err(E::custom),
            _ => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if !matches!(self.0, ColumnKind::VariableScaleDecimal) {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        let (mut scale, mut unscaled) = (None::<i64>, None::<i128>);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "scale" => scale = Some(map.next_value()?),
                "value" => {
                    let text: std::borrow::Cow<'de, str> = map.next_value()?;
                    unscaled = Some(decimal_from_base64(&text).map_err(de::Error::custom)?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let scale = scale.ok_or_else(|| de::Error::missing_field("scale"))?;
        let unscaled = unscaled.ok_or_else(|| de::Error::missing_field("value"))?;
        variable_decimal_text(unscaled, scale).map(Value::Utf8).map_err(de::Error::custom)
    }
}

/// Big-endian two's-complement bytes (Connect's Decimal) to an i128.
pub fn decimal_from_base64(text: &str) -> Result<i128, String> {
    let bytes = BASE64.decode(text).map_err(|e| format!("invalid base64 decimal {text:?}: {e}"))?;
    if bytes.is_empty() {
        return Ok(0);
    }
    if bytes.len() > 16 {
        return Err(format!("decimal of {} bytes does not fit 128 bits", bytes.len()));
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
        unscaled = unscaled.checked_mul(10).and_then(|u| u.checked_add((b - b'0') as i128)).ok_or_else(|| format!("{text:?} does not fit 128 bits"))?;
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
    fn decode(kind: &ColumnKind, json: &str) -> Result<Value, String> {
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
        assert_eq!(decode(&ColumnKind::Date, "19000"), Ok(Value::Date32(19000)));
        assert_eq!(decode(&ColumnKind::TimeMillis, "1500"), Ok(Value::Time64Micros(1_500_000)));
        assert_eq!(decode(&ColumnKind::TimeNanos, "7"), Ok(Value::Time64Nanos(7)));
        assert_eq!(decode(&ColumnKind::TimestampMillis { timezone: None }, "1000"), Ok(Value::TimestampMicros(1_000_000)));
        assert_eq!(decode(&ColumnKind::TimestampNanos, "-5"), Ok(Value::TimestampNanos(-5)));
        assert_eq!(
            decode(&ColumnKind::ZonedTimestamp, "\"1970-01-01T01:00:00.5+01:00\""),
            Ok(Value::TimestampMicros(500_000))
        );
    }

    #[test]
    fn decimals_from_base64_text_and_numbers() {
        let kind = ColumnKind::Decimal { precision: 10, scale: 2 };
        // 12345 = 0x3039 -> "MDk="
        assert_eq!(decode(&kind, "\"MDk=\""), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "\"123.45\""), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "123.45"), Ok(Value::Decimal128(12345)));
        assert_eq!(decode(&kind, "7"), Ok(Value::Decimal128(700)));
        assert!(decode(&kind, "\"1.234\"").is_err(), "would round");
        assert!(decode(&kind, "\"99999999999\"").is_err(), "exceeds precision");
        let variable = ColumnKind::VariableScaleDecimal;
        assert_eq!(decode(&variable, r#"{"scale":3,"value":"MDk="}"#), Ok(Value::Utf8("12.345".into())));
        assert_eq!(decode(&variable, r#"{"scale":0,"value":"/w=="}"#), Ok(Value::Utf8("-1".into())));
    }

    #[test]
    fn mistyped_and_out_of_range_values_fail() {
        assert!(decode(&ColumnKind::Int32, "\"x\"").expect_err("string for int").contains("integer"));
        assert!(decode(&ColumnKind::Int16, "70000").expect_err("range").contains("out of range"));
        assert!(decode(&ColumnKind::Boolean, "1").is_err());
        assert!(decode(&ColumnKind::Binary, "\"***\"").expect_err("base64").contains("base64"));
        assert_eq!(decode(&ColumnKind::Utf8, "null"), Ok(Value::Null));
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
        let kind = ColumnKind::VariableScaleDecimal;
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
