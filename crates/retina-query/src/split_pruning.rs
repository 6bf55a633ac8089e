//! Skipping whole splits whose column statistics prove no row can match the query's
//! filters.
//!
//! [`RetinaTable`](crate::provider::RetinaTable) tells DataFusion it handles simple
//! predicates ([`is_prunable`]) *inexactly*: DataFusion hands them to the scan and
//! still evaluates them in a `FilterExec` above it, so pruning only has to be safe,
//! never exact. The scan turns them into DataFusion's `PruningPredicate` (min/max
//! rewriting of comparisons, IN lists, BETWEEN, IS [NOT] NULL, AND, OR) and evaluates
//! it over one container per split with the statistics the catalog recorded when
//! the file was written ([`crate::split_statistics`]). A split is dropped only when
//! its statistics prove every stored version fails the filter; unknown statistics (a
//! column type that is not recorded, a write buffer's virtual file, which still
//! grows) keep it. The visibility mask is
//! untouched: kept splits are read by `read_split` exactly as before.
//!
//! A flushed file is a single row group, so pruning a file is pruning a row group.
//! Within a file, the Parquet page index narrows the read further
//! ([`crate::page_bounds`]).

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Cast, Expr, Operator, TryCast};
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use retina_core::scan::ScanSplit;

use crate::split_statistics::{ColumnStatistics, FileStatistics};

/// Whether `filter` is simple enough to prune splits with: `column op literal`
/// (=, <>, <, <=, >, >=, either side), `[NOT] IN (literals)`, `[NOT] BETWEEN
/// literal AND literal`, `IS [NOT] NULL`, and AND / OR of those. A column may be
/// wrapped in a cast (type coercion adds them).
pub fn is_prunable(filter: &Expr) -> bool {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::And | Operator::Or, right }) => {
            is_prunable(left) && is_prunable(right)
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(*op) => {
            (is_column(left) && is_literal(right)) || (is_literal(left) && is_column(right))
        }
        Expr::Between(Between { expr, low, high, .. }) => is_column(expr) && is_literal(low) && is_literal(high),
        Expr::InList(InList { expr, list, .. }) => is_column(expr) && list.iter().all(is_literal),
        Expr::IsNull(expr) | Expr::IsNotNull(expr) => is_column(expr),
        _ => false,
    }
}

fn is_comparison(op: Operator) -> bool {
    matches!(op, Operator::Eq | Operator::NotEq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq)
}

fn is_column(expr: &Expr) -> bool {
    match expr {
        Expr::Column(_) => true,
        Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) => is_column(expr),
        _ => false,
    }
}

fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(..) => true,
        Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) => is_literal(expr),
        _ => false,
    }
}

/// The pruning predicate of one scan.
pub struct SplitPruning {
    predicate: Arc<PruningPredicate>,
}

impl SplitPruning {
    /// The pruning predicate of the prunable `filters` over `schema` (the table's
    /// user columns), or `None` when none of them can prune. Pruning is only an
    /// optimization, so a filter DataFusion cannot turn into a pruning predicate
    /// means no pruning, not an error: the `FilterExec` above reports real errors.
    pub fn new(filters: &[Expr], schema: &SchemaRef, state: &dyn Session) -> Option<Self> {
        let prunable: Vec<Expr> = filters.iter().filter(|filter| is_prunable(filter)).map(unqualified).collect();
        let predicate = conjunction(prunable)?;
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).ok()?;
        let physical = state.create_physical_expr(predicate, &df_schema).ok()?;
        let predicate = PruningPredicateBuilder::new().with_file_schema(Arc::clone(schema)).build(physical)?;
        Some(Self { predicate })
    }

    /// The filter being pruned with, for EXPLAIN.
    pub fn describe(&self) -> String {
        self.predicate.orig_expr().to_string()
    }

    /// Splits that may hold a matching row, and how many were left out.
    pub fn prune(&self, schema: &Schema, splits: Vec<ScanSplit>) -> (Vec<ScanSplit>, usize) {
        let containers = SplitContainers::new(schema, &splits);
        let Ok(keep) = self.predicate.prune(&containers) else { return (splits, 0) };
        let before = splits.len();
        let kept: Vec<ScanSplit> =
            splits.into_iter().zip(keep).filter_map(|(split, keep)| keep.then_some(split)).collect();
        let pruned = before - kept.len();
        (kept, pruned)
    }
}

