//! Which engine table a change event belongs to, and how to decode its images: the
//! table is found in the catalog or created on first sight from the event's schema
//! (or, with `--infer-schema`, from its after-image); its primary key comes from the
//! message key, else `--primary-key`, else the catalog.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Field, Schema};
use parking_lot::RwLock;
use retina_core::{Engine, TableId, TableSchema};

use crate::debezium::schema::{columns_of_envelope, key_columns};
use super::decoding::Decoding;
use crate::debezium::{ChangeEvent, DebeziumType, ColumnPlan, KnownSchemas, Scalar, TablePlan};
use crate::error::{CdcError, CdcResult};
use crate::position::Position;

/// A table of the engine with the plan to decode its images.
#[derive(Debug)]
pub struct TableBinding {
    pub id: TableId,
    /// The table's name, shared by every pending change of it.
    pub name: Arc<str>,
    pub plan: TablePlan,
}

/// The bindings resolved so far: by table name (schemaless events) and by table name
/// and raw schema text (events with schemas: each distinct schema of a table is
/// checked against it once). Shared with the decode stage, which may only read it.
///
/// Keyed by table first: two tables may carry byte-identical schemas (nothing in a
/// Connect schema has to name its table), and hashing the short name instead of the
/// schema (a kilobyte or more, on every line) is cheaper.
#[derive(Default)]
pub struct KnownBindings {
    by_name: HashMap<String, Arc<TableBinding>>,
    /// Per table, its schema texts seen so far (the shared copies of
    /// [`KnownSchemas`], which lines read with that schema left out point to), newest
    /// last.
    by_schema: HashMap<String, Vec<SchemaBinding>>,
    decoding: Decoding,
}

impl KnownBindings {
    /// The sink's decoding options (`--table`, `--on-absent-row`).
    pub fn decoding(&self) -> &Decoding {
        &self.decoding
    }

    /// The binding `event` resolves to, if it was resolved before.
    pub fn lookup(&self, event: &ChangeEvent<'_>) -> Option<Arc<TableBinding>> {
        match event.schema {
            Some(schema) => {
                let schemas = self.by_schema.get(&event.table)?;
                schemas.iter().rev().find(|(known, _)| same_text(known, schema)).map(|(_, binding)| Arc::clone(binding))
            }
            None => self.by_name.get(&event.table).cloned(),
        }
    }
}

/// A schema text (the shared copy) and the binding it resolved to.
type SchemaBinding = (Arc<str>, Arc<TableBinding>);

/// Whether `known` and `text` are the same text: by address first, which is how a
/// schema left out of a line is recognized (its bytes were compared as it was read).
fn same_text(known: &str, text: &str) -> bool {
    (known.as_ptr() == text.as_ptr() && known.len() == text.len()) || known == text
}

/// Resolves events to tables (see [`KnownBindings`] for the caches).
pub struct TableResolver {
    primary_keys: HashMap<String, Vec<String>>,
    infer_schema: bool,
    known: Arc<RwLock<KnownBindings>>,
    /// The schema texts of bound tables, which sources leave out of lines.
    schemas: KnownSchemas,
    /// Tables that got columns since [`Self::take_widened`]: rows decoded with an
    /// older binding are short of them.
    widened: Vec<TableId>,
}

impl TableResolver {
    pub fn new(primary_keys: HashMap<String, Vec<String>>, infer_schema: bool) -> Self {
        Self { primary_keys, infer_schema, known: Arc::default(), schemas: KnownSchemas::default(), widened: Vec::new() }
    }

    /// Sets how events become row changes (`--table`, `--on-absent-row`).
    pub fn with_decoding(self, decoding: Decoding) -> Self {
        self.known.write().decoding = decoding;
        self
    }

    /// See [`Self::with_decoding`].
    pub fn decoding(&self) -> Decoding {
        self.known.read().decoding.clone()
    }

