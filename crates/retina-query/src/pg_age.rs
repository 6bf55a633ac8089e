//! `age(a, b)` and `age(a)`: PostgreSQL's symbolic difference of two timestamps in
//! years, months, days and time (`1 year 2 mons 14 days`), which DataFusion lacks.
//! `age(a)` is `age(current_date, a)`.
//!
//! Written here after PostgreSQL's `timestamp_age`: the fields are subtracted one by
//! one, and a negative field borrows from the next larger, a day from the length of
//! the earlier timestamp's month. No crate computes this calendar difference the same
//! way (chrono's `signed_duration_since` gives a length, not calendar fields).

use std::sync::Arc;

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, TimeUnit, TimestampMicrosecondType};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use crate::udf_result::shaped_like_args;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility};

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Age {
    signature: Signature,
}

impl Age {
    pub fn new() -> Self {
        // Stable, not immutable: `age(a)` reads today's date.
        Self { signature: Signature::one_of(vec![TypeSignature::Any(1), TypeSignature::Any(2)], Volatility::Stable) }
    }
}

impl Default for Age {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for Age {
    fn name(&self) -> &str {
        "age"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        for arg in arg_types {
            if !matches!(arg, DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Null) {
                return Err(DataFusionError::Plan(format!("age() takes timestamps or dates, not {arg}")));
            }
        }
        Ok(DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let today = || ColumnarValue::Scalar(ScalarValue::TimestampMicrosecond(midnight_today(), None));
        let (later, earlier) = match args.args.as_slice() {
            [a] => (today(), a.clone()),
            [a, b] => (a.clone(), b.clone()),
            _ => return Err(DataFusionError::Plan("age() takes one or two timestamps".into())),
        };
        let (later, earlier) = (micros(&later, rows)?, micros(&earlier, rows)?);
        let (later, earlier) = (later.as_primitive::<TimestampMicrosecondType>(), earlier.as_primitive::<TimestampMicrosecondType>());
        let ages: IntervalMonthDayNanoArray = (0..rows)
            .map(|row| match (later.is_valid(row), earlier.is_valid(row)) {
                (true, true) => Some(age(later.value_as_datetime(row)?, earlier.value_as_datetime(row)?)),
                _ => None,
            })
            .collect();
        shaped_like_args(Arc::new(ages), &args.args)
    }
}

fn midnight_today() -> Option<i64> {
    Some(chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0)?.and_utc().timestamp_micros())
}

/// `value` as `rows` microsecond timestamps (a timestamptz read in UTC, the session's
/// zone).
fn micros(value: &ColumnarValue, rows: usize) -> Result<ArrayRef> {
    let array = value.to_array(rows)?;
    Ok(cast(&array, &DataType::Timestamp(TimeUnit::Microsecond, None))?)
}

/// PostgreSQL's `timestamp_age(later, earlier)`.
fn age(later: NaiveDateTime, earlier: NaiveDateTime) -> IntervalMonthDayNano {
    let fields = |t: NaiveDateTime| {
        [t.year() as i64, t.month() as i64, t.day() as i64, t.hour() as i64, t.minute() as i64, t.second() as i64, (t.nanosecond() / 1_000) as i64]
    };
    let (a, b) = (fields(later), fields(earlier));
    let negative = later < earlier;
    let sign = if negative { -1 } else { 1 };
    let [mut year, mut month, mut day, mut hour, mut minute, mut second, mut micros] = std::array::from_fn(|i| sign * (a[i] - b[i]));
    carry(&mut micros, &mut second, 1_000_000);
    carry(&mut second, &mut minute, 60);
    carry(&mut minute, &mut hour, 60);
    carry(&mut hour, &mut day, 24);
    // A day is borrowed from the month of the earlier timestamp.
    let (borrow_year, borrow_month) = if negative { (a[0], a[1]) } else { (b[0], b[1]) };
    carry(&mut day, &mut month, days_in_month(borrow_year, borrow_month));
    carry(&mut month, &mut year, 12);
    let nanos = (((hour * 60 + minute) * 60 + second) * 1_000_000 + micros) * 1_000;
    IntervalMonthDayNano::new((sign * (year * 12 + month)) as i32, (sign * day) as i32, sign * nanos)
}

/// While `lower` is negative, borrows one `upper` worth `units` of it.
fn carry(lower: &mut i64, upper: &mut i64, units: i64) {
    while *lower < 0 {
        *lower += units;
        *upper -= 1;
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let first = |y: i64, m: i64| NaiveDate::from_ymd_opt(y as i32, m as u32, 1);
    let next = if month == 12 { first(year + 1, 1) } else { first(year, month + 1) };
    match (first(year, month), next) {
        (Some(start), Some(end)) => (end - start).num_days(),
        _ => 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").expect("a timestamp")
    }

    /// Each as PostgreSQL 15 answers it.
    #[test]
    fn ages_are_postgresql_symbolic_differences() {
        let hour = 3_600_000_000_000i64;
        let cases = [
            ("2024-03-15 00:00:00", "2023-01-01 00:00:00", IntervalMonthDayNano::new(14, 14, 0)),
            ("2024-03-01 00:00:00", "2024-01-31 00:00:00", IntervalMonthDayNano::new(1, 1, 0)),
            ("2023-01-01 00:00:00", "2024-03-15 10:00:00", IntervalMonthDayNano::new(-14, -14, -10 * hour)),
            ("2024-03-31 00:00:00", "2024-02-29 12:00:00", IntervalMonthDayNano::new(1, 1, 12 * hour)),
            ("2024-01-31 00:00:00", "2024-03-01 00:00:00", IntervalMonthDayNano::new(-1, -1, 0)),
            ("2024-03-01 00:00:00", "2024-01-31 23:59:59.5", IntervalMonthDayNano::new(1, 0, 500_000_000)),
        ];
        for (later, earlier, want) in cases {
            assert_eq!(age(at(later), at(earlier)), want, "age({later}, {earlier})");
        }
    }
}