/// Filters reach a table scan with columns qualified by the table's name; the
/// pruning schema is the bare table schema.
fn unqualified(filter: &Expr) -> Expr {
    let rewritten = filter.clone().transform(|expr| {
        Ok(match expr {
            Expr::Column(column) => Transformed::yes(Expr::Column(Column::new_unqualified(column.name))),
            other => Transformed::no(other),
        })
    });
    match rewritten {
        Ok(transformed) => transformed.data,
        // The closure never fails.
        Err(_) => filter.clone(),
    }
}

/// One pruning container per split: a flushed file with what is known of it, or a
/// virtual file, of which nothing is.
struct SplitContainers<'a> {
    schema: &'a Schema,
    files: Vec<Option<FileStatistics>>,
    row_counts: Vec<Option<u64>>,
}

impl<'a> SplitContainers<'a> {
    fn new(schema: &'a Schema, splits: &[ScanSplit]) -> Self {
        let files = splits
            .iter()
            .map(|split| match split {
                ScanSplit::File(file) => FileStatistics::recorded(&file.meta, schema),
                ScanSplit::Virtual(_) => None,
            })
            .collect();
        let row_counts = splits
            .iter()
            .map(|split| match split {
                ScanSplit::File(file) => Some(file.meta.row_count),
                ScanSplit::Virtual(_) => None,
            })
            .collect();
        Self { schema, files, row_counts }
    }

    /// What each container knows of `column`.
    fn column_statistics(&self, column: &Column) -> Option<Vec<Option<&ColumnStatistics>>> {
        let field = self.schema.field_with_name(&column.name).ok()?;
        let known: Vec<Option<&ColumnStatistics>> = self
            .files
            .iter()
            .map(|file| file.as_ref().and_then(|file| file.column(&column.name, field.data_type())))
            .collect();
        known.iter().any(Option::is_some).then_some(known)
    }

    fn values(&self, column: &Column, pick: impl Fn(&ColumnStatistics) -> &ScalarValue) -> Option<ArrayRef> {
        let known = self.column_statistics(column)?;
        let field = self.schema.field_with_name(&column.name).ok()?;
        let unknown = ScalarValue::try_from(field.data_type()).ok()?;
        let scalars = known.into_iter().map(|stats| stats.map_or_else(|| unknown.clone(), |stats| pick(stats).clone()));
        ScalarValue::iter_to_array(scalars).ok()
    }
}

impl PruningStatistics for SplitContainers<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |stats| &stats.min)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |stats| &stats.max)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let known = self.column_statistics(column)?;
        Some(Arc::new(known.into_iter().map(|stats| stats.map(|stats| stats.null_count)).collect::<UInt64Array>()))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(self.row_counts.iter().copied().collect::<UInt64Array>()))
    }

    #[allow(clippy::mutable_key_type)] // the trait's signature
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None // no Bloom filters or dictionaries: min/max only
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{col, lit};

    use super::*;

    #[test]
    fn simple_predicates_are_prunable_and_others_are_not() {
        for filter in [
            col("qty").gt(lit(5)),
            lit(5).lt_eq(col("qty")),
            col("qty").eq(lit(5)).and(col("name").not_eq(lit("a"))),
            col("qty").lt(lit(0)).or(col("qty").gt(lit(9))),
            col("qty").in_list(vec![lit(1), lit(2)], false),
            col("qty").in_list(vec![lit(1)], true),
            col("qty").between(lit(1), lit(3)),
            col("name").is_null(),
            col("name").is_not_null(),
            Expr::Cast(Cast::new(Box::new(col("qty")), datafusion::arrow::datatypes::DataType::Int64)).eq(lit(5i64)),
        ] {
            assert!(is_prunable(&filter), "{filter}");
        }
        for filter in [
            col("qty").eq(col("id")),
            (col("qty") + lit(1)).gt(lit(5)),
            col("qty").in_list(vec![col("id")], false),
            col("qty").gt(lit(5)).and(col("qty").eq(col("id"))),
            col("name").like(lit("a%")),
        ] {
            assert!(!is_prunable(&filter), "{filter}");
        }
    }
}
