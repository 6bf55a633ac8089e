//! PostgreSQL forms in client catalog queries that DataFusion cannot run, rewritten
//! into equivalents it can (after the `pg_catalog` emulation's own rewrites):
//!
//! - `x LIKE p ESCAPE 'c'` with an escape character other than backslash (SQLAlchemy's
//!   `get_schema_names`: `NOT LIKE 'pg/_%' ESCAPE '/'`): DataFusion supports only
//!   backslash, so the pattern is translated to backslash escapes by
//!   `retina_like_escape(p, 'c')`, which works for a parameter as well as a literal;
//! - `generate_subscripts(a, d)`, a set-returning function DataFusion lacks, used
//!   beside `unnest(a)` to number an array's elements (SQLAlchemy's primary-key and
//!   index reflection): `unnest(range(1, array_length(a, d) + 1))`, which DataFusion
//!   zips with the other `unnest` of the same projection as PostgreSQL does;
//! - a scalar subquery over a catalog table that is always empty here (column
//!   defaults, sequences): NULL;
//! - `information_schema._pg_expandarray(a)`, a set-returning function of `{x, n}`
//!   records (pgjdbc's `getPrimaryKeys`): `unnest(retina_expandarray(a))`; and a
//!   record's field `(r).x`, which DataFusion does not parse as one: `get_field(r, 'x')`;
//! - a scalar subquery over catalog tables that is not aggregated (see
//!   [`aggregate_catalog_subquery`]);
//! - a window extending a named one, `OVER (w ORDER BY …)`: spelled out (see
//!   [`NamedWindowsMerged`]);
//! - `FETCH FIRST n ROWS ONLY` (see [`FetchAsLimit`]);
//! - the column of `generate_series(…)` in FROM (see [`SeriesColumnNamed`]);
//! - the PostgreSQL date patterns (`YYYY-MM`) of `to_char`, `to_date` and
//!   `to_timestamp` as chrono's ([`crate::to_char_pattern`]);
//! - `generate_series` and `EXISTS` in a select list ([`crate::pg_select_list`]);
//! - intervals written as times (`'01:30:00'`), respelled, and numbers with an
//!   exponent (`1e20`) written out ([`crate::pg_literals`]);
//! - `varchar(n)` and `char(n)` casts, which cut the text to n characters;
//! - `number * interval` and `interval / number`: PostgreSQL's `interval_mul` and
//!   `interval_div` ([`crate::pg_interval_functions`]);
//! - `x SIMILAR TO 'pattern'`: `x ~ 'regex'` with the regular expression
//!   PostgreSQL reads the pattern as ([`crate::pg_literals`]);
//! - `float` (double precision in PostgreSQL, `real` in DataFusion) and the seconds
//!   field of `extract`/`date_part` (with its fraction in PostgreSQL);
//! - `x AT TIME ZONE 'zone'`: `timezone('zone', x)`, PostgreSQL's function of that
//!   meaning ([`crate::pg_time_zone`]), where DataFusion's own form keeps a
//!   `timestamptz` a `timestamptz`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions, visit_expressions_mut, AccessExpr, BinaryOperator, CharacterLength, DataType as SqlDataType, DateTimeField, ExactNumberInfo, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, JoinOperator,
    Fetch, LimitClause, NamedWindowDefinition, NamedWindowExpr, Query, SelectItem, SetExpr, TableAlias, TableAliasColumnDef, TableFactor, TimezoneInfo, Value, VisitMut,
    VisitorMut, WindowSpec, WindowType,
};
use datafusion::sql::sqlparser::ast::Statement;

use crate::sql_ast::{is_aggregate, parse};

/// Name of the function translating a LIKE pattern's escape character.
pub const LIKE_ESCAPE_FUNCTION: &str = "retina_like_escape";
/// Name of the function that cuts a `varchar(n)` cast's text to n characters.
pub const CUT_TEXT_FUNCTION: &str = "retina_cut_text";
/// Name of the function behind `information_schema._pg_expandarray`.
pub const EXPAND_ARRAY_FUNCTION: &str = "retina_expandarray";

