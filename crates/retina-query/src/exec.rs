//! `RetinaScanExec`: the physical scan of one Retina table at a query's snapshot.
//!
//! One output partition per scan split (a flushed file with its single row group, or
//! a write buffer's virtual file), so DataFusion reads splits in parallel. A file is
//! read by `retina_core::scan::read_split_pruned`, a virtual file by
//! `retina_core::scan::VirtualRows` — row-group skip by `_create_ts` min/max, the
//! visibility bitmap applied to what the store decoded, the `_create_ts` prefix cut —
//! so no operator above ever sees an invisible version or the hidden `_create_ts`
//! column.
//!
//! Splits pruned by statistics ([`crate::split_pruning`]) are not partitions at all;
//! EXPLAIN shows how many (`pruned_splits=`) and with what predicate, and the
//! `splits_read` / `splits_pruned` metrics (EXPLAIN ANALYZE, `retina.metrics`) count
//! them as the scan runs.
//!
//! The storage layer blocks (it drives its own runtime), so a file is read on tokio's
//! blocking pool, never on an async worker. A virtual file is in memory: its blocks
//! are masked on the stream's task as they are pulled. A per-scan semaphore bounds how
//! many splits of one scan are being read at once: a table with hundreds of files
//! must not fan out into hundreds of blocking reads holding their batches in memory.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Statistics;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, ReplaceChildrenOptions};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;
use retina_core::scan::{read_split_pruned, ScanSplit, SplitRead, VirtualRows};
use retina_core::storage::{DataFiles, PageBound};
use retina_core::table::TableRuntime;
use retina_core::Snapshot;
use tokio::sync::Semaphore;

use crate::scan_context::ScanContext;

/// What statistics pruning did to a scan's splits.
#[derive(Clone, Debug)]
pub struct ScanPruning {
    /// Splits left out.
    pub pruned_splits: usize,
    /// The filter pruned with.
    pub predicate: String,
}

/// The scan of one table at one snapshot.
///
/// Invariants: `splits` come from one consistent view of the table's files taken at
/// planning; partition `i < splits.len()` reads `splits[i]`; when there are no splits
/// there is one empty partition (DataFusion plans need at least one). `schema` is the
/// table's user schema projected by `projection` (never `_create_ts`).
pub struct RetinaScanExec {
    table: Arc<TableRuntime>,
    store: Arc<dyn DataFiles>,
    snapshot: Arc<Snapshot>,
    splits: Arc<[ScanSplit]>,
    projection: Option<Arc<[usize]>>,
    schema: SchemaRef,
    reads: Arc<Semaphore>,
    properties: Arc<PlanProperties>,
    context: Option<Arc<ScanContext>>,
    pruning: Option<ScanPruning>,
    /// Bounds the store may skip pages of flushed files with ([`crate::page_bounds`]).
    page_bounds: Arc<[PageBound]>,
    metrics: ExecutionPlanMetricsSet,
}

