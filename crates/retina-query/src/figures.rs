//! The operational figures of a running instance — watermarks, replay counters and
//! throughput, visibility memory, query counts and latency, sources — gathered in one
//! place so that `retina.metrics` and `GET /metrics` always agree.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use retina_core::{Engine, EngineStats};

use crate::metrics::{QueryMetrics, QueryMetricsSnapshot};
use crate::sources::{SourceRegistry, SourceStatus};

/// One named figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// Prometheus-style name, `retina_` prefixed.
    pub name: &'static str,
    pub help: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub value: f64,
}

/// Everything at one moment.
#[derive(Clone, Debug)]
pub struct Figures {
    pub engine: EngineStats,
    pub row_changes_per_s: f64,
    pub uptime: Duration,
    pub now_micros: i64,
    pub queries: QueryMetricsSnapshot,
    pub sources: Vec<SourceStatus>,
    /// The open tables published, when the store publishes.
    pub publication: Option<retina_core::storage::Publication>,
}

impl Figures {
    /// The scalar figures, in a fixed order.
    pub fn metrics(&self) -> Vec<Metric> {
        let e = &self.engine;
        let q = &self.queries;
        let m = |name, kind, help, value: f64| Metric { name, kind, help, value };
        vec![
            m("retina_high_watermark", "gauge", "Every mirror transaction below it is visible", e.high_watermark.0 as f64),
            m("retina_low_watermark", "gauge", "Smallest snapshot ts of running queries", e.low_watermark.0 as f64),
            m("retina_transactions_total", "counter", "Mirror transactions submitted", e.transactions as f64),
            m("retina_row_changes_total", "counter", "Row changes submitted", e.row_changes as f64),
            m("retina_row_changes_per_second", "gauge", "Replay throughput over the last interval", self.row_changes_per_s),
            m("retina_files_flushed_total", "counter", "Write-buffer files flushed to lake storage", e.files_flushed as f64),
            m("retina_gc_runs_total", "counter", "Memory GC runs", e.gc_runs as f64),
            m("retina_visibility_bytes", "gauge", "Memory held by visibility structures", e.visibility_bytes as f64),
            m("retina_stored_versions", "gauge", "Row versions stored (visible and stale)", e.stored_versions as f64),
            m("retina_visibility_bits_per_tuple", "gauge", "Visibility memory per stored version", e.visibility_bits_per_tuple()),
            m("retina_queries_started_total", "counter", "SQL queries started", q.started as f64),
            m("retina_queries_finished_total", "counter", "SQL queries finished (ok or failed)", q.finished as f64),
            m("retina_queries_failed_total", "counter", "SQL queries that failed", q.failed as f64),
            m("retina_queries_running", "gauge", "SQL queries running now", q.started.saturating_sub(q.finished) as f64),
            m("retina_query_rows_returned_total", "counter", "Rows returned to SQL clients", q.rows_returned as f64),
            m("retina_scan_splits_read_total", "counter", "Table splits (files, write-buffer files) read by SQL scans", q.splits_read as f64),
            m("retina_scan_splits_pruned_total", "counter", "Table splits skipped by their column statistics", q.splits_pruned as f64),
            m("retina_scan_bytes_fetched_total", "counter", "Bytes scans fetched from storage (footers and pages of data files)", q.bytes_fetched as f64),
            m("retina_uptime_seconds", "gauge", "Seconds since the SQL session started", self.uptime.as_secs_f64()),
        ]
        .into_iter()
        .chain(self.publication.iter().flat_map(|p| {
            let published = p.ts.map_or(0, |ts| ts.0);
            let visible = e.high_watermark.0.saturating_sub(1);
            let age = p.ts.map_or(0.0, |_| (self.now_micros as f64 / 1000.0 - p.published_at_ms as f64).max(0.0) / 1000.0);
            [
                m("retina_published_ts", "gauge", "Snapshot ts of the latest cut published as Delta Lake and Iceberg tables", published as f64),
                m("retina_publication_lag_ts", "gauge", "Mirror-transaction timestamps the latest visible snapshot is ahead of the published cut", visible.saturating_sub(published) as f64),
                m("retina_publication_age_seconds", "gauge", "Seconds since the latest cut was published", age),
                m("retina_publication_last_milliseconds", "gauge", "How long the last publication took", p.last_millis),
                m("retina_publications_total", "counter", "Publications this process made", p.publications as f64),
                m("retina_publication_failing", "gauge", "1 when the last publication failed or left a table out", if p.last_error.is_some() { 1.0 } else { 0.0 }),
            ]
        }))
        .collect()
    }
}

/// Collects [`Figures`]; keeps the last replay counter sample to derive throughput.
pub struct FiguresCollector {
    engine: Arc<Engine>,
    queries: Arc<QueryMetrics>,
    sources: SourceRegistry,
    started: Instant,
    /// (when, row changes then, rate derived at that sample)
    last_sample: Mutex<(Instant, u64, f64)>,
}

impl FiguresCollector {
    pub fn new(engine: Arc<Engine>, queries: Arc<QueryMetrics>, sources: SourceRegistry) -> Self {
        let changes = engine.stats().row_changes;
        Self { engine, queries, sources, started: Instant::now(), last_sample: Mutex::new((Instant::now(), changes, 0.0)) }
    }

    pub fn collect(&self) -> Figures {
        let engine = self.engine.stats();
        let rate = {
            let mut last = self.last_sample.lock();
            let elapsed = last.0.elapsed();
            // Re-derive at most every 250 ms so back-to-back reads see a stable rate.
            if elapsed >= Duration::from_millis(250) {
                let rate = engine.row_changes.saturating_sub(last.1) as f64 / elapsed.as_secs_f64();
                *last = (Instant::now(), engine.row_changes, rate);
            }
            last.2
        };
        Figures {
            engine,
            row_changes_per_s: rate,
            uptime: self.started.elapsed(),
            now_micros: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64),
            queries: self.queries.snapshot(),
            sources: self.sources.list(),
            publication: self.engine.store().publication().ok().flatten(),
        }
    }
}
