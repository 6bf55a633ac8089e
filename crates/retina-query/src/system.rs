//! The `retina` system schema (ARCHITECTURE.md §5): `watermarks` (with the latest
//! checkpoint and the last background write errors), `tables`, `sources`,
//! `source_partitions` (per-partition lag of partitioned sources: Kafka), `metrics`
//! and `published` (the open tables of the latest published cut). Each view is
//! computed when a query scans it, so it shows the figures of that moment.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use retina_core::Engine;

use crate::figures::FiguresCollector;

/// Name of the system schema.
pub const SYSTEM_SCHEMA: &str = "retina";

/// The views of the system schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemViewKind {
    Watermarks,
    Tables,
    Sources,
    SourcePartitions,
    Metrics,
    Published,
}

impl SystemViewKind {
    pub const ALL: [SystemViewKind; 6] =
        [Self::Watermarks, Self::Tables, Self::Sources, Self::SourcePartitions, Self::Metrics, Self::Published];

    pub fn name(self) -> &'static str {
        match self {
            Self::Watermarks => "watermarks",
            Self::Tables => "tables",
            Self::Sources => "sources",
            Self::SourcePartitions => "source_partitions",
            Self::Metrics => "metrics",
            Self::Published => "published",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    fn schema(self) -> SchemaRef {
        let utc = || DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let fields = match self {
            Self::Watermarks => vec![
                Field::new("hwm", DataType::Int64, false),
                Field::new("lwm", DataType::Int64, false),
                Field::new("now", utc(), false),
                // Durability: the latest checkpoint, and why the latest flush and
                // checkpoint failed (they are retried; NULL once one succeeds).
                Field::new("checkpoint_ts", DataType::Int64, false),
                Field::new("last_flush_error", DataType::Utf8, true),
                Field::new("last_checkpoint_error", DataType::Utf8, true),
            ],
            Self::Tables => vec![
                Field::new("schema_name", DataType::Utf8, false),
                Field::new("table_name", DataType::Utf8, false),
                Field::new("columns", DataType::Int64, false),
                Field::new("primary_key", DataType::Utf8, false),
                Field::new("files", DataType::Int64, false),
                Field::new("in_memory_files", DataType::Int64, false),
                Field::new("stored_versions", DataType::Int64, false),
                Field::new("visibility_bytes", DataType::Int64, false),
            ],
            Self::Sources => vec![
                Field::new("source", DataType::Utf8, false),
                Field::new("uri", DataType::Utf8, false),
                Field::new("state", DataType::Utf8, false),
                Field::new("position", DataType::Utf8, true),
                Field::new("position_ts", DataType::Int64, true),
                Field::new("transactions", DataType::Int64, false),
                Field::new("row_changes", DataType::Int64, false),
                Field::new("lag_transactions", DataType::Int64, true),
                Field::new("lag_bytes", DataType::Int64, true),
                Field::new("lag_millis", DataType::Int64, true),
                Field::new("last_error", DataType::Utf8, true),
                Field::new("updated_at", utc(), false),
                Field::new("durable_position", DataType::Utf8, true),
                Field::new("messages", DataType::Int64, false),
                Field::new("duplicate_transactions", DataType::Int64, false),
                Field::new("diverted", DataType::Int64, false),
                Field::new("held_transactions", DataType::Int64, true),
                Field::new("held_bytes", DataType::Int64, true),
                Field::new("detail", DataType::Utf8, true),
            ],
            Self::SourcePartitions => vec![
                Field::new("source", DataType::Utf8, false),
                Field::new("topic", DataType::Utf8, false),
                Field::new("partition", DataType::Int64, false),
                Field::new("applied_offset", DataType::Int64, false),
                Field::new("high_watermark", DataType::Int64, false),
                Field::new("lag_messages", DataType::Int64, false),
                Field::new("lag_millis", DataType::Int64, false),
            ],
            Self::Published => vec![
                Field::new("schema_name", DataType::Utf8, true),
                Field::new("table_name", DataType::Utf8, true),
                Field::new("format", DataType::Utf8, true),
                Field::new("path", DataType::Utf8, true),
                Field::new("version", DataType::Int64, true),
                Field::new("snapshot_id", DataType::Int64, true),
                Field::new("ts", DataType::Int64, true),
                Field::new("published_at", utc(), true),
                Field::new("last_error", DataType::Utf8, true),
            ],
            Self::Metrics => vec![
                Field::new("name", DataType::Utf8, false),
                Field::new("kind", DataType::Utf8, false),
                Field::new("value", DataType::Float64, false),
                Field::new("help", DataType::Utf8, false),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// Splits an engine table name into (SQL schema, SQL table): `chbench.stock` is table
/// `stock` in schema `chbench`; a name without a dot lives in `public`.
pub fn split_table_name(name: &str) -> (&str, &str) {
    name.split_once('.').unwrap_or(("public", name))
}

/// One system view.
pub struct SystemView {
    kind: SystemViewKind,
    schema: SchemaRef,
    engine: Arc<Engine>,
    figures: Arc<FiguresCollector>,
}

impl fmt::Debug for SystemView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SystemView({})", self.kind.name())
    }
}

impl SystemView {
    pub fn new(kind: SystemViewKind, engine: Arc<Engine>, figures: Arc<FiguresCollector>) -> Self {
        Self { kind, schema: kind.schema(), engine, figures }
    }

    /// The view's rows now.
    pub fn batch(&self) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = match self.kind {
            SystemViewKind::Watermarks => {
                let figures = self.figures.collect();
                let engine = &figures.engine;
                vec![
                    Arc::new(Int64Array::from(vec![engine.high_watermark.0 as i64])),
                    Arc::new(Int64Array::from(vec![engine.low_watermark.0 as i64])),
                    Arc::new(TimestampMicrosecondArray::from(vec![figures.now_micros]).with_timezone("UTC")),
                    Arc::new(Int64Array::from(vec![engine.last_checkpoint_ts.0 as i64])),
                    Arc::new(StringArray::from(vec![engine.last_flush_error.clone()])),
                    Arc::new(StringArray::from(vec![engine.last_checkpoint_error.clone()])),
                ]
            }
            SystemViewKind::Tables => self.tables_columns(),
            SystemViewKind::Sources => self.sources_columns(),
            SystemViewKind::SourcePartitions => {
                let statuses = self.figures.collect().sources;
                let rows: Vec<(&str, &retina_core::PartitionLag)> =
                    statuses.iter().flat_map(|s| s.partitions.iter().map(move |p| (s.name.as_str(), p))).collect();
                vec![
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|(source, _)| *source))),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, p)| p.topic.as_str()))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, p)| i64::from(p.partition)))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, p)| p.applied_offset))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, p)| p.high_watermark))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, p)| p.lag_messages as i64))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, p)| p.lag_millis as i64))),
                ]
            }
            SystemViewKind::Published => self.published_columns()?,
            SystemViewKind::Metrics => {
                let metrics = self.figures.collect().metrics();
                vec![
                    Arc::new(StringArray::from_iter_values(metrics.iter().map(|m| m.name))),
                    Arc::new(StringArray::from_iter_values(metrics.iter().map(|m| m.kind))),
                    Arc::new(Float64Array::from_iter_values(metrics.iter().map(|m| m.value))),
                    Arc::new(StringArray::from_iter_values(metrics.iter().map(|m| m.help))),
                ]
            }
        };
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    fn tables_columns(&self) -> Vec<ArrayRef> {
        let tables = self.engine.tables();
        let names: Vec<(&str, &str)> = tables.iter().map(|t| split_table_name(t.name())).collect();
        let files: Vec<_> = tables.iter().map(|t| t.files()).collect();
        let keys: Vec<String> = tables
            .iter()
            .map(|t| {
                let schema = t.schema();
                let columns = schema.columns();
                schema.primary_key().iter().map(|&i| columns.field(i).name().as_str()).collect::<Vec<_>>().join(", ")
            })
            .collect();
        let memory: Vec<(usize, u64)> = tables.iter().map(|t| t.visibility_and_versions()).collect();
        vec![
            Arc::new(StringArray::from_iter_values(names.iter().map(|n| n.0))),
            Arc::new(StringArray::from_iter_values(names.iter().map(|n| n.1))),
            Arc::new(Int64Array::from_iter_values(tables.iter().map(|t| t.schema().column_count() as i64))),
            Arc::new(StringArray::from_iter_values(keys)),
            Arc::new(Int64Array::from_iter_values(files.iter().map(|f| f.flushed.len() as i64))),
            Arc::new(Int64Array::from_iter_values(files.iter().map(|f| f.virtual_files.len() as i64))),
            Arc::new(Int64Array::from_iter_values(memory.iter().map(|(_, versions)| *versions as i64))),
            Arc::new(Int64Array::from_iter_values(memory.iter().map(|(bytes, _)| *bytes as i64))),
        ]
    }

    /// One row per table and format of the latest published cut; a publication that failed
    /// before any cut shows as one row with only its error.
    fn published_columns(&self) -> Result<Vec<ArrayRef>> {
        let publication = self.engine.store().publication().map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let publication = publication.unwrap_or_default();
        let error = publication.last_error.clone();
        let mut rows: Vec<Option<&retina_core::storage::PublishedTable>> = publication.tables.iter().map(Some).collect();
        if rows.is_empty() && error.is_some() {
            rows.push(None);
        }
        let names: Vec<Option<(&str, &str)>> = rows.iter().map(|t| t.map(|t| split_table_name(&t.table))).collect();
        let ts = publication.ts.map(|ts| ts.0 as i64);
        let at = publication.ts.map(|_| publication.published_at_ms * 1000);
        Ok(vec![
            Arc::new(StringArray::from_iter(names.iter().map(|n| n.map(|n| n.0)))),
            Arc::new(StringArray::from_iter(names.iter().map(|n| n.map(|n| n.1)))),
            Arc::new(StringArray::from_iter(rows.iter().map(|t| t.map(|t| t.format)))),
            Arc::new(StringArray::from_iter(rows.iter().map(|t| t.map(|t| t.path.as_str())))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|t| t.map(|t| t.version as i64)))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|t| t.and_then(|t| t.snapshot_id)))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|t| t.and(ts)))),
            Arc::new(TimestampMicrosecondArray::from_iter(rows.iter().map(|t| t.and(at))).with_timezone("UTC")),
            Arc::new(StringArray::from_iter(rows.iter().map(|_| error.as_deref()))),
        ])
    }

    fn sources_columns(&self) -> Vec<ArrayRef> {
        let statuses = self.figures.collect().sources;
        let positions = self.engine.source_positions();
        let position = |name: &str| positions.iter().find(|p| p.source == name);
        let micros = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64);
        vec![
            Arc::new(StringArray::from_iter_values(statuses.iter().map(|s| s.name.as_str()))),
            Arc::new(StringArray::from_iter_values(statuses.iter().map(|s| s.uri.as_str()))),
            Arc::new(StringArray::from_iter_values(statuses.iter().map(|s| s.state.as_str()))),
            Arc::new(StringArray::from_iter(statuses.iter().map(|s| position(&s.name).map(|p| p.position.clone())))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| position(&s.name).map(|p| p.ts.0 as i64)))),
            Arc::new(Int64Array::from_iter_values(statuses.iter().map(|s| s.transactions as i64))),
            Arc::new(Int64Array::from_iter_values(statuses.iter().map(|s| s.row_changes as i64))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| s.lag_transactions.map(|l| l as i64)))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| s.lag_bytes.map(|l| l as i64)))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| s.lag_millis.map(|l| l as i64)))),
            Arc::new(StringArray::from_iter(statuses.iter().map(|s| s.last_error.clone()))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(statuses.iter().map(|s| micros(s.updated_at))).with_timezone("UTC")),
            Arc::new(StringArray::from_iter(statuses.iter().map(|s| s.durable_position.clone()))),
            Arc::new(Int64Array::from_iter_values(statuses.iter().map(|s| s.messages as i64))),
            Arc::new(Int64Array::from_iter_values(statuses.iter().map(|s| s.duplicate_transactions as i64))),
            Arc::new(Int64Array::from_iter_values(statuses.iter().map(|s| s.diverted as i64))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| s.held_transactions.map(|h| h as i64)))),
            Arc::new(Int64Array::from_iter(statuses.iter().map(|s| s.held_bytes.map(|h| h as i64)))),
            Arc::new(StringArray::from_iter(statuses.iter().map(|s| s.detail.clone()))),
        ]
    }
}

#[async_trait]
impl TableProvider for SystemView {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = self.batch()?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&self.schema), projection.cloned())?)
    }
}