/// Rewrites `statement` in place.
pub fn rewrite(statement: &mut Statement) {
    let _ = statement.visit(&mut NamedWindowsMerged);
    let _ = statement.visit(&mut FetchAsLimit);
    let _ = statement.visit(&mut SeriesColumnNamed);
    crate::pg_select_list::rewrite(statement);
    let _ = visit_expressions_mut(statement, |expr| {
        if let Some(replacement) = replacement(expr) {
            *expr = replacement;
        }
        ControlFlow::<()>::Continue(())
    });
}

fn replacement(expr: &mut Expr) -> Option<Expr> {
    match expr {
        Expr::Like { escape_char, pattern, .. } | Expr::ILike { escape_char, pattern, .. } => {
            let escape = match &escape_char.as_ref()?.value {
                Value::SingleQuotedString(c) | Value::EscapedStringLiteral(c) => c.clone(),
                _ => return None,
            };
            if escape == "\\" {
                return None;
            }
            let translated = parse(&format!("{LIKE_ESCAPE_FUNCTION}({pattern}, {})", quote(&escape)))?;
            *pattern = Box::new(translated);
            *escape_char = None;
            None
        }
        Expr::Function(function) if function.name.to_string().to_ascii_lowercase().ends_with("_pg_expandarray") => {
            let FunctionArguments::List(list) = &function.args else { return None };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] = list.args.as_slice() else { return None };
            parse(&format!("unnest({EXPAND_ARRAY_FUNCTION}({array}))"))
        }
        Expr::CompoundFieldAccess { root, access_chain } => {
            let [AccessExpr::Dot(Expr::Identifier(field))] = access_chain.as_slice() else { return None };
            parse(&format!("get_field({root}, {})", quote(&field.value)))
        }
        Expr::Function(function) if function.name.to_string().eq_ignore_ascii_case("generate_subscripts") => {
            let FunctionArguments::List(list) = &function.args else { return None };
            let args: Vec<&Expr> = list
                .args
                .iter()
                .map(|arg| match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => Some(expr),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            let [array, dimension] = args.as_slice() else { return None };
            parse(&format!("unnest(range(1, CAST(array_length({array}, {dimension}) AS BIGINT) + 1))"))
        }
        // Intervals written as times (`pg_literals`): DataFusion reads an interval's
        // text as it plans, before any analyzer rule could respell it.
        Expr::Interval(interval) if interval.leading_field.is_none() => {
            rewrite_string_literal(&mut interval.value, crate::pg_literals::interval_from_time);
            None
        }
        Expr::Cast { data_type: SqlDataType::Interval { .. }, expr: operand, .. } => {
            rewrite_string_literal(operand, crate::pg_literals::interval_from_time);
            None
        }
        // A typed literal is read as the SQL is planned, before the analyzer's casts
        // (`pg_casts`) could respell it: in a table function's arguments
        // (`generate_series(timestamp '2024-01-01 03:00', …)`) too.
        Expr::TypedString(typed) => {
            let respelled: fn(&str) -> Option<String> = match &typed.data_type {
                SqlDataType::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) | SqlDataType::TimestampNtz(_) => {
                    crate::pg_literals::wall_clock_timestamp
                }
                SqlDataType::Timestamp(..) => crate::pg_literals::timestamp_with_seconds,
                SqlDataType::Date => crate::pg_literals::postgres_date,
                _ => return None,
            };
            respell(&mut typed.value.value, respelled);
            None
        }
        Expr::Value(value) => {
            let Value::Number(text, long) = &value.value else { return None };
            match crate::pg_literals::exponent_literal(text)? {
                crate::pg_literals::ExponentLiteral::Digits(digits) => {
                    value.value = Value::Number(digits, *long);
                    None
                }
                crate::pg_literals::ExponentLiteral::Float => parse(&format!("CAST('{text}' AS DOUBLE PRECISION)")),
            }
        }
        // `number * interval` and `interval / number`, which DataFusion refuses, as
        // PostgreSQL's functions of those operators (`pg_interval_functions`), where
        // one side is written as an interval.
        Expr::BinaryOp { left, op: BinaryOperator::Multiply, right } if is_interval(right) || is_interval(left) => {
            let (interval, factor) = if is_interval(right) { (right, left) } else { (left, right) };
            parse(&format!("{}({interval}, {factor})", crate::pg_interval_functions::INTERVAL_MUL_FUNCTION))
        }
        Expr::BinaryOp { left, op: BinaryOperator::Divide, right } if is_interval(left) => {
            parse(&format!("{}({left}, {right})", crate::pg_interval_functions::INTERVAL_DIV_FUNCTION))
        }
        Expr::SimilarTo { negated, expr: subject, pattern, escape_char } => {
            let Expr::Value(pattern) = pattern.as_ref() else { return None };
            let Value::SingleQuotedString(pattern) = &pattern.value else { return None };
            let escape = match escape_char.as_ref().map(|escape| &escape.value) {
                None => Some('\\'),
                Some(Value::SingleQuotedString(escape)) => {
                    let mut chars = escape.chars();
                    match (chars.next(), chars.next()) {
                        (first, None) => first,
                        _ => return None,
                    }
                }
                Some(_) => return None,
            };
            let regex = crate::pg_literals::regex_of_similar_to(pattern, escape)?;
            let operator = if *negated { "!~" } else { "~" };
            parse(&format!("({subject}) {operator} {}", quote(&regex)))
        }
        // `varchar(n)` and `char(n)` cut a longer text to n characters, as in
        // PostgreSQL; DataFusion's text types have no length. (`char(n)` is not
        // padded.) Their long names, which DataFusion refuses, become the short ones.
        Expr::Cast { data_type, expr: operand, .. } if character_length(data_type).is_some() => {
            let length = character_length(data_type)?;
            let short_name = match &mut *data_type {
                SqlDataType::Char(length) | SqlDataType::Character(length) => SqlDataType::Char(length.take()),
                SqlDataType::Varchar(length) | SqlDataType::CharacterVarying(length) | SqlDataType::CharVarying(length) => {
                    SqlDataType::Varchar(length.take())
                }
                other => other.clone(),
            };
            *data_type = short_name;
            if let Some(length) = length {
                *operand = Box::new(parse(&format!("{CUT_TEXT_FUNCTION}(CAST({operand} AS TEXT), {length})"))?);
            }
            None
        }
        // `float` is double precision in PostgreSQL (`float(p)` too for p > 24);
        // DataFusion reads it as 32-bit `real`, losing digits: `1::float / 3`.
        Expr::Cast { data_type, .. } if matches!(&*data_type, SqlDataType::Float(info) if means_double(info)) => {
            *data_type = SqlDataType::DoublePrecision;
            None
        }
        // PostgreSQL's seconds field keeps the fraction (12.5); DataFusion's is a
        // whole number.
        Expr::Extract { field: DateTimeField::Second | DateTimeField::Seconds, expr: source, .. } => seconds_with_fraction(source),
        // The same patterns read dates and timestamps: `to_date('05/07/2024', 'MM/DD/YYYY')`.
        Expr::Function(function) if ["to_char", "to_date", "to_timestamp"].iter().any(|name| function.name.to_string().eq_ignore_ascii_case(name)) => {
            let FunctionArguments::List(list) = &mut function.args else { return None };
            let [_, FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(format)))] = list.args.as_mut_slice() else { return None };
            if let Value::SingleQuotedString(pattern) = &mut format.value {
                if let Some(chrono) = crate::to_char_pattern::chrono_pattern(pattern) {
                    *pattern = chrono;
                }
            }
            None
        }
        Expr::Function(function) if function.name.to_string().eq_ignore_ascii_case("date_part") => {
            let FunctionArguments::List(list) = &function.args else { return None };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(field))), FunctionArg::Unnamed(FunctionArgExpr::Expr(source))] = list.args.as_slice() else {
                return None;
            };
            match &field.value {
                Value::SingleQuotedString(name) if name.eq_ignore_ascii_case("second") || name.eq_ignore_ascii_case("seconds") => {
                    seconds_with_fraction(source)
                }
                _ => None,
            }
        }
        Expr::AtTimeZone { timestamp, time_zone } => match time_zone.as_ref() {
            Expr::Value(value) if matches!(value.value, Value::SingleQuotedString(_)) => {
                parse(&format!("{}({time_zone}, {timestamp})", crate::pg_time_zone::TIME_ZONE_FUNCTION))
            }
            _ => None,
        },
        Expr::Subquery(query) if selects_from_an_empty_catalog_table(query) => Some(null_keeping_placeholders(query)),
        Expr::Subquery(query) => {
            aggregate_catalog_subquery(query);
            None
        }
        _ => None,
    }
}

