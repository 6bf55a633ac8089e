//! `RetinaSession`: SQL over an engine. Parses (PostgreSQL dialect), plans against the
//! `retina` catalog, and runs each query at one snapshot taken when it starts
//! executing (not at parse time: a prepared statement executed twice reads two
//! snapshots). SQL is read-only: tables change only by replay.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::GreedyMemoryPool;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{execute_stream, RecordBatchStream, SendableRecordBatchStream};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement;
use datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use futures::{Stream, StreamExt};
use retina_core::{Engine, Snapshot, Ts};

use crate::client_settings::ClientSettings;
use crate::sql_parser::SqlParser;
use crate::sql_catalog::{RetinaCatalog, CATALOG, DEFAULT_SCHEMA};
use crate::error::{QueryError, QueryResult};
use crate::figures::{Figures, FiguresCollector};
use crate::metrics::QueryMetrics;
use crate::scan_context::ScanContext;
use crate::snapshot::QuerySnapshot;
use crate::sources::SourceRegistry;

/// Tuning of a session.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// DataFusion's target partitions (parallelism of operators and of split reads).
    pub target_partitions: usize,
    /// Memory one query may hold in DataFusion operators (hash tables, sorts);
    /// `None` for no limit. Keeps a single query from starving replay.
    pub query_memory_limit: Option<usize>,
    /// Skip table splits whose column statistics rule out a query's filters
    /// ([`crate::split_pruning`]). Off only to compare against.
    pub prune_splits: bool,
    /// The longest SQL text one call may parse (54000 beyond it): a 100 MB query
    /// took 142 s and 1.5 GB to refuse after parsing.
    pub max_statement_bytes: usize,
}

/// The default of [`SessionOptions::max_statement_bytes`].
pub const DEFAULT_MAX_STATEMENT_BYTES: usize = 16 << 20;

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            target_partitions: std::thread::available_parallelism().map_or(2, |n| n.get()),
            query_memory_limit: Some(1 << 30),
            prune_splits: true,
            max_statement_bytes: DEFAULT_MAX_STATEMENT_BYTES,
        }
    }
}

/// A SQL session over one engine. Shareable across connections (`Arc`); each query
/// gets its own DataFusion state (snapshot, memory pool) cloned from the base.
pub struct RetinaSession {
    engine: Arc<Engine>,
    context: SessionContext,
    options: SessionOptions,
    metrics: Arc<QueryMetrics>,
    figures: Arc<FiguresCollector>,
    parser: SqlParser,
}

/// Decimal literals are numeric, as in PostgreSQL (`0.1 + 0.2 = 0.3`, `price * 3 =
/// 4.11` exact), not float8. Also for the plain DataFusion context Retina's answers
/// are compared with ([`crate::export::plain_context`]).
pub fn with_postgres_literals(config: SessionConfig) -> SessionConfig {
    config.set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
}

/// PostgreSQL's casts, checked arithmetic and interval order (`pg_casts`,
/// `pg_arithmetic`, `pg_intervals`), after DataFusion's own analyzer rules; type
/// coercion runs again to type what they add. Also for the plain DataFusion context
/// Retina's answers are compared with.
pub fn with_postgres_rules(state: SessionStateBuilder) -> SessionStateBuilder {
    state
        .with_analyzer_rule(Arc::new(crate::pg_casts::PostgresCasts))
        .with_analyzer_rule(Arc::new(crate::pg_arithmetic::PostgresArithmetic))
        .with_analyzer_rule(Arc::new(crate::pg_intervals::PostgresIntervals))
        .with_analyzer_rule(Arc::new(datafusion::optimizer::analyzer::type_coercion::TypeCoercion::new()))
}

