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
//! PostgreSQL's interval functions are in [`crate::pg_interval_functions`].

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{
    DataType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType, IntervalDayTimeType,
    IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType, TimeUnit,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, DataFusionError, Result};
use datafusion::functions_aggregate::first_last::first_value_udaf;
use datafusion::logical_expr::expr::{AggregateFunction, AggregateFunctionParams, ScalarFunction, Sort as SortExpr};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::plan_rewrite::rewrite_expressions;
use crate::udf_result::shaped_like_args;

pub(crate) const NANOS_PER_DAY: i128 = 86_400_000_000_000;
/// PostgreSQL's length of a month in an interval's arithmetic and comparisons.
pub(crate) const DAYS_PER_MONTH: i128 = 30;

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
        shaped_like_args(lengths(&value.to_array(args.number_rows)?)?, &args.args)
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
