//! PostgreSQL's interval functions that DataFusion lacks:
//!
//! - `interval_mul` and `interval_div` ([`IntervalScaled`]), which
//!   `7 * interval '1 day'` and `interval '3 hours' / 2` become (`pg_rewrite`):
//!   DataFusion refused to multiply an interval by a number;
//! - `justify_hours`, `justify_days` and `justify_interval` ([`JustifyFunction`]).
//!
//! Both follow PostgreSQL's `timestamp.c`, with a month as 30 days and a day as 24
//! hours ([`crate::pg_intervals`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit};
use datafusion::arrow::error::ArrowError;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};

use crate::pg_intervals::{DAYS_PER_MONTH, NANOS_PER_DAY};
use crate::udf_result::shaped_like_args;

/// Names of PostgreSQL's functions behind `number * interval` and `interval / number`.
pub const INTERVAL_MUL_FUNCTION: &str = "interval_mul";
pub const INTERVAL_DIV_FUNCTION: &str = "interval_div";

/// `interval_mul(interval, factor)` and `interval_div(interval, divisor)` as
/// PostgreSQL computes them: the whole months and days scale, and their fractions
/// cascade down (a month as 30 days, a day as 24 hours), never up.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalScaled {
    divide: bool,
    signature: Signature,
}

impl IntervalScaled {
    pub fn mul() -> Self {
        Self { divide: false, signature: Signature::any(2, Volatility::Immutable) }
    }

