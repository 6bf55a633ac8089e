//! SQL text to statements (PostgreSQL dialect), with PostgreSQL-only forms rewritten
//! into what DataFusion runs.
//!
//! Queries that read user tables only are parsed as they are and get the emulation's
//! (`datafusion-pg-catalog`) expression rewrites (`= ANY(array)`, `current_user`,
//! `COLLATE`, `::regclass`, ...), but not its `RemoveSubqueryFromProjection`: that
//! rule turns every correlated scalar subquery of a select list into NULL, a silent
//! wrong answer for `SELECT a.id, (SELECT count(*) FROM t b WHERE b.id = a.id) ...`,
//! which DataFusion plans correctly. Catalog queries (naming `pg_catalog`,
//! `information_schema` or `pg_*` tables) and other statements take the emulation's
//! whole parser, whose fixed replacements of known client catalog queries need it.
//! [`crate::pg_rewrite`] runs last on both.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::{visit_relations, CopySource, ObjectName, Query, Statement as SqlStatement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion_pg_catalog::sql::rules::{
    AliasDuplicatedProjectionRewrite, CurrentUserVariableToSessionUserFunctionCall, FixArrayLiteral, FixVersionColumnName,
    ResolveUnqualifiedIdentifier, RewriteArrayAnyAllOperation, RewritePgCatalogOperator, RewriteRegCastToSubquery,
    SqlStatementRewriteRule, StripCallableQualifier, StripCollate,
};
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;

use crate::error::{QueryError, QueryResult};

pub struct SqlParser {
    compatibility: PostgresCompatibilityParser,
    /// The emulation's rules for queries of user tables.
    query_rules: Vec<Arc<dyn SqlStatementRewriteRule>>,
}

impl Default for SqlParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SqlParser {
    pub fn new() -> Self {
        // The emulation's order, without RemoveSubqueryFromProjection and without the
        // rule that qualifies unqualified `pg_*` table names (catalog queries only).
        let query_rules: Vec<Arc<dyn SqlStatementRewriteRule>> = vec![
            Arc::new(AliasDuplicatedProjectionRewrite),
            Arc::new(ResolveUnqualifiedIdentifier),
            Arc::new(RewriteArrayAnyAllOperation),
            Arc::new(StripCallableQualifier),
            Arc::new(FixArrayLiteral),
            Arc::new(CurrentUserVariableToSessionUserFunctionCall),
            Arc::new(StripCollate),
            Arc::new(RewritePgCatalogOperator),
            Arc::new(RewriteRegCastToSubquery::new()),
            Arc::new(FixVersionColumnName),
        ];
        Self { compatibility: PostgresCompatibilityParser::new(), query_rules }
    }

    /// Splits `sql` into statements. What the emulation's parser refuses goes to
    /// DataFusion's own parser (its statements and its error messages).
    pub fn parse(&self, sql: &str) -> QueryResult<Vec<Statement>> {
        crate::statement_limits::check_complexity(sql)?;
        if let Some(statements) = self.parse_user_queries(sql) {
            return Ok(statements);
        }
        if let Ok(statements) = self.compatibility.parse(sql) {
            return Ok(statements
                .into_iter()
                .map(|mut statement| {
                    rewrite_for_postgres(&mut statement);
                    Statement::Statement(Box::new(statement))
                })
                .collect());
        }
        let mut statements: VecDeque<Statement> = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {})
            .map_err(|e| QueryError::DataFusion(DataFusionError::from(e)))?;
        for statement in &mut statements {
            if let Statement::Statement(inner) = statement {
                rewrite_for_postgres(inner);
            }
        }
        Ok(statements.into())
    }

    /// `sql` when it is only queries of user tables, rewritten; `None` otherwise. A
    /// query inside `DECLARE … CURSOR FOR`, `COPY (…) TO` or `EXPLAIN` counts: named
    /// cursors, connectorx and `\copy` read results that way, and must get the same
    /// answers as the query alone.
    fn parse_user_queries(&self, sql: &str) -> Option<Vec<Statement>> {
        let statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).ok()?;
        if statements.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(statements.len());
        for mut statement in statements {
            if reads_the_catalog(&statement) {
                return None;
            }
            match &mut statement {
                SqlStatement::Query(_) => statement = self.rewrite_query(statement),
                // What a cursor is read with, around it in one string, needs no rewrite.
                SqlStatement::StartTransaction { .. }
                | SqlStatement::Commit { .. }
                | SqlStatement::Rollback { .. }
                | SqlStatement::Fetch { .. }
                | SqlStatement::Close { .. } => {}
                _ => {
                    let query = inner_query(&mut statement)?;
                    let SqlStatement::Query(rewritten) = self.rewrite_query(SqlStatement::Query(query.clone())) else { return None };
                    *query = rewritten;
                }
            }
            out.push(Statement::Statement(Box::new(statement)));
        }
        Some(out)
    }

    fn rewrite_query(&self, query: SqlStatement) -> SqlStatement {
        let mut rewritten = self.query_rules.iter().fold(query, |statement, rule| rule.rewrite(statement));
        rewrite_for_postgres(&mut rewritten);
        rewritten
    }
}