/// Replaces the text of `expr` when it is a string literal that `respelled` reads.
fn rewrite_string_literal(expr: &mut Expr, respelled: fn(&str) -> Option<String>) {
    if let Expr::Value(value) = expr {
        respell(&mut value.value, respelled);
    }
}

/// Replaces the text of `value` when it is a string that `respelled` reads.
fn respell(value: &mut Value, respelled: fn(&str) -> Option<String>) {
    if let Value::SingleQuotedString(text) = value {
        if let Some(new_text) = respelled(text) {
            *text = new_text;
        }
    }
}

/// `[OFFSET n ROWS] FETCH {FIRST|NEXT} [m] {ROW|ROWS} ONLY`, the standard's paging
/// (Hibernate 6 writes it for PostgreSQL), as `LIMIT m [OFFSET n]`: DataFusion
/// refuses FETCH. `WITH TIES` and `PERCENT` stay refused.
struct FetchAsLimit;

impl VisitorMut for FetchAsLimit {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Some(Fetch { with_ties: false, percent: false, quantity }) = &query.fetch else { return ControlFlow::Continue(()) };
        let rows = quantity.clone().unwrap_or_else(|| Expr::value(Value::Number("1".into(), false)));
        match &mut query.limit_clause {
            None => query.limit_clause = Some(LimitClause::LimitOffset { limit: Some(rows), offset: None, limit_by: Vec::new() }),
            Some(LimitClause::LimitOffset { limit: limit @ None, .. }) => *limit = Some(rows),
            Some(_) => return ControlFlow::Continue(()), // both LIMIT and FETCH: left for the planner to refuse
        }
        query.fetch = None;
        ControlFlow::Continue(())
    }
}

