//! Select-list forms that PostgreSQL answers and DataFusion reads otherwise or not
//! at all, rewritten in each query's select list (not inside its subqueries, whose
//! own select lists are rewritten in their turn):
//!
//! - `generate_series(…)`, a set-returning function in PostgreSQL (a row per value)
//!   and an array-valued one in DataFusion: `unnest(generate_series(…))`. In FROM it
//!   is DataFusion's table function already.
//! - `[NOT] EXISTS (subquery)` (SQLAlchemy's `exists()`), which DataFusion plans only
//!   as a filter: a plain subquery (no WITH, grouping, DISTINCT, aggregate, LIMIT or
//!   set operation) becomes `(SELECT count(*) > 0 FROM … WHERE …)` (`= 0` for NOT),
//!   a scalar subquery DataFusion decorrelates. A count over no row is 0, so the
//!   answer is false, not NULL.
//!
//! Unnamed, such a column keeps PostgreSQL's name (`generate_series`, `exists`), as do
//! the forms `pg_rewrite` spells otherwise (`extract`, `date_part`).

use std::ops::ControlFlow;

use crate::sql_ast::{is_aggregate, parse};

use datafusion::sql::sqlparser::ast::{
    visit_expressions, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, Query, SelectItem, SetExpr, Statement,
    VisitMut, VisitorMut,
};

/// Rewrites the select lists of `statement`'s queries in place.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut SelectLists);
}

struct SelectLists;

impl VisitorMut for SelectLists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(expr) = item {
                if let Some(name) = postgres_name(expr) {
                    *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::new(name) };
                }
            }
            let (SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }) = item else { continue };
            rewrite_outside_subqueries(expr);
        }
        ControlFlow::Continue(())
    }
}

/// The name PostgreSQL gives an unnamed column of these forms, and of those
/// `pg_rewrite` spells otherwise (`extract`/`date_part` of seconds become arithmetic).
fn postgres_name(expr: &Expr) -> Option<&'static str> {
    match expr {
        Expr::Function(function) => {
            let name = function.name.to_string();
            match () {
                _ if is_generate_series(&name) => Some("generate_series"),
                _ if name.eq_ignore_ascii_case("date_part") => Some("date_part"),
                _ => None,
            }
        }
        Expr::Exists { .. } => Some("exists"),
        Expr::Extract { .. } => Some("extract"),
        _ => None,
    }
}

fn is_generate_series(name: &str) -> bool {
    name.eq_ignore_ascii_case("generate_series")
}

