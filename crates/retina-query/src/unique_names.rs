//! Result columns that share a name, as PostgreSQL allows them.
//!
//! `SELECT count(*), count(*) FROM t`, `SELECT x, x FROM t` and `SELECT 1 AS a, 2
//! AS a` are valid PostgreSQL, and its result simply has two columns of one name.
//! DataFusion refuses a projection whose expressions share a name ("Projections
//! require unique expression names"), and its names are not PostgreSQL's: a cast
//! does not count, so `arrow_typeof(x::date)` and `arrow_typeof(x)` collide too. So
//! a statement refused for that alone is planned again with every item of its select
//! lists named uniquely ([`with_unique_names`]), those of a CTE that lists its
//! columns too (`WITH RECURSIVE fib(a, b) AS (SELECT 0::bigint, 0 …)`). Only the
//! plan's names change: the PostgreSQL endpoint names result columns from the
//! statement's text, not from the plan.

use datafusion::error::DataFusionError;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Ident, Query, SelectItem, SetExpr, Statement as SqlStatement};

/// Whether planning failed only because two result expressions share a name.
pub(crate) fn is_duplicate_name_error(error: &DataFusionError) -> bool {
    // DataFusion has no error variant for it; this is its message
    // (`validate_unique_names` in datafusion-expr).
    error.to_string().contains("require unique expression names")
}

/// `statement` with every item of its outermost select lists (each branch of a set
/// operation) given a distinct name: its alias or its text, with ` (2)`, ` (3)` …
/// after a name already taken. `None` when the statement is not a query.
pub(crate) fn with_unique_names(statement: &Statement) -> Option<Statement> {
    let Statement::Statement(inner) = statement else { return None };
    let SqlStatement::Query(query) = inner.as_ref() else { return None };
    let mut query = query.clone();
    name_query(&mut query);
    Some(Statement::Statement(Box::new(SqlStatement::Query(query))))
}

fn name_query(query: &mut Query) {
    if let Some(with) = &mut query.with {
        // A CTE with a column list (`WITH t(a, b) AS (…)`) is read by those names,
        // so its select lists may be named apart too; one without is read by them.
        for cte in with.cte_tables.iter_mut().filter(|cte| !cte.alias.columns.is_empty()) {
            name_query(&mut cte.query);
        }
    }
    name_body(&mut query.body);
}

fn name_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            let mut taken: Vec<String> = Vec::with_capacity(select.projection.len());
            for item in select.projection.iter_mut() {
                let (expr, name) = match std::mem::replace(item, SelectItem::Wildcard(Default::default())) {
                    SelectItem::UnnamedExpr(expr) => {
                        let name = expr.to_string();
                        (expr, name)
                    }
                    SelectItem::ExprWithAlias { expr, alias } => {
                        let name = alias.value.clone();
                        (expr, name)
                    }
                    other => {
                        *item = other;
                        continue;
                    }
                };
                let name = distinct(name, &taken);
                taken.push(name.clone());
                *item = SelectItem::ExprWithAlias { expr, alias: Ident::with_quote('"', name) };
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_body(left);
            name_body(right);
        }
        SetExpr::Query(inner) => name_query(inner),
        _ => {}
    }
}

/// `name`, or `name (N)` with the first N from 2 that no taken name has.
fn distinct(name: String, taken: &[String]) -> String {
    if !taken.contains(&name) {
        return name;
    }
    (2..).map(|n| format!("{name} ({n})")).find(|candidate| !taken.contains(candidate)).unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::parser::DFParser;

    fn named(sql: &str) -> String {
        let statement = DFParser::parse_sql(sql).expect("parse").pop_front().expect("one statement");
        with_unique_names(&statement).expect("a query").to_string()
    }

    #[test]
    fn every_item_of_each_select_list_gets_a_distinct_name() {
        assert_eq!(named("SELECT count(*), count(*) FROM t"), r#"SELECT count(*) AS "count(*)", count(*) AS "count(*) (2)" FROM t"#);
        assert_eq!(named("SELECT 1 AS a, 2 AS a, 3 AS a"), r#"SELECT 1 AS "a", 2 AS "a (2)", 3 AS "a (3)""#);
        assert_eq!(named("SELECT t.*, x FROM t"), r#"SELECT t.*, x AS "x" FROM t"#);
        assert_eq!(
            named("SELECT x, x FROM a UNION ALL SELECT y, y FROM b"),
            r#"SELECT x AS "x", x AS "x (2)" FROM a UNION ALL SELECT y AS "y", y AS "y (2)" FROM b"#
        );
    }

    #[test]
    fn a_cte_with_a_column_list_is_named_apart_and_one_without_is_not() {
        assert_eq!(
            named("WITH f(a, b) AS (SELECT 1, 1), g AS (SELECT 2, 2) SELECT * FROM f, g"),
            r#"WITH f (a, b) AS (SELECT 1 AS "1", 1 AS "1 (2)"), g AS (SELECT 2, 2) SELECT * FROM f, g"#
        );
    }

    #[test]
    fn statements_that_are_not_queries_are_left_alone() {
        let statement = DFParser::parse_sql("SHOW search_path").expect("parse").pop_front().expect("one");
        assert!(with_unique_names(&statement).is_none());
    }
}
