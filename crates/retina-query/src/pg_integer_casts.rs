//! Casts of fractional numbers to integers round, as in PostgreSQL: `2.7::int` is 3
//! and `avg(qty)::int` the nearest integer, where DataFusion's casts truncate (2).
//! Halves round away from zero (`2.5::int` is 3, `-2.5::int` -3), as PostgreSQL
//! rounds a numeric. PostgreSQL rounds a float8 half to even (`2.5::float8::int` is
//! 2), but here decimal literals are float8 (`2.5`, `x / 4.0`), and they must round
//! as the numerics they are in PostgreSQL; so floats round as numerics do.
//!
//! An analyzer rule, because only after type coercion is an operand's type known
//! (`CAST(x AS INT)` of a bigint column must stay exact, not go through a float). The
//! session runs type coercion once more after it, to type the expressions it adds.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::functions::math::expr_fn::round;
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

/// Rewrites `CAST(x AS <integer>)` (and `TRY_CAST`) of a float or a numeric with a
/// fraction into a cast of `x` rounded.
#[derive(Debug, Default)]
pub struct RoundingIntegerCasts;

impl AnalyzerRule for RoundingIntegerCasts {
    fn name(&self) -> &str {
        "retina_rounding_integer_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(rewrite_plan)?.data)
    }
}

fn rewrite_plan(plan: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    // The columns an expression of `plan` may read, as type coercion resolves them.
    let mut schema = merge_schema(&plan.inputs());
    if let LogicalPlan::TableScan(scan) = &plan {
        schema.merge(&DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?);
    }
    let names = NamePreserver::new(&plan);
    let rewritten = plan.map_expressions(|expr| {
        let name = names.save(&expr);
        Ok(expr.transform_up(|expr| Ok(rounded_cast(expr, &schema)))?.update_data(|expr| name.restore(expr)))
    })?;
    match rewritten.transformed {
        true => rewritten.map_data(LogicalPlan::recompute_schema),
        false => Ok(rewritten),
    }
}

fn rounded_cast(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let (operand, field) = match &expr {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => (expr, field),
        _ => return Transformed::no(expr),
    };
    if !matches!(field.data_type(), DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64) {
        return Transformed::no(expr);
    }
    let Ok(from) = operand.get_type(schema) else { return Transformed::no(expr) };
    let fractional = match from {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => true,
        DataType::Decimal32(_, scale) | DataType::Decimal64(_, scale) | DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) => {
            scale > 0
        }
        _ => false,
    };
    if !fractional {
        return Transformed::no(expr);
    }
    let rounded = Box::new(round(vec![operand.as_ref().clone()]));
    let field = field.clone();
    Transformed::yes(match expr {
        Expr::TryCast(_) => Expr::TryCast(TryCast { expr: rounded, field }),
        _ => Expr::Cast(Cast { expr: rounded, field }),
    })
}
