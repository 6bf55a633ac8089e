//! Result column names as PostgreSQL gives them to a column without an alias
//! (`FigureColname` in its parser): a column's name, a function's name (`count`,
//! not DataFusion's `count(*)`), a cast's operand or else its type, `case`, and
//! `?column?` for anything else (`Int64(1)` in DataFusion). Clients address columns
//! by these names: pgjdbc's `getLong("count")`, pandas' and Polars' frame columns.
//! The outermost select list keeps DataFusion's names in the plan, which it needs
//! unique (PostgreSQL's need not be: `SELECT count(*), count(*)` has two columns
//! named `count`): only the names sent to the client change
//! ([`postgres_column_names`]). A nested query's columns are referred to by name
//! from around it (`SELECT count FROM (SELECT w, count(*) FROM t GROUP BY 1) AS v`,
//! what Superset, Metabase, Tableau and DuckDB's `postgres_query` send), so there
//! each unaliased item gets its PostgreSQL name as an alias where that name is
//! unique in its list ([`name_nested_select_lists`]).

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr,
    Statement as SqlStatement, TableFactor, TrimWhereField, VisitMut, VisitorMut,
};

use crate::pg_interval_functions::{INTERVAL_DIV_FUNCTION, INTERVAL_MUL_FUNCTION};
use crate::pg_rewrite::CUT_TEXT_FUNCTION;

/// The name PostgreSQL gives each result column of `statement`, where it can be
/// told from the text (`None`: keep the planner's name). Empty for statements that
/// are not a plain query, and when wildcards make the positions uncertain.
pub fn postgres_column_names(statement: &Statement, result_columns: usize) -> Vec<Option<String>> {
    let Statement::Statement(inner) = statement else { return Vec::new() };
    let SqlStatement::Query(query) = inner.as_ref() else { return Vec::new() };
    names_of_query(query, result_columns).unwrap_or_default()
}

fn names_of_query(query: &Query, result_columns: usize) -> Option<Vec<Option<String>>> {
    let mut body = query.body.as_ref();
    // A set operation's columns are named by its first branch.
    loop {
        body = match body {
            SetExpr::SetOperation { left, .. } => left,
            SetExpr::Query(inner) => inner.body.as_ref(),
            _ => break,
        };
    }
    let SetExpr::Select(select) = body else { return None };
    let wildcards = select.projection.iter().filter(|item| matches!(item, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))).count();
    let named = select.projection.len() - wildcards;
    let mut names = Vec::with_capacity(result_columns);
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(expr) => names.push(Some(expr_name(expr).unwrap_or_else(|| "?column?".to_string()))),
            // Given here too, not left to the planner: two columns may share an alias,
            // and then the plan names them apart (`retina_query`'s `unique_names`).
            SelectItem::ExprWithAlias { alias, .. } => names.push(Some(folded(alias))),
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) if wildcards == 1 => {
                // A lone wildcard stands for the columns the others do not take.
                names.extend(std::iter::repeat_n(None, result_columns.checked_sub(named)?));
            }
            _ => return None,
        }
    }
    (names.len() == result_columns).then_some(names)
}

/// An identifier as PostgreSQL folds it: lower case unless quoted.
fn folded(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(ident) => Some(folded(ident)),
        ObjectNamePart::Function(_) => None,
    }
}

/// `FigureColnameInternal`: the name an expression gives its column, if any.
fn expr_name(expr: &Expr) -> Option<String> {
    figured(expr).map(|(name, _)| name)
}

/// A name and its strength, as PostgreSQL's FigureColname: 2 for a column, function
/// or keyword name, 1 for a type's name. A cast takes its operand's strong name, or
/// else its own type's (`x::text::int` is `x`, `1.74::float8::int` is `int4`).
fn figured(expr: &Expr) -> Option<(String, u8)> {
    match expr {
        Expr::Nested(inner) => figured(inner),
        Expr::Cast { expr, data_type, .. } => match figured(expr) {
            Some((name, 2)) => Some((name, 2)),
            _ => Some((type_name(data_type), 1)),
        },
        Expr::TypedString(typed) => Some((type_name(&typed.data_type), 1)),
        // An operator written as a function by `pg_rewrite` names no column, as the operator.
        Expr::Function(function)
            if matches!(last_name(&function.name).as_deref(), Some(INTERVAL_MUL_FUNCTION | INTERVAL_DIV_FUNCTION)) =>
        {
            None
        }
        // The cut a `varchar(n)` cast was given (`pg_rewrite`) names as its text.
        Expr::Function(function) if last_name(&function.name).as_deref() == Some(CUT_TEXT_FUNCTION) => match &function.args {
            FunctionArguments::List(list) => match list.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(text))) => figured(text),
                _ => None,
            },
            _ => None,
        },
        other => strong_name(other).map(|name| (name, 2)),
    }
}

