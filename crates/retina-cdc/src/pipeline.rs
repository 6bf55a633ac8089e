//! The decode stage: a thread that decodes batches of lines (envelope, images, typed
//! row changes of already known tables) while the sink thread rebuilds transactions
//! and routes them to the shards. Decoding is the larger half of the sink's work per
//! message, so overlapping it with routing and replay is what lets end-to-end
//! throughput approach the engine's own.
//!
//! Order is kept: batches go to the workers round-robin and are taken back in the
//! same round-robin order, each worker answering over its own FIFO channel. Lines a
//! worker cannot prepare (errors, unknown tables or schemas) come back unprepared and
//! the sink handles them itself.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};
use parking_lot::RwLock;

use crate::debezium::Line;
use crate::error::{CdcError, CdcResult};
use crate::position::Position;
use crate::sink::prepare::{prepare_known, Prepared};
use crate::sink::tables::KnownBindings;

/// Lines per batch handed to the worker.
pub const BATCH_LINES: usize = 256;

pub type LineBatch = Vec<(Position, Line)>;
pub type PreparedBatch = Vec<(Position, Line, Option<Prepared>)>;

/// Decode workers. Two: decoding is about half of the CPU per message end to end, and
/// one worker left the second core partly idle while the sink thread and the shards
/// waited for it (measured: 1.45 of 2 cores busy with one worker).
pub const DECODE_WORKERS: usize = 2;

/// Batches sent and not yet taken back at most: one decoding and one queued per
/// worker. Measured on `retina ingest` of the envelope stream (interleaved rounds on
/// one binary): waiting for the oldest batch as soon as more than one per worker was
/// out left a worker idle while the sink thread applied and read; two per worker,
/// taken back as soon as decoded, ran ahead in 6 of 8 rounds (up to +20%), three
/// per worker gained nothing more and keeps more lines out of cache.
pub const MAX_IN_FLIGHT: usize = 2 * DECODE_WORKERS;

/// One decode thread and its two channels.
struct Worker {
    inbox: Option<Sender<LineBatch>>,
    outbox: Receiver<PreparedBatch>,
    thread: Option<JoinHandle<()>>,
}

/// Invariant: `in_flight` batches were sent and not yet received; batch `k` (counting
/// from the first ever sent) went to worker `k % workers.len()`, so receiving from
/// `next_receive` onwards in the same rotation returns them in the order sent.
pub struct DecodeStage {
    workers: Vec<Worker>,
    next_send: usize,
    next_receive: usize,
    in_flight: usize,
}

impl DecodeStage {
    pub fn start(known: Arc<RwLock<KnownBindings>>) -> CdcResult<Self> {
        let mut workers = Vec::with_capacity(DECODE_WORKERS);
        for index in 0..DECODE_WORKERS {
            let (inbox, batches) = bounded::<LineBatch>(2);
            let (results, outbox) = bounded::<PreparedBatch>(2);
            let known = Arc::clone(&known);
            let thread = std::thread::Builder::new()
                .name(format!("retina-cdc-decode-{index}"))
                .spawn(move || {
                    for batch in batches {
                        let prepared = batch
                            .into_iter()
                            .map(|(position, line)| {
                                let prepared = prepare_known(&line, position, &known);
                                (position, line, prepared)
                            })
                            .collect();
                        if results.send(prepared).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| CdcError::InvalidOption(format!("cannot start a decode thread: {e}")))?;
            workers.push(Worker { inbox: Some(inbox), outbox, thread: Some(thread) });
        }
        Ok(Self { workers, next_send: 0, next_receive: 0, in_flight: 0 })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub fn send(&mut self, batch: LineBatch) -> CdcResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let worker = &self.workers[self.next_send];
        let sender = worker.inbox.as_ref().expect("the sender lives until drop");
        sender.send(batch).map_err(|_| CdcError::InvalidOption("a decode thread exited".into()))?;
        self.next_send = (self.next_send + 1) % self.workers.len();
        self.in_flight += 1;
        Ok(())
    }

    /// The oldest batch in flight (blocking), `None` when none is.
    pub fn receive(&mut self) -> CdcResult<Option<PreparedBatch>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let worker = &self.workers[self.next_receive];
        let batch = worker.outbox.recv().map_err(|_| CdcError::InvalidOption("a decode thread exited".into()))?;
        Ok(Some(self.received(batch)))
    }

    /// The oldest batch in flight if it is decoded already, without waiting.
    pub fn try_receive(&mut self) -> CdcResult<Option<PreparedBatch>> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        match self.workers[self.next_receive].outbox.try_recv() {
            Ok(batch) => Ok(Some(self.received(batch))),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(CdcError::InvalidOption("a decode thread exited".into())),
        }
    }

    fn received(&mut self, batch: PreparedBatch) -> PreparedBatch {
        self.next_receive = (self.next_receive + 1) % self.workers.len();
        self.in_flight -= 1;
        batch
    }
}

impl Drop for DecodeStage {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            worker.inbox.take();
        }
        for worker in &mut self.workers {
            // Unblock a worker waiting to hand back a batch nobody will read.
            if let Some(thread) = worker.thread.take() {
                while !thread.is_finished() {
                    while worker.outbox.try_recv().is_ok() {}
                    std::thread::yield_now();
                }
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches come back in the order sent whichever worker decoded them, also when
    /// some are received late (several in flight).
    #[test]
    fn batches_come_back_in_the_order_sent() {
        let mut stage = DecodeStage::start(Arc::new(RwLock::new(KnownBindings::default()))).expect("stage");
        let batch = |n: u64| -> LineBatch { (0..3).map(|i| (Position::line(n * 10 + i), Line::plain(format!("not json {n}")))).collect() };
        let mut received = Vec::new();
        for n in 0..20 {
            stage.send(batch(n)).expect("send");
            if n % 3 == 2 {
                while stage.in_flight() > 1 {
                    received.push(stage.receive().expect("receive").expect("a batch"));
                }
            }
        }
        while let Some(prepared) = stage.receive().expect("receive") {
            received.push(prepared);
        }
        let firsts: Vec<u64> = received.iter().map(|b| b[0].0.value).collect();
        assert_eq!(firsts, (0..20).map(|n| n * 10).collect::<Vec<_>>());
        // Undecodable lines come back unprepared, for the sink to report.
        assert!(received.iter().flatten().all(|(_, _, prepared)| prepared.is_none()));
    }

    /// Taking back without waiting returns nothing until the oldest batch is decoded,
    /// then the batches in the order sent, even when a later one was decoded first.
    #[test]
    fn taking_back_without_waiting_keeps_the_order() {
        let mut stage = DecodeStage::start(Arc::new(RwLock::new(KnownBindings::default()))).expect("stage");
        assert!(stage.try_receive().expect("try").is_none(), "nothing is in flight");
        let batch = |n: u64| -> LineBatch { vec![(Position::line(n), Line::plain(format!("not json {n}")))] };
        for n in 0..MAX_IN_FLIGHT as u64 {
            stage.send(batch(n)).expect("send");
        }
        let mut received = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while received.len() < MAX_IN_FLIGHT {
            assert!(std::time::Instant::now() < deadline, "the workers did not answer");
            match stage.try_receive().expect("try") {
                Some(prepared) => received.push(prepared[0].0.value),
                None => std::thread::yield_now(),
            }
        }
        assert_eq!(received, (0..MAX_IN_FLIGHT as u64).collect::<Vec<_>>());
        assert_eq!(stage.in_flight(), 0);
        assert!(stage.try_receive().expect("try").is_none());
    }
}
