//! Group commit: the transactions of one batch become visible together, once every
//! shard that received a part of the batch has applied it.

use std::sync::atomic::{AtomicUsize, Ordering::AcqRel};
use std::sync::Arc;

use crate::txn::TransactionService;
use crate::types::Ts;

/// A batch of mirror transactions waiting for its shards.
///
/// Invariant: `remaining` counts the shards that still have to apply their part; the
/// shard that brings it to zero commits every ts of the batch, exactly once.
pub(crate) struct CommitGroup {
    timestamps: Vec<Ts>,
    remaining: AtomicUsize,
    txn: Arc<dyn TransactionService>,
}

impl CommitGroup {
    pub(crate) fn new(timestamps: Vec<Ts>, shards: usize, txn: Arc<dyn TransactionService>) -> Arc<Self> {
        let group = Arc::new(Self { timestamps, remaining: AtomicUsize::new(shards), txn });
        if shards == 0 {
            group.commit();
        }
        group
    }

    /// Called by each participating shard after applying (and publishing) its part.
    pub(crate) fn shard_done(&self) {
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            self.commit();
        }
    }

    fn commit(&self) {
        for &ts in &self.timestamps {
            self.txn.commit(ts);
        }
    }
}
