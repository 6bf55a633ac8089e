//! Parameters in PostgreSQL's binary wire format (the `send` functions of each
//! type): psycopg 3 sends dates, timestamps, UUIDs and bytes this way by default,
//! pgjdbc sends numerics and bytes, asyncpg sends everything. Written here because
//! the formats are a few lines each and no crate maps them to Arrow scalars
//! (postgres-types reads them into chrono or `rust_decimal` types behind features
//! this workspace does not build).

use pgwire::api::Type;
use retina_query::datafusion::arrow::datatypes::IntervalMonthDayNano;
use retina_query::datafusion::scalar::ScalarValue;

/// Days and microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i32 = 10_957;
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The value of a binary parameter of `pg_type`, or why it cannot be read.
pub fn binary_value(pg_type: &Type, bytes: &[u8]) -> Result<ScalarValue, String> {
    let fixed = |n: usize| -> Result<&[u8], String> {
        (bytes.len() == n).then_some(bytes).ok_or_else(|| format!("{} bytes for a {}, which takes {n}", bytes.len(), pg_type.name()))
    };
    let text = || String::from_utf8(bytes.to_vec()).map_err(|_| format!("a {} that is not UTF-8", pg_type.name()));
    Ok(match *pg_type {
        Type::BOOL => ScalarValue::Boolean(Some(fixed(1)?[0] != 0)),
        Type::INT2 => ScalarValue::Int16(Some(i16::from_be_bytes(array(fixed(2)?)))),
        Type::INT4 => ScalarValue::Int32(Some(i32::from_be_bytes(array(fixed(4)?)))),
        Type::INT8 => ScalarValue::Int64(Some(i64::from_be_bytes(array(fixed(8)?)))),
        Type::OID => ScalarValue::Int64(Some(i64::from(u32::from_be_bytes(array(fixed(4)?))))),
        Type::FLOAT4 => ScalarValue::Float32(Some(f32::from_be_bytes(array(fixed(4)?)))),
        Type::FLOAT8 => ScalarValue::Float64(Some(f64::from_be_bytes(array(fixed(8)?)))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::XML | Type::UNKNOWN => {
            ScalarValue::Utf8(Some(text()?))
        }
        // jsonb's binary form is a version byte (1) and the text.
        Type::JSONB => match bytes.split_first() {
            Some((1, rest)) => ScalarValue::Utf8(Some(String::from_utf8(rest.to_vec()).map_err(|_| "a jsonb that is not UTF-8".to_string())?)),
            _ => return Err("a jsonb without its version byte 1".into()),
        },
        Type::UUID => ScalarValue::Utf8(Some(uuid_text(fixed(16)?))),
        Type::BYTEA => ScalarValue::Binary(Some(bytes.to_vec())),
        Type::DATE => {
            let days = i32::from_be_bytes(array(fixed(4)?));
            let days = days.checked_add(PG_EPOCH_DAYS).filter(|_| days != i32::MAX && days != i32::MIN);
            ScalarValue::Date32(Some(days.ok_or("an infinite or out-of-range date")?))
        }
        Type::TIME => ScalarValue::Time64Microsecond(Some(i64::from_be_bytes(array(fixed(8)?)))),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(array(fixed(8)?));
            let micros = micros.checked_add(PG_EPOCH_MICROS).filter(|_| micros != i64::MAX && micros != i64::MIN);
            let micros = Some(micros.ok_or("an infinite or out-of-range timestamp")?);
            let zone = (*pg_type == Type::TIMESTAMPTZ).then(|| "+00:00".into());
            ScalarValue::TimestampMicrosecond(micros, zone)
        }
        Type::INTERVAL => {
            let raw = fixed(16)?;
            let micros = i64::from_be_bytes(array(&raw[..8]));
            let days = i32::from_be_bytes(array(&raw[8..12]));
            let months = i32::from_be_bytes(array(&raw[12..]));
            let nanos = micros.checked_mul(1000).ok_or("an interval out of range")?;
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(months, days, nanos)))
        }
        // As exact decimal text, cast to the placeholder's decimal type by the caller.
        Type::NUMERIC => ScalarValue::Utf8(Some(numeric_text(bytes)?)),
        _ => return Err(format!("type {} in binary format is not supported; send it as text", pg_type.name())),
    })
}

/// `bytes` (of the length the caller checked) as an array.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

