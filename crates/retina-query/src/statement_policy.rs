//! What SQL may do: read Retina's tables and nothing else.
//!
//! Decided on the whole logical plan by allow-list, node by node, including the plans
//! under `EXPLAIN` / `EXPLAIN ANALYZE` (which run their input), subqueries in
//! expressions, and the plans of prepared statements and cursors (every path plans
//! through [`crate::session::RetinaSession::plan_in`]). Looking at the top node only
//! let `EXPLAIN ANALYZE COPY (…) TO '/any/path'` write any file the server could.
//!
//! An allow-list rather than a deny-list: a plan kind DataFusion adds later is refused
//! until someone decides it is safe.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::LogicalPlan;

use crate::error::{QueryError, QueryResult};

/// Checks every node of `plan`; the first one that is not a read is refused:
/// writes, DDL and `COPY … TO` with [`QueryError::ReadOnly`] (25006), a scan of a
/// file-backed table or an unknown extension node with [`QueryError::NotPermitted`]
/// (42501). A top-level utility statement (`LogicalPlan::Statement`) is the caller's
/// to answer and passes; nested under `EXPLAIN` it is refused.
pub fn check_read_only(plan: &LogicalPlan) -> QueryResult<()> {
    let mut refusal = None;
    let walked = plan.apply_with_subqueries(|node| {
        if std::ptr::eq(node, plan) && matches!(node, LogicalPlan::Statement(_)) {
            return Ok(TreeNodeRecursion::Continue);
        }
        match refused(node) {
            Some(error) => {
                refusal = Some(error);
                Ok(TreeNodeRecursion::Stop)
            }
            None => Ok(TreeNodeRecursion::Continue),
        }
    });
    walked?;
    refusal.map_or(Ok(()), Err)
}

/// Why `node` may not run, if it may not.
fn refused(node: &LogicalPlan) -> Option<QueryError> {
    match node {
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Aggregate(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Join(_)
        | LogicalPlan::Repartition(_)
        | LogicalPlan::Union(_)
        | LogicalPlan::EmptyRelation(_)
        | LogicalPlan::Subquery(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Values(_)
        | LogicalPlan::Explain(_)
        | LogicalPlan::Analyze(_)
        | LogicalPlan::Distinct(_)
        | LogicalPlan::DescribeTable(_)
        | LogicalPlan::Unnest(_)
        | LogicalPlan::RecursiveQuery(_) => None,
        LogicalPlan::TableScan(scan) => {
            let reads_files = source_as_provider(&scan.source).is_ok_and(|provider| {
                let provider: &dyn std::any::Any = provider.as_ref();
                provider.downcast_ref::<ListingTable>().is_some()
            });
            reads_files.then(|| QueryError::NotPermitted {
                statement: format!("reading files of the server's file system (table {})", scan.table_name),
            })
        }
        LogicalPlan::Dml(dml) => Some(QueryError::ReadOnly { statement: format!("{} of {}", dml.op, dml.table_name) }),
        LogicalPlan::Ddl(ddl) => Some(QueryError::ReadOnly { statement: ddl.name().to_string() }),
        LogicalPlan::Copy(copy) => Some(QueryError::ReadOnly { statement: format!("COPY … TO '{}'", copy.output_url) }),
        LogicalPlan::Statement(statement) => Some(QueryError::NotPermitted { statement: format!("{} inside another statement", statement.name()) }),
        LogicalPlan::Extension(extension) => {
            Some(QueryError::NotPermitted { statement: format!("the plan node {}", extension.node.name()) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn plan(context: &SessionContext, sql: &str) -> LogicalPlan {
        context.state().create_logical_plan(sql).await.expect("plans")
    }

    fn message(result: QueryResult<()>) -> String {
        match result {
            Ok(()) => "allowed".into(),
            Err(error) => format!("{} {error}", error.sqlstate()),
        }
    }

    /// Every DataFusion statement that writes, copies or defines, at the top and
    /// under EXPLAIN / EXPLAIN ANALYZE / in a subquery, is refused; reads pass.
    #[tokio::test]
    async fn every_writing_plan_kind_is_refused_wherever_it_sits() {
        let context = SessionContext::new();
        context.sql("CREATE TABLE t (a INT, b TEXT)").await.expect("a table to aim at");
        let writes = [
            "COPY (SELECT 1) TO '/tmp/retina-policy-probe.csv' STORED AS CSV",
            "COPY t TO '/tmp/retina-policy-probe' STORED AS PARQUET",
            "INSERT INTO t VALUES (1, 'x')",
            "INSERT INTO t SELECT * FROM t",
            "UPDATE t SET a = 2",
            "DELETE FROM t",
            "CREATE TABLE u (a INT)",
            "CREATE TABLE u AS SELECT 1",
            "CREATE VIEW v AS SELECT 1",
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
            "CREATE SCHEMA s",
            "CREATE DATABASE d",
            "DROP TABLE t",
            "DROP VIEW IF EXISTS v",
            "DROP SCHEMA IF EXISTS s",
            "CREATE FUNCTION f(INT) RETURNS INT RETURN $1",
            "DROP FUNCTION IF EXISTS f",
            "TRUNCATE t",
        ];
        for write in writes {
            let Ok(logical) = context.state().create_logical_plan(write).await else {
                continue; // not planned by this DataFusion at all
            };
            for sql in [write.to_string(), format!("EXPLAIN {write}"), format!("EXPLAIN ANALYZE {write}"), format!("EXPLAIN VERBOSE {write}")] {
                let Ok(logical) = context.state().create_logical_plan(&sql).await else { continue };
                let refused = message(check_read_only(&logical));
                assert!(refused.starts_with("25006") || refused.starts_with("42501"), "{sql}: {refused}");
            }
            assert!(check_read_only(&logical).is_err(), "{write}");
        }
        let reads = [
            "SELECT * FROM t",
            "EXPLAIN SELECT a FROM t",
            "EXPLAIN ANALYZE SELECT count(*) FROM t",
            "SELECT * FROM t WHERE a IN (SELECT a FROM t)",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
            "SELECT * FROM generate_series(1, 3)",
            "SELECT unnest([1, 2])",
            "VALUES (1), (2)",
            "DESCRIBE t",
        ];
        for sql in reads {
            assert_eq!(message(check_read_only(&plan(&context, sql).await)), "allowed", "{sql}");
        }
        assert!(!std::path::Path::new("/tmp/retina-policy-probe.csv").exists());
    }

    /// A table that reads files of the server (registered some other way) is refused,
    /// also as a subquery in an expression.
    #[tokio::test]
    async fn a_file_backed_table_is_refused_also_in_a_subquery() {
        let dir = tempfile::tempdir().expect("temp dir");
        let csv = dir.path().join("secret.csv");
        std::fs::write(&csv, "a\n1\n").expect("csv");
        let context = SessionContext::new();
        context.register_csv("secret", csv.to_str().expect("utf-8 path"), Default::default()).await.expect("registered");
        context.sql("CREATE TABLE t (a INT)").await.expect("t");
        for sql in ["SELECT * FROM secret", "SELECT 1 WHERE 1 IN (SELECT a FROM secret)", "EXPLAIN ANALYZE SELECT * FROM secret"] {
            let refused = message(check_read_only(&plan(&context, sql).await));
            assert!(refused.starts_with("42501") && refused.contains("table secret"), "{sql}: {refused}");
        }
    }
}
