//! The frame of Retina's PostgreSQL analyzer rules ([`crate::pg_casts`],
//! [`crate::pg_arithmetic`], [`crate::pg_intervals`]): each rewrites the expressions
//! of a plan after type coercion, bottom up and inside subqueries, with the types
//! that the plan's inputs give, and keeps the name a rewritten expression had (plans
//! above address its column by that name).

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// `plan` with `rewrite` applied to each of its expressions' nodes, bottom up.
pub fn rewrite_expressions(plan: LogicalPlan, rewrite: &dyn Fn(Expr, &DFSchema) -> Transformed<Expr>) -> Result<LogicalPlan> {
    Ok(plan.transform_up_with_subqueries(|plan| rewrite_plan(plan, rewrite))?.data)
}

fn rewrite_plan(plan: LogicalPlan, rewrite: &dyn Fn(Expr, &DFSchema) -> Transformed<Expr>) -> Result<Transformed<LogicalPlan>> {
    // The columns an expression of `plan` may read, as type coercion resolves them.
    let mut schema = merge_schema(&plan.inputs());
    if let LogicalPlan::TableScan(scan) = &plan {
        schema.merge(&DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?);
    }
    let names = NamePreserver::new(&plan);
    let rewritten = plan.map_expressions(|expr| {
        let name = names.save(&expr);
        Ok(expr.transform_up(|expr| Ok(rewrite(expr, &schema)))?.update_data(|expr| name.restore(expr)))
    })?;
    // A rewrite may change a type (a bigint's sum becomes numeric): every plan is
    // typed again from its inputs, or one above would describe the column by the old
    // type.
    rewritten.map_data(LogicalPlan::recompute_schema)
}
