//! Arbitrary bytes, read as a stream of JSON lines, through the Debezium decoder and
//! on as deep as the sink goes without an engine: `decode_line`, the Connect schema
//! (`columns_of_envelope`, `key_columns`), table plans built the ways the sink's
//! `TableResolver` builds them (from the event's schema, inferred from the image, and
//! from a catalog table's Arrow schema), `row_changes` (typed rows and keys), every
//! value against every column kind, and transaction reconstruction over the lines.
//!
//! It must never panic; errors are fine (and are formatted, as the sink does). The
//! payload scanner is checked against serde on every line, and every line is also read
//! as the file source reads it (the schemas of tables bound so far left out) and must
//! read back whole, fail UTF-8 at the same byte and decode the same.
#![no_main]

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Field, Schema};
use libfuzzer_sys::fuzz_target;
use retina_cdc::debezium::schema::{columns_of_envelope, key_columns};
use retina_cdc::debezium::value::value_of;
use retina_cdc::debezium::{
    assert_agrees_with_serde, decode_elided, decode_line, ChangeEvent, DebeziumType, ColumnPlan, Image, KnownSchemas, Line, Message, Scalar,
    SchemaElider, TablePlan,
};
use retina_cdc::sink::prepare::{change, row_changes, Prepared};
use retina_cdc::sink::tables::{plan_of_schema, TableBinding};
use retina_cdc::sink::{CompletedTransaction, Grouping, PendingChange, Reconstructor};
use retina_cdc::Position;
use retina_core::{TableId, TableSchema};

/// One of each kind (and a few decimal shapes), for the value conversions.
fn all_kinds() -> Vec<DebeziumType> {
    vec![
        DebeziumType::Boolean,
        DebeziumType::Int16,
        DebeziumType::Int32,
        DebeziumType::Int64,
        DebeziumType::Float32,
        DebeziumType::Float64,
        DebeziumType::Utf8,
        DebeziumType::Binary,
        DebeziumType::Date,
        DebeziumType::TimeMillis,
        DebeziumType::TimeMicros,
        DebeziumType::TimeNanos,
        DebeziumType::TimestampMillis { timezone: None },
        DebeziumType::TimestampMicros { timezone: Some("UTC".into()) },
        DebeziumType::TimestampNanos,
        DebeziumType::ZonedTimestamp,
        DebeziumType::Decimal { precision: 38, scale: 2 },
        DebeziumType::Decimal { precision: 10, scale: 0 },
        DebeziumType::Decimal { precision: 38, scale: -3 },
        DebeziumType::Decimal { precision: 5, scale: 10 },
        DebeziumType::Decimal { precision: 1, scale: 127 },
        DebeziumType::Decimal { precision: 38, scale: -128 },
        DebeziumType::VariableScaleDecimal,
    ]
}

/// What the sink keeps between lines of one stream.
struct Stream {
    kinds: Vec<DebeziumType>,
    /// First binding of each table (the sink caches bindings by name and schema).
    bindings: HashMap<String, Arc<TableBinding>>,
    reconstructor: Reconstructor,
    completed: Vec<CompletedTransaction>,
    next_table: u32,
    /// The schemas of the tables bound so far, as the sink shares them.
    known: KnownSchemas,
    elider: SchemaElider,
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the grouping of events without transaction metadata.
    let grouping = if data.first().is_some_and(|b| b & 1 == 1) { Grouping::PerEvent } else { Grouping::SourceTransaction };
    let mut stream = Stream {
        kinds: all_kinds(),
        bindings: HashMap::new(),
        reconstructor: Reconstructor::new(grouping, true),
        completed: Vec::new(),
        next_table: 0,
        known: KnownSchemas::default(),
        elider: SchemaElider::none(),
    };
    stream.elider = SchemaElider::new(stream.known.clone());
    let mut last_line = 0u64;
    for (index, chunk) in data.split(|&b| b == b'\n').enumerate() {
        stream.read_elided(chunk);
        let Ok(line) = std::str::from_utf8(chunk) else { continue };
        // The payload scanner must read every line as serde does, or leave it to serde.
        assert_agrees_with_serde(line);
        last_line = index as u64 + 1;
        stream.line(Position::line(last_line), line);
    }
    stream.reconstructor.finish(Position::line(last_line + 1), &mut stream.completed);
    for rejected in stream.reconstructor.take_rejected() {
        let _ = rejected.error.to_string();
    }
    for transaction in &stream.completed {
        let _ = (transaction.changes.len(), transaction.order);
    }
});

