//! Query counters and latency histogram, shared by every session of a server and
//! exported by `retina.metrics` and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram buckets, Prometheus style.
pub const LATENCY_BUCKETS_S: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// Invariant: `bucket_counts[i]` counts finished queries with latency at most
/// `LATENCY_BUCKETS_S[i]` and above the previous bound (not cumulative);
/// their sum plus `over_last_bucket` equals `finished`.
#[derive(Debug, Default)]
pub struct QueryMetrics {
    started: AtomicU64,
    finished: AtomicU64,
    failed: AtomicU64,
    latency_micros_total: AtomicU64,
    bucket_counts: [AtomicU64; LATENCY_BUCKETS_S.len()],
    over_last_bucket: AtomicU64,
    rows_returned: AtomicU64,
    splits_read: AtomicU64,
    splits_pruned: AtomicU64,
    bytes_fetched: AtomicU64,
}

/// A consistent-enough copy of the counters (each read atomically).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryMetricsSnapshot {
    pub started: u64,
    pub finished: u64,
    pub failed: u64,
    pub latency_seconds_total: f64,
    /// Cumulative counts per bucket, as Prometheus expects.
    pub cumulative_buckets: Vec<(f64, u64)>,
    pub rows_returned: u64,
    /// Table splits (files, write-buffer files) read by scans.
    pub splits_read: u64,
    /// Table splits skipped because their statistics rule out the query's filters.
    pub splits_pruned: u64,
    /// Bytes scans fetched from storage (data files' footers and pages).
    pub bytes_fetched: u64,
}

impl QueryMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn query_started(&self) {
        self.started.fetch_add(1, Relaxed);
    }

    /// Records a query's end (success or failure) with its wall-clock latency.
    pub fn query_finished(&self, latency: Duration, rows: u64, failed: bool) {
        self.finished.fetch_add(1, Relaxed);
        if failed {
            self.failed.fetch_add(1, Relaxed);
        }
        self.rows_returned.fetch_add(rows, Relaxed);
        self.latency_micros_total.fetch_add(latency.as_micros() as u64, Relaxed);
        let seconds = latency.as_secs_f64();
        match LATENCY_BUCKETS_S.iter().position(|&bound| seconds <= bound) {
            Some(bucket) => self.bucket_counts[bucket].fetch_add(1, Relaxed),
            None => self.over_last_bucket.fetch_add(1, Relaxed),
        };
    }

    /// One split read by a scan, which fetched `bytes` from storage.
    pub fn count_split_read(&self, bytes: u64) {
        self.splits_read.fetch_add(1, Relaxed);
        self.bytes_fetched.fetch_add(bytes, Relaxed);
    }

    /// Splits a scan skipped by their statistics.
    pub fn count_splits_pruned(&self, count: u64) {
        self.splits_pruned.fetch_add(count, Relaxed);
    }

    pub fn snapshot(&self) -> QueryMetricsSnapshot {
        let mut running = 0;
        let cumulative_buckets = LATENCY_BUCKETS_S
            .iter()
            .zip(&self.bucket_counts)
            .map(|(&bound, count)| {
                running += count.load(Relaxed);
                (bound, running)
            })
            .collect();
        QueryMetricsSnapshot {
            started: self.started.load(Relaxed),
            finished: self.finished.load(Relaxed),
            failed: self.failed.load(Relaxed),
            latency_seconds_total: self.latency_micros_total.load(Relaxed) as f64 / 1e6,
            cumulative_buckets,
            rows_returned: self.rows_returned.load(Relaxed),
            splits_read: self.splits_read.load(Relaxed),
            splits_pruned: self.splits_pruned.load(Relaxed),
            bytes_fetched: self.bytes_fetched.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_failures_counted() {
        let metrics = QueryMetrics::new();
        metrics.query_started();
        metrics.query_finished(Duration::from_micros(500), 3, false);
        metrics.query_started();
        metrics.query_finished(Duration::from_millis(30), 0, true);
        metrics.query_finished(Duration::from_secs(60), 0, false);
        let s = metrics.snapshot();
        assert_eq!((s.started, s.finished, s.failed, s.rows_returned), (2, 3, 1, 3));
        assert_eq!(s.cumulative_buckets[0], (0.001, 1));
        assert_eq!(s.cumulative_buckets.last().map(|b| b.1), Some(2), "60 s is above every bucket");
    }
}
