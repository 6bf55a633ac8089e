//! Debezium JSON *encoder* for mirror-transaction row changes: how the built-in
//! generator's stream becomes the same Debezium JSON a real connector writes, so the
//! generator, the benchmarks and the demo exercise the real decoder and sink.
//!
//! Each transaction becomes `BEGIN`, one change event per row change (with its
//! `transaction` block and a PostgreSQL-like `source` block whose `sequence` is
//! monotone), and `END` with per-table event counts.

use std::fmt::Write as _;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use retina_core::{RowChange, TableSchema, Value};

use super::types::DebeziumType;
use super::value::decimal_to_base64;
use crate::error::DecodeError;

/// The shapes the encoder can write.
#[derive(Clone, Copy, Debug, Default)]
pub struct EncoderOptions {
    /// `{"schema":…,"payload":…}` (Debezium `schemas.enable=true`) instead of a bare payload.
    pub with_schemas: bool,
    /// Wrap every line as `{"key":…,"value":…}` (a keyed Kafka topic dump).
    pub with_keys: bool,
}

impl EncoderOptions {
    /// Lines as Kafka Connect's JsonConverter writes them by default: every value
    /// `{"schema":…,"payload":…}` and every line keyed, the key with its own schema.
    pub fn kafka_connect_default() -> Self {
        Self { with_schemas: true, with_keys: true }
    }
}

/// One event to write: op, before-image key values, after-image row.
type EncodedEvent<'a> = (char, Option<&'a [Value]>, Option<&'a [Value]>);

struct EncodedTable {
    namespace: String,
    table: String,
    full_name: String,
    columns: Vec<(String, DebeziumType, bool)>,
    primary_key: Vec<usize>,
    value_schema: String,
    key_schema: String,
}

/// Encodes transactions over a fixed set of tables, indexed by `TableId.0`.
pub struct DebeziumEncoder {
    tables: Vec<EncodedTable>,
    options: EncoderOptions,
    transactions: u64,
}

