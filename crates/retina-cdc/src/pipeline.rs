//! The decode stage: a thread that decodes batches of lines (envelope, images, typed
//! row changes of already known tables) while the sink thread rebuilds transactions
//! and routes them to the shards. Decoding is the larger half of the sink's work per
//! message, so overlapping it with routing and replay is what lets end-to-end
//! throughput approach the engine's own.
//!
//! Order is kept: one worker, FIFO channels. Lines the worker cannot prepare (errors,
//! unknown tables or schemas) come back unprepared and the sink handles them itself.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::RwLock;

use crate::error::{CdcError, CdcResult};
use crate::position::Position;
use crate::sink::prepare::{prepare_known, Prepared};
use crate::sink::tables::KnownBindings;

/// Lines per batch handed to the worker.
pub const BATCH_LINES: usize = 256;

pub type LineBatch = Vec<(Position, String)>;
pub type PreparedBatch = Vec<(Position, String, Option<Prepared>)>;

/// Invariant: `in_flight` batches were sent and not yet received; they come back in
/// the order they were sent.
pub struct DecodeStage {
    to_worker: Option<Sender<LineBatch>>,
    from_worker: Receiver<PreparedBatch>,
    worker: Option<JoinHandle<()>>,
    in_flight: usize,
}

impl DecodeStage {
    pub fn start(known: Arc<RwLock<KnownBindings>>) -> CdcResult<Self> {
        let (to_worker, inbox) = bounded::<LineBatch>(4);
        let (outbox, from_worker) = bounded::<PreparedBatch>(4);
        let worker = std::thread::Builder::new()
            .name("retina-cdc-decode".into())
            .spawn(move || {
                for batch in inbox {
                    let prepared = batch
                        .into_iter()
                        .map(|(position, line)| {
                            let prepared = prepare_known(&line, position, &known);
                            (position, line, prepared)
                        })
                        .collect();
                    if outbox.send(prepared).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| CdcError::InvalidOption(format!("cannot start the decode thread: {e}")))?;
        Ok(Self { to_worker: Some(to_worker), from_worker, worker: Some(worker), in_flight: 0 })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub fn send(&mut self, batch: LineBatch) -> CdcResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let sender = self.to_worker.as_ref().expect("the sender lives until drop");
        sender.send(batch).map_err(|_| CdcError::InvalidOption("the decode thread exited".into()))?;
        self.in_flight += 1;
        Ok(())
    }

    /// The oldest batch in flight (blocking), `None` when none is.
    pub fn receive(&mut self) -> CdcResult<Option<PreparedBatch>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let batch = self.from_worker.recv().map_err(|_| CdcError::InvalidOption("the decode thread exited".into()))?;
        self.in_flight -= 1;
        Ok(Some(batch))
    }
}

impl Drop for DecodeStage {
    fn drop(&mut self) {
        self.to_worker.take();
        // Unblock a worker waiting to hand back a batch nobody will read.
        while self.from_worker.try_recv().is_ok() {}
        if let Some(worker) = self.worker.take() {
            while !worker.is_finished() {
                while self.from_worker.try_recv().is_ok() {}
                std::thread::yield_now();
            }
            let _ = worker.join();
        }
    }
}
