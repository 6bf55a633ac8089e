//! The decode stage: threads that decode batches of lines (envelope, images, typed
//! row changes of already known tables) while the sink thread rebuilds transactions
//! and routes them to the shards. Decoding is the larger half of the sink's work per
//! message, so overlapping it with routing and replay is what lets end-to-end
//! throughput approach the engine's own.
//!
//! Order is kept: every batch is numbered as it is sent, any idle worker takes the
//! next one from one shared queue, and batches decoded ahead of an older one wait
//! in the stage until it is taken back. (Batches dealt to the workers in turn left
//! one worker idle whenever the other was descheduled holding the oldest batch.)
//! Lines a worker cannot prepare (errors, unknown tables or schemas) come back
//! unprepared and the sink handles them itself.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};
use parking_lot::RwLock;

use crate::debezium::Line;
use crate::error::{CdcError, CdcResult};
use crate::position::Position;
use crate::sink::prepare::{prepare_known, Prepared};
use crate::sink::tables::KnownBindings;

/// Lines per batch handed to a worker.
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

/// Invariant: the batches numbered `next_receive .. next_receive + decoded.len()` were
/// sent and not taken back; `decoded[i]` holds batch `next_receive + i` once a worker
/// has answered for it. At most [`MAX_IN_FLIGHT`] are in flight, so neither channel (each
/// that deep) ever blocks a worker.
pub struct DecodeStage {
    inbox: Option<Sender<(u64, LineBatch)>>,
    outbox: Receiver<(u64, PreparedBatch)>,
    threads: Vec<JoinHandle<()>>,
    decoded: VecDeque<Option<PreparedBatch>>,
    next_receive: u64,
}

impl DecodeStage {
    pub fn start(known: Arc<RwLock<KnownBindings>>) -> CdcResult<Self> {
        let (inbox, batches) = bounded::<(u64, LineBatch)>(MAX_IN_FLIGHT);
        let (results, outbox) = bounded::<(u64, PreparedBatch)>(MAX_IN_FLIGHT);
        let mut threads = Vec::with_capacity(DECODE_WORKERS);
        for index in 0..DECODE_WORKERS {
            let (batches, results, known) = (batches.clone(), results.clone(), Arc::clone(&known));
            let thread = std::thread::Builder::new()
                .name(format!("retina-cdc-decode-{index}"))
                .spawn(move || {
                    for (number, batch) in batches {
                        let prepared = batch
                            .into_iter()
                            .map(|(position, line)| {
                                let prepared = prepare_known(&line, position, &known);
                                (position, line, prepared)
                            })
                            .collect();
                        if results.send((number, prepared)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| CdcError::InvalidOption(format!("cannot start a decode thread: {e}")))?;
            threads.push(thread);
        }
        Ok(Self { inbox: Some(inbox), outbox, threads, decoded: VecDeque::new(), next_receive: 0 })
    }

    pub fn in_flight(&self) -> usize {
        self.decoded.len()
    }

    /// Hands `batch` to the workers; the caller keeps at most [`MAX_IN_FLIGHT`] out.
    pub fn send(&mut self, batch: LineBatch) -> CdcResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let inbox = self.inbox.as_ref().ok_or_else(exited)?;
        inbox.send((self.next_receive + self.decoded.len() as u64, batch)).map_err(|_| exited())?;
        self.decoded.push_back(None);
        Ok(())
    }

    /// The oldest batch in flight (blocking), `None` when none is.
    pub fn receive(&mut self) -> CdcResult<Option<PreparedBatch>> {
        while matches!(self.decoded.front(), Some(None)) {
            let (number, batch) = self.outbox.recv().map_err(|_| exited())?;
            self.file(number, batch);
        }
        Ok(self.take_oldest())
    }

    /// The oldest batch in flight if it is decoded already, without waiting.
    pub fn try_receive(&mut self) -> CdcResult<Option<PreparedBatch>> {
        loop {
            match self.outbox.try_recv() {
                Ok((number, batch)) => self.file(number, batch),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Err(exited()),
            }
        }
        Ok(if matches!(self.decoded.front(), Some(Some(_))) { self.take_oldest() } else { None })
    }

    /// Puts a worker's answer in its place.
    fn file(&mut self, number: u64, batch: PreparedBatch) {
        // Numbers come only from `send`, and each batch is answered once.
        let slot = (number - self.next_receive) as usize;
        self.decoded[slot] = Some(batch);
    }

    fn take_oldest(&mut self) -> Option<PreparedBatch> {
        let batch = self.decoded.pop_front()??;
        self.next_receive += 1;
        Some(batch)
    }
}

fn exited() -> CdcError {
    CdcError::InvalidOption("a decode thread exited".into())
}

impl Drop for DecodeStage {
    fn drop(&mut self) {
        self.inbox.take();
        for thread in self.threads.drain(..) {
            // Unblock a worker waiting to hand back a batch nobody will read.
            while !thread.is_finished() {
                while self.outbox.try_recv().is_ok() {}
                std::thread::yield_now();
            }
            let _ = thread.join();
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