    /// The tables widened since the last call.
    pub fn take_widened(&mut self) -> Vec<TableId> {
        std::mem::take(&mut self.widened)
    }

    /// The caches, for readers on other threads.
    pub fn known(&self) -> Arc<RwLock<KnownBindings>> {
        Arc::clone(&self.known)
    }

    /// The schema texts of bound tables, for the thread reading the source.
    pub fn known_schemas(&self) -> KnownSchemas {
        self.schemas.clone()
    }

    /// The binding for `event`'s table, creating the table if needed.
    pub fn resolve(&mut self, engine: &Engine, event: &ChangeEvent<'_>, position: Position) -> CdcResult<Arc<TableBinding>> {
        let known = self.known.read().lookup(event);
        if let Some(binding) = known {
            return self.with_new_fields(engine, binding, event, position);
        }
        if let Some(schema) = event.schema {
            let binding = self.resolve_with_schema(engine, event, schema, position)?;
            // Both parsed as part of the message (and the value schema again for its
            // columns), so sources may leave them out from now on.
            let schema = self.schemas.intern(schema);
            if let Some(key_schema) = event.key_schema {
                self.schemas.intern(key_schema);
            }
            let mut known = self.known.write();
            known.by_schema.entry(event.table.clone()).or_default().push((schema, Arc::clone(&binding)));
            return Ok(binding);
        }
        let binding = match engine.table_id(&event.table) {
            Some(id) => self.with_new_fields(engine, Arc::new(self.schemaless_binding(engine, id, position)?), event, position)?,
            None if self.infer_schema => self.create_inferred(engine, event, position)?,
            None => {
                return Err(CdcError::Schema {
                    position,
                    table: event.table.clone(),
                    column: "*".into(),
                    reason: "the table is not in the catalog and the message carries no schema: \
                             enable Debezium schemas, create the table, or pass --infer-schema"
                        .into(),
                })
            }
        };
        self.known.write().by_name.insert(event.table.clone(), Arc::clone(&binding));
        Ok(binding)
    }

    fn resolve_with_schema(
        &mut self,
        engine: &Engine,
        event: &ChangeEvent<'_>,
        schema: &str,
        position: Position,
    ) -> CdcResult<Arc<TableBinding>> {
        let decode_error = |error| CdcError::Decode { position, table: Some(event.table.clone()), error };
        let columns = columns_of_envelope(schema).map_err(decode_error)?;
        let binding = match engine.table_id(&event.table) {
            Some(id) => {
                let (binding, widened) = bind_schema_to_table(engine, id, columns, position)?;
                if widened {
                    self.widened.push(id);
                }
                binding
            }
            None => {
                let key = self.key_columns(event, &columns, position)?;
                create_table(engine, &event.table, columns, &key, position)?
            }
        };
        let binding = Arc::new(binding);
        self.known.write().by_name.insert(event.table.clone(), Arc::clone(&binding));
        Ok(binding)
    }

    /// Primary-key column names for a new table.
    fn key_columns(&self, event: &ChangeEvent<'_>, columns: &[ColumnPlan], position: Position) -> CdcResult<Vec<String>> {
        if let Some(key_schema) = event.key_schema {
            let names = key_columns(key_schema).map_err(|error| CdcError::Decode { position, table: Some(event.table.clone()), error })?;
            match names.iter().find(|name| columns.iter().all(|c| &c.name != *name)) {
                // A transform added a key field that is no column: the user names the key.
                Some(extra) => return self.key_for_transformed(event, extra, position),
                None if !names.is_empty() => return Ok(names),
                None => {}
            }
        }
        if let Some(key) = event.key {
            if let Ok(object) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(key.get()) {
                if !object.is_empty() && object.keys().all(|k| columns.iter().any(|c| &c.name == k)) {
                    return Ok(object.keys().cloned().collect());
                }
            }
        }
        if let Some(names) = self.primary_keys.get(&event.table) {
            return Ok(names.clone());
        }
        Err(CdcError::NoPrimaryKey {
            position,
            table: event.table.clone(),
            reason: format!(
                "no primary key is known (the message has no key and no --primary-key {}=COL[,COL...] was given)",
                event.table
            ),
        })
    }