fn strong_name(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Identifier(ident) => Some(folded(ident)),
        Expr::CompoundIdentifier(idents) => idents.last().map(folded),
        Expr::Function(function) => last_name(&function.name),
        Expr::Case { .. } => Some("case".into()),
        Expr::Exists { .. } => Some("exists".into()),
        Expr::Array(_) => Some("array".into()),
        Expr::Extract { .. } => Some("extract".into()),
        Expr::Ceil { .. } => Some("ceil".into()),
        Expr::Floor { .. } => Some("floor".into()),
        Expr::Position { .. } => Some("position".into()),
        Expr::Substring { .. } => Some("substring".into()),
        Expr::Overlay { .. } => Some("overlay".into()),
        Expr::Trim { trim_where, .. } => Some(
            match trim_where {
                Some(TrimWhereField::Leading) => "ltrim",
                Some(TrimWhereField::Trailing) => "rtrim",
                _ => "btrim",
            }
            .into(),
        ),
        Expr::AtTimeZone { .. } => Some("timezone".into()),
        Expr::Interval(_) => Some("interval".into()),
        // A scalar subquery takes its only column's name.
        Expr::Subquery(query) => names_of_query(query, 1).and_then(|names| names.into_iter().next().flatten()),
        _ => None,
    }
}

/// PostgreSQL's internal name of a type, as a cast of an unnamed value shows it.
fn type_name(data_type: &DataType) -> String {
    let written = data_type.to_string().to_lowercase();
    let base = written.split('(').next().unwrap_or(&written).trim();
    match base {
        "int" | "integer" | "int4" => "int4",
        "bigint" | "int8" => "int8",
        "smallint" | "int2" => "int2",
        "real" | "float4" => "float4",
        "double precision" | "float8" | "double" | "float" => "float8",
        "boolean" | "bool" => "bool",
        "decimal" | "numeric" => "numeric",
        "character varying" | "varchar" => "varchar",
        "character" | "char" => "bpchar",
        "timestamp with time zone" | "timestamptz" => "timestamptz",
        "timestamp" | "timestamp without time zone" => "timestamp",
        "time" | "time without time zone" => "time",
        other => other,
    }
    .to_string()
}

/// Gives the unaliased items of the select lists of derived tables and CTEs (each
/// branch of a set operation), the queries whose columns are referred to by name,
/// their PostgreSQL name, where it is unique in that list and no wildcard makes the
/// list's names uncertain. Scalar and `IN` subqueries are left as they are.
pub fn name_nested_select_lists(statement: &mut SqlStatement) {
    let _ = statement.visit(&mut NestedNames);
}

struct NestedNames;

impl VisitorMut for NestedNames {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                name_body(&mut cte.query.body);
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived { subquery, .. } = factor {
            name_body(&mut subquery.body);
        }
        ControlFlow::Continue(())
    }
}

fn name_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => name_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            name_body(left);
            name_body(right);
        }
        SetExpr::Query(inner) => name_body(&mut inner.body),
        _ => {}
    }
}