impl RetinaScanExec {
    pub fn new(
        table: Arc<TableRuntime>,
        store: Arc<dyn DataFiles>,
        snapshot: Arc<Snapshot>,
        splits: Vec<ScanSplit>,
        projection: Option<Vec<usize>>,
        schema: SchemaRef,
        max_parallel_reads: usize,
    ) -> Self {
        let partitions = splits.len().max(1);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self {
            table,
            store,
            snapshot,
            splits: splits.into(),
            projection: projection.map(Into::into),
            schema,
            reads: Arc::new(Semaphore::new(max_parallel_reads.max(1))),
            properties: Arc::new(properties),
            context: None,
            pruning: None,
            page_bounds: Arc::new([]),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Lets the reads skip pages whose statistics are outside `bounds`.
    pub fn with_page_bounds(mut self, bounds: Vec<PageBound>) -> Self {
        self.page_bounds = bounds.into();
        self
    }

    /// Reads through `context` (learning statistics, counting splits), after
    /// `pruning` left out some splits (`None`: no filter could prune).
    pub fn with_context(mut self, context: Arc<ScanContext>, pruning: Option<ScanPruning>) -> Self {
        self.context = Some(context);
        self.pruning = pruning;
        self
    }

    /// Splits left out by statistics pruning.
    pub fn pruned_split_count(&self) -> usize {
        self.pruning.as_ref().map_or(0, |pruning| pruning.pruned_splits)
    }

    /// The snapshot ts this scan reads at.
    pub fn snapshot_ts(&self) -> retina_core::Ts {
        self.snapshot.ts()
    }

    pub fn split_count(&self) -> usize {
        self.splits.len()
    }

    /// Row versions stored in a split: an upper bound of its visible rows.
    fn split_rows(split: &ScanSplit) -> usize {
        match split {
            ScanSplit::File(file) => file.meta.row_count as usize,
            ScanSplit::Virtual(file) => file.published_rows(),
        }
    }
}

impl fmt::Debug for RetinaScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetinaScanExec")
            .field("table", &self.table.name())
            .field("snapshot_ts", &self.snapshot.ts())
            .field("splits", &self.splits.len())
            .field("projection", &self.projection)
            .finish()
    }
}

impl DisplayAs for RetinaScanExec {
    fn fmt_as(&self, _format: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let columns: Vec<&str> = self.schema.fields().iter().map(|field| field.name().as_str()).collect();
        write!(
            f,
            "RetinaScanExec: table={}, snapshot_ts={}, splits={}, projection=[{}]",
            self.table.name(),
            self.snapshot.ts(),
            self.splits.len(),
            columns.join(", ")
        )?;
        if let Some(pruning) = &self.pruning {
            write!(f, ", pruned_splits={}, pruning_predicate={}", pruning.pruned_splits, pruning.predicate)?;
        }
        if !self.page_bounds.is_empty() {
            let stored = self.table.schema().stored_schema();
            let bounds: Vec<String> = self
                .page_bounds
                .iter()
                .map(|bound| {
                    let name = stored.fields().get(bound.column).map_or("?", |field| field.name().as_str());
                    let side = |value: Option<i64>| value.map_or(String::new(), |v| v.to_string());
                    format!("{name} in [{}, {}]", side(bound.min), side(bound.max))
                })
                .collect();
            write!(f, ", page_bounds=[{}]", bounds.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for RetinaScanExec {
    fn name(&self) -> &str {
        "RetinaScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        leaf_without_children(self, children)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        leaf_without_children(self, children)
    }

    #[allow(deprecated)] // DataFusion 55 still calls this through statistics_from_inputs
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows = match partition {
            Some(index) => self.splits.get(index).map_or(0, Self::split_rows),
            None => self.splits.iter().map(Self::split_rows).sum(),
        };
        // Stale versions are left out by the scan, so the count is an upper bound.
        Ok(Arc::new(Statistics::new_unknown(&self.schema).with_num_rows(Precision::Inexact(rows))))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition >= self.properties.partitioning.partition_count() {
            return Err(DataFusionError::Internal(format!(
                "RetinaScanExec of {} has no partition {partition}",
                self.table.name()
            )));
        }
        let splits_read = MetricBuilder::new(&self.metrics).counter("splits_read", partition);
        let rows_skipped = MetricBuilder::new(&self.metrics).counter("rows_skipped_by_page_index", partition);
        let bytes_fetched = MetricBuilder::new(&self.metrics).counter("bytes_fetched", partition);
        let bounds = Arc::clone(&self.page_bounds);
        if partition == 0 {
            // Once per execution of the plan: every partition is executed once.
            let pruned = self.pruned_split_count();
            MetricBuilder::new(&self.metrics).counter("splits_pruned", partition).add(pruned);
            if let Some(context) = &self.context {
                context.metrics.count_splits_pruned(pruned as u64);
            }
        }
        let context = self.context.clone();
        let split = self.splits.get(partition).cloned();
        if let Some(ScanSplit::Virtual(file)) = &split {
            // In memory: masked block by block as the query pulls them, on this task
            // (a block is microseconds of work).
            splits_read.add(1);
            if let Some(context) = &context {
                context.metrics.count_split_read(0);
            }
            let schema = self.table.schema();
            let (columns, count_only) = match self.projection.as_deref() {
                Some([]) => (vec![counted_column(&schema)], true),
                Some(projection) => (projection.to_vec(), false),
                None => ((0..schema.column_count()).collect(), false),
            };
            // The snapshot stays registered while the stream lives.
            let snapshot = Arc::clone(&self.snapshot);
            let rows = VirtualRows::new(&schema, file, snapshot.ts(), columns).map(move |batch| {
                let _registered = &snapshot;
                let batch = batch.map_err(|error| DataFusionError::External(Box::new(error)))?;
                if count_only {
                    return batch.project(&[]).map_err(DataFusionError::from);
                }
                Ok(batch)
            });
            return Ok(Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.schema), futures::stream::iter(rows))));
        }
        let table = Arc::clone(&self.table);
        let store = Arc::clone(&self.store);
        let snapshot = Arc::clone(&self.snapshot);
        let projection = self.projection.clone();
        let reads = Arc::clone(&self.reads);
        let batches = futures::stream::once(async move {
            let Some(split) = split else { return Ok(Vec::new()) };
            let _permit = reads
                .acquire_owned()
                .await
                .map_err(|_| DataFusionError::Execution("scan read limiter closed".into()))?;
            splits_read.add(1);
            let read = tokio::task::spawn_blocking(move || {
                let read = read_visible(&table, &split, store.as_ref(), &snapshot, projection.as_deref(), &bounds);
                if let (Some(context), Ok(read)) = (&context, &read) {
                    context.metrics.count_split_read(read.bytes_fetched);
                }
                read
            })
            .await
            .map_err(|error| DataFusionError::ExecutionJoin(Box::new(error)))??;
            rows_skipped.add(read.rows_skipped as usize);
            bytes_fetched.add(read.bytes_fetched as usize);
            Ok(read.batches)
        })
        .flat_map(|result: Result<Vec<RecordBatch>>| match result {
            Ok(batches) => futures::stream::iter(batches.into_iter().map(Ok)).left_stream(),
            Err(error) => futures::stream::once(async move { Err(error) }).right_stream(),
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.schema), batches)))
    }
}

