//! Query snapshots that can let go of LWM: the paper's visibility checkpoint for
//! long-running queries (§4.3).
//!
//! A query's snapshot normally holds LWM at its ts, which stops memory GC for every
//! table. When a query runs longer than a threshold, its deleted-rows bitmaps at its
//! ts are materialized — copied out of the tiles, one bit per row, and written to
//! objects in the lake store under `visibility/<query>/<file id>` — and its LWM
//! registration is dropped; from then on it reads the objects (one per split it
//! scans), GC goes on, and no memory is held for them. The objects are deleted with
//! the query, and whatever a crashed process left under `visibility/` when the engine
//! opens.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::RwLock;

use crate::error::{CoreError, CoreResult};
use crate::storage::LakeStore;

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
    Materialized { folder: String, objects: HashMap<FileId, String>, files: HashMap<TableId, Arc<TableFiles>>, store: Arc<dyn LakeStore> },
}

/// Where materialized visibility lives in the lake store.
pub const VISIBILITY_FOLDER: &str = "visibility";

/// Distinguishes the folders of the queries of one process.
static NEXT_QUERY: AtomicU64 = AtomicU64::new(0);

fn encode_bitmap(bitmap: &[u64]) -> Vec<u8> {
    bitmap.iter().flat_map(|word| word.to_le_bytes()).collect()
}

fn decode_bitmap(bytes: &[u8], path: &str) -> CoreResult<DeleteBitmap> {
    if bytes.len() % 8 != 0 {
        return Err(CoreError::Storage(format!("materialized visibility {path} is {} bytes, not whole words", bytes.len())));
    }
    Ok(bytes.chunks_exact(8).map(|word| u64::from_le_bytes(word.try_into().expect("chunks of 8"))).collect())
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

    /// Writes the bitmaps at `ts` of every file of `tables` to `store` and releases
    /// the LWM registration. Returns the bytes written (0 if already done). On a
    /// write failure the query stays live (holding LWM) and the error is returned.
    pub(crate) fn materialize(&self, tables: &[Arc<TableRuntime>], store: &Arc<dyn LakeStore>) -> CoreResult<usize> {
        let mut state = self.visibility.write();
        if matches!(*state, QueryVisibility::Materialized { .. }) {
            return Ok(0);
        }
        let folder = format!("{VISIBILITY_FOLDER}/{}-{}-{}", std::process::id(), self.ts.0, NEXT_QUERY.fetch_add(1, Relaxed));
        let mut objects = HashMap::new();
        let mut captured = HashMap::new();
        let mut bytes = 0;
        let written: CoreResult<()> = (|| {
            for table in tables {
                let files = table.files();
                captured.insert(table.id(), Arc::clone(&files));
                let flushed = files.flushed.iter().map(|f| (f.meta.file_id, f.visibility.bitmap_at(self.ts, f.meta.row_count as usize)));
                let buffered = files.virtual_files.iter().map(|f| (f.file_id(), f.visibility().bitmap_at(self.ts, f.capacity())));
                for (file_id, bitmap) in flushed.chain(buffered) {
                    // A file with nothing deleted at `ts` needs no object.
                    if bitmap.iter().all(|&word| word == 0) {
                        continue;
                    }
                    let path = format!("{folder}/{file_id}");
                    let encoded = encode_bitmap(&bitmap);
                    bytes += encoded.len();
                    store.put_object(&path, encoded)?;
                    objects.insert(file_id, path);
                }
            }
            Ok(())
        })();
        if let Err(error) = written {
            let _ = store.delete_objects(&folder);
            return Err(error);
        }
        // Dropping the live snapshot here, under the write lock, releases LWM.
        *state = QueryVisibility::Materialized { folder, objects, files: captured, store: Arc::clone(store) };
        Ok(bytes)
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

    fn deleted_rows(&self, file: FileId, visibility: &RgVisibility, rows: usize) -> CoreResult<DeleteBitmap> {
        match &*self.visibility.read() {
            QueryVisibility::Live { .. } => Ok(visibility.bitmap_at(self.ts, rows)),
            QueryVisibility::Materialized { objects, store, .. } => {
                let mut bitmap = match objects.get(&file) {
                    None => Vec::new(),
                    Some(path) => {
                        let bytes = store.get_object(path)?.ok_or_else(|| {
                            CoreError::Storage(format!("materialized visibility {path} of a running query is missing"))
                        })?;
                        decode_bitmap(&bytes, path)?
                    }
                };
                bitmap.resize(rows.div_ceil(64), 0);
                Ok(bitmap)
            }
        }
    }
}

impl Drop for QuerySnapshot {
    fn drop(&mut self) {
        if let QueryVisibility::Materialized { folder, store, .. } = &*self.visibility.read() {
            // Best effort: what stays behind is removed when the engine next opens.
            let _ = store.delete_objects(folder);
        }
    }
}

impl std::fmt::Debug for QuerySnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuerySnapshot").field("ts", &self.ts).field("materialized", &self.is_materialized()).finish()
    }
}
