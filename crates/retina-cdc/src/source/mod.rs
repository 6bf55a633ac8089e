//! Where messages come from. Every source yields Debezium JSON messages with a
//! strictly increasing transport position, says when it has nothing more for now
//! (so the sink can send its partial batch) and when a finite stream ended, and is
//! told what a checkpoint made durable so it can acknowledge it.

pub mod channel;
pub mod generator;
pub mod kafka;
pub mod lines;
pub mod nats;
pub mod uri;

use retina_core::{SourceStatus, TableSchema};

use crate::debezium::{Line, SchemaElider};
use crate::error::CdcResult;
use crate::position::{Position, SinkPosition};

/// [`MessageSource::next`] for a source that implements
/// [`MessageSource::next_line`]: `read` fills a line with nothing left out, whose text
/// goes to `buffer`.
pub fn next_whole(buffer: &mut String, read: impl FnOnce(&mut Line, &mut SchemaElider) -> CdcResult<SourceEvent>) -> CdcResult<SourceEvent> {
    let mut line = Line::plain(std::mem::take(buffer));
    let event = read(&mut line, &mut SchemaElider::none());
    *buffer = line.into_text();
    event
}

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
    /// Called once before the first [`Self::next`] with the position recorded for
    /// this source (after recovery): a source that cannot replay from its start seeks
    /// there. The sink drops redelivered messages at or before it either way.
    fn start(&mut self, _recorded: Option<&SinkPosition>) -> CdcResult<()> {
        Ok(())
    }

    /// Fills `buffer` with the next message (replacing its content).
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent>;

    /// Fills `line` with the next message, leaving out the schemas `elider` knows
    /// where it can do so cheaply (a source holding the message's bytes); by default
    /// the message as it is.
    fn next_line(&mut self, line: &mut Line, _elider: &mut SchemaElider) -> CdcResult<SourceEvent> {
        self.next(line.plain_text_mut())
    }

    /// Everything up to `durable` is held by a saved checkpoint: a source with
    /// acknowledgements may now acknowledge it (let the broker or database discard
    /// it). Never called with a position that is merely visible: a crash recovers to
    /// the latest checkpoint, and what comes after it must be delivered again.
    /// Acknowledging less than asked is always safe (the sink drops redeliveries).
    fn acknowledge(&mut self, _durable: &SinkPosition) -> CdcResult<()> {
        Ok(())
    }

    /// After a message that ends a transaction: where the source resumes once it is
    /// applied ([`SinkPosition::offsets`]), for sources whose transport position
    /// alone cannot say (Kafka's partitions).
    fn take_resume_offsets(&mut self) -> Option<String> {
        None
    }

    /// Where a message came from in the source's own terms (topic, partition,
    /// offset), for error messages; `None` when the transport position says it.
    fn locate(&self, _position: Position) -> Option<String> {
        None
    }

    /// Adds what only the source knows (per-partition lag, held transactions) to the
    /// status the driver publishes.
    fn report(&self, _status: &mut SourceStatus) {}

    /// Whether nothing is ready because the source has read everything there is
    /// (a broker answered up to its end), not because answers are still on their
    /// way: a run told to stop at idle stops only when caught up, so a slow broker's
    /// first fetch is not mistaken for the end of the stream.
    fn caught_up(&self) -> bool {
        true
    }

    /// Tables the source's messages need but do not describe (schemaless streams of a
    /// known workload); created before replay when absent.
    fn declared_tables(&self) -> Vec<TableSchema> {
        Vec::new()
    }
}