    /// The key of a table whose key schema has a field `extra` that is no column:
    /// the `--primary-key` given for it, else an error saying to give one.
    fn key_for_transformed(&self, event: &ChangeEvent<'_>, extra: &str, position: Position) -> CdcResult<Vec<String>> {
        if let Some(names) = self.primary_keys.get(&event.table) {
            return Ok(names.clone());
        }
        let by = match extra {
            ROUTER_KEY_FIELD => "Debezium's ByLogicalTableRouter transform, which merges tables into one topic",
            _ => "a transform",
        };
        Err(CdcError::NoPrimaryKey {
            position,
            table: event.table.clone(),
            reason: format!(
                "the message key has a field {extra} that is not a column of the table (added by {by}); give the \
                 table's own key with --primary-key {}=COL[,COL...]",
                event.table
            ),
        })
    }

    /// The binding of a catalog table for schemaless events, which decode by the
    /// table's own column types.
    fn schemaless_binding(&self, engine: &Engine, id: TableId, position: Position) -> CdcResult<TableBinding> {
        let binding = catalog_binding(engine, id, position)?;
        Ok(if self.infer_schema { TableBinding { plan: binding.plan.with_null_fields_absent(), ..binding } } else { binding })
    }

    /// Creates a table from a schemaless event's image: a column per field, typed by
    /// its value. A field that is null (and no key column) gives no type to go by, so
    /// it becomes a column when its first value arrives ([`Self::with_new_fields`]):
    /// typing it as text here refused the numbers that came later.
    fn create_inferred(&self, engine: &Engine, event: &ChangeEvent<'_>, position: Position) -> CdcResult<Arc<TableBinding>> {
        let image = event.after.as_ref().or(event.before.as_ref()).ok_or_else(|| CdcError::Schema {
            position,
            table: event.table.clone(),
            column: "*".into(),
            reason: "cannot infer a schema without an after- or before-image".into(),
        })?;
        let mut columns = Vec::with_capacity(image.fields.len());
        for (name, value) in &image.fields {
            let kind = inferred_kind(&event.table, name, value, position)?;
            columns.push(ColumnPlan { name: name.to_string(), kind, nullable: true });
        }
        let key = self.key_columns(event, &columns, position)?;
        let untyped = |name: &str| image.fields.iter().any(|(field, value)| field == name && matches!(value, Scalar::Null));
        columns.retain(|c| key.contains(&c.name) || !untyped(&c.name));
        for column in columns.iter_mut().filter(|c| key.contains(&c.name)) {
            column.nullable = false;
        }
        let binding = create_table(engine, &event.table, columns, &key, position)?;
        Ok(Arc::new(TableBinding { plan: binding.plan.with_null_fields_absent(), ..binding }))
    }

    /// `binding`, or with `--infer-schema` and a schemaless event whose images hold
    /// values in fields that are no column yet, the binding after those columns
    /// were added (nullable, typed by the values; rows stored before read NULL).
    fn with_new_fields(
        &mut self,
        engine: &Engine,
        binding: Arc<TableBinding>,
        event: &ChangeEvent<'_>,
        position: Position,
    ) -> CdcResult<Arc<TableBinding>> {
        if !self.infer_schema || event.schema.is_some() {
            return Ok(binding);
        }
        let mut added: Vec<(&str, DebeziumType)> = Vec::new();
        for image in [event.after.as_ref(), event.before.as_ref()].into_iter().flatten() {
            for (name, value) in binding.plan.unknown_fields(image) {
                if added.iter().all(|(known, _)| *known != name) {
                    added.push((name, inferred_kind(&event.table, name, value, position)?));
                }
            }
        }
        if added.is_empty() {
            return Ok(binding);
        }
        for (name, kind) in added {
            engine
                .add_column(binding.id, Field::new(name, kind.arrow_type(), true))
                .map_err(|e| schema_error(position, &event.table, name, e.to_string()))?;
        }
        self.widened.push(binding.id);
        let widened = Arc::new(self.schemaless_binding(engine, binding.id, position)?);
        self.known.write().by_name.insert(event.table.clone(), Arc::clone(&widened));
        Ok(widened)
    }
}

