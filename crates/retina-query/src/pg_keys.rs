//! `pg_catalog.pg_index` and `pg_catalog.pg_constraint` with every table's primary
//! key, so clients that reflect a schema find it: SQLAlchemy's `get_pk_constraint`
//! (and so `Table(autoload_with=)`, pandas `read_sql_table`, Superset), which
//! unnests `pg_index.indkey` joined through `pg_constraint.conindid`.
//!
//! The emulation (`datafusion-pg-catalog`) serves both as fixed copies of a real
//! server's system constraints, whose oids name no relation here and whose key
//! columns are text where clients unnest arrays. These tables replace them: one
//! primary-key index and one constraint per table with a key, `indkey`/`conkey` as
//! `int2` arrays of the columns' `attnum`s. A table's oid is whatever the
//! emulation's `pg_class` assigns it, read when the table is scanned, so joins
//! with `pg_class` and `pg_attribute` hold.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Int16Array, Int16Builder, Int32Array, Int32Builder, ListBuilder, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int16Type, Int32Type, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::{SchemaProvider, Session};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::{collect, ExecutionPlan};
use retina_core::Engine;

use crate::system::split_table_name;

/// Oids of the key's index and constraint: the table's oid moved past what the
/// emulation hands out (it counts up from 16384).
const INDEX_OID_OFFSET: i32 = 1_000_000_000;
const CONSTRAINT_OID_OFFSET: i32 = 1_500_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyTableKind {
    Index,
    Constraint,
}

