//! Intervals compared and sorted by their length, as in PostgreSQL, where Arrow
//! compares their months, then days, then nanoseconds: `now() - o_entry_d >
//! interval '3 days'` was false for every order older than that (the difference of
//! two timestamps holds only nanoseconds, 0 days < 3 days), and `interval '25 hours'
//! > interval '1 day'` was false. PostgreSQL's `interval_cmp_value` counts a month
//! as 30 days and a day as 24 hours; so does [`IntervalLength`].
//!
//! An analyzer rule after type coercion: each comparison of intervals (or
//! durations, which a timestamp difference is) compares their lengths, and a sort
//! key of that type sorts by its length, and `min`/`max` of intervals take the
//! shortest and longest. (`GROUP BY` still tells `'24 hours'` from `'1 day'`.)
//!
//! Also PostgreSQL's `interval_mul` and `interval_div` ([`IntervalScaled`]), which
//! `7 * interval '1 day'` and `interval '3 hours' / 2` become (`pg_rewrite`):
//! DataFusion refused to multiply an interval by a number; and its `justify_hours`,
//! `justify_days` and `justify_interval` ([`JustifyFunction`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, IntervalMonthDayNanoArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float64Type, IntervalDayTimeType,
    IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType, TimeUnit,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::functions_aggregate::first_last::first_value_udaf;
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams, ScalarFunction, Sort as SortExpr};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::plan_rewrite::rewrite_expressions;

const NANOS_PER_DAY: i128 = 86_400_000_000_000;
/// PostgreSQL's length of a month in an interval comparison.
const DAYS_PER_MONTH: i128 = 30;

/// Compares and sorts intervals by their length (see the module's documentation).
#[derive(Debug, Default)]
pub struct PostgresIntervals;

impl AnalyzerRule for PostgresIntervals {
    fn name(&self) -> &str {
        "retina_postgres_intervals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = rewrite_expressions(plan, &compared_by_length)?;
        Ok(plan.transform_up_with_subqueries(sorted_by_length)?.data)
    }
}

fn is_interval(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Interval(_) | DataType::Duration(_))
}

fn length_of(expr: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(ScalarUDF::new_from_impl(IntervalLength::new())), vec![expr]))
}

fn compared_by_length(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    if let Expr::AggregateFunction(aggregate) = &expr {
        return match longest_or_shortest(aggregate, schema) {
            Some(replacement) => Transformed::yes(replacement),
            None => Transformed::no(expr),
        };
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &expr else { return Transformed::no(expr) };
    use Operator::{Eq, Gt, GtEq, IsDistinctFrom, IsNotDistinctFrom, Lt, LtEq, NotEq};
    if !matches!(op, Eq | NotEq | Lt | LtEq | Gt | GtEq | IsDistinctFrom | IsNotDistinctFrom) {
        return Transformed::no(expr);
    }
    let (Ok(left_type), Ok(right_type)) = (left.get_type(schema), right.get_type(schema)) else { return Transformed::no(expr) };
    if !is_interval(&left_type) || !is_interval(&right_type) {
        return Transformed::no(expr);
    }
    let (left, right) = (length_of(left.as_ref().clone()), length_of(right.as_ref().clone()));
    Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(Box::new(left), *op, Box::new(right))))
}

/// `max`/`min` of intervals as the longest or shortest one:
/// `first_value(x ORDER BY length(x) DESC NULLS LAST)` (`ASC` for `min`).
fn longest_or_shortest(aggregate: &AggregateFunction, schema: &DFSchema) -> Option<Expr> {
    let AggregateFunction { func, params } = aggregate;
    let shortest = match func.name() {
        "max" => false,
        "min" => true,
        _ => return None,
    };
    let [arg] = params.args.as_slice() else { return None };
    if params.distinct || !params.order_by.is_empty() || !matches!(arg.get_type(schema).ok()?, DataType::Interval(_)) {
        return None;
    }
    let order_by = vec![SortExpr::new(length_of(arg.clone()), shortest, false)];
    let params = AggregateFunctionParams { order_by, ..params.clone() };
    Some(Expr::AggregateFunction(AggregateFunction { func: first_value_udaf(), params }))
}

/// A sort whose keys include an interval sorts by its length (the rows keep it).
fn sorted_by_length(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Sort(mut sort) = plan else { return Ok(Transformed::no(plan)) };
    let schema = sort.input.schema().clone();
    let mut changed = false;
    for key in &mut sort.expr {
        if key.expr.get_type(&schema).is_ok_and(|data_type| is_interval(&data_type)) {
            key.expr = length_of(key.expr.clone());
            changed = true;
        }
    }
    Ok(Transformed::new_transformed(LogicalPlan::Sort(sort), changed))
}

