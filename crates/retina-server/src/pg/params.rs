//! Bound parameters (extended protocol) to DataFusion scalars.
//!
//! The placeholder's type is the one the client declared or the planner inferred
//! ([`super::param_types`]). Text-format values are cast to it by Arrow (a bytea's
//! `\x…` hex decoded first), which covers every type Retina stores; binary-format
//! values are read in the wire format of the declared type, or of the type the
//! statement's description gave the client ([`super::param_binary`]).

use pgwire::api::portal::Portal;
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use retina_query::datafusion::arrow::datatypes::DataType;
use retina_query::datafusion::common::ParamValues;
use retina_query::datafusion::scalar::ScalarValue;

use super::errors::user_error;
use super::param_binary::binary_value;
use super::param_types::declared_type;

pub fn bind_parameters<S: Clone>(portal: &Portal<S>, inferred: &[Option<DataType>]) -> PgWireResult<ParamValues> {
    let count = portal.parameter_len();
    if count != inferred.len() {
        return Err(user_error(
            "08P01",
            format!("bind message supplies {count} parameters, but the statement requires {}", inferred.len()),
        ));
    }
    let mut values = Vec::with_capacity(count);
    for (index, inferred_type) in inferred.iter().enumerate() {
        let declared = portal.statement.parameter_types.get(index).cloned().flatten();
        let target = inferred_type.clone().or_else(|| declared.as_ref().and_then(declared_type)).unwrap_or(DataType::Utf8);
        let value = match portal.parameters.get(index).cloned().flatten() {
            None => ScalarValue::try_from(&target).map_err(|e| user_error("22023", e.to_string()))?,
            Some(bytes) if portal.parameter_format.is_binary(index) => {
                // What the client encoded by: its declared type, else the one we described.
                let wire_type = match declared.filter(|t| *t != Type::UNKNOWN) {
                    Some(declared) => declared,
                    None => arrow_pg::datatypes::into_pg_type(&target).unwrap_or(Type::UNKNOWN),
                };
                binary_value(&wire_type, &bytes).map_err(|e| user_error("22P03", format!("parameter ${}: {e}", index + 1)))?
            }
            Some(bytes) => {
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| user_error("22021", format!("parameter ${} is not valid UTF-8", index + 1)))?;
                let text = datetime_text(text, &target);
                match (&target, text.strip_prefix("\\x")) {
                    (DataType::Binary, Some(hex)) => ScalarValue::Binary(Some(
                        hex_bytes(hex).ok_or_else(|| user_error("22P02", format!("parameter ${}: invalid bytea hex", index + 1)))?,
                    )),
                    _ => ScalarValue::Utf8(Some(text.to_string())),
                }
            }
        };
        if let (ScalarValue::Utf8(Some(text)), DataType::Decimal128(_, scale)) = (&value, &target) {
            check_decimal_digits(text, *scale).map_err(|e| user_error("22003", format!("parameter ${}: {e}", index + 1)))?;
        }
        let value = if value.data_type() == target {
            value
        } else {
            value.cast_to(&target).map_err(|e| {
                user_error("22P02", format!("parameter ${}: cannot convert to {target}: {e}", index + 1))
            })?
        };
        values.push(value);
    }
    Ok(ParamValues::from(values))
}

