//! `nats://HOST:PORT/STREAM`: Debezium JSON messages in a JetStream stream, read by a
//! durable pull consumer with cumulative acknowledgement (`AckPolicy::All`). A message
//! is acknowledged only once a checkpoint holds a transaction at or after it, so a
//! crash (which recovers to the latest checkpoint) gets everything after that
//! checkpoint redelivered; redeliveries of what was already handed to the sink are
//! dropped by stream sequence, and a jump in the stream sequence (lost messages) is an
//! error.

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::message::Acker;
use futures::StreamExt;

use super::{MessageSource, SourceEvent};
use crate::debezium::elision::NotUtf8;
use crate::debezium::{Line, SchemaElider};
use crate::error::{CdcError, CdcResult};
use crate::position::{Position, SinkPosition};

const FETCH_BATCH: usize = 1024;

/// Acknowledgements wait for a checkpoint (seconds: millions of messages at full
/// speed), so keeping every handed-out message's acker costs memory in proportion to
/// the rate. Under `AckPolicy::All` one acker covers everything before it, and
/// acknowledging less than what is durable is safe (the sink drops redeliveries), so
/// only the ackers of the newest `RECENT_ACKERS` messages are all kept (the end of a
/// stream is acknowledged exactly), and of older ones every `ACK_STRIDE`-th: at most
/// `ACK_STRIDE - 1` more messages are redelivered after a crash.
const RECENT_ACKERS: usize = 4096;
const ACK_STRIDE: u64 = 256;

pub struct NatsSource {
    name: String,
    runtime: tokio::runtime::Runtime,
    consumer: PullConsumer,
    /// Fetched, not yet handed out: (stream sequence, payload, acker).
    buffered: VecDeque<(u64, Vec<u8>, Acker)>,
    /// Handed out, not yet acknowledged, in sequence order: the newest
    /// [`RECENT_ACKERS`] messages ...
    unacknowledged: VecDeque<(u64, Acker)>,
    /// ... and, before them, every [`ACK_STRIDE`]-th.
    sparse_unacknowledged: VecDeque<(u64, Acker)>,
    last_sequence: Option<u64>,
    reported_idle: bool,
}

impl NatsSource {
    /// Connects and creates (or reuses) the durable consumer `durable` on `stream`.
    pub fn connect(server: &str, stream: &str, durable: &str) -> CdcResult<Self> {
        let name = crate::source::uri::redacted(&format!("nats://{server}/{stream}"));
        let error = |reason: String| CdcError::Source { source_name: name.clone(), reason };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| error(format!("cannot start the I/O runtime: {e}")))?;
        let consumer = runtime.block_on(async {
            let client = async_nats::connect(server).await.map_err(|e| error(format!("cannot connect: {e}")))?;
            let jetstream = async_nats::jetstream::new(client);
            let stream = jetstream.get_stream(stream).await.map_err(|e| error(format!("no stream: {e}")))?;
            // Messages a previous session received but never acknowledged would be
            // redelivered only after ack_wait, *after* newer ones: the sink needs them
            // in order, so such a consumer is recreated to start right after its ack floor.
            let mut deliver_policy = DeliverPolicy::All;
            if let Ok(mut existing) = stream.get_consumer::<PullConfig>(durable).await {
                let info = existing.info().await.map_err(|e| error(format!("consumer {durable}: {e}")))?;
                if info.num_ack_pending > 0 {
                    let start_sequence = info.ack_floor.stream_sequence + 1;
                    stream.delete_consumer(durable).await.map_err(|e| error(format!("consumer {durable}: {e}")))?;
                    deliver_policy = DeliverPolicy::ByStartSequence { start_sequence };
                }
            }
            stream
                .get_or_create_consumer(
                    durable,
                    PullConfig {
                        durable_name: Some(durable.to_string()),
                        deliver_policy,
                        ack_policy: AckPolicy::All,
                        ack_wait: Duration::from_secs(60),
                        max_ack_pending: 1_000_000,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| error(format!("cannot create consumer {durable}: {e}")))
        })?;
        Ok(Self {
            name,
            runtime,
            consumer,
            buffered: VecDeque::new(),
            unacknowledged: VecDeque::new(),
            sparse_unacknowledged: VecDeque::new(),
            last_sequence: None,
            reported_idle: false,
        })
    }

