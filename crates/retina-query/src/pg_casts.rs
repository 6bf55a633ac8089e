//! Casts (and the rounding they share) that PostgreSQL does otherwise than DataFusion,
//! made as PostgreSQL makes them:
//!
//! - **Fractional numbers to integers round**: `2.7::int` is 3 and `avg(qty)::int`
//!   the nearest integer, where DataFusion's casts truncate (2). A numeric's half
//!   rounds away from zero (`2.5::int` is 3, `-2.5::int` -3), a float's to even, as
//!   PostgreSQL's `rint` (`2.5::float8::int` is 2, `3.5::float8::int` 4).
//! - **`round` of a float** rounds a tie to even too (`round(2.5::float8)` is 2),
//!   where DataFusion's rounds it away from zero (3).
//! - **Text to timestamps and dates**: a timestamp without seconds
//!   (`'2024-01-01 10:00'`) gets them, a date written with a time
//!   (`'2024-01-05 10:00'::date`) is read by its date, and `'2024-1-5'` and
//!   `'20240105'` are dates, where Arrow's parsers refuse them. A zone written after
//!   a `timestamp`'s time (without time zone) is ignored, as PostgreSQL ignores it,
//!   where Arrow's parser moved the time to UTC. This covers the casts type coercion
//!   adds too: `WHERE o_entry_d > '2024-01-01 10:00'`.
//!
//! An analyzer rule, because only after type coercion are an operand's type and the
//! casts coercion adds known (`CAST(x AS INT)` of a bigint column must stay exact,
//! not go through a float). The session runs type coercion once more after it, to
//! type the expressions it adds.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::functions::math::expr_fn::{abs, round, trunc};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{cast, lit, when, Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

use crate::pg_literals::{postgres_date, timestamp_with_seconds, wall_clock_timestamp};
use crate::plan_rewrite::rewrite_expressions;

/// Rewrites the casts of a plan's expressions (see the module's documentation).
#[derive(Debug, Default)]
pub struct PostgresCasts;

impl AnalyzerRule for PostgresCasts {
    fn name(&self) -> &str {
        "retina_postgres_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions(plan, &postgres_cast)
    }
}

fn postgres_cast(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    if let Some(rounded) = float_round(&expr, schema) {
        return Transformed::yes(rounded);
    }
    let (operand, field) = match &expr {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => (expr, field),
        _ => return Transformed::no(expr),
    };
    let new_operand = match field.data_type() {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => rounded(operand, schema),
        DataType::Timestamp(_, None) => respelled_text(operand, wall_clock_timestamp),
        DataType::Timestamp(..) => respelled_text(operand, timestamp_with_seconds),
        DataType::Date32 | DataType::Date64 => respelled_text(operand, postgres_date),
        _ => None,
    };
    let Some(new_operand) = new_operand else { return Transformed::no(expr) };
    let (new_operand, field) = (Box::new(new_operand), field.clone());
    Transformed::yes(match expr {
        Expr::TryCast(_) => Expr::TryCast(TryCast { expr: new_operand, field }),
        _ => Expr::Cast(Cast { expr: new_operand, field }),
    })
}

/// `operand` rounded when it is a float or a numeric with a fraction.
fn rounded(operand: &Expr, schema: &DFSchema) -> Option<Expr> {
    match operand.get_type(schema).ok()? {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => half_to_even(operand.clone()),
        DataType::Decimal32(_, scale) | DataType::Decimal64(_, scale) | DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale)
            if scale > 0 =>
        {
            Some(round(vec![operand.clone()]))
        }
        _ => None,
    }
}

/// `round(x)` of a float, as PostgreSQL's: C's `rint`.
fn float_round(expr: &Expr, schema: &DFSchema) -> Option<Expr> {
    let Expr::ScalarFunction(function) = expr else { return None };
    let [x] = function.args.as_slice() else { return None };
    if function.name() != "round" {
        return None;
    }
    match x.get_type(schema).ok()? {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => half_to_even(x.clone()),
        _ => None,
    }
}

/// `x` rounded to the nearest integer, a tie to the even one (C's `rint`):
/// `CASE WHEN abs(x - trunc(x)) = 0.5 THEN 2 * round(x / 2) ELSE round(x) END`.
fn half_to_even(x: Expr) -> Option<Expr> {
    let x = cast(x, DataType::Float64);
    let tie = abs(x.clone() - trunc(vec![x.clone()])).eq(lit(0.5f64));
    when(tie, lit(2.0f64) * round(vec![x.clone() / lit(2.0f64)])).otherwise(round(vec![x])).ok()
}

/// `operand` with its text respelled, when it is a text literal `respell` reads.
fn respelled_text(operand: &Expr, respell: fn(&str) -> Option<String>) -> Option<Expr> {
    let Expr::Literal(value, metadata) = operand else { return None };
    let respelled = match value {
        ScalarValue::Utf8(Some(text)) => ScalarValue::Utf8(Some(respell(text)?)),
        ScalarValue::LargeUtf8(Some(text)) => ScalarValue::LargeUtf8(Some(respell(text)?)),
        ScalarValue::Utf8View(Some(text)) => ScalarValue::Utf8View(Some(respell(text)?)),
        _ => return None,
    };
    Some(Expr::Literal(respelled, metadata.clone()))
}