/// A date or timestamp parameter's text in the form Arrow reads, as PostgreSQL
/// reads it: a date takes the date part of a text with a time or zone after it
/// (pgjdbc's `setDate` sends `2024-01-01 +00`); a timestamp without time zone
/// ignores a zone offset (pgjdbc's `setTimestamp` sends the JVM zone's offset,
/// which PostgreSQL drops for `timestamp`); a date alone with a zone is its
/// midnight there.
fn datetime_text<'a>(text: &'a str, target: &DataType) -> std::borrow::Cow<'a, str> {
    use std::borrow::Cow;
    let trimmed = text.trim();
    let is_date = |part: &str| part.len() == 10 && part.as_bytes()[4] == b'-' && part.as_bytes()[7] == b'-';
    let (date, rest) = match trimmed.split_once([' ', 'T']) {
        Some((date, rest)) if is_date(date) => (date, rest.trim()),
        _ => return Cow::Borrowed(text),
    };
    // The zone: `Z`, or a sign after which only digits and `:` follow.
    let zone_start = rest.rfind(['+', '-']).filter(|at| rest[at + 1..].chars().all(|c| c.is_ascii_digit() || c == ':') && at + 1 < rest.len());
    let zone_start = zone_start.or_else(|| rest.ends_with('Z').then(|| rest.len() - 1));
    let (time, zone) = match zone_start {
        Some(at) => (rest[..at].trim(), &rest[at..]),
        None => (rest, ""),
    };
    match target {
        DataType::Date32 | DataType::Date64 => Cow::Borrowed(date),
        DataType::Timestamp(_, None) if !zone.is_empty() => {
            Cow::Owned(if time.is_empty() { format!("{date} 00:00:00") } else { format!("{date} {time}") })
        }
        DataType::Timestamp(_, Some(_)) if time.is_empty() && !zone.is_empty() => Cow::Owned(format!("{date} 00:00:00{zone}")),
        _ => Cow::Borrowed(text),
    }
}

/// A decimal parameter's digits after the point must fit the placeholder's scale:
/// Arrow's cast would round them away, and a numeric the client declared without
/// a column to compare with is read with 10 (PostgreSQL's numeric has no limit).
fn check_decimal_digits(text: &str, scale: i8) -> Result<(), String> {
    let mantissa = text.trim().split(['e', 'E']).next().unwrap_or("");
    let fraction = mantissa.split_once('.').map_or("", |(_, fraction)| fraction).trim_end_matches('0');
    match usize::try_from(scale) {
        Ok(scale) if fraction.len() > scale => Err(format!(
            "{text} has {} digits after the point, more than the {scale} this comparison reads; compare with a \
             column of more scale or cast the parameter (CAST($n AS DECIMAL(38, {})))",
            fraction.len(),
            fraction.len().min(38)
        )),
        _ => Ok(()),
    }
}

/// The bytes of PostgreSQL's bytea hex text (after its `\x`).
fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// psycopg's `Decimal('0.12345678901')` was rounded to 10 digits, silently.
    #[test]
    fn decimal_digits_beyond_the_scale_are_refused_not_rounded() {
        assert!(check_decimal_digits("12.34", 10).is_ok());
        assert!(check_decimal_digits("12.3400000000000", 2).is_ok(), "trailing zeros are no digits");
        let error = check_decimal_digits("0.12345678901", 10).expect_err("11 digits");
        assert!(error.contains("11 digits after the point") && error.contains("DECIMAL(38, 11)"), "{error}");
        assert!(check_decimal_digits("-5", 0).is_ok());
        assert_eq!(hex_bytes("01ff"), Some(vec![1, 255]));
        assert_eq!(hex_bytes("0"), None);
    }

    /// pgjdbc's `setDate` and `setTimestamp` texts, read as PostgreSQL reads them.
    #[test]
    fn date_and_timestamp_texts_with_zones_read_as_postgresql_reads_them() {
        let micros = |zone: Option<&str>| DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, zone.map(Into::into));
        assert_eq!(datetime_text("2024-01-01 +00", &DataType::Date32), "2024-01-01");
        assert_eq!(datetime_text("2024-01-01 12:30:00-05", &DataType::Date32), "2024-01-01");
        assert_eq!(datetime_text("2024-01-01 12:00:00-05", &micros(None)), "2024-01-01 12:00:00");
        assert_eq!(datetime_text("2024-01-01 12:00:00.5+05:30", &micros(None)), "2024-01-01 12:00:00.5");
        assert_eq!(datetime_text("2024-01-01 +00", &micros(None)), "2024-01-01 00:00:00");
        assert_eq!(datetime_text("2024-01-01 +00", &micros(Some("UTC"))), "2024-01-01 00:00:00+00");
        assert_eq!(datetime_text("2024-01-01 12:00:00-05", &micros(Some("UTC"))), "2024-01-01 12:00:00-05");
        assert_eq!(datetime_text("2024-01-01 12:00:00", &micros(None)), "2024-01-01 12:00:00");
        assert_eq!(datetime_text("plain text", &DataType::Date32), "plain text");
    }
}
