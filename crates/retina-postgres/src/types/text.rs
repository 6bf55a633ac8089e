//! One value's text form (as the type's output function prints it) to a [`Value`].

use retina_core::Value;

use super::temporal::{parse_date, parse_time, parse_timestamp};
use super::PgType;

/// Parses `text` as a value of `kind`. The error is the reason only; the caller adds
/// table, column and position.
pub fn parse_value(kind: &PgType, text: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not valid UTF-8".to_string())?;
    Ok(match kind {
        PgType::Boolean => match text {
            "t" => Value::Boolean(true),
            "f" => Value::Boolean(false),
            _ => return Err("expected t or f".into()),
        },
        PgType::Int16 => Value::Int16(text.parse().map_err(|e| format!("{e}"))?),
        PgType::Int32 => Value::Int32(text.parse().map_err(|e| format!("{e}"))?),
        PgType::Int64 => Value::Int64(text.parse().map_err(|e| format!("{e}"))?),
        PgType::Float32 => Value::Float32(parse_float(text)? as f32),
        PgType::Float64 => Value::Float64(parse_float(text)?),
        PgType::Decimal { scale, .. } => Value::Decimal128(parse_decimal(text, *scale)?),
        PgType::Binary => Value::Binary(parse_bytea(text)?),
        PgType::Date => Value::Date32(parse_date(text)?),
        PgType::Time => Value::Time64Micros(parse_time(text)?),
        PgType::Timestamp => Value::TimestampMicros(parse_timestamp(text, false)?),
        PgType::TimestampTz => Value::TimestampMicros(parse_timestamp(text, true)?),
        PgType::Text => Value::Utf8(text.into()),
    })
}

fn parse_float(text: &str) -> Result<f64, String> {
    match text {
        "NaN" => Ok(f64::NAN),
        "Infinity" => Ok(f64::INFINITY),
        "-Infinity" => Ok(f64::NEG_INFINITY),
        _ => text.parse().map_err(|e| format!("{e}")),
    }
}

/// Exact decimal text to the unscaled integer at `scale`.
fn parse_decimal(text: &str, scale: i8) -> Result<i128, String> {
    if matches!(text, "NaN" | "Infinity" | "-Infinity") {
        return Err(format!("{text} has no Decimal128 representation"));
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return Err("not a decimal number".into());
    }
    let overflow = || "too many digits for Decimal128".to_string();
    let mut unscaled: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        unscaled = unscaled.checked_mul(10).and_then(|v| v.checked_add(i128::from(b - b'0'))).ok_or_else(overflow)?;
    }
    // unscaled = value * 10^fraction_digits; we need value * 10^scale.
    let shift = i32::from(scale) - fraction.len() as i32;
    if shift >= 0 {
        unscaled = unscaled.checked_mul(10i128.checked_pow(shift as u32).ok_or_else(overflow)?).ok_or_else(overflow)?;
    } else {
        let divisor = 10i128.checked_pow((-shift) as u32).ok_or_else(overflow)?;
        if unscaled % divisor != 0 {
            return Err(format!("more fractional digits than the column's scale {scale}"));
        }
        unscaled /= divisor;
    }
    Ok(if negative { -unscaled } else { unscaled })
}

/// `\x0a1b` (bytea_output = hex).
fn parse_bytea(text: &str) -> Result<Vec<u8>, String> {
    let hex = text.strip_prefix("\\x").ok_or("expected hex bytea output (\\x...)")?;
    if hex.len() % 2 != 0 {
        return Err("odd number of hex digits".into());
    }
    let nibble = |b: u8| -> Result<u8, String> {
        match b {
            b'0'..=b'9' => Ok(b - b'0'),
            b'a'..=b'f' => Ok(b - b'a' + 10),
            b'A'..=b'F' => Ok(b - b'A' + 10),
            _ => Err(format!("bad hex digit {:?}", char::from(b))),
        }
    };
    hex.as_bytes().chunks_exact(2).map(|pair| Ok(nibble(pair[0])? << 4 | nibble(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(kind: PgType, text: &str) -> Result<Value, String> {
        parse_value(&kind, text.as_bytes())
    }

    #[test]
    fn scalars() {
        assert_eq!(parse(PgType::Boolean, "t"), Ok(Value::Boolean(true)));
        assert!(parse(PgType::Boolean, "true").is_err());
        assert_eq!(parse(PgType::Int16, "-32768"), Ok(Value::Int16(i16::MIN)));
        assert!(parse(PgType::Int16, "32768").is_err());
        assert_eq!(parse(PgType::Int64, "9223372036854775807"), Ok(Value::Int64(i64::MAX)));
        assert_eq!(parse(PgType::Float64, "1.0000000000000002"), Ok(Value::Float64(1.0000000000000002)));
        assert!(matches!(parse(PgType::Float64, "NaN"), Ok(Value::Float64(v)) if v.is_nan()));
        assert_eq!(parse(PgType::Float32, "-Infinity"), Ok(Value::Float32(f32::NEG_INFINITY)));
        assert_eq!(parse(PgType::Text, "héllo"), Ok(Value::Utf8("héllo".into())));
        assert_eq!(parse(PgType::Binary, "\\x00ff10"), Ok(Value::Binary(vec![0, 255, 16])));
        assert!(parse(PgType::Binary, "\\x0").is_err());
        assert!(parse(PgType::Binary, "abc").is_err());
    }

    #[test]
    fn decimals_are_exact() {
        let decimal = |scale| PgType::Decimal { precision: 38, scale };
        assert_eq!(parse(decimal(2), "123.45"), Ok(Value::Decimal128(12_345)));
        assert_eq!(parse(decimal(2), "-0.05"), Ok(Value::Decimal128(-5)));
        assert_eq!(parse(decimal(4), "1.5"), Ok(Value::Decimal128(15_000)));
        assert_eq!(parse(decimal(0), "99999999999999999999999999999999999999"), Ok(Value::Decimal128(10i128.pow(38) - 1)));
        assert_eq!(parse(decimal(-2), "12300"), Ok(Value::Decimal128(123)));
        assert!(parse(decimal(1), "1.25").unwrap_err().contains("scale"));
        assert!(parse(decimal(2), "NaN").unwrap_err().contains("NaN"));
        assert!(parse(decimal(2), "1e5").is_err());
        assert!(parse(decimal(2), "").is_err());
    }
}