fn uuid_text(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// PostgreSQL's binary numeric: `ndigits`, `weight` (of the first base-10000 digit),
/// `sign` and `dscale` (digits after the point), each 16 bits, then the digits.
fn numeric_text(bytes: &[u8]) -> Result<String, String> {
    let word = |i: usize| bytes.get(2 * i..2 * i + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let bad = || "a numeric shorter than its header says".to_string();
    let (ndigits, weight, sign, dscale) = (word(0).ok_or_else(bad)?, word(1).ok_or_else(bad)? as i16, word(2).ok_or_else(bad)?, word(3).ok_or_else(bad)?);
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Err("NaN cannot be compared with a stored decimal".into()),
        _ => return Err("a numeric infinity cannot be compared with a stored decimal".into()),
    }
    let digits: Vec<u16> = (0..usize::from(ndigits)).map(|i| word(4 + i).ok_or_else(bad)).collect::<Result<_, _>>()?;
    if digits.iter().any(|d| *d > 9999) {
        return Err("a numeric digit above 9999".into());
    }
    // Base-10000 digit i has weight `weight - i`; the integer part is weights >= 0.
    let digit = |w: i32| -> u16 {
        let index = i32::from(weight) - w;
        usize::try_from(index).ok().and_then(|i| digits.get(i).copied()).unwrap_or(0)
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        for w in (0..=i32::from(weight)).rev() {
            let group = digit(w);
            if text.trim_start_matches('-').is_empty() {
                text.push_str(&group.to_string());
            } else {
                text.push_str(&format!("{group:04}"));
            }
        }
    }
    if dscale > 0 {
        let mut fraction = String::new();
        let mut w = -1;
        while fraction.len() < usize::from(dscale) {
            fraction.push_str(&format!("{:04}", digit(w)));
            w -= 1;
        }
        fraction.truncate(usize::from(dscale));
        text.push('.');
        text.push_str(&fraction);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values as PostgreSQL 16's `*send` functions write them (the bytes psycopg,
    /// pgjdbc and asyncpg send).
    #[test]
    fn binary_parameters_read_as_postgresql_sends_them() {
        assert_eq!(binary_value(&Type::DATE, &[0, 0, 0, 0]), Ok(ScalarValue::Date32(Some(10_957))));
        assert_eq!(binary_value(&Type::DATE, &(-1i32).to_be_bytes()), Ok(ScalarValue::Date32(Some(10_956))));
        let micros = 1_000_000i64.to_be_bytes();
        assert_eq!(binary_value(&Type::TIMESTAMP, &micros), Ok(ScalarValue::TimestampMicrosecond(Some(946_684_801_000_000), None)));
        assert_eq!(
            binary_value(&Type::TIMESTAMPTZ, &micros),
            Ok(ScalarValue::TimestampMicrosecond(Some(946_684_801_000_000), Some("+00:00".into())))
        );
        let uuid = [0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11];
        assert_eq!(binary_value(&Type::UUID, &uuid), Ok(ScalarValue::Utf8(Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()))));
        assert_eq!(binary_value(&Type::JSONB, b"\x01{\"a\":1}"), Ok(ScalarValue::Utf8(Some("{\"a\":1}".into()))));
        assert_eq!(binary_value(&Type::FLOAT8, &1.5f64.to_be_bytes()), Ok(ScalarValue::Float64(Some(1.5))));
        assert!(binary_value(&Type::INT4, &[0, 1]).expect_err("short").contains("2 bytes for a int4"));
        assert!(binary_value(&Type::DATE, &i32::MAX.to_be_bytes()).is_err(), "infinity");
        let interval = [1_000_000i64.to_be_bytes().as_slice(), &2i32.to_be_bytes(), &3i32.to_be_bytes()].concat();
        assert_eq!(
            binary_value(&Type::INTERVAL, &interval),
            Ok(ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(3, 2, 1_000_000_000))))
        );
    }

    #[test]
    fn numerics_become_exact_decimal_text() {
        let numeric = |weight: i16, sign: u16, dscale: u16, digits: &[u16]| {
            let mut bytes = Vec::new();
            for word in [digits.len() as u16, weight as u16, sign, dscale].iter().chain(digits) {
                bytes.extend_from_slice(&word.to_be_bytes());
            }
            numeric_text(&bytes)
        };
        assert_eq!(numeric(0, 0, 2, &[12, 3400]), Ok("12.34".into()));
        assert_eq!(numeric(1, 0x4000, 0, &[1, 2345]), Ok("-12345".into()));
        assert_eq!(numeric(-1, 0, 5, &[1234, 5000]), Ok("0.12345".into()));
        assert_eq!(numeric(-1, 0, 6, &[12]), Ok("0.001200".into()));
        assert_eq!(numeric(2, 0, 0, &[1]), Ok("100000000".into()), "trailing zero groups are left out");
        assert_eq!(numeric(0, 0, 0, &[]), Ok("0".into()));
        assert!(numeric(0, 0xC000, 0, &[]).expect_err("NaN").contains("NaN"));
        assert!(numeric_text(&[0, 2, 0, 0]).is_err(), "short header");
    }
}