impl Stream {
    /// `chunk` read with known schemas left out: the same line back, the same UTF-8
    /// error, the same decoded message.
    fn read_elided(&mut self, chunk: &[u8]) {
        let mut line = Line::default();
        let filled = self.elider.fill(&mut line, chunk);
        let whole = std::str::from_utf8(chunk);
        assert_eq!(filled.as_ref().err().map(|e| e.valid_up_to), whole.as_ref().err().map(|e| e.valid_up_to()), "UTF-8 error offset");
        let Ok(text) = whole else { return };
        assert_eq!(line.full(), text, "the line reads back whole");
        if let Some(decoded) = decode_elided(&line, None) {
            assert_eq!(format!("{decoded:?}"), format!("{:?}", decode_line(text)), "decoded with schemas left out of {text:?}");
        }
    }

    fn line(&mut self, position: Position, line: &str) {
        let message = match decode_line(line) {
            Ok(message) => message,
            Err(error) => {
                let _ = error.to_string();
                return;
            }
        };
        let prepared = match message {
            Message::Tombstone => Prepared::Tombstone,
            Message::Begin { id } => Prepared::Begin { id },
            Message::End { id, event_count, data_collections } => Prepared::End { id, event_count, data_collections },
            Message::Change(event) => {
                self.values(&event);
                let Some(binding) = self.resolve(&event) else { return };
                // Bound: the sink shares its schemas with the reading thread.
                for schema in event.schema.into_iter().chain(event.key_schema) {
                    self.known.intern(schema);
                }
                match row_changes(&binding, &event, position) {
                    Ok(changes) => change(*event, &binding, changes),
                    Err(error) => {
                        let _ = error.to_string();
                        // `Sink::accept`: the event's whole transaction fails.
                        let (transaction, source) = (event.transaction.as_ref(), event.source_transaction.as_deref());
                        if let Err(rejected) = self.reconstructor.fail(error, position, transaction, source, Some(line), &mut self.completed) {
                            let _ = rejected.error.to_string();
                        }
                        return;
                    }
                }
            }
        };
        self.accept(position, prepared, line);
    }

    /// Every scalar of every image against every column kind.
    fn values(&self, event: &ChangeEvent<'_>) {
        for image in [&event.before, &event.after].into_iter().flatten() {
            for (_, scalar) in &image.fields {
                for kind in &self.kinds {
                    let _ = value_of(kind, scalar);
                }
            }
        }
        if let Some(key_schema) = event.key_schema {
            let _ = key_columns(key_schema);
            let _ = columns_of_envelope(key_schema);
        }
    }

    /// The table binding, as `TableResolver::resolve` would make it for a new table:
    /// from the event's schema, else inferred from its image (`--infer-schema`); plus
    /// the catalog-table path (a plan from the created table's Arrow schema) run on
    /// the same event.
    fn resolve(&mut self, event: &ChangeEvent<'_>) -> Option<Arc<TableBinding>> {
        if let Some(known) = self.bindings.get(&event.table) {
            return Some(Arc::clone(known));
        }
        let columns = match event.schema {
            Some(schema) => match columns_of_envelope(schema) {
                Ok(columns) => columns,
                Err(error) => {
                    let _ = error.to_string();
                    return None;
                }
            },
            None => inferred_columns(event.after.as_ref().or(event.before.as_ref())?)?,
        };
        let mut columns = columns;
        let key = key_names(event, &columns);
        if event.schema.is_none() {
            for column in columns.iter_mut().filter(|c| key.contains(&c.name)) {
                column.nullable = false;
            }
        }
        let id = TableId(self.next_table);
        self.next_table += 1;
        let binding = Arc::new(create_table(id, &event.table, columns, &key)?);
        // A catalog table decoded by its own Arrow types (a later schemaless stream).
        let schema = binding_schema(&binding)?;
        match plan_of_schema(&schema) {
            Ok(plan) => {
                let catalog = TableBinding { id, name: Arc::clone(&binding.name), plan };
                if let Err(error) = row_changes(&catalog, event, Position::line(0)) {
                    let _ = error.to_string();
                }
            }
            Err(error) => {
                let _ = error.to_string();
            }
        }
        self.bindings.insert(event.table.clone(), Arc::clone(&binding));
        Some(binding)
    }

