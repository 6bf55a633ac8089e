//! The emulated `pg_catalog` (`datafusion-pg-catalog`) with what schema-reflecting
//! clients need and it lacks: `pg_index` and `pg_constraint` with every table's
//! primary key ([`crate::pg_keys`]), and columns PostgreSQL has that its tables leave
//! out (`pg_class.reloptions`, read by SQLAlchemy's `get_indexes`), as NULL.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, Session};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::scalar::ScalarValue;
use retina_core::Engine;

use crate::pg_keys::{KeyTable, KeyTableKind};

/// Columns added to an emulated table, by table name.
fn missing_columns(table: &str) -> Vec<Field> {
    let text_array = || DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    match table {
        "pg_class" => vec![Field::new("reloptions", text_array(), true), Field::new("relacl", text_array(), true)],
        _ => Vec::new(),
    }
}

/// The emulated `pg_catalog` with its overrides.
pub struct PgCatalogOverrides {
    inner: Arc<dyn SchemaProvider>,
    engine: Arc<Engine>,
}

impl PgCatalogOverrides {
    pub fn new(inner: Arc<dyn SchemaProvider>, engine: Arc<Engine>) -> Self {
        Self { inner, engine }
    }
}

impl fmt::Debug for PgCatalogOverrides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PgCatalogOverrides")
    }
}

#[async_trait]
impl SchemaProvider for PgCatalogOverrides {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let name = name.to_ascii_lowercase();
        let kind = match name.as_str() {
            "pg_index" => KeyTableKind::Index,
            "pg_constraint" => KeyTableKind::Constraint,
            _ => {
                let Some(table) = self.inner.table(&name).await? else { return Ok(None) };
                let missing = missing_columns(&name);
                if missing.is_empty() {
                    return Ok(Some(table));
                }
                return Ok(Some(Arc::new(WithNullColumns::new(table, missing))));
            }
        };
        Ok(Some(Arc::new(KeyTable::new(kind, Arc::clone(&self.engine), Arc::clone(&self.inner)))))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

/// A table with more columns, always NULL.
struct WithNullColumns {
    inner: Arc<dyn TableProvider>,
    schema: SchemaRef,
}

impl WithNullColumns {
    fn new(inner: Arc<dyn TableProvider>, extra: Vec<Field>) -> Self {
        let base = inner.schema();
        let fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).chain(extra).collect();
        let schema = Arc::new(Schema::new_with_metadata(fields, base.metadata().clone()));
        Self { inner, schema }
    }
}

impl fmt::Debug for WithNullColumns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WithNullColumns")
    }
}

#[async_trait]
impl TableProvider for WithNullColumns {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = self.inner.scan(state, None, &[], limit).await?;
        let inner_columns = self.inner.schema().fields().len();
        let wanted: Vec<usize> = projection.cloned().unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let mut exprs = Vec::with_capacity(wanted.len());
        for index in wanted {
            let field = self.schema.field(index);
            let expr: Arc<dyn PhysicalExpr> = if index < inner_columns {
                Arc::new(Column::new(field.name(), index))
            } else {
                Arc::new(Literal::new(ScalarValue::try_from(field.data_type())?))
            };
            exprs.push(ProjectionExpr { expr, alias: field.name().clone() });
        }
        Ok(Arc::new(ProjectionExec::try_new(exprs, input)?))
    }
}