/// The length of an interval or a duration in nanoseconds, a month counted as 30
/// days and a day as 24 hours (PostgreSQL's `interval_cmp_value`); a numeric, which
/// holds any interval's.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalLength {
    signature: Signature,
}

impl IntervalLength {
    fn new() -> Self {
        Self { signature: Signature::any(1, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for IntervalLength {
    fn name(&self) -> &str {
        "interval_length"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(38, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return Err(DataFusionError::Internal("interval_length takes one interval".into()));
        };
        match value {
            ColumnarValue::Array(array) => Ok(ColumnarValue::Array(lengths(array)?)),
            ColumnarValue::Scalar(scalar) => {
                let lengths = lengths(&scalar.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&lengths, 0)?))
            }
        }
    }
}

fn lengths(array: &ArrayRef) -> Result<ArrayRef> {
    let nanos: Vec<Option<i128>> = match array.data_type() {
        DataType::Interval(IntervalUnit::MonthDayNano) => each(array.as_primitive::<IntervalMonthDayNanoType>(), |v| {
            (i128::from(v.months) * DAYS_PER_MONTH + i128::from(v.days)) * NANOS_PER_DAY + i128::from(v.nanoseconds)
        }),
        DataType::Interval(IntervalUnit::DayTime) => {
            each(array.as_primitive::<IntervalDayTimeType>(), |v| i128::from(v.days) * NANOS_PER_DAY + i128::from(v.milliseconds) * 1_000_000)
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            each(array.as_primitive::<IntervalYearMonthType>(), |months| i128::from(months) * DAYS_PER_MONTH * NANOS_PER_DAY)
        }
        DataType::Duration(TimeUnit::Second) => each(array.as_primitive::<DurationSecondType>(), |v| i128::from(v) * 1_000_000_000),
        DataType::Duration(TimeUnit::Millisecond) => each(array.as_primitive::<DurationMillisecondType>(), |v| i128::from(v) * 1_000_000),
        DataType::Duration(TimeUnit::Microsecond) => each(array.as_primitive::<DurationMicrosecondType>(), |v| i128::from(v) * 1_000),
        DataType::Duration(TimeUnit::Nanosecond) => each(array.as_primitive::<DurationNanosecondType>(), i128::from),
        other => return Err(DataFusionError::Internal(format!("interval_length takes an interval, not {other}"))),
    };
    Ok(Arc::new(Decimal128Array::from(nanos).with_precision_and_scale(38, 0)?))
}

fn each<T: datafusion::arrow::datatypes::ArrowPrimitiveType>(
    array: &datafusion::arrow::array::PrimitiveArray<T>,
    length: impl Fn(T::Native) -> i128,
) -> Vec<Option<i128>> {
    (0..array.len()).map(|row| array.is_valid(row).then(|| length(array.value(row)))).collect()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{DurationNanosecondArray, IntervalMonthDayNanoArray};
    use datafusion::arrow::datatypes::IntervalMonthDayNano;

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

    #[test]
    fn a_month_is_thirty_days_and_a_day_twenty_four_hours() {
        let hour = 3_600_000_000_000i64;
        let intervals: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(1, 0, 0)),
            Some(IntervalMonthDayNano::new(0, 30, 0)),
            Some(IntervalMonthDayNano::new(0, 1, 0)),
            Some(IntervalMonthDayNano::new(0, 0, 25 * hour)),
            None,
        ]));
        let lengths = lengths(&intervals).expect("lengths");
        let lengths = lengths.as_primitive::<datafusion::arrow::datatypes::Decimal128Type>();
        assert_eq!(lengths.value(0), lengths.value(1), "1 month = 30 days");
        assert!(lengths.value(3) > lengths.value(2), "25 hours > 1 day");
        assert!(lengths.is_null(4));
        let durations: ArrayRef = Arc::new(DurationNanosecondArray::from(vec![24 * hour]));
        let day = lengths.value(2);
        assert_eq!(super::lengths(&durations).expect("lengths").as_primitive::<datafusion::arrow::datatypes::Decimal128Type>().value(0), day);
    }
}

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
        let scalars = args.args.iter().all(|arg| matches!(arg, ColumnarValue::Scalar(_)));
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
        let scaled: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(scaled));
        match scalars {
            true => Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&scaled, 0)?)),
            false => Ok(ColumnarValue::Array(scaled)),
        }
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
        let justified: ArrayRef = Arc::new(intervals.iter().map(|span| span.map(|span| justify(span, self.justify))).collect::<IntervalMonthDayNanoArray>());
        match value {
            ColumnarValue::Scalar(_) => Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&justified, 0)?)),
            ColumnarValue::Array(_) => Ok(ColumnarValue::Array(justified)),
        }
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