fn leaf_without_children(
    plan: Arc<RetinaScanExec>,
    children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if children.is_empty() {
        Ok(plan)
    } else {
        Err(DataFusionError::Internal("RetinaScanExec is a leaf and takes no children".into()))
    }
}

/// Counting rows (`count(*)`) needs no column, but a reader needs one to know how
/// many rows survive: it reads the first key column and drops it.
fn counted_column(schema: &retina_core::TableSchema) -> usize {
    schema.primary_key().first().copied().unwrap_or(0)
}

/// Reads the visible rows of one split. `snapshot` is borrowed for the whole read, so
/// the registration outlives the read even if the query is dropped meanwhile.
fn read_visible(
    table: &TableRuntime,
    split: &ScanSplit,
    store: &dyn DataFiles,
    snapshot: &Snapshot,
    projection: Option<&[usize]>,
    bounds: &[PageBound],
) -> Result<SplitRead> {
    let external = |error: retina_core::CoreError| DataFusionError::External(Box::new(error));
    let schema = table.schema();
    let ts = snapshot.ts();
    match projection {
        Some([]) => {
            let key = counted_column(&schema);
            let mut read = read_split_pruned(&schema, split, store, ts, Some(&[key]), bounds).map_err(external)?;
            read.batches = read.batches.iter().map(|batch| batch.project(&[]).map_err(DataFusionError::from)).collect::<Result<_>>()?;
            Ok(read)
        }
        projection => read_split_pruned(&schema, split, store, ts, projection, bounds).map_err(external),
    }
}