impl RetinaSession {
    pub fn new(engine: Arc<Engine>, sources: SourceRegistry, options: SessionOptions) -> Self {
        let metrics = Arc::new(QueryMetrics::new());
        let figures = Arc::new(FiguresCollector::new(Arc::clone(&engine), Arc::clone(&metrics), sources));
        let config = with_postgres_literals(SessionConfig::new())
            .with_target_partitions(options.target_partitions.max(1))
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false)
            .with_default_catalog_and_schema(CATALOG, DEFAULT_SCHEMA)
            .set_str("datafusion.sql_parser.dialect", "PostgreSQL")
            // Sessions run in UTC (`SHOW TimeZone`): `now()` and `timestamptz` carry
            // the zone, as stored timestamptz columns do, so they compare as instants
            // and reach clients as timestamptz.
            .set_str("datafusion.execution.time_zone", "UTC");
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(crate::cancellation::YieldingJoins));
        let state = with_postgres_rules(state).build();
        let context = SessionContext::new_with_state(state);
        let scans = Arc::new(ScanContext {
            metrics: Arc::clone(&metrics),
            prune_splits: options.prune_splits,
        });
        context.register_catalog(CATALOG, Arc::new(RetinaCatalog::new(Arc::clone(&engine), Arc::clone(&figures), scans)));
        if let Err(error) = datafusion_pg_catalog::setup_pg_catalog(&context, CATALOG, EmptyContextProvider) {
            // Only introspection by clients needs it; queries of Retina tables do not.
            tracing::warn!(%error, "pg_catalog emulation is unavailable");
        }
        // After the emulation: its set-up must not bring DataFusion's `version()` back.
        crate::pg_compat::register_functions(&context);
        let key_definitions = Arc::new(crate::pg_keys::KeyDefinitions::default());
        crate::pg_functions::register(&context, Arc::clone(&key_definitions));
        if let Some(catalog) = context.catalog(CATALOG) {
            if let Some(emulated) = catalog.schema("pg_catalog") {
                let overrides = crate::pg_overrides::PgCatalogOverrides::new(emulated, Arc::clone(&engine), key_definitions);
                let _ = catalog.register_schema("pg_catalog", Arc::new(overrides));
            }
        }
        Self { engine, context, options, metrics, figures, parser: SqlParser::new() }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn metrics(&self) -> &Arc<QueryMetrics> {
        &self.metrics
    }

    /// The instance's figures now (what `retina.metrics` and `/metrics` show).
    pub fn figures(&self) -> Figures {
        self.figures.collect()
    }

    /// Splits `sql` into statements (PostgreSQL dialect), PostgreSQL-only forms
    /// rewritten into what DataFusion runs ([`crate::sql_parser`]).
    pub fn parse(&self, sql: &str) -> QueryResult<Vec<Statement>> {
        if sql.len() > self.options.max_statement_bytes {
            return Err(QueryError::StatementTooLong { bytes: sql.len(), limit: self.options.max_statement_bytes });
        }
        self.parser.parse(sql)
    }

    /// Plans one statement. Statements that would change data or the catalog are
    /// refused with [`QueryError::ReadOnly`].
    pub async fn plan(&self, statement: Statement) -> QueryResult<LogicalPlan> {
        self.plan_in(statement, &ClientSettings::default()).await
    }

    /// Plans one statement under a client's own settings (a SQL connection's
    /// `search_path`); [`Self::plan`] is this with the defaults.
    pub async fn plan_in(&self, statement: Statement, settings: &ClientSettings) -> QueryResult<LogicalPlan> {
        if let Statement::Statement(inner) = &statement {
            if let SqlStatement::ShowVariable { variable } = inner.as_ref() {
                if let Some(plan) = crate::pg_compat::show_plan(variable, settings) {
                    return Ok(plan?);
                }
            }
        }
        let mut state = self.context.state();
        if let Some(schema) = &settings.default_schema {
            state.config_mut().options_mut().catalog.default_schema = schema.clone();
        }
        if settings != &ClientSettings::default() {
            crate::pg_functions::register_for_client(&mut state, settings)?;
        }
        let unique = crate::unique_names::with_unique_names(&statement);
        let plan = match (state.statement_to_plan(statement).await, unique) {
            (Err(error), Some(unique)) if crate::unique_names::is_duplicate_name_error(&error) => state.statement_to_plan(unique).await?,
            (planned, _) => planned?,
        };
        crate::statement_policy::check_read_only(&plan)?;
        match &plan {
            LogicalPlan::Statement(statement) => Err(QueryError::DataFusion(DataFusionError::NotImplemented(format!(
                "{} is not supported",
                statement.name()
            )))),
            _ => Ok(crate::result_types::with_signed_integers(plan)?),
        }
    }

    /// Plans `sql`, which must be exactly one statement.
    pub async fn plan_sql(&self, sql: &str) -> QueryResult<LogicalPlan> {
        let mut statements = self.parse(sql)?;
        if statements.len() != 1 {
            return Err(QueryError::StatementCount { count: statements.len() });
        }
        let statement = statements.remove(0);
        self.plan(statement).await
    }

    /// Runs a planned query at a fresh snapshot. The snapshot stays registered until
    /// the returned stream (and everything DataFusion spawned for it) is dropped.
    pub async fn execute(&self, plan: LogicalPlan) -> QueryResult<QueryStream> {
        let record = QueryRecord::start(Arc::clone(&self.metrics));
        let snapshot = QuerySnapshot::new(self.engine.snapshot()?);
        self.run(plan, snapshot, record).await
    }

    /// Runs a planned query at a snapshot the caller already holds, e.g. to read
    /// several queries at one point in time, or to compare with an export of it.
    pub async fn execute_at(&self, plan: LogicalPlan, snapshot: &QuerySnapshot) -> QueryResult<QueryStream> {
        let record = QueryRecord::start(Arc::clone(&self.metrics));
        self.run(plan, snapshot.clone(), record).await
    }

    async fn run(&self, plan: LogicalPlan, snapshot: QuerySnapshot, mut record: QueryRecord) -> QueryResult<QueryStream> {
        let state = self.execution_state(&snapshot);
        let physical = state.create_physical_plan(&plan).await?;
        let inner = execute_stream(physical, state.task_ctx())?;
        record.snapshot_ts = Some(snapshot.ts());
        Ok(QueryStream { inner, snapshot: Some(snapshot.guard()), record })
    }

    /// Parses, plans and runs one statement.
    pub async fn sql(&self, sql: &str) -> QueryResult<QueryStream> {
        let plan = self.plan_sql(sql).await?;
        self.execute(plan).await
    }

    /// Runs one statement to the end and returns its schema and batches.
    pub async fn collect(&self, sql: &str) -> QueryResult<(SchemaRef, Vec<RecordBatch>)> {
        let mut stream = self.sql(sql).await?;
        let schema = stream.schema();
        let mut batches = Vec::new();
        while let Some(batch) = stream.next().await {
            batches.push(batch?);
        }
        Ok((schema, batches))
    }

    /// The base state plus this query's snapshot and memory pool.
    fn execution_state(&self, snapshot: &QuerySnapshot) -> SessionState {
        let mut state = self.context.state();
        state.config_mut().set_extension(Arc::new(snapshot.clone()));
        match self.options.query_memory_limit {
            Some(limit) => {
                let base = self.context.runtime_env();
                let runtime = RuntimeEnv {
                    memory_pool: Arc::new(GreedyMemoryPool::new(limit)),
                    disk_manager: Arc::clone(&base.disk_manager),
                    cache_manager: Arc::clone(&base.cache_manager),
                    object_store_registry: Arc::clone(&base.object_store_registry),
                };
                SessionStateBuilder::new_from_existing(state).with_runtime_env(Arc::new(runtime)).build()
            }
            None => state,
        }
    }
}

