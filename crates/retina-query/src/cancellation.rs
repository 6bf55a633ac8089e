//! Queries that can be cancelled while a join runs.
//!
//! A query is cancelled (pgwire's cancel request, a dropped stream) only when its
//! future yields to the runtime. DataFusion's own `EnsureCooperative` rule makes
//! the *leaves* yield (every scan is wrapped in a `CooperativeExec`), but a join
//! that has taken its inputs produces output without polling them again: a nested
//! loop or cross join of a few thousand rows runs for seconds, or hours, without
//! one yield, and a cancel waits for the whole query. Wrapping every join in a
//! `CooperativeExec` spends tokio's cooperative budget per output batch, so the
//! query yields every few batches and a cancel lands within milliseconds. The cost
//! is a budget check per batch.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::ExecutionPlan;

/// Puts a [`CooperativeExec`] above every join (see the module doc).
#[derive(Debug, Default)]
pub struct YieldingJoins;

/// Whether `plan` is a join operator (DataFusion names them `…JoinExec`).
fn is_join(plan: &dyn ExecutionPlan) -> bool {
    plan.name().ends_with("JoinExec")
}

impl PhysicalOptimizerRule for YieldingJoins {
    fn optimize(&self, plan: Arc<dyn ExecutionPlan>, _config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            // Already above a join (a second run of the rule): nothing to add.
            if node.name() == "CooperativeExec" {
                return Ok(Transformed::no(node));
            }
            let wrapped: Vec<Arc<dyn ExecutionPlan>> = node
                .children()
                .into_iter()
                .map(|child| if is_join(child.as_ref()) { Arc::new(CooperativeExec::new(Arc::clone(child))) as _ } else { Arc::clone(child) })
                .collect();
            if wrapped.iter().zip(node.children()).all(|(new, old)| Arc::ptr_eq(new, old)) {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(replace_children_if_necessary(node, wrapped)?))
        })
        .map(|transformed| transformed.data)
        .and_then(|plan| if is_join(plan.as_ref()) { Ok(Arc::new(CooperativeExec::new(plan)) as _) } else { Ok(plan) })
    }

    fn name(&self) -> &str {
        "YieldingJoins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use datafusion::execution::session_state::SessionStateBuilder;
    use datafusion::physical_plan::displayable;
    use datafusion::prelude::SessionContext;

    use super::*;

    #[tokio::test]
    async fn every_join_has_one_cooperative_exec_above_it() {
        let state = SessionStateBuilder::new().with_default_features().with_physical_optimizer_rule(Arc::new(YieldingJoins)).build();
        let context = SessionContext::new_with_state(state);
        context.sql("CREATE TABLE t AS VALUES (1), (2), (3)").await.expect("create").collect().await.expect("run");
        let plan = context
            .sql("SELECT count(*) FROM t a, t b, t c WHERE a.column1 + b.column1 > c.column1")
            .await
            .expect("plan")
            .create_physical_plan()
            .await
            .expect("physical plan");
        let text = displayable(plan.as_ref()).indent(true).to_string();
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        let joins: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains("JoinExec")).collect();
        assert!(joins.len() >= 2, "a three-way join plans at least two joins: {text}");
        for &i in &joins {
            assert!(i > 0 && lines[i - 1].starts_with("CooperativeExec"), "join at line {i} is not wrapped: {text}");
        }
        let again = YieldingJoins.optimize(Arc::clone(&plan), &ConfigOptions::new()).expect("optimize again");
        assert_eq!(displayable(again.as_ref()).indent(true).to_string(), text, "a second run wraps nothing more");
    }
}
