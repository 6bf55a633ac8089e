//! `RetinaTable`: a DataFusion `TableProvider` for one Retina table.
//!
//! Its schema is the user's columns only: the hidden `_create_ts` column is used by
//! the scan to cut invisible versions and never reaches SQL (`SELECT *` does not
//! show it, and naming it is an unknown-column error).
//!
//! Simple filters are pushed down *inexactly* ([`crate::split_pruning`]): the scan
//! leaves out splits whose statistics rule them out, and DataFusion still filters
//! every row above the scan.


use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use retina_core::scan::table_splits;
use retina_core::{Engine, TableId};

use crate::exec::{RetinaScanExec, ScanPruning};
use crate::snapshot::QuerySnapshot;
use crate::page_bounds::page_bounds;
use crate::scan_context::ScanContext;
use crate::split_pruning::{is_prunable, SplitPruning};

/// One Retina table as seen by DataFusion.
pub struct RetinaTable {
    engine: Arc<Engine>,
    id: TableId,
    schema: SchemaRef,
    context: Arc<ScanContext>,
}

impl RetinaTable {
    pub fn new(engine: Arc<Engine>, id: TableId, context: Arc<ScanContext>) -> retina_core::CoreResult<Self> {
        let schema = Arc::clone(engine.table(id)?.schema().columns());
        Ok(Self { engine, id, schema, context })
    }

    pub fn id(&self) -> TableId {
        self.id
    }
}

impl std::fmt::Debug for RetinaTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetinaTable").field("id", &self.id).field("columns", &self.schema.fields().len()).finish()
    }
}

#[async_trait]
impl TableProvider for RetinaTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = state.config().get_extension::<QuerySnapshot>().ok_or_else(|| {
            DataFusionError::Internal(
                "no query snapshot in the session: Retina tables are read through RetinaSession".into(),
            )
        })?;
        let table = self.engine.table(self.id).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let schema = match projection {
            Some(columns) => Arc::new(self.schema.project(columns)?),
            None => Arc::clone(&self.schema),
        };
        let splits = table_splits(&table);
        let pruning = self.context.prune_splits.then(|| SplitPruning::new(filters, &self.schema, state)).flatten();
        let (splits, pruning) = match pruning {
            Some(pruning) => {
                let (kept, pruned) = pruning.prune(&self.schema, splits);
                (kept, Some(ScanPruning { pruned_splits: pruned, predicate: pruning.describe() }))
            }
            None => (splits, None),
        };
        let files = self.engine.data_files();
        let parallel = state.config().target_partitions().max(files.parallel_reads().unwrap_or(0));
        let bounds = if self.context.prune_splits { page_bounds(filters, &self.schema) } else { Vec::new() };
        Ok(Arc::new(
            RetinaScanExec::new(table, files, snapshot.guard(), splits, projection.cloned(), schema, parallel)
                .with_context(Arc::clone(&self.context), pruning)
                .with_page_bounds(bounds),
        ))
    }

    /// Simple predicates are `Inexact`: used to prune splits, and evaluated again on
    /// the visible rows by a `FilterExec` above the scan. Others are `Unsupported`.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|filter| {
                if is_prunable(filter) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }
}