    /// `Sink::accept_prepared`: the message into the reconstructor.
    fn accept(&mut self, position: Position, prepared: Prepared, line: &str) {
        let result = match prepared {
            Prepared::Tombstone => Ok(()),
            Prepared::Begin { id } => {
                self.reconstructor.begin(id, position, Some(line));
                Ok(())
            }
            Prepared::End { id, event_count, data_collections } => self
                .reconstructor
                .end(&id, event_count, &data_collections, position, Some(line))
                .map(|completed| self.completed.push(completed)),
            Prepared::Change { table, changes, transaction, source_transaction, order } => changes.into_iter().try_for_each(|change| {
                let pending = PendingChange { change, table: Arc::clone(&table), position, order };
                self.reconstructor.change(pending, transaction.as_ref(), source_transaction.as_deref(), Some(line), &mut self.completed)
            }),
        };
        if let Err(rejected) = result {
            let _ = rejected.error.to_string();
        }
        for rejected in self.reconstructor.take_rejected() {
            let _ = rejected.error.to_string();
        }
        let _ = (self.reconstructor.oldest_open_begin(), self.reconstructor.open_transactions());
        // Completed transactions would be submitted here; keep memory bounded.
        if self.completed.len() > 64 {
            self.completed.clear();
        }
    }
}

/// `TableResolver::create_inferred`'s column kinds.
fn inferred_columns(image: &Image<'_>) -> Option<Vec<ColumnPlan>> {
    let mut columns = Vec::with_capacity(image.fields.len());
    for (name, value) in &image.fields {
        let kind = match value {
            Scalar::Bool(_) => DebeziumType::Boolean,
            Scalar::I64(_) | Scalar::U64(_) => DebeziumType::Int64,
            Scalar::F64(_) => DebeziumType::Float64,
            Scalar::Str(_) | Scalar::Null => DebeziumType::Utf8,
            Scalar::VariableDecimal { .. } => DebeziumType::VariableScaleDecimal,
            // Nested values (and kinds this mirror does not know) make no column.
            #[allow(unreachable_patterns)]
            _ => return None,
        };
        columns.push(ColumnPlan { name: name.to_string(), kind, nullable: true });
    }
    Some(columns)
}

/// `TableResolver::key_columns`: the key schema's fields, else the key object's names
/// when all are columns, else (as if `--primary-key` named it) the first column.
fn key_names(event: &ChangeEvent<'_>, columns: &[ColumnPlan]) -> Vec<String> {
    if let Some(names) = event.key_schema.and_then(|k| key_columns(k).ok()).filter(|n| !n.is_empty()) {
        return names;
    }
    if let Some(key) = event.key {
        if let Ok(object) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(key.get()) {
            if !object.is_empty() && object.keys().all(|k| columns.iter().any(|c| &c.name == k)) {
                return object.keys().cloned().collect();
            }
        }
    }
    columns.first().map(|c| vec![c.name.clone()]).unwrap_or_default()
}

/// `tables::create_table` without the engine: the key resolved, the table schema
/// validated, the plan built.
fn create_table(id: TableId, name: &str, columns: Vec<ColumnPlan>, key: &[String]) -> Option<TableBinding> {
    let primary_key = key.iter().map(|k| columns.iter().position(|c| &c.name == k)).collect::<Option<Vec<_>>>()?;
    let fields: Vec<Field> = columns.iter().map(|c| Field::new(&c.name, c.kind.arrow_type(), c.nullable)).collect();
    if let Err(error) = TableSchema::new(name, Schema::new(fields), primary_key.clone()) {
        let _ = error.to_string();
        return None;
    }
    Some(TableBinding { id, name: Arc::from(name), plan: TablePlan::new(name, columns, primary_key) })
}

fn binding_schema(binding: &TableBinding) -> Option<TableSchema> {
    let plan = &binding.plan;
    let fields: Vec<Field> = plan.columns().iter().map(|c| Field::new(&c.name, c.kind.arrow_type(), c.nullable)).collect();
    TableSchema::new(plan.table(), Schema::new(fields), plan.primary_key().to_vec()).ok()
}