fn name_select(select: &mut Select) {
    if select.projection.iter().any(|item| matches!(item, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))) {
        return;
    }
    let names: Vec<Option<String>> = select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(expr) => Some(expr_name(expr).unwrap_or_else(|| "?column?".to_string())),
            SelectItem::ExprWithAlias { alias, .. } => Some(folded(alias)),
            _ => None,
        })
        .collect();
    for (item, name) in select.projection.iter_mut().zip(&names) {
        let (SelectItem::UnnamedExpr(expr), Some(name)) = (&*item, name) else { continue };
        // A column keeps its own name already.
        if matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            continue;
        }
        if names.iter().filter(|other| other.as_deref() == Some(name.as_str())).count() != 1 {
            continue;
        }
        *item = SelectItem::ExprWithAlias { expr: expr.clone(), alias: Ident::with_quote('"', name.clone()) };
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::parser::DFParser;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;

    use super::*;

    fn names(sql: &str, columns: usize) -> Vec<Option<String>> {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parses");
        postgres_column_names(&statements.pop_front().expect("one statement"), columns)
    }

    fn some(names: &[&str]) -> Vec<Option<String>> {
        names.iter().map(|n| Some(n.to_string())).collect()
    }

    /// What PostgreSQL 16 answers for each (checked against its `FigureColname`).
    #[test]
    fn unaliased_columns_are_named_as_postgresql_names_them() {
        let sql = "SELECT count(*), SUM(t.x), t.Id, \"Quoted\", 1, 1 + 2, '7'::int, x::text, CASE WHEN true THEN 1 END, \
                   (SELECT max(y) FROM u), pg_catalog.version(), DATE '2024-01-01' FROM t";
        let expected = some(&["count", "sum", "id", "Quoted", "?column?", "?column?", "int4", "x", "case", "max", "version", "date"]);
        assert_eq!(names(sql, 12), expected);
        assert_eq!(names("SELECT count(*) AS n, 1 AS \"Big\", 2 AS Small FROM t", 3), some(&["n", "Big", "small"]));
        assert_eq!(names("SELECT count(*) FROM t UNION ALL SELECT 1", 1), some(&["count"]));
        // A cast of a cast or of a typed literal: the operand's column name, else the outer type.
        assert_eq!(names("SELECT 1.74::float8::int, (x::text)::int, DATE '2024-01-01'::text, 1::int::text FROM t", 4), some(&["int4", "x", "text", "text"]));
        // Checked against PostgreSQL 15.
        let sql = "SELECT trim('  x  '), trim(leading 'x' from s), trim(trailing ' ' from s), overlay(s placing 'XX' from 2 for 3) FROM t";
        assert_eq!(names(sql, 4), some(&["btrim", "ltrim", "rtrim", "overlay"]));
    }

    #[test]
    fn wildcards_keep_the_planner_names_and_uncertain_positions_rename_nothing() {
        assert_eq!(names("SELECT *, count(*) OVER () FROM t", 3), vec![None, None, Some("count".into())]);
        assert_eq!(names("SELECT t.*, u.* FROM t, u", 4), Vec::<Option<String>>::new());
        assert_eq!(names("SELECT 1, 2", 3), Vec::<Option<String>>::new(), "a count that does not add up");
        assert_eq!(names("SHOW TIME ZONE", 1), Vec::<Option<String>>::new());
    }

    fn nested_named(sql: &str) -> String {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parses");
        let Some(Statement::Statement(mut statement)) = statements.pop_front() else { panic!("a statement") };
        name_nested_select_lists(&mut statement);
        statement.to_string()
    }

    #[test]
    fn nested_select_lists_get_postgresql_names_where_unique() {
        assert_eq!(
            nested_named("SELECT count FROM (SELECT w, count(*) FROM t GROUP BY 1) AS v"),
            r#"SELECT count FROM (SELECT w, count(*) AS "count" FROM t GROUP BY 1) AS v"#
        );
        assert_eq!(
            nested_named("WITH s AS (SELECT max(x), sum(x)::int FROM t) SELECT max, sum, count(*) FROM s"),
            r#"WITH s AS (SELECT max(x) AS "max", sum(x)::INT AS "sum" FROM t) SELECT max, sum, count(*) FROM s"#
        );
        // Two columns that PostgreSQL names alike, a wildcard, the outermost list: left alone.
        assert_eq!(nested_named("SELECT * FROM (SELECT count(*), count(x) FROM t) v"), "SELECT * FROM (SELECT count(*), count(x) FROM t) v");
        assert_eq!(nested_named("SELECT * FROM (SELECT *, count(*) OVER () FROM t) v"), "SELECT * FROM (SELECT *, count(*) OVER () FROM t) v");
        assert_eq!(nested_named("SELECT count(*) FROM t"), "SELECT count(*) FROM t");
        assert_eq!(nested_named("SELECT * FROM (SELECT 1 + 1) s"), r#"SELECT * FROM (SELECT 1 + 1 AS "?column?") s"#);
        assert_eq!(nested_named("SELECT (SELECT max(x) FROM u) FROM t"), "SELECT (SELECT max(x) FROM u) FROM t", "a scalar subquery");
    }
}
