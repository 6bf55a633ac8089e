//! Where messages come from. Every source yields Debezium JSON messages with a
//! strictly increasing transport position, says when it has nothing more for now
//! (so the sink can send its partial batch) and when a finite stream ended, and is
//! told what a checkpoint made durable so it can acknowledge it.

pub mod channel;
pub mod generator;
pub mod lines;
pub mod nats;
pub mod uri;

use retina_core::TableSchema;

use crate::error::CdcResult;
use crate::position::{Position, SinkPosition};

/// What [`MessageSource::next`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum SourceEvent {
    /// A message is in the caller's buffer.
    Message(Position),
    /// Nothing is available right now.
    Idle,
    /// The (finite) stream ended.
    End,
}

/// A stream of Debezium JSON messages.
pub trait MessageSource {
    /// Fills `buffer` with the next message (replacing its content).
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent>;

    /// Everything up to `durable` is held by a saved checkpoint: a source with
    /// acknowledgements may now acknowledge it (let the broker or database discard
    /// it). Never called with a position that is merely visible: a crash recovers to
    /// the latest checkpoint, and what comes after it must be delivered again.
    /// Acknowledging less than asked is always safe (the sink drops redeliveries).
    fn acknowledge(&mut self, _durable: SinkPosition) -> CdcResult<()> {
        Ok(())
    }

    /// Tables the source's messages need but do not describe (schemaless streams of a
    /// known workload); created before replay when absent.
    fn declared_tables(&self) -> Vec<TableSchema> {
        Vec::new()
    }
}
