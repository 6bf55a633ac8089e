//! Where a message sits in its stream (transport position) and where its transaction
//! sits in the source database's log (source order), and how both are recorded with
//! the engine so a restart resumes exactly once.

use std::fmt;

/// The kind of transport position a source reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionKind {
    /// 1-based line of a JSON-lines file or of stdin.
    Line,
    /// JetStream stream sequence.
    StreamSequence,
    /// Message number of the built-in generator.
    Generated,
    /// Sequence number of the messages a Kafka source handed out, across restarts
    /// (its real position is the per-partition offsets in [`SinkPosition::offsets`]).
    KafkaMessage,
}

/// A message's transport position. Invariant: strictly increasing within a source
/// (redeliveries repeat an earlier one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub kind: PositionKind,
    pub value: u64,
}

impl Position {
    pub fn line(value: u64) -> Self {
        Self { kind: PositionKind::Line, value }
    }

    pub fn stream_sequence(value: u64) -> Self {
        Self { kind: PositionKind::StreamSequence, value }
    }

    pub fn generated(value: u64) -> Self {
        Self { kind: PositionKind::Generated, value }
    }

    pub fn kafka(value: u64) -> Self {
        Self { kind: PositionKind::KafkaMessage, value }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PositionKind::Line => write!(f, "line {}", self.value),
            PositionKind::StreamSequence => write!(f, "stream sequence {}", self.value),
            PositionKind::Generated => write!(f, "generated message {}", self.value),
            PositionKind::KafkaMessage => write!(f, "kafka message {}", self.value),
        }
    }
}

/// A transaction's place in the source database's commit order, when the connector
/// gives one that is monotone in stream order: PostgreSQL's `sequence`
/// (`[last commit LSN, LSN]`) or MySQL's binlog (file number, position, row).
///
/// Plain PostgreSQL change LSNs are *not* monotone across transactions (a transaction
/// that started earlier can commit later), so they are never used for ordering: a
/// wrong order would drop real transactions as "duplicates".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceOrder(pub u64, pub u64, pub u64);

impl fmt::Display for SourceOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.0, self.1, self.2)
    }
}

/// What the sink records with each mirror transaction (`Engine::submit_from`): the
/// transport position of the transaction's last message, its source order, and for
/// a partitioned transport (Kafka) every partition's resume offset. Once the
/// transaction is visible this is the point a restart resumes after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkPosition {
    pub transport: u64,
    pub order: Option<SourceOrder>,
    /// Opaque to the sink, written by the source; has no spaces.
    pub offsets: Option<String>,
}

impl SinkPosition {
    /// The text stored in the engine: `transport=N[ order=A/B/C][ offsets=…]`.
    pub fn encode(&self) -> String {
        let mut text = format!("transport={}", self.transport);
        if let Some(order) = self.order {
            text.push_str(&format!(" order={order}"));
        }
        if let Some(offsets) = &self.offsets {
            text.push_str(" offsets=");
            text.push_str(offsets);
        }
        text
    }

    /// Parses [`Self::encode`]'s text; `None` for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split(' ');
        let transport = parts.next()?.strip_prefix("transport=")?.parse().ok()?;
        let mut position = Self { transport, order: None, offsets: None };
        let mut next = parts.next();
        if let Some(order) = next.and_then(|part| part.strip_prefix("order=")) {
            let mut numbers = order.split('/').map(|n| n.parse::<u64>());
            let order = SourceOrder(numbers.next()?.ok()?, numbers.next()?.ok()?, numbers.next()?.ok()?);
            if numbers.next().is_some() {
                return None;
            }
            position.order = Some(order);
            next = parts.next();
        }
        if let Some(part) = next {
            position.offsets = Some(part.strip_prefix("offsets=")?.to_string());
        }
        if parts.next().is_some() {
            return None;
        }
        Some(position)
    }
}

/// Options that change how a source connects, paces or reacts, not which messages it
/// reads: leaving them out of the name positions are recorded under lets a user
/// change them (follow an error's advice to pass `allow_retention_gap=true`, rotate a
/// password, tune `fetch_wait_ms=`) and resume where the mirror stands, instead of
/// starting a new mirror of the same stream.
const NOT_IDENTITY: [&str; 13] = [
    "on_absent_row",
    "tls",
    "tls_ca",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "group",
    "commit_offsets",
    "fetch_wait_ms",
    "max_partition_fetch_bytes",
    "transaction_timeout_s",
    "memory_budget_mb",
    "allow_retention_gap",
];

/// The name a source's positions are recorded under: its URI without the options in
/// [`NOT_IDENTITY`], the others as given (the name metrics and `retina.sources` show). (Data dirs written before this
/// recorded the whole redacted URI: the sink looks under that name too.)
pub fn position_key(uri: &str) -> String {
    let split = if uri.starts_with("file:") { uri.rsplit_once('?') } else { uri.split_once('?') };
    let Some((base, query)) = split else { return uri.to_string() };
    let kept: Vec<&str> = query.split('&').filter(|pair| !pair.is_empty()).filter(|pair| !NOT_IDENTITY.contains(&pair.split_once('=').map_or(*pair, |(k, _)| k))).collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_keyed_by_what_a_source_reads_not_how() {
        assert_eq!(position_key("kafka://b:9092/srv?allow_retention_gap=true&fetch_wait_ms=5&sasl_password=x"), "kafka://b:9092/srv");
        assert_eq!(position_key("kafka://b:9092/srv?max_partition_fetch_bytes=1048576"), "kafka://b:9092/srv");
        assert_eq!(position_key("kafka://b:9092/srv?tls=true&topics=srv.a&table=t"), "kafka://b:9092/srv?topics=srv.a&table=t");
        assert_eq!(position_key("generator:chbench?rate=3000&base_rows=5000"), "generator:chbench?rate=3000&base_rows=5000");
        assert_ne!(position_key("kafka://b:9092/srv?topics=srv.a"), position_key("kafka://b:9092/srv?topics=srv.b"));
        assert_eq!(position_key("nats://h:4222/cdc?durable=d1&on_absent_row=upsert"), "nats://h:4222/cdc?durable=d1");
        assert_eq!(position_key("file:/tmp/x.jsonl?on_absent_row=upsert"), "file:/tmp/x.jsonl");
        assert_eq!(position_key("file:/tmp/x.jsonl"), "file:/tmp/x.jsonl");
        assert_eq!(position_key("-"), "-");
    }


    #[test]
    fn sink_position_round_trips_and_rejects_garbage() {
        for position in [
            SinkPosition { transport: 7, order: None, offsets: None },
            SinkPosition { transport: 0, order: Some(SourceOrder(1, u64::MAX, 3)), offsets: None },
            SinkPosition { transport: 9, order: None, offsets: Some("t/0=5+7,u/1=0".into()) },
            SinkPosition { transport: 9, order: Some(SourceOrder(1, 2, 3)), offsets: Some("t/0=5".into()) },
        ] {
            assert_eq!(SinkPosition::decode(&position.encode()), Some(position));
        }
        for bad in ["", "transport=x", "transport=1 order=1/2", "transport=1 order=1/2/3/4", "line 5", "transport=1 x", "transport=1 offsets=a x"] {
            assert_eq!(SinkPosition::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn positions_say_what_they_count() {
        assert_eq!(Position::line(3).to_string(), "line 3");
        assert_eq!(Position::stream_sequence(9).to_string(), "stream sequence 9");
    }
}
