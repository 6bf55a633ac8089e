//! The flusher: writes complete virtual files to lake storage under their file id
//! and swaps them into the catalog.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use crossbeam_channel::Receiver;

use crate::replay::shared::EngineShared;
use crate::replay::messages::{FlushJob, FlushMessage};
use crate::catalog::DataFileMeta;
use crate::error::CoreResult;
use crate::table::FlushedFile;
use crate::types::Ts;

/// Attempts per file before the engine is failed (the rows stay in memory meanwhile).
const FLUSH_ATTEMPTS: u32 = 8;

pub(crate) fn run(shared: Arc<EngineShared>, inbox: Receiver<FlushMessage>) {
    for message in inbox {
        match message {
            FlushMessage::Job(job) => flush_with_retries(&shared, &job),
            FlushMessage::Barrier(reply) => {
                let _ = reply.send(());
            }
        }
    }
}

/// How far a flush got. A retry goes on from there: a file already swapped into the
/// table (and perhaps rewritten by storage GC since) is neither written nor swapped
/// in again; only the catalog save is retried.
#[derive(Clone, Copy, PartialEq)]
enum FlushStage {
    Write,
    SaveCatalog,
}

fn flush_with_retries(shared: &EngineShared, job: &FlushJob) {
    let mut backoff = Duration::from_millis(10);
    let mut stage = FlushStage::Write;
    for attempt in 1..=FLUSH_ATTEMPTS {
        match flush(shared, job, &mut stage) {
            Ok(()) => {
                *shared.last_flush_error.lock() = None;
                return;
            }
            Err(error) => {
                let message =
                    format!("flush of file {} of table {} (attempt {attempt}): {error}", job.file.file_id(), job.table.name());
                shared.record_flush_error(message.clone());
                if attempt == FLUSH_ATTEMPTS {
                    shared.fail(message);
                    return;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

fn flush(shared: &EngineShared, job: &FlushJob, stage: &mut FlushStage) -> CoreResult<()> {
    if *stage == FlushStage::Write {
        write_and_swap_in(shared, job)?;
        *stage = FlushStage::SaveCatalog;
    }
    // `return` makes this attempt's catalog save fail (the flush is retried);
    // `panic` is a crash at this step.
    fail::fail_point!("flush::before-catalog", |_| Err(crate::error::failpoint_error(
        "flush::before-catalog",
        "the catalog save failed"
    )));
    shared.save_catalog()?;
    shared.stats.files_flushed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Writes the virtual file to lake storage and swaps it into its table's list.
fn write_and_swap_in(shared: &EngineShared, job: &FlushJob) -> CoreResult<()> {
    let file = &job.file;
    debug_assert!(file.is_complete());
    // Blocks from before a column was added are written in the current layout.
    let schema = job.table.schema();
    let batches = crate::schema_evolution::conform_batches(&schema, &file.blocks())?;
    let stored = shared.store.write_file(&schema, file.file_id(), &batches)?;
    fail::fail_point!("flush::after-write");
    let create_ts_column = schema.create_ts_index();
    let (min_create_ts, max_create_ts) = create_ts_range(&batches, create_ts_column);
    let meta = DataFileMeta {
        file_id: file.file_id(),
        path: stored.path,
        row_count: batches.iter().map(RecordBatch::num_rows).sum::<usize>() as u64,
        first_row_id: file.first_row_id(),
        min_create_ts,
        max_create_ts,
        size_bytes: stored.size_bytes,
        replaces: Vec::new(),
        column_ranges: crate::column_ranges::column_ranges(&schema, &batches),
    };
    let swapped = job.table.replace_with_flushed(file.file_id(), FlushedFile { meta: Arc::new(meta), visibility: Arc::clone(file.visibility()) });
    debug_assert!(swapped, "file {} was flushed twice", file.file_id());
    Ok(())
}

/// Min and max of the `_create_ts` column over `batches` ((0, 0) when empty).
pub(crate) fn create_ts_range(batches: &[RecordBatch], column: usize) -> (Ts, Ts) {
    let mut range: Option<(i64, i64)> = None;
    for batch in batches {
        for &ts in batch.column(column).as_primitive::<Int64Type>().values().iter() {
            range = Some(match range {
                None => (ts, ts),
                Some((lo, hi)) => (lo.min(ts), hi.max(ts)),
            });
        }
    }
    let (lo, hi) = range.unwrap_or((0, 0));
    (Ts(lo as u64), Ts(hi as u64))
}