impl KeyTableKind {
    /// PostgreSQL 16's columns, in its order.
    fn schema(self) -> SchemaRef {
        let int2_array = || DataType::List(Arc::new(Field::new("item", DataType::Int16, true)));
        let oid_array = || DataType::List(Arc::new(Field::new("item", DataType::Int32, true)));
        let fields = match self {
            Self::Index => vec![
                Field::new("indexrelid", DataType::Int32, false),
                Field::new("indrelid", DataType::Int32, false),
                Field::new("indnatts", DataType::Int16, false),
                Field::new("indnkeyatts", DataType::Int16, false),
                Field::new("indisunique", DataType::Boolean, false),
                Field::new("indnullsnotdistinct", DataType::Boolean, false),
                Field::new("indisprimary", DataType::Boolean, false),
                Field::new("indisexclusion", DataType::Boolean, false),
                Field::new("indimmediate", DataType::Boolean, false),
                Field::new("indisclustered", DataType::Boolean, false),
                Field::new("indisvalid", DataType::Boolean, false),
                Field::new("indcheckxmin", DataType::Boolean, false),
                Field::new("indisready", DataType::Boolean, false),
                Field::new("indislive", DataType::Boolean, false),
                Field::new("indisreplident", DataType::Boolean, false),
                Field::new("indkey", int2_array(), false),
                Field::new("indcollation", oid_array(), false),
                Field::new("indclass", oid_array(), false),
                Field::new("indoption", int2_array(), false),
                Field::new("indexprs", DataType::Utf8, true),
                Field::new("indpred", DataType::Utf8, true),
            ],
            Self::Constraint => vec![
                Field::new("oid", DataType::Int32, false),
                Field::new("conname", DataType::Utf8, false),
                Field::new("connamespace", DataType::Int32, false),
                Field::new("contype", DataType::Utf8, false),
                Field::new("condeferrable", DataType::Boolean, false),
                Field::new("condeferred", DataType::Boolean, false),
                Field::new("convalidated", DataType::Boolean, false),
                Field::new("conrelid", DataType::Int32, false),
                Field::new("contypid", DataType::Int32, false),
                Field::new("conindid", DataType::Int32, false),
                Field::new("conparentid", DataType::Int32, false),
                Field::new("confrelid", DataType::Int32, false),
                Field::new("confupdtype", DataType::Utf8, false),
                Field::new("confdeltype", DataType::Utf8, false),
                Field::new("confmatchtype", DataType::Utf8, false),
                Field::new("conislocal", DataType::Boolean, false),
                Field::new("coninhcount", DataType::Int16, false),
                Field::new("connoinherit", DataType::Boolean, false),
                Field::new("conkey", int2_array(), true),
                Field::new("confkey", int2_array(), true),
                Field::new("conpfeqop", oid_array(), true),
                Field::new("conppeqop", oid_array(), true),
                Field::new("conffeqop", oid_array(), true),
                Field::new("confdelsetcols", int2_array(), true),
                Field::new("conexclop", oid_array(), true),
                Field::new("conbin", DataType::Utf8, true),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// One table's primary key, as the catalog names it.
#[derive(Clone, Debug)]
pub struct PrimaryKey {
    pub table_oid: i32,
    pub namespace_oid: i32,
    /// `<table>_pkey`, the name of the key's constraint and of its index.
    pub constraint_name: String,
    /// `attnum` of each key column, in key order.
    pub attnums: Vec<i16>,
    /// `schema.table`, quoted where needed.
    pub qualified_table: String,
    /// The key columns' names, in key order.
    pub columns: Vec<String>,
}

impl PrimaryKey {
    /// The oid of the key's index (in `pg_class` and `pg_index`).
    pub fn index_oid(&self) -> i32 {
        self.table_oid + INDEX_OID_OFFSET
    }

    /// The oid of the key's constraint (in `pg_constraint`).
    pub fn constraint_oid(&self) -> i32 {
        self.table_oid + CONSTRAINT_OID_OFFSET
    }

    /// What `pg_get_indexdef(index)` answers.
    pub fn index_definition(&self) -> String {
        format!("CREATE UNIQUE INDEX {} ON {} USING btree ({})", quoted(&self.constraint_name), self.qualified_table, self.column_list())
    }

    /// What `pg_get_constraintdef(constraint)` answers.
    pub fn constraint_definition(&self) -> String {
        format!("PRIMARY KEY ({})", self.column_list())
    }

    fn column_list(&self) -> String {
        self.columns.iter().map(|c| quoted(c)).collect::<Vec<_>>().join(", ")
    }
}

/// An identifier as PostgreSQL prints it: bare when it is lower case letters,
/// digits and underscores, else in double quotes.
fn quoted(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain { name.to_string() } else { format!("\"{}\"", name.replace('"', "\"\"")) }
}

/// The primary keys the catalog tables last listed, by index and constraint oid:
/// what `pg_get_indexdef` and `pg_get_constraintdef` describe. A client gets those
/// oids from a scan of `pg_index`, `pg_constraint` or `pg_class`, which records the
/// keys here first.
#[derive(Default)]
pub struct KeyDefinitions {
    by_oid: parking_lot::RwLock<HashMap<i32, PrimaryKey>>,
}

impl KeyDefinitions {
    pub fn record(&self, keys: &[PrimaryKey]) {
        let mut by_oid = self.by_oid.write();
        by_oid.clear();
        for key in keys {
            by_oid.insert(key.index_oid(), key.clone());
            by_oid.insert(key.constraint_oid(), key.clone());
        }
    }

    /// The key whose index or constraint has `oid`.
    pub fn get(&self, oid: i32) -> Option<PrimaryKey> {
        self.by_oid.read().get(&oid).cloned()
    }
}

/// `pg_index` or `pg_constraint`, computed when scanned.
pub struct KeyTable {
    kind: KeyTableKind,
    schema: SchemaRef,
    engine: Arc<Engine>,
    /// The emulation, whose `pg_class` and `pg_namespace` give the oids.
    catalog: Arc<dyn SchemaProvider>,
    definitions: Arc<KeyDefinitions>,
}

impl fmt::Debug for KeyTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyTable({:?})", self.kind)
    }
}

impl KeyTable {
    /// `kind`'s table over `engine`'s tables, with oids from the emulated `catalog`.
    pub fn new(kind: KeyTableKind, engine: Arc<Engine>, catalog: Arc<dyn SchemaProvider>, definitions: Arc<KeyDefinitions>) -> Self {
        Self { kind, schema: kind.schema(), engine, catalog, definitions }
    }

    fn batch(&self, keys: &[PrimaryKey]) -> Result<RecordBatch> {
        let n = keys.len();
        let int32 = |f: &dyn Fn(&PrimaryKey) -> i32| Arc::new(keys.iter().map(f).collect::<Int32Array>()) as ArrayRef;
        let int16 = |f: &dyn Fn(&PrimaryKey) -> i16| Arc::new(keys.iter().map(f).collect::<Int16Array>()) as ArrayRef;
        let flag = |value: bool| Arc::new(BooleanArray::from(vec![value; n])) as ArrayRef;
        let text = |f: &dyn Fn(&PrimaryKey) -> Option<String>| Arc::new(keys.iter().map(f).collect::<StringArray>()) as ArrayRef;
        let key_columns = || {
            let mut builder = ListBuilder::new(Int16Builder::new());
            for key in keys {
                builder.values().append_slice(&key.attnums);
                builder.append(true);
            }
            Arc::new(builder.finish()) as ArrayRef
        };
        // One entry per key column: default collation, operator class and options.
        let int2_zeros_per_column = || {
            let mut builder = ListBuilder::new(Int16Builder::new());
            for key in keys {
                builder.values().append_slice(&vec![0; key.attnums.len()]);
                builder.append(true);
            }
            Arc::new(builder.finish()) as ArrayRef
        };
        let zeros_per_column = || {
            let mut builder = ListBuilder::new(Int32Builder::new());
            for key in keys {
                builder.values().append_slice(&vec![0; key.attnums.len()]);
                builder.append(true);
            }
            Arc::new(builder.finish()) as ArrayRef
        };
        let no_arrays = |item: DataType| datafusion::arrow::array::new_null_array(&DataType::List(Arc::new(Field::new("item", item, true))), n);
        let key_count = |key: &PrimaryKey| i16::try_from(key.attnums.len()).unwrap_or(i16::MAX);
        let columns: Vec<ArrayRef> = match self.kind {
            KeyTableKind::Index => vec![
                int32(&PrimaryKey::index_oid),
                int32(&|k| k.table_oid),
                int16(&key_count),
                int16(&key_count),
                flag(true),  // indisunique
                flag(false), // indnullsnotdistinct
                flag(true),  // indisprimary
                flag(false), // indisexclusion
                flag(true),  // indimmediate
                flag(false), // indisclustered
                flag(true),  // indisvalid
                flag(false), // indcheckxmin
                flag(true),  // indisready
                flag(true),  // indislive
                flag(false), // indisreplident
                key_columns(),
                zeros_per_column(),
                zeros_per_column(),
                int2_zeros_per_column(),
                text(&|_| None),
                text(&|_| None),
            ],
            KeyTableKind::Constraint => vec![
                int32(&PrimaryKey::constraint_oid),
                text(&|k| Some(k.constraint_name.clone())),
                int32(&|k| k.namespace_oid),
                text(&|_| Some("p".into())),
                flag(false), // condeferrable
                flag(false), // condeferred
                flag(true),  // convalidated
                int32(&|k| k.table_oid),
                int32(&|_| 0),
                int32(&PrimaryKey::index_oid),
                int32(&|_| 0),
                int32(&|_| 0),
                text(&|_| Some(" ".into())),
                text(&|_| Some(" ".into())),
                text(&|_| Some(" ".into())),
                flag(true), // conislocal
                int16(&|_| 0),
                flag(true), // connoinherit
                key_columns(),
                no_arrays(DataType::Int16),
                no_arrays(DataType::Int32),
                no_arrays(DataType::Int32),
                no_arrays(DataType::Int32),
                no_arrays(DataType::Int16),
                no_arrays(DataType::Int32),
                text(&|_| None),
            ],
        };
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

/// A relation `pg_class` lists, by its oid.
pub struct Relation {
    pub name: String,
    pub namespace: String,
    pub namespace_oid: i32,
}

/// Every relation of the emulated `catalog`'s `pg_class`, by oid, with its schema.
pub async fn relation_oids(catalog: &dyn SchemaProvider, state: &dyn Session) -> Result<HashMap<i32, Relation>> {
    let mut namespaces: HashMap<i32, String> = HashMap::new();
    for batch in read(catalog, state, "pg_namespace").await? {
        let (oids, names) = (int32_column(&batch, "oid")?, string_column(&batch, "nspname")?);
        for row in 0..batch.num_rows() {
            namespaces.insert(oids.value(row), names.value(row).to_string());
        }
    }
    let mut relations = HashMap::new();
    for batch in read(catalog, state, "pg_class").await? {
        let (oids, names, spaces) =
            (int32_column(&batch, "oid")?, string_column(&batch, "relname")?, int32_column(&batch, "relnamespace")?);
        for row in 0..batch.num_rows() {
            let Some(namespace) = namespaces.get(&spaces.value(row)) else { continue };
            let relation = Relation { name: names.value(row).to_string(), namespace: namespace.clone(), namespace_oid: spaces.value(row) };
            relations.insert(oids.value(row), relation);
        }
    }
    Ok(relations)
}

/// Every column of `table` in the emulated catalog, as record batches.
async fn read(catalog: &dyn SchemaProvider, state: &dyn Session, table: &str) -> Result<Vec<RecordBatch>> {
    let provider = catalog
        .table(table)
        .await?
        .ok_or_else(|| DataFusionError::Internal(format!("the pg_catalog emulation has no {table}")))?;
    read_all(provider.as_ref(), state).await
}

/// Every row and column of `table` (catalog tables are small).
pub async fn read_all(table: &dyn TableProvider, state: &dyn Session) -> Result<Vec<RecordBatch>> {
    let plan = table.scan(state, None, &[], None).await?;
    collect(plan, state.task_ctx()).await
}

/// `batch` with its column `name` replaced by `values`.
pub fn with_column(batch: &RecordBatch, name: &str, values: ArrayRef) -> Result<RecordBatch> {
    let index = batch.schema().index_of(name)?;
    let mut columns = batch.columns().to_vec();
    columns[index] = values;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The primary keys of every table of `engine` that the emulated `catalog`'s
/// `pg_class` lists, with its oids.
pub async fn primary_keys(
    engine: &Engine,
    catalog: &dyn SchemaProvider,
    state: &dyn Session,
    definitions: &KeyDefinitions,
) -> Result<Vec<PrimaryKey>> {
    let relations = relation_oids(catalog, state).await?;
    let namespaces: HashMap<&str, i32> = relations.values().map(|r| (r.namespace.as_str(), r.namespace_oid)).collect();
    let tables: HashMap<(i32, &str), i32> = relations.iter().map(|(oid, r)| ((r.namespace_oid, r.name.as_str()), *oid)).collect();
    let mut keys = Vec::new();
    for table in engine.tables() {
        let schema = table.schema();
        if schema.primary_key().is_empty() {
            continue;
        }
        let (namespace, name) = split_table_name(table.name());
        let Some(&namespace_oid) = namespaces.get(namespace) else { continue };
        let Some(&table_oid) = tables.get(&(namespace_oid, name)) else { continue };
        // `attnum` is the column's position in the table's SQL schema, from 1.
        let attnums = schema.primary_key().iter().map(|&column| i16::try_from(column + 1).unwrap_or(i16::MAX)).collect();
        let columns = schema.primary_key().iter().map(|&column| schema.columns().field(column).name().clone()).collect();
        let qualified_table = format!("{}.{}", quoted(namespace), quoted(name));
        keys.push(PrimaryKey { table_oid, namespace_oid, constraint_name: format!("{name}_pkey"), attnums, qualified_table, columns });
    }
    definitions.record(&keys);
    Ok(keys)
}

#[async_trait]
impl TableProvider for KeyTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let keys = primary_keys(&self.engine, self.catalog.as_ref(), state, &self.definitions).await?;
        let batch = self.batch(&keys)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&self.schema), projection.cloned())?)
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| DataFusionError::Internal(format!("the pg_catalog emulation has no column {name}")))
}

pub fn int32_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a Int32Array> {
    column(batch, name)?
        .as_primitive_opt::<Int32Type>()
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog column {name} is not int4")))
}

pub fn int16_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a Int16Array> {
    column(batch, name)?
        .as_primitive_opt::<Int16Type>()
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog column {name} is not int2")))
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    column(batch, name)?
        .as_string_opt::<i32>()
        .ok_or_else(|| DataFusionError::Internal(format!("pg_catalog column {name} is not text")))
}
