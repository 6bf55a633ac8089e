//! Query snapshots that can let go of LWM: the paper's visibility checkpoint for
//! long-running queries (§4.3).
//!
//! A query's snapshot normally holds LWM at its ts, which stops memory GC for every
//! table. When a query runs longer than a threshold, its deleted-rows bitmaps at its
//! ts are materialized (copied out of the tiles, one bit per row) and its LWM
//! registration is dropped; from then on it reads the copies, and GC goes on. The
//! copies are kept in memory here (the same size as writing them to files, 1 bit per
//! row) and freed with the query.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::scan::VisibilitySource;
use crate::table::{TableFiles, TableRuntime};
use crate::txn::Snapshot;
use crate::types::{FileId, TableId, Ts};
use crate::visibility::{DeleteBitmap, RgVisibility};

enum QueryVisibility {
    /// Registered for LWM (the registration is held for its `Drop`): the tiles still
    /// answer at `ts`.
    Live { _registration: Snapshot },
    /// Bitmaps at `ts` of every file that existed when they were taken, and those
    /// files: the query keeps reading them even if storage GC swaps them out (a
    /// rewrite drops rows the query may still need). Files created later hold no row
    /// created at or before `ts`.
    Materialized { bitmaps: HashMap<FileId, Arc<DeleteBitmap>>, files: HashMap<TableId, Arc<TableFiles>> },
}

/// A query's snapshot, shared by every scan of the query.
///
/// Invariant: while a scan computes a bitmap it holds the read lock, and
/// materialization takes the write lock before it releases the LWM registration, so
/// no scan ever reads tiles at `ts` after GC may have folded past `ts`.
pub struct QuerySnapshot {
    ts: Ts,
    started: Instant,
    visibility: RwLock<QueryVisibility>,
}

impl QuerySnapshot {
    pub(crate) fn new(snapshot: Snapshot) -> Self {
        Self { ts: snapshot.ts(), started: Instant::now(), visibility: RwLock::new(QueryVisibility::Live { _registration: snapshot }) }
    }

    pub fn ts(&self) -> Ts {
        self.ts
    }

    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn is_materialized(&self) -> bool {
        matches!(*self.visibility.read(), QueryVisibility::Materialized { .. })
    }

    /// Copies the bitmaps at `ts` of every file of `tables` and releases the LWM
    /// registration. Returns the bytes the copies take (0 if already done).
    pub(crate) fn materialize(&self, tables: &[Arc<TableRuntime>]) -> usize {
        let mut state = self.visibility.write();
        if matches!(*state, QueryVisibility::Materialized { .. }) {
            return 0;
        }
        let mut bitmaps = HashMap::new();
        let mut captured = HashMap::new();
        let mut bytes = 0;
        for table in tables {
            let files = table.files();
            captured.insert(table.id(), Arc::clone(&files));
            for file in &files.flushed {
                let bitmap = file.visibility.bitmap_at(self.ts, file.meta.row_count as usize);
                bytes += bitmap.len() * 8;
                bitmaps.insert(file.meta.file_id, Arc::new(bitmap));
            }
            for file in &files.virtual_files {
                let bitmap = file.visibility().bitmap_at(self.ts, file.capacity());
                bytes += bitmap.len() * 8;
                bitmaps.insert(file.file_id(), Arc::new(bitmap));
            }
        }
        // Dropping the live snapshot here, under the write lock, releases LWM.
        *state = QueryVisibility::Materialized { bitmaps, files: captured };
        bytes
    }

    /// The files of `table` this query must read, once materialized.
    pub(crate) fn files_for(&self, table: TableId) -> Option<Arc<TableFiles>> {
        match &*self.visibility.read() {
            QueryVisibility::Live { .. } => None,
            QueryVisibility::Materialized { files, .. } => files.get(&table).cloned(),
        }
    }
}

impl VisibilitySource for QuerySnapshot {
    fn ts(&self) -> Ts {
        self.ts
    }

    fn deleted_rows(&self, file: FileId, visibility: &RgVisibility, rows: usize) -> DeleteBitmap {
        match &*self.visibility.read() {
            QueryVisibility::Live { .. } => visibility.bitmap_at(self.ts, rows),
            QueryVisibility::Materialized { bitmaps, .. } => {
                let mut bitmap = bitmaps.get(&file).map_or_else(Vec::new, |b| b.as_ref().clone());
                bitmap.resize(rows.div_ceil(64), 0);
                bitmap
            }
        }
    }
}

impl std::fmt::Debug for QuerySnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuerySnapshot").field("ts", &self.ts).field("materialized", &self.is_materialized()).finish()
    }
}