/// Rewrites `expr` and what it is built of (operators, parentheses, CASE, function
/// arguments, casts), leaves first, without entering subqueries.
fn rewrite_outside_subqueries(expr: &mut Expr) {
    match expr {
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } | Expr::Cast { expr: inner, .. } => rewrite_outside_subqueries(inner),
        Expr::BinaryOp { left, right, .. } => {
            rewrite_outside_subqueries(left);
            rewrite_outside_subqueries(right);
        }
        Expr::Case { operand, conditions, else_result, .. } => {
            let whens = conditions.iter_mut().flat_map(|when| [&mut when.condition, &mut when.result]);
            for inner in operand.iter_mut().map(|operand| &mut **operand).chain(whens).chain(else_result.iter_mut().map(|e| &mut **e)) {
                rewrite_outside_subqueries(inner);
            }
        }
        Expr::Function(function) => {
            if let FunctionArguments::List(list) = &mut function.args {
                for arg in &mut list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(inner)) = arg {
                        rewrite_outside_subqueries(inner);
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(rewritten) = replacement(expr) {
        *expr = rewritten;
    }
}

fn replacement(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::Function(function) if is_generate_series(function.name.to_string().as_str()) => parse(&format!("unnest({function})")),
        Expr::Exists { subquery, negated } => exists_as_count(subquery, *negated),
        _ => None,
    }
}

/// `[NOT] EXISTS (subquery)` as a counting scalar subquery, when the subquery is plain.
fn exists_as_count(subquery: &Query, negated: bool) -> Option<Expr> {
    let SetExpr::Select(select) = subquery.body.as_ref() else { return None };
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty());
    let mut aggregated = false;
    let _ = visit_expressions(&select.projection, |expr| {
        aggregated |= is_aggregate(expr);
        ControlFlow::<()>::Continue(())
    });
    let plain = subquery.with.is_none()
        && subquery.limit_clause.is_none()
        && subquery.fetch.is_none()
        && select.distinct.is_none()
        && select.having.is_none()
        && select.named_window.is_empty()
        && !grouped
        && !aggregated;
    if !plain {
        return None;
    }
    let mut counted = subquery.clone();
    counted.order_by = None;
    let SetExpr::Select(select) = counted.body.as_mut() else { return None };
    select.projection = vec![SelectItem::UnnamedExpr(parse(if negated { "count(*) = 0" } else { "count(*) > 0" })?)];
    Some(Expr::Subquery(Box::new(counted)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        crate::sql_ast::rewritten_by(sql, rewrite)
    }

    #[test]
    fn generate_series_outside_from_gives_rows() {
        assert_eq!(rewritten("SELECT generate_series(1, 3) AS g"), "SELECT unnest(generate_series(1, 3)) AS g");
        assert_eq!(rewritten("SELECT generate_series(1, 3)"), "SELECT unnest(generate_series(1, 3)) AS generate_series");
        assert_eq!(rewritten("SELECT generate_series(1, 3) * 2 FROM t"), "SELECT unnest(generate_series(1, 3)) * 2 FROM t");
        // In FROM it is DataFusion's table function already.
        assert_eq!(rewritten("SELECT * FROM generate_series(1, 3)"), "SELECT * FROM generate_series(1, 3)");
        // A subquery's select list is rewritten once, in its turn; arguments too.
        assert_eq!(
            rewritten("SELECT s.g FROM (SELECT abs(generate_series(-1, 1)) AS g) AS s"),
            "SELECT s.g FROM (SELECT abs(unnest(generate_series(-1, 1))) AS g) AS s"
        );
    }

    #[test]
    fn forms_spelled_otherwise_keep_postgresql_names() {
        assert_eq!(
            rewritten("SELECT extract(second FROM t), date_part('second', t), date_part('second', t) AS d FROM x"),
            "SELECT EXTRACT(SECOND FROM t) AS extract, date_part('second', t) AS date_part, date_part('second', t) AS d FROM x"
        );
    }

    #[test]
    fn exists_in_a_select_list_counts_and_elsewhere_stays() {
        assert_eq!(
            rewritten("SELECT u.id, EXISTS (SELECT 1 FROM o WHERE o.u = u.id ORDER BY o.x) FROM u"),
            "SELECT u.id, (SELECT count(*) > 0 FROM o WHERE o.u = u.id) AS exists FROM u"
        );
        assert_eq!(rewritten("SELECT NOT EXISTS (SELECT * FROM o) AS none"), "SELECT (SELECT count(*) = 0 FROM o) AS none");
        assert_eq!(
            rewritten("SELECT CASE WHEN (EXISTS (SELECT * FROM o)) THEN 'y' END AS c"),
            "SELECT CASE WHEN ((SELECT count(*) > 0 FROM o)) THEN 'y' END AS c"
        );
        // Inside a subquery's filter it stays a semi-join.
        assert_eq!(
            rewritten("SELECT (SELECT count(*) FROM o WHERE EXISTS (SELECT 1 FROM p)) AS n"),
            "SELECT (SELECT count(*) FROM o WHERE EXISTS (SELECT 1 FROM p)) AS n"
        );
        // An aggregate always gives a row, a LIMIT may be 0: left to DataFusion.
        assert_eq!(rewritten("SELECT EXISTS (SELECT max(x) FROM o) AS e"), "SELECT EXISTS (SELECT max(x) FROM o) AS e");
        assert_eq!(rewritten("SELECT EXISTS (SELECT 1 FROM o LIMIT 0) AS e"), "SELECT EXISTS (SELECT 1 FROM o LIMIT 0) AS e");
        // In WHERE DataFusion plans it as a semi-join.
        assert_eq!(rewritten("SELECT 1 FROM u WHERE EXISTS (SELECT 1 FROM o)"), "SELECT 1 FROM u WHERE EXISTS (SELECT 1 FROM o)");
    }
}