/// The key field Debezium's `ByLogicalTableRouter` adds so that keys of the tables it
/// merges into one topic stay unique (`key.enforce.uniqueness`).
const ROUTER_KEY_FIELD: &str = "__dbz__physicalTableIdentifier";

/// The column type a schemaless stream's value implies. A null implies nothing; it
/// is typed as text only where a column must exist now (a key column, which a null
/// then fails anyway).
fn inferred_kind(table: &str, column: &str, value: &Scalar<'_>, position: Position) -> CdcResult<DebeziumType> {
    Ok(match value {
        Scalar::Bool(_) => DebeziumType::Boolean,
        // An unsigned 64-bit value past i64 (MySQL BIGINT UNSIGNED): a decimal of its 20 digits.
        Scalar::U64(value) if i64::try_from(*value).is_err() => DebeziumType::Decimal { precision: 20, scale: 0 },
        Scalar::I64(_) | Scalar::U64(_) => DebeziumType::Int64,
        Scalar::F64(_) => DebeziumType::Float64,
        Scalar::Str(_) | Scalar::Array(_) | Scalar::Map(_) | Scalar::Null => DebeziumType::Utf8,
        Scalar::VariableDecimal { .. } => DebeziumType::VariableScaleDecimal,
        Scalar::Geometry(_) => DebeziumType::Geometry,
        Scalar::Nested(what) => {
            return Err(schema_error(position, table, column, format!("cannot infer a column type from {what}")));
        }
    })
}

fn schema_error(position: Position, table: &str, column: &str, reason: impl Into<String>) -> CdcError {
    CdcError::Schema { position, table: table.to_string(), column: column.to_string(), reason: reason.into() }
}

/// Creates a table with `columns` and the named key.
fn create_table(engine: &Engine, name: &str, columns: Vec<ColumnPlan>, key: &[String], position: Position) -> CdcResult<TableBinding> {
    let mut primary_key = Vec::with_capacity(key.len());
    for column in key {
        let index = columns
            .iter()
            .position(|c| &c.name == column)
            .ok_or_else(|| schema_error(position, name, column, "primary-key column is not among the table's columns"))?;
        primary_key.push(index);
    }
    let fields: Vec<Field> = columns.iter().map(|c| Field::new(&c.name, c.kind.arrow_type(), c.nullable)).collect();
    let schema = TableSchema::new(name, Schema::new(fields), primary_key.clone())
        .map_err(|e| schema_error(position, name, "*", e.to_string()))?;
    let id = match engine.create_table(schema) {
        Ok(id) => id,
        Err(retina_core::CoreError::TableExists { .. }) => {
            engine.table_id(name).ok_or_else(|| schema_error(position, name, "*", "table vanished while being created"))?
        }
        Err(other) => return Err(other.into()),
    };
    Ok(TableBinding { id, name: Arc::from(name), plan: TablePlan::new(name, columns, primary_key) })
}

/// A binding for a catalog table decoded by its own Arrow types (schemaless streams).
fn catalog_binding(engine: &Engine, id: TableId, position: Position) -> CdcResult<TableBinding> {
    let table = engine.table(id)?;
    let plan = plan_of_schema(&table.schema()).map_err(|e| schema_error(position, table.name(), "*", e.to_string()))?;
    Ok(TableBinding { id, name: Arc::from(table.name()), plan })
}

