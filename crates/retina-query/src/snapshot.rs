//! The snapshot a query reads at.
//!
//! A query takes one snapshot (HWM - 1) when it starts executing and stores it in its
//! DataFusion session config as an extension; every Retina table the query scans reads
//! that same snapshot, which is what makes a query consistent across tables. The
//! snapshot is registered for LWM until the last `Arc` to it drops: the session
//! config, the scan plans and their running streams all hold one, so it is released
//! when the query finishes, fails, or its client goes away and the stream is dropped.

use std::sync::Arc;

use retina_core::{Snapshot, Ts};

/// A query's snapshot, shared by every scan of the query.
#[derive(Debug, Clone)]
pub struct QuerySnapshot {
    snapshot: Arc<Snapshot>,
}

impl QuerySnapshot {
    pub fn new(snapshot: Snapshot) -> Self {
        Self { snapshot: Arc::new(snapshot) }
    }

    pub fn ts(&self) -> Ts {
        self.snapshot.ts()
    }

    /// A handle that keeps the registration alive (held by scan streams).
    pub fn guard(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot)
    }
}
