//! The emulated `pg_catalog` (`datafusion-pg-catalog`) with what schema-reflecting
//! clients need and it lacks: `pg_index` and `pg_constraint` with every table's
//! primary key ([`crate::pg_keys`]), the keys' indexes as `pg_class` rows (pgjdbc's
//! `getPrimaryKeys` takes the key's name from there), and columns PostgreSQL has
//! that its tables leave out (`pg_class.reloptions`, read by SQLAlchemy's
//! `get_indexes`), as NULL; decimal columns' precision and scale as their
//! `pg_attribute.atttypmod`; and `pg_settings` with the settings `SHOW` answers.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::array::{ArrayRef, BooleanArray, Int32Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::catalog::memory::MemorySourceConfig;
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

use crate::client_settings::ClientSettings;
use crate::pg_compat::{setting, SETTING_NAMES};
use crate::pg_compat::numeric_typmod;
use crate::pg_keys::{
    int16_column, int32_column, primary_keys, read_all, relation_oids, with_column, KeyDefinitions, KeyTable, KeyTableKind,
    PrimaryKey, Relation,
};
use crate::sql_catalog::engine_table_id;

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
    definitions: Arc<KeyDefinitions>,
}

impl PgCatalogOverrides {
    /// `definitions`: where the keys listed are recorded for `pg_get_indexdef`.
    pub fn new(inner: Arc<dyn SchemaProvider>, engine: Arc<Engine>, definitions: Arc<KeyDefinitions>) -> Self {
        Self { inner, engine, definitions }
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
            "pg_settings" => return Ok(Some(Arc::new(settings_table()?))),
            "pg_index" => KeyTableKind::Index,
            "pg_constraint" => KeyTableKind::Constraint,
            _ => {
                let Some(table) = self.inner.table(&name).await? else { return Ok(None) };
                if name == "pg_attribute" {
                    let (engine, catalog) = (Arc::clone(&self.engine), Arc::clone(&self.inner));
                    return Ok(Some(Arc::new(PgAttributeWithTypmods { inner: table, engine, catalog })));
                }
                let missing = missing_columns(&name);
                if missing.is_empty() {
                    return Ok(Some(table));
                }
                let table = WithNullColumns::new(table, missing);
                if name == "pg_class" {
                    let (engine, catalog, definitions) = (Arc::clone(&self.engine), Arc::clone(&self.inner), Arc::clone(&self.definitions));
                    return Ok(Some(Arc::new(PgClassWithIndexes { table, engine, catalog, definitions })));
                }
                return Ok(Some(Arc::new(table)));
            }
        };
        Ok(Some(Arc::new(KeyTable::new(kind, Arc::clone(&self.engine), Arc::clone(&self.inner), Arc::clone(&self.definitions)))))
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

/// `pg_class` with a row for each primary key's index (`relkind` `i`, named like its
/// constraint, access method btree).
struct PgClassWithIndexes {
    table: WithNullColumns,
    engine: Arc<Engine>,
    catalog: Arc<dyn SchemaProvider>,
    definitions: Arc<KeyDefinitions>,
}

impl fmt::Debug for PgClassWithIndexes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PgClassWithIndexes")
    }
}

/// PostgreSQL's oid of the btree access method.
const BTREE_AM_OID: i32 = 403;

impl PgClassWithIndexes {
    /// One `pg_class` row per key index; columns not named here hold zero, false,
    /// the empty string or NULL (as the emulation's own rows do).
    fn index_rows(&self, keys: &[PrimaryKey]) -> Result<RecordBatch> {
        let schema = self.table.schema();
        let mut columns = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let value = |key: &PrimaryKey| -> ScalarValue {
                let int = |v: i32| ScalarValue::Int32(Some(v));
                match field.name().as_str() {
                    "oid" | "relfilenode" => int(key.index_oid()),
                    "relname" => ScalarValue::Utf8(Some(key.constraint_name.clone())),
                    "relnamespace" => int(key.namespace_oid),
                    "relam" => int(BTREE_AM_OID),
                    "relkind" => ScalarValue::Utf8(Some("i".into())),
                    "relpersistence" => ScalarValue::Utf8(Some("p".into())),
                    "relreplident" => ScalarValue::Utf8(Some("n".into())),
                    "relnatts" => ScalarValue::Int16(Some(i16::try_from(key.attnums.len()).unwrap_or(i16::MAX))),
                    "relispopulated" => ScalarValue::Boolean(Some(true)),
                    _ if field.is_nullable() => ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null),
                    _ => ScalarValue::new_zero(field.data_type())
                        .or_else(|_| ScalarValue::try_from_string(String::new(), field.data_type()))
                        .or_else(|_| ScalarValue::try_from(field.data_type()))
                        .unwrap_or(ScalarValue::Null),
                }
            };
            let values: Vec<ScalarValue> = keys.iter().map(value).collect();
            columns.push(if values.is_empty() {
                datafusion::arrow::array::new_empty_array(field.data_type())
            } else {
                ScalarValue::iter_to_array(values)?
            });
        }
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