/// `generate_series(…)` in FROM names its column as PostgreSQL does: after the
/// function (`SELECT generate_series FROM generate_series(1, 3)`), or after the
/// alias a query gives it (`SELECT d FROM generate_series(…) d`), where DataFusion
/// names it `value` and refused both.
struct SeriesColumnNamed;

impl VisitorMut for SeriesColumnNamed {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, args: Some(_), alias, .. } = factor else { return ControlFlow::Continue(()) };
        let is_series = name.0.last().and_then(|part| part.as_ident()).is_some_and(|ident| ident.value.eq_ignore_ascii_case("generate_series"));
        match alias {
            _ if !is_series => {}
            Some(alias) if alias.columns.is_empty() => alias.columns = vec![TableAliasColumnDef::from_name(alias.name.value.clone())],
            Some(_) => {}
            None => {
                *alias = Some(TableAlias {
                    explicit: true,
                    name: Ident::new("generate_series"),
                    columns: vec![TableAliasColumnDef::from_name("generate_series")],
                    at: None,
                })
            }
        }
        ControlFlow::Continue(())
    }
}

/// PostgreSQL's seconds field of `source`, with its fraction: DataFusion's
/// microseconds field holds the seconds and the fraction.
fn seconds_with_fraction(source: &Expr) -> Option<Expr> {
    parse(&format!("date_part('microsecond', {source}) / CAST(1000000 AS DOUBLE PRECISION)"))
}

/// Whether `expr` is written as an interval: `interval '1 day'`, `'1 day'::interval`.
fn is_interval(expr: &Expr) -> bool {
    match expr {
        Expr::Interval(_) | Expr::Cast { data_type: SqlDataType::Interval { .. }, .. } => true,
        Expr::Nested(inner) => is_interval(inner),
        _ => false,
    }
}