    pub fn div() -> Self {
        Self { divide: true, signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for IntervalScaled {
    fn name(&self) -> &str {
        if self.divide {
            INTERVAL_DIV_FUNCTION
        } else {
            INTERVAL_MUL_FUNCTION
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Interval(_) | DataType::Null, factor] if factor.is_numeric() || factor.is_null() => {
                Ok(DataType::Interval(IntervalUnit::MonthDayNano))
            }
            _ => Err(DataFusionError::Plan(format!("{} takes an interval and a number, not {arg_types:?}", self.name()))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let [interval, factor] = args.args.as_slice() else {
            return Err(DataFusionError::Internal(format!("{} takes two arguments", self.name())));
        };
        let interval = cast(&interval.to_array(rows)?, &DataType::Interval(IntervalUnit::MonthDayNano))?;
        let factor = cast(&factor.to_array(rows)?, &DataType::Float64)?;
        let (interval, factor) = (interval.as_primitive::<IntervalMonthDayNanoType>(), factor.as_primitive::<Float64Type>());
        let mut scaled = Vec::with_capacity(rows);
        for row in 0..rows {
            if interval.is_null(row) || factor.is_null(row) {
                scaled.push(None);
                continue;
            }
            let factor = match (self.divide, factor.value(row)) {
                (true, divisor) if divisor == 0.0 => return Err(DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None)),
                (true, divisor) => 1.0 / divisor,
                (false, factor) => factor,
            };
            scaled.push(Some(interval_mul(interval.value(row), factor)?));
        }
        shaped_like_args(Arc::new(IntervalMonthDayNanoArray::from(scaled)), &args.args)
    }
}

/// Which of PostgreSQL's `justify_*` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Justify {
    /// Whole 24 hours become days.
    Hours,
    /// Whole 30 days become months.
    Days,
    /// Both, with the signs of the parts made to agree.
    Interval,
}

/// `justify_hours`, `justify_days` and `justify_interval` as in PostgreSQL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JustifyFunction {
    justify: Justify,
    signature: Signature,
}

impl JustifyFunction {
    pub fn new(justify: Justify) -> Self {
        Self { justify, signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for JustifyFunction {
    fn name(&self) -> &str {
        match self.justify {
            Justify::Hours => "justify_hours",
            Justify::Days => "justify_days",
            Justify::Interval => "justify_interval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Interval(_) | DataType::Null] => Ok(DataType::Interval(IntervalUnit::MonthDayNano)),
            _ => Err(DataFusionError::Plan(format!("{} takes an interval, not {arg_types:?}", self.name()))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return Err(DataFusionError::Internal(format!("{} takes one interval", self.name())));
        };
        let intervals = cast(&value.to_array(args.number_rows)?, &DataType::Interval(IntervalUnit::MonthDayNano))?;
        let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
        let justified = intervals.iter().map(|span| span.map(|span| justify(span, self.justify))).collect::<IntervalMonthDayNanoArray>();
        shaped_like_args(Arc::new(justified), &args.args)
    }
}

/// PostgreSQL's `interval_justify_hours`, `_days` and `_interval` (timestamp.c).
fn justify(span: IntervalMonthDayNano, justify: Justify) -> IntervalMonthDayNano {
    const NANOS: i64 = NANOS_PER_DAY as i64;
    const MONTH: i32 = DAYS_PER_MONTH as i32;
    let (mut months, mut days, mut time) = (span.months, span.days, span.nanoseconds);
    let days_into_months = |months: &mut i32, days: &mut i32| {
        *months += *days / MONTH;
        *days %= MONTH;
    };
    let hours_into_days = |days: &mut i32, time: &mut i64| {
        *days += (*time / NANOS) as i32;
        *time %= NANOS;
    };
    let signs_agree = |days: &mut i32, time: &mut i64| {
        if *days > 0 && *time < 0 {
            *time += NANOS;
            *days -= 1;
        } else if *days < 0 && *time > 0 {
            *time -= NANOS;
            *days += 1;
        }
    };
    match justify {
        Justify::Hours => {
            hours_into_days(&mut days, &mut time);
            signs_agree(&mut days, &mut time);
        }
        Justify::Days => {
            days_into_months(&mut months, &mut days);
            if months > 0 && days < 0 {
                days += MONTH;
                months -= 1;
            } else if months < 0 && days > 0 {
                days -= MONTH;
                months += 1;
            }
        }
        Justify::Interval => {
            if (days > 0 && time > 0) || (days < 0 && time < 0) {
                days_into_months(&mut months, &mut days);
            }
            hours_into_days(&mut days, &mut time);
            days_into_months(&mut months, &mut days);
            if months > 0 && (days < 0 || (days == 0 && time < 0)) {
                days += MONTH;
                months -= 1;
            } else if months < 0 && (days > 0 || (days == 0 && time > 0)) {
                days -= MONTH;
                months += 1;
            }
            signs_agree(&mut days, &mut time);
        }
    }
    IntervalMonthDayNano::new(months, days, time)
}

/// PostgreSQL's `interval_mul` (timestamp.c), on nanoseconds.
fn interval_mul(span: IntervalMonthDayNano, factor: f64) -> Result<IntervalMonthDayNano> {
    const SECONDS_PER_DAY: f64 = 86_400.0;
    // PostgreSQL's TSROUND: to whole microseconds, so whole numbers come out whole.
    let round_micros = |value: f64| (value * 1e6).round_ties_even() / 1e6;
    let out_of_range = || DataFusionError::Execution("interval out of range".into());
    let whole = |value: f64| if value.is_finite() && value.abs() <= f64::from(i32::MAX) { Ok(value.trunc() as i32) } else { Err(out_of_range()) };
    let months = whole(f64::from(span.months) * factor)?;
    let mut days = whole(f64::from(span.days) * factor)?;
    let month_remainder_days = round_micros((f64::from(span.months) * factor - f64::from(months)) * DAYS_PER_MONTH as f64);
    let mut second_remainder =
        round_micros((f64::from(span.days) * factor - f64::from(days) + month_remainder_days - month_remainder_days.trunc()) * SECONDS_PER_DAY);
    if second_remainder.abs() >= SECONDS_PER_DAY {
        let whole_days = (second_remainder / SECONDS_PER_DAY).trunc();
        days += whole_days as i32;
        second_remainder -= whole_days * SECONDS_PER_DAY;
    }
    days += month_remainder_days.trunc() as i32;
    let micros = ((span.nanoseconds as f64 / 1e3) * factor + second_remainder * 1e6).round_ties_even();
    if !micros.is_finite() || micros.abs() >= 9.2e15 {
        return Err(out_of_range());
    }
    Ok(IntervalMonthDayNano::new(months, days, micros as i64 * 1_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each as PostgreSQL 15 answers it.
    #[test]
    fn intervals_scale_as_in_postgresql() {
        let hour = 3_600_000_000_000i64;
        let cases = [
            (IntervalMonthDayNano::new(0, 1, 0), 7.0, IntervalMonthDayNano::new(0, 7, 0)),
            (IntervalMonthDayNano::new(0, 0, hour), 1.5, IntervalMonthDayNano::new(0, 0, 3 * hour / 2)),
            (IntervalMonthDayNano::new(0, 0, 3 * hour), 0.5, IntervalMonthDayNano::new(0, 0, 3 * hour / 2)),
            (IntervalMonthDayNano::new(1, 0, 0), 2.5, IntervalMonthDayNano::new(2, 15, 0)),
            (IntervalMonthDayNano::new(0, 1, 0), 1.5, IntervalMonthDayNano::new(0, 1, 12 * hour)),
            (IntervalMonthDayNano::new(1, 1, hour), -2.0, IntervalMonthDayNano::new(-2, -2, -2 * hour)),
        ];
        for (span, factor, want) in cases {
            assert_eq!(interval_mul(span, factor).expect("in range"), want, "{span:?} * {factor}");
        }
        assert!(interval_mul(IntervalMonthDayNano::new(i32::MAX, 0, 0), 2.0).is_err());
    }

    /// Each as PostgreSQL 15 answers it.
    #[test]
    fn intervals_justify_as_in_postgresql() {
        let hour = 3_600_000_000_000i64;
        let span = |months, days, hours: i64| IntervalMonthDayNano::new(months, days, hours * hour);
        assert_eq!(justify(span(0, 0, 27), Justify::Hours), span(0, 1, 3));
        assert_eq!(justify(span(0, 1, -3), Justify::Hours), span(0, 0, 21));
        assert_eq!(justify(span(0, 35, 0), Justify::Days), span(1, 5, 0));
        assert_eq!(justify(span(1, -35, 0), Justify::Days), span(0, -5, 0));
        assert_eq!(justify(span(1, -1, 0), Justify::Interval), span(0, 29, 0));
        assert_eq!(justify(span(0, 29, 27), Justify::Interval), span(1, 0, 3));
        assert_eq!(justify(span(-1, 0, 27), Justify::Interval), span(0, -28, -21));
    }
}
