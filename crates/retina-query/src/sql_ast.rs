//! Small helpers over sqlparser's syntax tree, shared by the rewrites of
//! PostgreSQL forms (`pg_rewrite`, `pg_select_list`).

use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// `text` parsed as one PostgreSQL expression; `None` if it is not one.
pub(crate) fn parse(text: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {}).try_with_sql(text).ok()?.parse_expr().ok()
}

/// Whether `expr` is a call of one of the common aggregate functions.
pub(crate) fn is_aggregate(expr: &Expr) -> bool {
    const AGGREGATES: [&str; 10] = ["max", "min", "count", "sum", "avg", "array_agg", "string_agg", "bool_and", "bool_or", "json_agg"];
    matches!(expr, Expr::Function(f) if AGGREGATES.iter().any(|name| f.name.to_string().eq_ignore_ascii_case(name)))
}

/// `sql`'s first statement after `rewrite`, as text: how the rewrites' tests read.
#[cfg(test)]
pub(crate) fn rewritten_by(sql: &str, rewrite: fn(&mut datafusion::sql::sqlparser::ast::Statement)) -> String {
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parse");
    rewrite(&mut statements[0]);
    statements[0].to_string()
}
