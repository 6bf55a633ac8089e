//! PostgreSQL's `timezone(zone, value)`, which is what `value AT TIME ZONE zone`
//! means ([`crate::pg_rewrite`] turns the one into the other, and the result column is
//! named `timezone`, as PostgreSQL names it).
//!
//! - A `timestamptz` gives the wall-clock time `zone`'s clocks show at that instant: a
//!   `timestamp` (no zone). `TIMESTAMPTZ '2024-01-01 12:00+00' AT TIME ZONE
//!   'America/New_York'` is `2024-01-01 07:00:00`.
//! - A `timestamp` is read as a wall-clock time in `zone`, giving the instant: a
//!   `timestamptz`, shown in the session's time zone (UTC).
//!
//! DataFusion plans `AT TIME ZONE` as a cast to a timestamp in `zone`. For a
//! `timestamptz` that keeps the instant and only relabels it, so clients got a
//! `timestamptz` with `zone`'s offset where PostgreSQL gives a plain `timestamp`
//! (psycopg and pgjdbc then hand out an aware value instead of a local one).
//!
//! The function only decides the type; the optimizer's simplification replaces it by
//! DataFusion's own casts and `to_local_time` before it runs.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    cast, ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name, also PostgreSQL's.
pub const TIME_ZONE_FUNCTION: &str = "timezone";
/// The session time zone, as DataFusion labels a `timestamptz` (`now()`'s type).
const SESSION_ZONE: &str = "UTC";

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimeZoneFunction {
    signature: Signature,
}

impl TimeZoneFunction {
    pub fn new() -> Self {
        Self { signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl Default for TimeZoneFunction {
    fn default() -> Self {
        Self::new()
    }
}

/// What a value of `input` becomes, or why it cannot.
enum Conversion {
    /// An instant to the wall-clock time in the zone.
    ToWallClock(TimeUnit),
    /// A wall-clock time in the zone to the instant.
    ToInstant(TimeUnit),
}

fn conversion(input: &DataType) -> Result<Conversion> {
    match input {
        DataType::Timestamp(unit, Some(_)) => Ok(Conversion::ToWallClock(*unit)),
        // An untyped literal reads as a timestamptz, as in PostgreSQL.
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(Conversion::ToWallClock(TimeUnit::Nanosecond)),
        DataType::Timestamp(unit, None) => Ok(Conversion::ToInstant(*unit)),
        DataType::Date32 | DataType::Date64 => Ok(Conversion::ToInstant(TimeUnit::Nanosecond)),
        other => Err(DataFusionError::Plan(format!("AT TIME ZONE takes a timestamp or timestamptz, not {other}"))),
    }
}

fn zone_of(value: Option<&ScalarValue>) -> Result<String> {
    match value {
        Some(ScalarValue::Utf8(Some(zone)) | ScalarValue::LargeUtf8(Some(zone)) | ScalarValue::Utf8View(Some(zone))) => Ok(zone.clone()),
        _ => Err(DataFusionError::Plan("AT TIME ZONE needs a constant time zone name, such as 'America/New_York'".into())),
    }
}

impl ScalarUDFImpl for TimeZoneFunction {
    fn name(&self) -> &str {
        TIME_ZONE_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Err(DataFusionError::Internal("timezone() has its type from its arguments (return_field_from_args)".into()))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [_, value] = args.arg_fields else {
            return Err(DataFusionError::Plan("timezone() takes a zone and a timestamp".into()));
        };
        zone_of(args.scalar_arguments.first().copied().flatten())?;
        let data_type = match conversion(value.data_type())? {
            Conversion::ToWallClock(unit) => DataType::Timestamp(unit, None),
            Conversion::ToInstant(unit) => DataType::Timestamp(unit, Some(SESSION_ZONE.into())),
        };
        Ok(Arc::new(Field::new(self.name(), data_type, value.is_nullable())))
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        let [zone, value] = args.as_slice() else {
            return Err(DataFusionError::Plan("timezone() takes a zone and a timestamp".into()));
        };
        let zone = match zone {
            Expr::Literal(literal, _) => zone_of(Some(literal))?,
            _ => zone_of(None)?,
        };
        let in_zone = |unit| DataType::Timestamp(unit, Some(zone.as_str().into()));
        let session = |unit| DataType::Timestamp(unit, Some(SESSION_ZONE.into()));
        let input = info.get_data_type(value)?;
        let replacement = match conversion(&input)? {
            Conversion::ToWallClock(unit) => {
                // A string is an instant written in the session's zone, not in `zone`.
                let instant = match input {
                    DataType::Timestamp(..) => value.clone(),
                    _ => cast(value.clone(), session(unit)),
                };
                Expr::ScalarFunction(ScalarFunction::new_udf(
                    datafusion::functions::datetime::to_local_time(),
                    vec![cast(instant, in_zone(unit))],
                ))
            }
            // A cast of a plain timestamp (a date at midnight) into a zone reads it as
            // that zone's wall clock.
            Conversion::ToInstant(unit) => {
                cast(cast(cast(value.clone(), DataType::Timestamp(unit, None)), in_zone(unit)), session(unit))
            }
        };
        Ok(ExprSimplifyResult::Simplified(replacement))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Err(DataFusionError::Internal("timezone() runs as the casts it simplifies to".into()))
    }
}