    fn error(&self, reason: String) -> CdcError {
        CdcError::Source { source_name: self.name.clone(), reason }
    }

    /// Fetches what is available; after an idle report, waits up to 100 ms for more.
    fn fetch(&mut self) -> CdcResult<()> {
        let wait = self.reported_idle;
        let consumer = &self.consumer;
        let fetched = self.runtime.block_on(async {
            let mut batch = if wait {
                consumer.batch().max_messages(FETCH_BATCH).expires(Duration::from_millis(100)).messages().await
            } else {
                consumer.fetch().max_messages(FETCH_BATCH).messages().await
            }
            .map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            while let Some(message) = batch.next().await {
                let message = message.map_err(|e| e.to_string())?;
                let sequence = message.info().map_err(|e| e.to_string())?.stream_sequence;
                let (message, acker) = message.split();
                out.push((sequence, message.payload.to_vec(), acker));
            }
            Ok::<_, String>(out)
        });
        let fetched = fetched.map_err(|e| self.error(format!("fetch failed: {e}")))?;
        self.buffered.extend(fetched);
        Ok(())
    }
}

impl MessageSource for NatsSource {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        super::next_whole(buffer, |line, elider| self.next_line(line, elider))
    }

    /// The message's known schemas left out as for a file's lines; a payload that is
    /// not UTF-8 stops the source (never read with replacement characters).
    fn next_line(&mut self, line: &mut Line, elider: &mut SchemaElider) -> CdcResult<SourceEvent> {
        loop {
            if self.buffered.is_empty() {
                self.fetch()?;
                if self.buffered.is_empty() {
                    self.reported_idle = true;
                    return Ok(SourceEvent::Idle);
                }
            }
            let Some((sequence, payload, acker)) = self.buffered.pop_front() else { continue };
            if let Some(last) = self.last_sequence {
                if sequence <= last {
                    continue; // a redelivery of something already handed to the sink
                }
                if sequence != last + 1 {
                    return Err(CdcError::Gap {
                        position: Position::stream_sequence(sequence),
                        reason: format!(
                            "stream sequence jumped from {last} to {sequence}: messages {}..{} are missing",
                            last + 1,
                            sequence - 1
                        ),
                    });
                }
            }
            elider.fill(line, &payload).map_err(|NotUtf8 { valid_up_to }| {
                self.error(format!("the message at stream sequence {sequence} is not valid UTF-8 (byte {} of the message)", valid_up_to + 1))
            })?;
            self.last_sequence = Some(sequence);
            self.reported_idle = false;
            self.unacknowledged.push_back((sequence, acker));
            if self.unacknowledged.len() > RECENT_ACKERS {
                if let Some(older) = self.unacknowledged.pop_front().filter(|(sequence, _)| sequence % ACK_STRIDE == 0) {
                    self.sparse_unacknowledged.push_back(older);
                }
            }
            return Ok(SourceEvent::Message(Position::stream_sequence(sequence)));
        }
    }

    fn acknowledge(&mut self, durable: &SinkPosition) -> CdcResult<()> {
        let mut newest = None;
        for queue in [&mut self.sparse_unacknowledged, &mut self.unacknowledged] {
            while queue.front().is_some_and(|(sequence, _)| *sequence <= durable.transport) {
                newest = queue.pop_front();
            }
        }
        if let Some((sequence, acker)) = newest {
            // AckPolicy::All: acknowledging `sequence` acknowledges everything before it.
            self.runtime
                .block_on(acker.double_ack())
                .map_err(|e| self.error(format!("acknowledging stream sequence {sequence} failed: {e}")))?;
        }
        Ok(())
    }
}
