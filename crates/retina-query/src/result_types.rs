//! Result column types a PostgreSQL client can read as PostgreSQL gives them.
//!
//! PostgreSQL has no unsigned integers. DataFusion's `row_number()`, `rank()`,
//! `dense_rank()`, `ntile()`, `array_length()` … are `UInt64`, which reached clients
//! as `numeric` (psycopg and pandas a `Decimal`, pgjdbc a `BigDecimal`) where
//! PostgreSQL answers `bigint`. So unsigned result columns are cast to the signed
//! type that holds them; a `UInt64` past `bigint`'s range fails the query instead of
//! wrapping (DataFusion's cast is checked).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Column;
use datafusion::error::Result;
use datafusion::logical_expr::{cast, Expr, LogicalPlan, LogicalPlanBuilder};

/// The signed type a column of unsigned `data_type` goes out as. Smaller unsigned
/// types already go out as the next larger signed PostgreSQL type (arrow-pg).
fn signed(data_type: &DataType) -> Option<DataType> {
    match data_type {
        DataType::UInt64 => Some(DataType::Int64),
        _ => None,
    }
}

/// `plan` with its unsigned result columns cast to signed ones, names kept.
pub(crate) fn with_signed_integers(plan: LogicalPlan) -> Result<LogicalPlan> {
    if !plan.schema().fields().iter().any(|field| signed(field.data_type()).is_some()) {
        return Ok(plan);
    }
    let columns: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(qualifier, field)| {
            let column = Expr::Column(Column::from((qualifier, field)));
            match signed(field.data_type()) {
                Some(to) => cast(column, to).alias_qualified(qualifier.cloned(), field.name()),
                None => column,
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(columns)?.build()
}