/// Counts a query in [`QueryMetrics`] exactly once, when it ends: successfully when
/// its stream was read to the end, as failed on an error, a planning failure, or when
/// it was dropped early (cancelled, client gone).
struct QueryRecord {
    metrics: Arc<QueryMetrics>,
    start: Instant,
    rows: u64,
    succeeded: bool,
    snapshot_ts: Option<Ts>,
}

impl QueryRecord {
    fn start(metrics: Arc<QueryMetrics>) -> Self {
        metrics.query_started();
        Self { metrics, start: Instant::now(), rows: 0, succeeded: false, snapshot_ts: None }
    }
}

impl Drop for QueryRecord {
    fn drop(&mut self) {
        self.metrics.query_finished(self.start.elapsed(), self.rows, !self.succeeded);
    }
}

/// The result stream of one query. Holds the query's snapshot: dropping the stream
/// (at the end, on error, or when the client goes away) releases it.
pub struct QueryStream {
    inner: SendableRecordBatchStream,
    snapshot: Option<Arc<Snapshot>>,
    record: QueryRecord,
}

impl QueryStream {
    /// The result schema.
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    /// The snapshot ts the query reads at.
    pub fn snapshot_ts(&self) -> Option<Ts> {
        self.record.snapshot_ts
    }
}

impl Stream for QueryStream {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.poll_next_unpin(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => self.record.rows += batch.num_rows() as u64,
            Poll::Ready(Some(Err(_))) => self.snapshot = None,
            Poll::Ready(None) => {
                self.record.succeeded = true;
                self.snapshot = None;
            }
            Poll::Pending => {}
        }
        polled
    }
}

impl RecordBatchStream for QueryStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}
