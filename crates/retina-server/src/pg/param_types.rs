//! The types a client declares for its parameters (Parse), given to the plan's
//! placeholders before the statement is described.
//!
//! DataFusion infers a placeholder's type from its context only: `$1 * 2` becomes an
//! integer, so a float8 `1.5` from psycopg or `setDouble` was cast to one and
//! `SELECT $1 * 2` answered 2 (PostgreSQL: 3). A declared type is what the client
//! will send, and PostgreSQL plans with it; so do we, except where the declared type
//! is text or of the same kind as the inferred one (an int8 for an int4 column keeps
//! the column's type, so its splits are still pruned by min/max).

use std::sync::Arc;

use pgwire::api::Type;
use pgwire::error::PgWireResult;
use retina_query::datafusion::arrow::datatypes::{DataType, Field, IntervalUnit, TimeUnit};
use retina_query::datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use retina_query::datafusion::logical_expr::expr::{Cast, Placeholder, TryCast};
use retina_query::datafusion::logical_expr::{Expr, Limit, LogicalPlan};

use super::errors::user_error;

/// The placeholder types of a plan, in `$1, $2, ...` order (`None` if not inferred).
pub fn placeholder_types(plan: &LogicalPlan) -> PgWireResult<Vec<Option<DataType>>> {
    let types = plan
        .get_parameter_types()
        .map_err(|e| user_error("42P18", format!("cannot determine parameter types: {e}")))?;
    let mut numbered: Vec<(usize, Option<DataType>)> = Vec::with_capacity(types.len());
    for (id, data_type) in types {
        let number = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| user_error("42601", format!("unsupported parameter {id}: use $1, $2, ...")))?;
        numbered.push((number, data_type));
    }
    numbered.sort_by_key(|(number, _)| *number);
    for (expected, (number, _)) in numbered.iter().enumerate() {
        if *number != expected + 1 {
            return Err(user_error("42P02", format!("parameter ${} is missing (parameters must be $1..$n)", expected + 1)));
        }
    }
    Ok(numbered.into_iter().map(|(_, data_type)| data_type).collect())
}

