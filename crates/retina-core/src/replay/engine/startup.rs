//! Starting an engine: fresh, over a store with only tables, or by recovery; and
//! the threads it runs (shards, flusher, memory GC, storage GC, checkpoints).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use crossbeam_channel::bounded;
use parking_lot::{Mutex, RwLock};

use crate::replay::config::EngineConfig;
use crate::replay::durability::flusher;
use crate::replay::durability::recovery::{RecoveredState, RecoveryReport, recover};
use crate::replay::durability::source_progress::SourceProgress;
use crate::replay::engine::{Engine, PendingBatch};
use crate::replay::engine::threads::{sleep_unless_stopped, spawn, spawn_background};
use crate::replay::gc::memory::collect_garbage;
use crate::replay::hot_path::shard::Shard;
use crate::replay::shared::{EngineShared, TableRegistry};
use crate::replay::stats::SharedStats;
use crate::catalog::CATALOG_FORMAT_VERSION;
use crate::error::{CoreError, CoreResult};
use crate::storage::LakeStore;
use crate::table::TableRuntime;
use crate::txn::{EmbeddedTransactionService, TransactionService};
use crate::types::Ts;

impl Engine {
    /// Opens the lakehouse in `store`: recovers from the catalog and the latest
    /// checkpoint when there is one (replay then resumes from
    /// [`Self::recovered_positions`]), or starts empty and writes a first checkpoint,
    /// so that a crash at any later moment has one to recover from. Over a store
    /// that may not write, the engine is read-only: it recovers and answers
    /// queries, recovered rows stay in memory, and nothing is written.
    pub fn open(config: EngineConfig, store: Arc<dyn LakeStore>) -> CoreResult<Self> {
        match recover(store.as_ref(), config.shards.max(1))? {
            Some(state) => {
                let txn = Arc::new(EmbeddedTransactionService::starting_at(state.checkpoint_ts.next()));
                Self::launch(config, txn, store, Some(state))
            }
            None => {
                let engine = Self::launch(config, Arc::new(EmbeddedTransactionService::new()), store, None)?;
                if !engine.is_read_only() {
                    engine.checkpoint()?;
                }
                Ok(engine)
            }
        }
    }

    /// Starts an engine with its own transaction service over an empty `store` (or
    /// one whose catalog lists tables but no data files). Use [`Self::open`] to
    /// resume a lakehouse.
    pub fn start(config: EngineConfig, txn: Arc<dyn TransactionService>, store: Arc<dyn LakeStore>) -> CoreResult<Self> {
        let mut registry = TableRegistry::default();
        let mut next_file_id = 1;
        if let Some(manifest) = store.load_catalog()? {
            if manifest.format_version != CATALOG_FORMAT_VERSION {
                return Err(CoreError::Storage(format!(
                    "catalog format version {} is not supported (expected {CATALOG_FORMAT_VERSION})",
                    manifest.format_version
                )));
            }
            if manifest.tables.iter().any(|t| !t.files.is_empty()) {
                return Err(CoreError::Storage(
                    "the data dir already holds data files: open it with recovery (Engine::open) instead".into(),
                ));
            }
            for entry in manifest.tables {
                registry.by_name.insert(entry.schema.name().to_string(), entry.id);
                registry.tables.push(Arc::new(TableRuntime::new(entry.id, entry.schema)));
            }
            next_file_id = manifest.next_file_id;
        }
        let state = RecoveredState {
            checkpoint_ts: Ts(0),
            shards: config.shards.max(1),
            registry,
            next_file_id,
            shard_tables: Vec::new(),
            sources: Vec::new(),
            to_flush: Vec::new(),
            report: RecoveryReport { checkpoint_ts: Ts(0), tables: 0, files: 0, rows_scanned: 0, keys: 0, files_given_column_ranges: 0, millis: 0.0 },
        };
        let mut engine = Self::launch(config, txn, store, Some(state))?;
        engine.recovery = None;
        Ok(engine)
    }

