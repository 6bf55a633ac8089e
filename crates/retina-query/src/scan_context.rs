//! What the table scans of one session share.

use std::sync::Arc;

use crate::metrics::QueryMetrics;

/// What the scans of one session share: the query counters, and whether to prune
/// splits at all.
#[derive(Debug)]
pub struct ScanContext {
    pub metrics: Arc<QueryMetrics>,
    pub prune_splits: bool,
}
