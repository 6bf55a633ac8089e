//! `RetinaTable`: a DataFusion `TableProvider` for one Retina table.
//!
//! Its schema is the user's columns only: the hidden `_create_ts` column is used by
//! the scan to cut invisible versions and never reaches SQL (`SELECT *` does not
//! show it, and naming it is an unknown-column error).

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

use crate::exec::RetinaScanExec;
use crate::snapshot::QuerySnapshot;

/// One Retina table as seen by DataFusion.
pub struct RetinaTable {
    engine: Arc<Engine>,
    id: TableId,
    schema: SchemaRef,
}

impl RetinaTable {
    pub fn new(engine: Arc<Engine>, id: TableId) -> retina_core::CoreResult<Self> {
        let schema = Arc::clone(engine.table(id)?.schema().columns());
        Ok(Self { engine, id, schema })
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
        _filters: &[Expr],
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
        let parallel = state.config().target_partitions();
        Ok(Arc::new(RetinaScanExec::new(
            table,
            Arc::clone(self.engine.store()),
            snapshot.guard(),
            splits,
            projection.cloned(),
            schema,
            parallel,
        )))
    }

    /// Filters are evaluated above the scan (a `FilterExec` on the visible rows).
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Unsupported; filters.len()])
    }
}