/// For a character type (`varchar`, `char` and their long names): its length, if it
/// has one (`char` alone has 1). `None` for other types.
fn character_length(data_type: &SqlDataType) -> Option<Option<u64>> {
    match data_type {
        SqlDataType::Varchar(length)
        | SqlDataType::CharacterVarying(length)
        | SqlDataType::CharVarying(length) => Some(match length {
            Some(CharacterLength::IntegerLength { length, .. }) => Some(*length),
            Some(CharacterLength::Max) | None => None,
        }),
        // `char` alone is `char(1)`.
        SqlDataType::Char(length) | SqlDataType::Character(length) => Some(match length {
            Some(CharacterLength::IntegerLength { length, .. }) => Some(*length),
            Some(CharacterLength::Max) => None,
            None => Some(1),
        }),
        _ => None,
    }
}

/// Whether `float` with this precision is PostgreSQL's double precision.
fn means_double(info: &ExactNumberInfo) -> bool {
    match info {
        ExactNumberInfo::Precision(bits) => *bits > 24,
        ExactNumberInfo::None | ExactNumberInfo::PrecisionAndScale(..) => true,
    }
}

/// `OVER (w ORDER BY …)`, a window that extends a named one (`WINDOW w AS (PARTITION
/// BY …)`), spelled out: DataFusion resolves only `OVER w` and dropped the named
/// window's partitioning from the extended form, a silently wrong running total.
/// As PostgreSQL copies it: the named window's PARTITION BY, its ORDER BY unless the
/// extension gives one, and the extension's frame, else the named window's.
struct NamedWindowsMerged;

impl VisitorMut for NamedWindowsMerged {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_mut() else { return ControlFlow::Continue(()) };
        if select.named_window.is_empty() {
            return ControlFlow::Continue(());
        }
        let named = select.named_window.clone();
        let _ = visit_expressions_mut(&mut select.projection, |expr| {
            if let Expr::Function(function) = expr {
                if let Some(WindowType::WindowSpec(spec)) = &mut function.over {
                    if let Some(merged) = spelled_out(&named, spec, 0) {
                        *spec = merged;
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        ControlFlow::Continue(())
    }
}

/// `spec` with the window it extends (`window_name`) merged in, recursively (a few
/// deep at most, so a cycle ends); `None` when it extends none or an unknown one.
fn spelled_out(named: &[NamedWindowDefinition], spec: &WindowSpec, depth: usize) -> Option<WindowSpec> {
    let name = spec.window_name.as_ref()?;
    let base = resolved(named, name, depth + 1)?;
    Some(WindowSpec {
        window_name: None,
        partition_by: base.partition_by,
        order_by: if spec.order_by.is_empty() { base.order_by } else { spec.order_by.clone() },
        window_frame: spec.window_frame.clone().or(base.window_frame),
    })
}

/// The definition of the window `name`, spelled out.
fn resolved(named: &[NamedWindowDefinition], name: &Ident, depth: usize) -> Option<WindowSpec> {
    if depth > 8 {
        return None;
    }
    let NamedWindowDefinition(_, definition) = named.iter().find(|NamedWindowDefinition(n, _)| n.value.eq_ignore_ascii_case(&name.value))?;
    match definition {
        NamedWindowExpr::WindowSpec(spec) if spec.window_name.is_none() => Some(spec.clone()),
        NamedWindowExpr::WindowSpec(spec) => spelled_out(named, spec, depth),
        NamedWindowExpr::NamedWindow(other) => resolved(named, other, depth + 1),
    }
}

/// A scalar subquery over `pg_catalog` tables whose one column is not an aggregate
/// gets `max()` around it: DataFusion plans a correlated scalar subquery only when
/// it is aggregated (it cannot check "at most one row" at run time), and catalog
/// queries ask for a column of the one row matching an oid (SQLAlchemy's column
/// defaults, identity options and collations). Only catalog subqueries: elsewhere a
/// second row must stay an error, not become the larger value.
fn aggregate_catalog_subquery(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else { return };
    let only_catalog = !select.from.is_empty()
        && select.from.iter().all(|from| {
            std::iter::once(&from.relation).chain(from.joins.iter().map(|join| &join.relation)).all(|relation| {
                matches!(relation, TableFactor::Table { name, .. } if name.to_string().to_ascii_lowercase().starts_with("pg_catalog."))
            })
        });
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty());
    if !only_catalog || grouped || select.projection.len() != 1 || query.limit_clause.is_some() {
        return;
    }
    let (SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }) = &mut select.projection[0] else { return };
    if is_aggregate(expr) {
        return;
    }
    if let Some(aggregated) = parse(&format!("max({expr})")) {
        *expr = aggregated;
    }
}

/// Catalog tables that have no rows here: no column has a default and no column is
/// backed by a sequence.
const EMPTY_CATALOG_TABLES: [&str; 2] = ["pg_catalog.pg_attrdef", "pg_catalog.pg_sequence"];

/// A scalar subquery of one column that is not an aggregate, whose first table is
/// one of [`EMPTY_CATALOG_TABLES`] joined by inner joins only: it has no row, so it
/// is NULL. SQLAlchemy's column defaults and identity options are such subqueries,
/// correlated in ways DataFusion cannot plan (an outer boolean as a condition, outer
/// columns in the aggregate it would need, regclass look-ups nested inside).
fn selects_from_an_empty_catalog_table(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else { return false };
    let [from] = select.from.as_slice() else { return false };
    let empty = matches!(&from.relation, TableFactor::Table { name, .. }
        if EMPTY_CATALOG_TABLES.contains(&name.to_string().to_ascii_lowercase().as_str()));
    let inner_joins = from.joins.iter().all(|join| matches!(join.join_operator, JoinOperator::Join(_) | JoinOperator::Inner(_)));
    let single = match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. }] => !is_aggregate(expr),
        _ => false,
    };
    empty && inner_joins && single && matches!(&select.group_by, GroupByExpr::Expressions(exprs, _) if exprs.is_empty())
}