    fn launch(
        config: EngineConfig,
        txn: Arc<dyn TransactionService>,
        store: Arc<dyn LakeStore>,
        state: Option<RecoveredState>,
    ) -> CoreResult<Self> {
        let mut state = state.unwrap_or_else(|| RecoveredState {
            checkpoint_ts: Ts(0),
            shards: config.shards.max(1),
            registry: TableRegistry::default(),
            next_file_id: 1,
            shard_tables: Vec::new(),
            sources: Vec::new(),
            to_flush: Vec::new(),
            report: RecoveryReport { checkpoint_ts: Ts(0), tables: 0, files: 0, rows_scanned: 0, keys: 0, files_given_column_ranges: 0, millis: 0.0 },
        });
        // Key ownership depends on the shard count, so a recovered lakehouse keeps it.
        let shards = state.shards;
        let (flush_sender, flush_inbox) = bounded(1024);
        let read_only = !store.writable();
        let shared = Arc::new(EngineShared {
            config: EngineConfig { shards, ..config },
            txn,
            read_only,
            store,
            registry: RwLock::new(std::mem::take(&mut state.registry)),
            next_file_id: AtomicU64::new(state.next_file_id),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            last_flush_error: Mutex::new(None),
            last_checkpoint_error: Mutex::new(None),
            flusher: Mutex::new(Some(flush_sender)),
            catalog_write: Mutex::new(()),
            checkpoint_write: Mutex::new(()),
            checkpoint_segments: Mutex::new(Default::default()),
            retired: Mutex::new(Vec::new()),
            checkpoint_started: AtomicU64::new(0),
            checkpoint_seq: AtomicU64::new(0),
            catalog_changes: AtomicU64::new(0),
            checkpointed_catalog_changes: AtomicU64::new(0),
            idle_checkpoints_skipped: AtomicU64::new(0),
            visibility_folded_at: Mutex::new(None),
            sources: SourceProgress::restored(&state.sources),
            durable_sources: Mutex::new(state.sources.clone()),
            stats: SharedStats::default(),
        });
        let mut threads = Vec::new();
        let flusher_shared = Arc::clone(&shared);
        threads.push(spawn_background(&shared, "retina-flusher", shared.config.background_nice, move || flusher::run(flusher_shared, flush_inbox))?);
        let mut restored = std::mem::take(&mut state.shard_tables).into_iter();
        let mut shard_inboxes = Vec::with_capacity(shards);
        for index in 0..shards {
            let (sender, inbox) = bounded(64);
            let mut shard = Shard::new(Arc::clone(&shared));
            for table in restored.next().unwrap_or_default() {
                shard.restore(table);
            }
            threads.push(spawn(&shared, &format!("retina-shard-{index}"), move || shard.run(inbox))?);
            shard_inboxes.push(sender);
        }
        // A read-only engine keeps recovered full files in memory, and runs no
        // background work that writes.
        if !read_only {
            for job in std::mem::take(&mut state.to_flush) {
                shared.flush(job);
            }
        }
        let stop_background = Arc::new(AtomicBool::new(false));
        if let Some(interval) = shared.config.gc_interval {
            let (gc_shared, gc_inboxes, stop) =
                (Arc::clone(&shared), shard_inboxes.clone(), Arc::clone(&stop_background));
            threads.push(spawn_background(&shared, "retina-gc", shared.config.background_nice, move || {
                while !stop.load(SeqCst) {
                    sleep_unless_stopped(interval, &stop);
                    collect_garbage(&gc_shared, &gc_inboxes);
                }
            })?);
        }
        if let Some(interval) = shared.config.storage_gc_interval.filter(|_| !read_only) {
            let (gc_shared, gc_inboxes, stop) =
                (Arc::clone(&shared), shard_inboxes.clone(), Arc::clone(&stop_background));
            threads.push(spawn_background(&shared, "retina-storage-gc", shared.config.background_nice, move || {
                while !stop.load(SeqCst) {
                    sleep_unless_stopped(interval, &stop);
                    if stop.load(SeqCst) || gc_shared.has_failed() {
                        break;
                    }
                    let threshold = gc_shared.config.storage_gc_threshold;
                    if let Err(error) = gc_shared.collect_storage_garbage(threshold, &gc_inboxes) {
                        *gc_shared.last_checkpoint_error.lock() = Some(format!("storage GC: {error}"));
                    }
                }
            })?);
        }
        if let Some(interval) = shared.config.checkpoint_interval.filter(|_| !read_only) {
            let (checkpoint_shared, stop) = (Arc::clone(&shared), Arc::clone(&stop_background));
            threads.push(spawn_background(&shared, "retina-checkpoint", shared.config.background_nice, move || {
                while !stop.load(SeqCst) {
                    sleep_unless_stopped(interval, &stop);
                    if stop.load(SeqCst) || checkpoint_shared.has_failed() {
                        break;
                    }
                    // Full files the flusher has queued are written by it, not also
                    // as this checkpoint's segments (which encoded them twice).
                    checkpoint_shared.wait_for_queued_flushes();
                    let Some(result) = checkpoint_shared.checkpoint_unless_idle() else { continue };
                    *checkpoint_shared.last_checkpoint_error.lock() = match result {
                        Ok(report) => report.cleanup_error,
                        Err(error) => Some(error.to_string()),
                    };
                }
            })?);
        }
        Ok(Self {
            shared,
            pending: Mutex::new(PendingBatch {
                per_shard: (0..shards).map(|_| Vec::new()).collect(),
                timestamps: Vec::new(),
                changes: 0,
                last_submitted: state.checkpoint_ts,
            }),
            shard_inboxes,
            threads,
            stop_background,
            recovery: Some((state.report, state.sources)),
        })
    }

}
