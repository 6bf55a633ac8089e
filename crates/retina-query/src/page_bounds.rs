//! Page-index pruning inside a file: the pushed-down filters that bound an
//! integer-encoded column (`id = 5`, `d BETWEEN ...`, `ts >= ...`, ANDed) become
//! [`PageBound`]s, and the store skips the pages of a flushed file whose min/max
//! (the Parquet page index written with every file) lie outside them.
//!
//! Split pruning ([`crate::split_pruning`]) drops whole files; this narrows the read
//! of the files that remain. Like it, it only has to be safe: the `FilterExec` above
//! the scan evaluates every filter again on the rows read.
//!
//! Only signed integers, dates, times and timestamps take bounds: their Parquet
//! page statistics are signed INT32/INT64 values comparable with the literal. A
//! bound needs a literal of exactly the column's type (type coercion has already
//! cast literals to the column type by the time filters reach the scan).

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use retina_core::storage::PageBound;

/// The bounds `filters` (ANDed) imply for the columns of `schema` (the table's user
/// columns, whose indices are the stored ones), at most one per column.
pub fn page_bounds(filters: &[Expr], schema: &Schema) -> Vec<PageBound> {
    let mut bounds: Vec<PageBound> = Vec::new();
    for conjunct in filters.iter().flat_map(split_conjunction) {
        let Some(bound) = bound_of(conjunct, schema) else { continue };
        match bounds.iter_mut().find(|b| b.column == bound.column) {
            Some(existing) => {
                existing.min = existing.min.max(bound.min);
                existing.max = match (existing.max, bound.max) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => bounds.push(bound),
        }
    }
    bounds
}

fn bound_of(filter: &Expr, schema: &Schema) -> Option<PageBound> {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, value) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(column), Expr::Literal(value, _)) => (column, *op, value),
                (Expr::Literal(value, _), Expr::Column(column)) => (column, op.swap()?, value),
                _ => return None,
            };
            let (index, value) = column_and_value(schema, &column.name, value)?;
            let (min, max) = match op {
                Operator::Eq => (Some(value), Some(value)),
                Operator::Lt => (None, Some(value.checked_sub(1)?)),
                Operator::LtEq => (None, Some(value)),
                Operator::Gt => (Some(value.checked_add(1)?), None),
                Operator::GtEq => (Some(value), None),
                _ => return None,
            };
            Some(PageBound { column: index, min, max })
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let (Expr::Column(column), Expr::Literal(low, _), Expr::Literal(high, _)) = (expr.as_ref(), low.as_ref(), high.as_ref())
            else {
                return None;
            };
            let (index, low) = column_and_value(schema, &column.name, low)?;
            let (_, high) = column_and_value(schema, &column.name, high)?;
            Some(PageBound { column: index, min: Some(low), max: Some(high) })
        }
        _ => None,
    }
}

/// The column's index and the literal as the i64 its pages are compared in, when the
/// column is integer-encoded and the literal has its type.
fn column_and_value(schema: &Schema, name: &str, value: &ScalarValue) -> Option<(usize, i64)> {
    let index = schema.index_of(name).ok()?;
    let data_type = schema.field(index).data_type();
    if !is_signed_integer_encoded(data_type) || value.data_type() != *data_type {
        return None;
    }
    let value = match value {
        ScalarValue::Int8(v) => v.map(i64::from),
        ScalarValue::Int16(v) => v.map(i64::from),
        ScalarValue::Int32(v) | ScalarValue::Date32(v) => v.map(i64::from),
        ScalarValue::Time32Second(v) | ScalarValue::Time32Millisecond(v) => v.map(i64::from),
        ScalarValue::Int64(v) | ScalarValue::Date64(v) => *v,
        ScalarValue::Time64Microsecond(v) | ScalarValue::Time64Nanosecond(v) => *v,
        ScalarValue::TimestampSecond(v, _)
        | ScalarValue::TimestampMillisecond(v, _)
        | ScalarValue::TimestampMicrosecond(v, _)
        | ScalarValue::TimestampNanosecond(v, _) => *v,
        _ => None,
    }?;
    Some((index, value))
}

fn is_signed_integer_encoded(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(_, _)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("qty", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::UInt32, false),
        ])
    }

    #[test]
    fn comparisons_and_between_become_inclusive_bounds_merged_per_column() {
        let filters = vec![
            col("id").gt_eq(lit(10i64)).and(col("id").lt(lit(20i64))),
            lit(5i32).lt(col("qty")),
            col("qty").between(lit(0i32), lit(9i32)),
        ];
        assert_eq!(
            page_bounds(&filters, &schema()),
            vec![
                PageBound { column: 0, min: Some(10), max: Some(19) },
                PageBound { column: 1, min: Some(6), max: Some(9) },
            ]
        );
        assert_eq!(page_bounds(&[col("id").eq(lit(7i64))], &schema()), vec![PageBound { column: 0, min: Some(7), max: Some(7) }]);
    }

    #[test]
    fn what_cannot_bound_pages_safely_is_left_out() {
        let none = [
            col("id").not_eq(lit(3i64)),                  // not a range
            col("id").eq(lit(3i32)),                      // literal of another type
            col("name").eq(lit("x")),                     // text: pages compare bytes
            col("price").eq(lit(3u32)),                   // unsigned: signed page statistics
            col("id").gt(lit(1i64)).or(col("qty").eq(lit(2i32))), // OR
            col("id").lt(lit(i64::MIN)),                  // no value below
            col("id").not_between(lit(1i64), lit(2i64)),
        ];
        for filter in none {
            assert!(page_bounds(std::slice::from_ref(&filter), &schema()).is_empty(), "{filter}");
        }
    }
}