/// NULL, as an expression that still names `query`'s parameters (a statement's
/// parameters must stay `$1..$n`; the client sends them all).
fn null_keeping_placeholders(query: &Query) -> Expr {
    let mut placeholders = Vec::new();
    let _ = visit_expressions(query, |expr| {
        match expr {
            Expr::Cast { expr: inner, .. } if matches!(inner.as_ref(), Expr::Value(v) if matches!(v.value, Value::Placeholder(_))) => {
                placeholders.push(expr.to_string());
            }
            Expr::Value(v) if matches!(v.value, Value::Placeholder(_)) && !placeholders.iter().any(|p| p.starts_with(&format!("{expr}:"))) => {
                placeholders.push(format!("CAST({expr} AS TEXT)"));
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    placeholders.sort();
    placeholders.dedup();
    if placeholders.is_empty() {
        return Expr::value(Value::Null);
    }
    parse(&format!("CASE WHEN FALSE THEN concat({}) END", placeholders.join(", "))).unwrap_or_else(|| Expr::value(Value::Null))
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `pattern` with escape character `escape` (`None`: `ESCAPE ''`, no escape
/// character) as a pattern with backslash escapes; `Err` for a pattern that ends
/// with the escape character (as PostgreSQL refuses).
pub fn like_pattern_with_backslash(pattern: &str, escape: Option<char>) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            let Some(escaped) = chars.next() else {
                return Err("LIKE pattern must not end with escape character".into());
            };
            out.push('\\');
            out.push(escaped);
        } else if c == '\\' {
            out.push_str("\\\\"); // a plain backslash, not an escape
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        crate::sql_ast::rewritten_by(sql, rewrite)
    }

    #[test]
    fn like_with_another_escape_character_translates_its_pattern() {
        assert_eq!(
            rewritten("SELECT 1 WHERE n NOT LIKE $1::VARCHAR || '%' ESCAPE '/'"),
            "SELECT 1 WHERE n NOT LIKE retina_like_escape($1::VARCHAR || '%', '/')"
        );
        assert_eq!(rewritten(r"SELECT 1 WHERE n LIKE 'a\_%' ESCAPE '\'"), r"SELECT 1 WHERE n LIKE 'a\_%' ESCAPE '\'");
        assert_eq!(like_pattern_with_backslash("pg/_%", Some('/')), Ok(r"pg\_%".to_string()));
        assert_eq!(like_pattern_with_backslash("a//b\\c", Some('/')), Ok(r"a\/b\\c".to_string()));
        assert!(like_pattern_with_backslash("ab/", Some('/')).is_err());
        assert_eq!(like_pattern_with_backslash(r"a\_", None), Ok(r"a\\_".to_string()), "ESCAPE '': no escape character");
        assert_eq!(
            rewritten("SELECT 1 WHERE n LIKE 'a_' ESCAPE ''"),
            "SELECT 1 WHERE n LIKE retina_like_escape('a_', '')"
        );
    }

    #[test]
    fn scalar_subqueries_over_the_catalog_are_aggregated_and_others_are_not() {
        assert_eq!(
            rewritten("SELECT (SELECT t.typcollation FROM pg_catalog.pg_type AS t WHERE t.oid = a.atttypid) FROM pg_catalog.pg_attribute AS a"),
            "SELECT (SELECT max(t.typcollation) FROM pg_catalog.pg_type AS t WHERE t.oid = a.atttypid) FROM pg_catalog.pg_attribute AS a"
        );
        let user = "SELECT (SELECT o.x FROM shop.orders AS o WHERE o.id = i.id) FROM shop.items AS i";
        assert_eq!(rewritten(user), user);
        let counted = "SELECT (SELECT count(*) FROM pg_catalog.pg_type AS t) FROM pg_catalog.pg_attribute AS a";
        assert_eq!(rewritten(counted), counted);
    }

    #[test]
    fn subqueries_over_always_empty_catalog_tables_are_null() {
        assert_eq!(
            rewritten("SELECT (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef AS d WHERE a.atthasdef AND d.adrelid = a.attrelid) FROM pg_catalog.pg_attribute AS a"),
            "SELECT NULL FROM pg_catalog.pg_attribute AS a"
        );
        let counted = "SELECT (SELECT count(*) FROM pg_catalog.pg_sequence AS s) FROM pg_catalog.pg_attribute AS a";
        assert_eq!(rewritten(counted), counted);
        assert_eq!(
            rewritten("SELECT (SELECT json_build_object($1::VARCHAR, s.seqstart) FROM pg_catalog.pg_sequence AS s WHERE s.seqrelid = CAST(pg_get_serial_sequence($2, 'c') AS OID))"),
            "SELECT CASE WHEN false THEN concat($1::VARCHAR, CAST($2 AS TEXT)) END"
        );
    }

    #[test]
    fn expandarray_and_record_fields_become_unnest_and_get_field() {
        assert_eq!(
            rewritten("SELECT (information_schema._pg_expandarray(i.indkey)).n AS k, information_schema._pg_expandarray(i.indkey) AS keys FROM pg_catalog.pg_index AS i"),
            "SELECT get_field((unnest(retina_expandarray(i.indkey))), 'n') AS k, unnest(retina_expandarray(i.indkey)) AS keys FROM pg_catalog.pg_index AS i"
        );
        assert_eq!(rewritten("SELECT 1 FROM r WHERE r.a = (r.keys).x"), "SELECT 1 FROM r WHERE r.a = get_field((r.keys), 'x')");
    }

    #[test]
    fn intervals_as_times_are_respelled() {
        assert_eq!(
            rewritten("SELECT INTERVAL '01:30:00', '1:30'::interval"),
            "SELECT INTERVAL '01 hours 30 minutes 00 seconds', '1 hours 30 minutes 0 seconds'::INTERVAL"
        );
        // Other text, and intervals with a leading field, are left alone.
        assert_eq!(rewritten("SELECT INTERVAL '1 hour', INTERVAL '1:30' HOUR TO MINUTE, 'a:30'::interval"), "SELECT INTERVAL '1 hour', INTERVAL '1:30' HOUR TO MINUTE, 'a:30'::INTERVAL");
    }

    #[test]
    fn generate_subscripts_numbers_the_elements_beside_unnest() {
        assert_eq!(
            rewritten("SELECT unnest(i.indkey) AS a, generate_subscripts(i.indkey, $1::INTEGER) AS o FROM pg_index AS i"),
            "SELECT unnest(i.indkey) AS a, unnest(range(1, CAST(array_length(i.indkey, $1::INTEGER) AS BIGINT) + 1)) AS o FROM pg_index AS i"
        );
    }
}