/// The plan that decodes a table's images by its own Arrow column types.
pub fn plan_of_schema(schema: &TableSchema) -> Result<TablePlan, crate::DecodeError> {
    let columns = schema
        .columns()
        .fields()
        .iter()
        .map(|f| {
            let kind = DebeziumType::for_arrow_type(f.name(), f.data_type())?;
            Ok(ColumnPlan { name: f.name().clone(), kind, nullable: f.is_nullable() })
        })
        .collect::<Result<Vec<_>, crate::DecodeError>>()?;
    Ok(TablePlan::new(schema.name(), columns, schema.primary_key().to_vec()))
}

/// Checks an event schema against an existing table and builds the plan that decodes
/// the event's units into the table's columns; adds the event's new nullable columns
/// to the table first (then `true`).
fn bind_schema_to_table(engine: &Engine, id: TableId, columns: Vec<ColumnPlan>, position: Position) -> CdcResult<(TableBinding, bool)> {
    let table = engine.table(id)?;
    let schema = table.schema();
    let name = schema.name();
    let fields = schema.columns().fields();
    let mut plan_columns = Vec::with_capacity(fields.len());
    for field in fields {
        match columns.iter().find(|c| c.name == *field.name()) {
            Some(column) => {
                if !column.kind.fits_column(field.data_type()) {
                    return Err(schema_error(
                        position,
                        name,
                        field.name(),
                        format!("incompatible change: the stream now sends {:?} for a {} column", column.kind, field.data_type()),
                    ));
                }
                if column.nullable && !field.is_nullable() {
                    return Err(schema_error(position, name, field.name(), "incompatible change: the column became nullable"));
                }
                plan_columns.push(ColumnPlan {
                    name: field.name().clone(),
                    kind: column.kind.adapted_to(field.data_type()),
                    nullable: field.is_nullable(),
                });
            }
            None if field.is_nullable() => plan_columns.push(ColumnPlan {
                name: field.name().clone(),
                kind: DebeziumType::for_arrow_type(field.name(), field.data_type())
                    .map_err(|e| schema_error(position, name, field.name(), e.to_string()))?,
                nullable: true,
            }),
            None => return Err(schema_error(position, name, field.name(), "incompatible change: a non-nullable column was dropped")),
        }
    }
    let added: Vec<&ColumnPlan> = columns.iter().filter(|c| fields.iter().all(|f| f.name() != &c.name)).collect();
    if let Some(required) = added.iter().find(|c| !c.nullable) {
        return Err(schema_error(position, name, &required.name, "incompatible change: new non-nullable column"));
    }
    if !added.is_empty() {
        // New nullable columns are appended to the table (in the stream's order);
        // rows stored before read them as NULL.
        for column in &added {
            engine
                .add_column(id, Field::new(&column.name, column.kind.arrow_type(), true))
                .map_err(|e| schema_error(position, name, &column.name, e.to_string()))?;
        }
        let (binding, _) = bind_schema_to_table(engine, id, columns, position)?;
        return Ok((binding, true));
    }
    Ok((TableBinding { id, name: Arc::from(name), plan: TablePlan::new(name, plan_columns, schema.primary_key().to_vec()) }, false))
}

/// `TABLE=COL[,COL...]` of `--primary-key`.
pub fn parse_primary_key_option(text: &str) -> Result<(String, Vec<String>), CdcError> {
    let (table, columns) =
        text.split_once('=').ok_or_else(|| CdcError::InvalidOption(format!("--primary-key {text:?}: expected TABLE=COL[,COL...]")))?;
    let columns: Vec<String> = columns.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect();
    if table.trim().is_empty() || columns.is_empty() {
        return Err(CdcError::InvalidOption(format!("--primary-key {text:?}: expected TABLE=COL[,COL...]")));
    }
    Ok((table.trim().to_string(), columns))
}