/// PostgreSQL's forms rewritten for DataFusion, then the columns of derived tables and
/// CTEs named as PostgreSQL names them (figured from the rewritten forms).
fn rewrite_for_postgres(statement: &mut SqlStatement) {
    crate::pg_rewrite::rewrite(statement);
    crate::pg_column_names::name_nested_select_lists(statement);
}

/// The query a statement runs to give its rows: a cursor's, a `COPY (query) TO`'s or
/// an `EXPLAIN`ed one.
fn inner_query(statement: &mut SqlStatement) -> Option<&mut Box<Query>> {
    match statement {
        SqlStatement::Declare { stmts } => match stmts.as_mut_slice() {
            [declare] => declare.for_query.as_mut(),
            _ => None,
        },
        SqlStatement::Copy { source: CopySource::Query(query), .. } => Some(query),
        SqlStatement::Explain { statement, .. } => match statement.as_mut() {
            SqlStatement::Query(query) => Some(query),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `statement` names a catalog table: in `pg_catalog` or
/// `information_schema`, or an unqualified `pg_*` name (PostgreSQL finds those in
/// `pg_catalog` first).
fn reads_the_catalog(statement: &SqlStatement) -> bool {
    let flow = visit_relations(statement, |name: &ObjectName| {
        let parts: Vec<String> = name.0.iter().map(|part| part.to_string().trim_matches('"').to_ascii_lowercase()).collect();
        let catalog = match parts.as_slice() {
            [only] => only.starts_with("pg_"),
            [schema, ..] => schema == "pg_catalog" || schema == "information_schema",
            [] => false,
        };
        if catalog { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    flow.is_break()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(statements: &[Statement]) -> String {
        statements.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    }

    #[test]
    fn correlated_subqueries_of_user_queries_are_kept() {
        let parser = SqlParser::new();
        let sql = "SELECT a.id, (SELECT count(*) FROM shop.items AS b WHERE b.id = a.id) AS n FROM shop.items AS a";
        assert_eq!(text(&parser.parse(sql).expect("parse")), sql);
        // The emulation's parser alone makes the subquery NULL.
        let emulated = PostgresCompatibilityParser::new().parse(sql).expect("parse");
        assert!(emulated[0].to_string().contains("NULL AS n"), "{}", emulated[0]);
    }

    #[test]
    fn catalog_queries_and_other_statements_take_the_emulations_parser() {
        let parser = SqlParser::new();
        let unqualified = text(&parser.parse("SELECT relname FROM pg_class").expect("parse"));
        assert!(unqualified.contains("pg_catalog.pg_class"), "{unqualified}");
        let rewritten = text(&parser.parse("SELECT 1 FROM shop.items WHERE name = current_user").expect("parse"));
        assert!(!rewritten.contains("current_user"), "user queries keep the emulation's expression rewrites: {rewritten}");
        assert!(reads_the_catalog(&datafusion::sql::sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, "SELECT * FROM information_schema.tables").expect("parse")[0]));
    }
}