#[async_trait]
impl TableProvider for PgClassWithIndexes {
    fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    fn table_type(&self) -> TableType {
        self.table.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let keys = primary_keys(&self.engine, self.catalog.as_ref(), state, &self.definitions).await?;
        let keyed: std::collections::HashSet<i32> = keys.iter().map(|key| key.table_oid).collect();
        let mut batches = Vec::new();
        // A table with a key has an index: psql's `\d` lists indexes only then.
        for batch in read_all(&self.table, state).await? {
            let oids = int32_column(&batch, "oid")?;
            let has_index: BooleanArray = (0..batch.num_rows()).map(|row| Some(keyed.contains(&oids.value(row)))).collect();
            batches.push(with_column(&batch, "relhasindex", Arc::new(has_index))?);
        }
        batches.push(self.index_rows(&keys)?);
        Ok(MemorySourceConfig::try_new_exec(&[batches], self.table.schema(), projection.cloned())?)
    }
}

/// `pg_settings` with every setting `SHOW` answers (the emulation lists one), at
/// the values of a connection with the default settings. pgjdbc reads
/// `max_index_keys` from it before `getImportedKeys`.
fn settings_table() -> Result<MemTable> {
    let text = |name: &str| Field::new(name, DataType::Utf8, true);
    let schema = Arc::new(Schema::new(vec![
        text("name"),
        text("setting"),
        text("unit"),
        text("category"),
        text("short_desc"),
        text("extra_desc"),
        text("context"),
        text("vartype"),
        text("source"),
        text("min_val"),
        text("max_val"),
        text("enumvals"),
        text("boot_val"),
        text("reset_val"),
        text("sourcefile"),
        Field::new("sourceline", DataType::Int32, true),
        Field::new("pending_restart", DataType::Boolean, true),
    ]));
    let defaults = ClientSettings::default();
    let rows: Vec<(&str, String)> = SETTING_NAMES.iter().filter_map(|name| setting(name, &defaults)).collect();
    let column = |value: &dyn Fn(&(&str, String)) -> Option<String>| Arc::new(rows.iter().map(value).collect::<StringArray>()) as ArrayRef;
    let mut columns = vec![
        column(&|(name, _)| Some(name.to_string())),
        column(&|(_, value)| Some(value.clone())),
    ];
    for field in &schema.fields()[2..] {
        columns.push(match field.name().as_str() {
            "context" => column(&|_| Some("internal".into())),
            "vartype" => column(&|_| Some("string".into())),
            "source" => column(&|_| Some("default".into())),
            "boot_val" | "reset_val" => column(&|(_, value)| Some(value.clone())),
            "pending_restart" => Arc::new(BooleanArray::from(vec![false; rows.len()])) as ArrayRef,
            _ => datafusion::arrow::array::new_null_array(field.data_type(), rows.len()),
        });
    }
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    MemTable::try_new(schema, vec![vec![batch]])
}

/// `pg_attribute` with each decimal column's precision and scale as its `atttypmod`
/// ([`numeric_typmod`]), where the
/// emulation leaves -1: SQLAlchemy's reflection reads `numeric(12,2)` through
/// `format_type`, and pgjdbc's `getColumns` its COLUMN_SIZE and DECIMAL_DIGITS.
struct PgAttributeWithTypmods {
    inner: Arc<dyn TableProvider>,
    engine: Arc<Engine>,
    catalog: Arc<dyn SchemaProvider>,
}

impl fmt::Debug for PgAttributeWithTypmods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PgAttributeWithTypmods")
    }
}

impl PgAttributeWithTypmods {
    /// The SQL schema of `relation`, if it is a user table.
    fn columns_of(&self, relation: &Relation) -> Option<SchemaRef> {
        let id = engine_table_id(&self.engine, &relation.namespace, &relation.name)?;
        self.engine.table(id).ok().map(|table| Arc::clone(table.schema().columns()))
    }
}

#[async_trait]
impl TableProvider for PgAttributeWithTypmods {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let relations = relation_oids(self.catalog.as_ref(), state).await?;
        let schemas: HashMap<i32, SchemaRef> =
            relations.iter().filter_map(|(oid, relation)| Some((*oid, self.columns_of(relation)?))).collect();
        let mut batches = Vec::new();
        for batch in read_all(self.inner.as_ref(), state).await? {
            let (relids, attnums, typmods) =
                (int32_column(&batch, "attrelid")?, int16_column(&batch, "attnum")?, int32_column(&batch, "atttypmod")?);
            let typmods: Int32Array = (0..batch.num_rows())
                .map(|row| {
                    let field = schemas.get(&relids.value(row)).and_then(|schema| {
                        usize::try_from(attnums.value(row)).ok().and_then(|n| n.checked_sub(1)).and_then(|i| schema.fields().get(i).cloned())
                    });
                    Some(field.and_then(|f| numeric_typmod(f.data_type())).unwrap_or_else(|| typmods.value(row)))
                })
                .collect();
            batches.push(with_column(&batch, "atttypmod", Arc::new(typmods))?);
        }
        Ok(MemorySourceConfig::try_new_exec(&[batches], self.inner.schema(), projection.cloned())?)
    }
}