/// The types the SQL around untyped placeholders gives them, by index, as
/// PostgreSQL infers them and DataFusion does not: a cast's (`$1::date`), and
/// bigint for `LIMIT $1` and `OFFSET $1`.
fn context_types(plan: &LogicalPlan) -> PgWireResult<Vec<(usize, DataType)>> {
    let index_of = |expr: &Expr| match expr {
        Expr::Placeholder(Placeholder { id, field: None }) => {
            id.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()).and_then(|n| n.checked_sub(1))
        }
        _ => None,
    };
    let mut found = Vec::new();
    let visited = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Limit(Limit { skip, fetch, .. }) = node {
            let bounds = skip.iter().chain(fetch.iter());
            found.extend(bounds.filter_map(|bound| index_of(bound)).map(|index| (index, DataType::Int64)));
        }
        node.apply_expressions(|expr| {
            expr.apply(|expr| {
                if let Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) = expr {
                    if let Some(index) = index_of(expr) {
                        found.push((index, field.data_type().clone()));
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    visited.map_err(|e| user_error("42P18", format!("cannot determine parameter types: {e}")))?;
    Ok(found)
}

/// The Arrow type a parameter declared as `pg_type` is read as.
pub fn declared_type(pg_type: &Type) -> Option<DataType> {
    Some(match *pg_type {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 | Type::OID => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        // PostgreSQL's numeric has no fixed scale; 10 digits after the point is what
        // DataFusion gives `NUMERIC` too.
        Type::NUMERIC => DataType::Decimal128(38, 10),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::JSONB | Type::UUID | Type::XML => {
            DataType::Utf8
        }
        Type::BYTEA => DataType::Binary,
        Type::DATE => DataType::Date32,
        Type::TIME => DataType::Time64(TimeUnit::Microsecond),
        Type::TIMESTAMP => DataType::Timestamp(TimeUnit::Microsecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        Type::INTERVAL => DataType::Interval(IntervalUnit::MonthDayNano),
        _ => return None,
    })
}

/// Types of one family: a declared type of the inferred one's family keeps the
/// inferred type.
fn family(data_type: &DataType) -> u8 {
    match data_type {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => 1,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => 2,
        DataType::Decimal128(..) | DataType::Decimal256(..) => 3,
        DataType::Timestamp(..) => 4,
        DataType::Time32(_) | DataType::Time64(_) => 5,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 6,
        _ => 0,
    }
}

/// `declared` where it is an integer or float wider than `inferred` (of its family).
fn wider(declared: &DataType, inferred: &DataType) -> Option<DataType> {
    let width = |t: &DataType| match t {
        DataType::Int8 => 1,
        DataType::Int16 | DataType::Float16 => 2,
        DataType::Int32 | DataType::Float32 => 4,
        DataType::Int64 | DataType::Float64 => 8,
        _ => 0,
    };
    (width(declared) > width(inferred)).then(|| declared.clone())
}

/// `plan` with each placeholder typed as the client declared it (see the module
/// doc), and a parameter nobody typed read as text, as PostgreSQL resolves an
/// unknown one. Unchanged when nothing is to change.
pub fn with_declared_types(plan: LogicalPlan, declared: &[Option<Type>]) -> PgWireResult<LogicalPlan> {
    let planned = placeholder_types(&plan)?;
    // `$1::float8`, `LIMIT $1`: asyncpg declares nothing and encodes by the type we
    // describe, which DataFusion leaves open there.
    let mut inferred = planned.clone();
    for (index, data_type) in context_types(&plan)? {
        if let Some(slot @ None) = inferred.get_mut(index) {
            *slot = Some(data_type);
        }
    }
    let chosen: Vec<DataType> = inferred
        .into_iter()
        .enumerate()
        .map(|(index, inferred)| {
            let declared = declared.get(index).cloned().flatten().as_ref().and_then(declared_type);
            match (declared, inferred) {
                // A wider integer or float than the column's: 2^40 against an int4
                // column matches no row, as in PostgreSQL, instead of failing a cast.
                (Some(declared), Some(inferred)) if family(&declared) == family(&inferred) => {
                    wider(&declared, &inferred).unwrap_or(inferred)
                }
                (Some(declared), Some(inferred)) if declared == DataType::Utf8 => inferred,
                (Some(declared), _) => declared,
                (None, Some(inferred)) => inferred,
                (None, None) => DataType::Utf8,
            }
        })
        .collect();
    if chosen.iter().zip(&planned).all(|(chosen, planned)| planned.as_ref() == Some(chosen)) {
        return Ok(plan);
    }
    let typed = |id: &str| -> Option<DataType> {
        let index = id.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)?;
        chosen.get(index).cloned()
    };
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let node = node.map_expressions(|expr| {
            expr.transform_up(|expr| match expr {
                Expr::Placeholder(Placeholder { id, field }) => match typed(&id) {
                    Some(data_type) => {
                        let field = Some(Arc::new(Field::new("", data_type, true)));
                        Ok(Transformed::yes(Expr::Placeholder(Placeholder::new_with_field(id, field))))
                    }
                    None => Ok(Transformed::no(Expr::Placeholder(Placeholder { id, field }))),
                },
                other => Ok(Transformed::no(other)),
            })
        })?;
        // Every node above a changed placeholder may change type (a projection of
        // `$1 * 2`), and a node's schema is computed when it is built.
        node.map_data(LogicalPlan::recompute_schema)
    });
    rewritten.map(|t| t.data).map_err(|e| user_error("42P18", format!("cannot type the parameters as declared: {e}")))
}

#[cfg(test)]
mod tests {
    use retina_query::datafusion::prelude::SessionContext;

    use super::*;

    fn typed(sql: &str, declared: &[Option<Type>]) -> Vec<Option<DataType>> {
        let state = SessionContext::new().state();
        let plan = futures::executor::block_on(state.create_logical_plan(sql)).expect("plans");
        placeholder_types(&with_declared_types(plan, declared).expect("typed")).expect("types")
    }

    #[test]
    fn declared_types_win_over_inference_unless_text_or_of_its_family() {
        // psycopg's float8 for `%s * 2`: DataFusion alone would infer an integer.
        assert_eq!(typed("SELECT $1 * 2", &[Some(Type::FLOAT8)]), [Some(DataType::Float64)]);
        // An int2 for an Int32 comparison keeps the column's type; a wider int8 wins,
        // so a value beyond int4 matches nothing instead of failing its cast.
        let column = "SELECT * FROM (VALUES (CAST(1 AS INT))) AS t(a) WHERE a = $1";
        assert_eq!(typed(column, &[Some(Type::INT2)]), [Some(DataType::Int32)]);
        assert_eq!(typed(column, &[Some(Type::INT8)]), [Some(DataType::Int64)]);
        // Text declared for a number keeps the number; nothing declared reads as text.
        assert_eq!(typed(column, &[Some(Type::VARCHAR)]), [Some(DataType::Int32)]);
        assert_eq!(typed("SELECT $1", &[None]), [Some(DataType::Utf8)]);
    }

    /// asyncpg declares nothing and encodes by the described type: `$1::float8`
    /// must be described as float8, as PostgreSQL does.
    #[test]
    fn a_cast_parameter_takes_the_cast_type_and_limits_are_bigint() {
        let types = typed("SELECT CAST($1 AS DOUBLE) * 2, CAST($2 AS DATE)", &[]);
        assert_eq!(types, [Some(DataType::Float64), Some(DataType::Date32)]);
        let types = typed("SELECT * FROM (VALUES (1), (2), (3)) AS t(a) LIMIT $1 OFFSET $2", &[]);
        assert_eq!(types, [Some(DataType::Int64), Some(DataType::Int64)]);
    }
}
