//! A source fed through a channel by a producer in the same process: chunks of
//! Debezium JSON lines (the built-in generator's producer thread, the demo's
//! workload). Positions are the lines' numbers, from 1.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::{MessageSource, SourceEvent};
use crate::error::CdcResult;
use crate::position::Position;

/// Encoded lines of many transactions, `\n`-separated, with their row-change count.
pub struct EncodedChunk {
    pub text: String,
    pub row_changes: u64,
}

/// Reads the lines of the chunks a producer sends; the stream ends when the producer
/// drops its sender.
pub struct ChannelSource {
    chunks: Receiver<EncodedChunk>,
    current: String,
    offset: usize,
    messages: u64,
    /// Set after an `Idle`: the next call may block briefly for data.
    reported_idle: bool,
}

impl ChannelSource {
    pub fn new(chunks: Receiver<EncodedChunk>) -> Self {
        Self { chunks, current: String::new(), offset: 0, messages: 0, reported_idle: false }
    }

    /// Drops whatever the producer sent and nobody read (unblocks a producer waiting
    /// on a full channel when the reader goes away).
    pub fn discard_pending(&self) {
        while self.chunks.try_recv().is_ok() {}
    }

    fn take(&mut self, chunk: EncodedChunk) {
        self.current = chunk.text;
        self.offset = 0;
    }
}

impl MessageSource for ChannelSource {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        loop {
            if self.offset < self.current.len() {
                let rest = &self.current[self.offset..];
                let end = rest.find('\n').unwrap_or(rest.len());
                buffer.clear();
                buffer.push_str(&rest[..end]);
                self.offset += end + 1;
                self.messages += 1;
                self.reported_idle = false;
                return Ok(SourceEvent::Message(Position::generated(self.messages)));
            }
            match self.chunks.try_recv() {
                Ok(chunk) => self.take(chunk),
                Err(TryRecvError::Disconnected) => return Ok(SourceEvent::End),
                // Ran dry: say so at once, so the sink sends its partial batch.
                Err(TryRecvError::Empty) if !self.reported_idle => {
                    self.reported_idle = true;
                    return Ok(SourceEvent::Idle);
                }
                Err(TryRecvError::Empty) => match self.chunks.recv_timeout(Duration::from_millis(1)) {
                    Ok(chunk) => self.take(chunk),
                    Err(RecvTimeoutError::Timeout) => return Ok(SourceEvent::Idle),
                    Err(RecvTimeoutError::Disconnected) => return Ok(SourceEvent::End),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_every_chunk_in_order_then_idle_then_end() {
        let (sender, receiver) = crossbeam_channel::unbounded();
        let mut source = ChannelSource::new(receiver);
        let mut buffer = String::new();
        sender.send(EncodedChunk { text: "a\nb\n".into(), row_changes: 2 }).expect("send");
        sender.send(EncodedChunk { text: "c".into(), row_changes: 1 }).expect("send");
        let mut seen = Vec::new();
        while let SourceEvent::Message(position) = source.next(&mut buffer).expect("next") {
            seen.push((position.value, buffer.clone()));
        }
        assert_eq!(seen, vec![(1, "a".to_string()), (2, "b".to_string()), (3, "c".to_string())]);
        drop(sender);
        assert_eq!(source.next(&mut buffer).expect("next"), SourceEvent::End);
    }
}