impl DebeziumEncoder {
    /// `schemas[i]` is the table with id `i`. Table names must be `<schema>.<table>`.
    pub fn new(schemas: &[TableSchema], options: EncoderOptions) -> Result<Self, DecodeError> {
        let mut tables = Vec::with_capacity(schemas.len());
        for schema in schemas {
            let (namespace, table) = schema
                .name()
                .split_once('.')
                .ok_or_else(|| DecodeError::bad_value(schema.name(), "table name is not <schema>.<table>"))?;
            let columns = schema
                .columns()
                .fields()
                .iter()
                .map(|f| Ok((f.name().clone(), DebeziumType::for_arrow_type(f.name(), f.data_type())?, f.is_nullable())))
                .collect::<Result<Vec<_>, DecodeError>>()?;
            let value_schema = envelope_schema(schema.name(), &columns);
            let key_columns: Vec<_> = schema.primary_key().iter().map(|&i| columns[i].clone()).collect();
            let key_schema = format!(r#"{{"type":"struct","optional":false,"name":"{}.Key","fields":[{}]}}"#, schema.name(), fields_schema(&key_columns));
            tables.push(EncodedTable {
                namespace: namespace.to_string(),
                table: table.to_string(),
                full_name: schema.name().to_string(),
                columns,
                primary_key: schema.primary_key().to_vec(),
                value_schema,
                key_schema,
            });
        }
        Ok(Self { tables, options, transactions: 0 })
    }

    /// Appends the lines (each ending in `\n`) of one source transaction to `out`;
    /// returns the number of lines written.
    pub fn encode_transaction(&mut self, changes: &[RowChange], out: &mut String) -> Result<usize, DecodeError> {
        self.transactions += 1;
        let txn = self.transactions;
        // Ids as Debezium's PostgreSQL connector writes them: `txId:LSN` with the LSN
        // of each message (BEGIN, every event, the END's commit), so one transaction's
        // messages carry different ids.
        let id = |lsn: u64| format!("{txn}:{lsn}");
        let mut per_table = vec![0u64; self.tables.len()];
        let mut lines = 0;
        self.wrap(out, None, |out| {
            let _ = write!(out, r#"{{"status":"BEGIN","id":"{}","event_count":null,"data_collections":null}}"#, id(txn * 1000));
        });
        out.push('\n');
        lines += 1;
        let mut order = 0u64;
        for change in changes {
            let table_index = change.table().0 as usize;
            if table_index >= self.tables.len() {
                return Err(DecodeError::bad_value("table", format!("no table with id {table_index}")));
            }
            let events: Vec<EncodedEvent<'_>> = match change {
                RowChange::Insert { row, .. } => vec![('c', None, Some(row))],
                RowChange::Upsert { row, .. } => vec![('r', None, Some(row))],
                RowChange::Delete { key, .. } | RowChange::DeleteIfPresent { key, .. } => vec![('d', Some(key), None)],
                RowChange::UpdateKeeping { .. } => {
                    return Err(DecodeError::bad_value("change", "an update keeping unsent columns has no Debezium encoding here"))
                }
                RowChange::Update { key, row, .. } | RowChange::UpdateOrInsert { key, row, .. } => {
                    let new_key: Vec<Value> = self.tables[table_index].primary_key.iter().map(|&i| row[i].clone()).collect();
                    if new_key == *key {
                        vec![('u', None, Some(row))]
                    } else {
                        // Debezium writes a primary-key change as a delete and a create.
                        vec![('d', Some(key), None), ('c', None, Some(row))]
                    }
                }
            };
            for (op, before_key, after) in events {
                order += 1;
                per_table[table_index] += 1;
                let table = &self.tables[table_index];
                let key_values: Vec<Value> = match (before_key, after) {
                    (Some(key), _) => key.to_vec(),
                    (None, Some(row)) => table.primary_key.iter().map(|&i| row[i].clone()).collect(),
                    (None, None) => Vec::new(),
                };
                let with_schemas = self.options.with_schemas;
                let value_schema = table.value_schema.as_str();
                let key = self.options.with_keys.then(|| {
                    let mut key = String::new();
                    if with_schemas {
                        let _ = write!(key, r#"{{"schema":{},"payload":"#, table.key_schema);
                    }
                    write_key_image(&mut key, table, &key_values);
                    if with_schemas {
                        key.push('}');
                    }
                    key
                });
                let body = |out: &mut String| {
                    if with_schemas {
                        let _ = write!(out, r#"{{"schema":{value_schema},"payload":"#);
                    }
                    out.push_str(r#"{"before":"#);
                    match before_key {
                        Some(key) => write_key_image(out, table, key),
                        None => out.push_str("null"),
                    }
                    out.push_str(r#","after":"#);
                    match after {
                        Some(row) => write_row_image(out, table, row),
                        None => out.push_str("null"),
                    }
                    let _ = write!(
                        out,
                        r#","source":{{"connector":"postgresql","name":"retina-generator","db":"retina","schema":"{}","table":"{}","txId":{txn},"lsn":{},"sequence":"[\"{}\",\"{}\"]"}},"op":"{op}","transaction":{{"id":"{}","total_order":{order},"data_collection_order":{}}}}}"#,
                        table.namespace,
                        table.table,
                        txn * 1000 + order,
                        (txn - 1) * 1000,
                        txn * 1000 + order,
                        id(txn * 1000 + order),
                        per_table[table_index],
                    );
                    if with_schemas {
                        out.push('}');
                    }
                };
                self.wrap(out, key.as_deref(), body);
                out.push('\n');
                lines += 1;
            }
        }
        let collections: Vec<String> = per_table
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| format!(r#"{{"data_collection":"{}","event_count":{n}}}"#, self.tables[i].full_name))
            .collect();
        self.wrap(out, None, |out| {
            let _ = write!(
                out,
                r#"{{"status":"END","id":"{}","event_count":{order},"data_collections":[{}]}}"#,
                id(txn * 1000 + order + 1),
                collections.join(",")
            );
        });
        out.push('\n');
        Ok(lines + 1)
    }

    fn wrap(&self, out: &mut String, key: Option<&str>, body: impl FnOnce(&mut String)) {
        if self.options.with_keys {
            out.push_str(r#"{"key":"#);
            out.push_str(key.unwrap_or("null"));
            out.push_str(r#","value":"#);
            body(out);
            out.push('}');
        } else {
            body(out);
        }
    }
}

fn write_row_image(out: &mut String, table: &EncodedTable, row: &[Value]) {
    out.push('{');
    for (i, ((name, kind, _), value)) in table.columns.iter().zip(row).enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, name);
        out.push(':');
        write_value(out, kind, value);
    }
    out.push('}');
}

fn write_key_image(out: &mut String, table: &EncodedTable, key: &[Value]) {
    out.push('{');
    for (i, (&column, value)) in table.primary_key.iter().zip(key).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (name, kind, _) = &table.columns[column];
        write_string(out, name);
        out.push(':');
        write_value(out, kind, value);
    }
    out.push('}');
}

fn write_value(out: &mut String, kind: &DebeziumType, value: &Value) {
    let _ = match value {
        Value::Null => write!(out, "null"),
        Value::Boolean(v) => write!(out, "{v}"),
        Value::Int16(v) => write!(out, "{v}"),
        Value::Int32(v) | Value::Date32(v) => write!(out, "{v}"),
        Value::Int64(v) | Value::TimestampMicros(v) | Value::TimestampNanos(v) | Value::Time64Micros(v) | Value::Time64Nanos(v) => {
            write!(out, "{v}")
        }
        Value::Float32(v) => write_float(out, *v as f64, v.to_string()),
        Value::Float64(v) => write_float(out, *v, v.to_string()),
        Value::Utf8(v) => {
            write_string(out, v);
            Ok(())
        }
        Value::Binary(v) => write!(out, "\"{}\"", BASE64.encode(v)),
        Value::Decimal128(v) => match kind {
            DebeziumType::Decimal { .. } => write!(out, "\"{}\"", decimal_to_base64(*v)),
            _ => write!(out, "{v}"),
        },
    };
}

fn write_float(out: &mut String, value: f64, shortest: String) -> std::fmt::Result {
    if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        out.push_str(&shortest);
    }
    Ok(())
}

/// A JSON string literal.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

fn connect_type(kind: &DebeziumType) -> (&'static str, Option<&'static str>) {
    match kind {
        DebeziumType::Boolean => ("boolean", None),
        DebeziumType::Int16 => ("int16", None),
        DebeziumType::Int32 => ("int32", None),
        DebeziumType::Int64 => ("int64", None),
        DebeziumType::Float32 => ("float", None),
        DebeziumType::Float64 => ("double", None),
        DebeziumType::Utf8 | DebeziumType::VariableScaleDecimal | DebeziumType::Array(_) | DebeziumType::SparseVector => {
            ("string", None)
        }
        // Catalog columns never decode as geometry or zoned time (for_arrow_type):
        // their Arrow types are plain Binary and Time64(µs).
        DebeziumType::Binary | DebeziumType::Geometry => ("bytes", None),
        DebeziumType::Date => ("int32", Some("io.debezium.time.Date")),
        DebeziumType::TimeMillis => ("int32", Some("io.debezium.time.Time")),
        DebeziumType::TimeMicros | DebeziumType::ZonedTime => ("int64", Some("io.debezium.time.MicroTime")),
        DebeziumType::TimeNanos => ("int64", Some("io.debezium.time.NanoTime")),
        DebeziumType::TimestampMillis { .. } => ("int64", Some("io.debezium.time.Timestamp")),
        DebeziumType::TimestampMicros { .. } => ("int64", Some("io.debezium.time.MicroTimestamp")),
        DebeziumType::TimestampNanos => ("int64", Some("io.debezium.time.NanoTimestamp")),
        DebeziumType::ZonedTimestamp | DebeziumType::ZonedTimestampNanos => ("string", Some("io.debezium.time.ZonedTimestamp")),
        DebeziumType::Decimal { .. } => ("bytes", Some("org.apache.kafka.connect.data.Decimal")),
    }
}

fn fields_schema(columns: &[(String, DebeziumType, bool)]) -> String {
    let mut out = String::new();
    for (i, (name, kind, nullable)) in columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (connect, semantic) = connect_type(kind);
        let _ = write!(out, r#"{{"type":"{connect}","optional":{nullable}"#);
        if let Some(semantic) = semantic {
            let _ = write!(out, r#","name":"{semantic}""#);
        }
        if let DebeziumType::Decimal { precision, scale } = kind {
            let _ = write!(out, r#","parameters":{{"scale":"{scale}","connect.decimal.precision":"{precision}"}}"#);
        }
        out.push_str(",\"field\":");
        write_string(&mut out, name);
        out.push('}');
    }
    out
}

fn envelope_schema(table: &str, columns: &[(String, DebeziumType, bool)]) -> String {
    let fields = fields_schema(columns);
    format!(
        r#"{{"type":"struct","optional":false,"name":"{table}.Envelope","fields":[{{"type":"struct","optional":true,"name":"{table}.Value","field":"before","fields":[{fields}]}},{{"type":"struct","optional":true,"name":"{table}.Value","field":"after","fields":[{fields}]}},{{"type":"struct","optional":false,"field":"source","fields":[]}},{{"type":"string","optional":false,"field":"op"}}]}}"#
    )
}
