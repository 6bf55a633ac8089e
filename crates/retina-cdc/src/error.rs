//! Errors of the CDC sink. Every variant names where in the stream it happened, and
//! the table and field when there is one, because an operator fixing a bad stream
//! needs to find the message.

use crate::position::Position;

pub type CdcResult<T> = Result<T, CdcError>;

/// What went wrong with one message's content: the message cannot be turned into row
/// changes. These are the errors `--dead-letter` may divert instead of stopping.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed JSON: {0}")]
    MalformedJson(String),

    #[error("field {field}: missing")]
    MissingField { field: String },

    #[error("field {field}: expected {expected}, got {actual}")]
    MistypedField { field: String, expected: &'static str, actual: String },

    #[error("field {field}: unknown Debezium type {type_name}")]
    UnknownType { field: String, type_name: String },

    #[error("field {field}: unknown op {op:?}")]
    UnknownOp { field: String, op: String },

    #[error("field {field}: {reason}")]
    BadValue { field: String, reason: String },

    /// A change event without a `source` block (some captures drop it), so without
    /// the name of its table.
    #[error("field source: missing, so the message names no table; for a file of one table's changes pass --table NAME (source URI option table=NAME)")]
    NoSource,

    /// Debezium or Kafka Connect output that is not a row change (a schema change
    /// event, a heartbeat, a flattened row…): what it is and what to change.
    #[error("not a row change event: {0}")]
    NotAChangeEvent(String),

    /// A change event printed in Avro's JSON encoding (unions as `{"string": …}`).
    #[error(
        "field {field}: {{\"string\": …}} is how Avro's JSON encoding writes a union (kafka-avro-console-consumer's \
         output); Retina reads Debezium JSON as Kafka Connect's JsonConverter writes it"
    )]
    AvroJson { field: String },
}

impl DecodeError {
    pub(crate) fn missing(field: impl Into<String>) -> Self {
        Self::MissingField { field: field.into() }
    }

    pub(crate) fn mistyped(field: impl Into<String>, expected: &'static str, actual: impl Into<String>) -> Self {
        Self::MistypedField { field: field.into(), expected, actual: actual.into() }
    }

    pub(crate) fn bad_value(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::BadValue { field: field.into(), reason: reason.into() }
    }

    /// The same error with `prefix.` in front of the field name (e.g. `after.`).
    pub(crate) fn within(self, prefix: &str) -> Self {
        let join = |field: String| format!("{prefix}.{field}");
        match self {
            Self::MissingField { field } => Self::MissingField { field: join(field) },
            Self::MistypedField { field, expected, actual } => Self::MistypedField { field: join(field), expected, actual },
            Self::UnknownType { field, type_name } => Self::UnknownType { field: join(field), type_name },
            Self::UnknownOp { field, op } => Self::UnknownOp { field: join(field), op },
            Self::BadValue { field, reason } => Self::BadValue { field: join(field), reason },
            other @ (Self::MalformedJson(_) | Self::NoSource | Self::NotAChangeEvent(_) | Self::AvroJson { .. }) => other,
        }
    }
}

/// Errors of the sink and its sources.
#[derive(Debug, thiserror::Error)]
pub enum CdcError {
    /// A message that cannot be decoded (dead-letterable).
    #[error("{position}{}: {error}", table_suffix(.table))]
    Decode { position: Position, table: Option<String>, error: DecodeError },

    /// The stream's transaction structure is broken at this message (dead-letterable):
    /// END without BEGIN, an event count that does not match, a total_order gap, ...
    #[error("{position}: transaction {transaction}: {reason}")]
    Transaction { position: Position, transaction: String, reason: String },

    /// The table's definition does not fit this message (dead-letterable).
    #[error("{position}: table {table}, column {column}: {reason}")]
    Schema { position: Position, table: String, column: String, reason: String },

    /// An update whose after-image lacks a column's value (Debezium's placeholder for
    /// an unchanged TOAST value) where no previous value can be found for it. The
    /// placeholder is never stored, nor NULL or a default instead.
    #[error("{position}: table {table}, column {column}, key {key}: {reason}")]
    UnavailableValue { position: Position, table: String, column: String, key: String, reason: String },

    /// No primary key is known for a table that needs one.
    #[error("{position}: table {table}: {reason}")]
    NoPrimaryKey { position: Position, table: String, reason: String },

    /// The stream skips or reorders messages in a way that cannot be repaired.
    #[error("{position}: {reason}")]
    Gap { position: Position, reason: String },

    /// Applying a transaction failed in the engine (e.g. a delete of a missing key):
    /// the engine's error in the source's terms, `detail` adding the key's values,
    /// where the transaction ends and what to do.
    #[error("{position}: source transaction {transaction}{}: {source}{detail}", table_suffix(.table))]
    Apply { position: Position, transaction: String, table: Option<String>, source: Box<retina_core::CoreError>, detail: String },

    #[error("engine: {0}")]
    Engine(#[from] retina_core::CoreError),

    #[error("source {source_name}: {reason}")]
    Source { source_name: String, reason: String },

    #[error("invalid source URI {uri:?}: {reason}")]
    InvalidUri { uri: String, reason: String },

    #[error("invalid option: {0}")]
    InvalidOption(String),

    #[error("dead-letter file {path}: {reason}")]
    DeadLetter { path: String, reason: String },

    /// An error at a message whose transport position means little to a user (a
    /// Kafka source's message number), with where the message really is.
    #[error("{location}: {error}")]
    Located { location: String, error: Box<CdcError> },
}

fn table_suffix(table: &Option<String>) -> String {
    table.as_ref().map(|t| format!(", table {t}")).unwrap_or_default()
}

impl CdcError {
    /// The message the error is at, when it names one.
    pub fn position(&self) -> Option<Position> {
        match self {
            Self::Decode { position, .. }
            | Self::Transaction { position, .. }
            | Self::Schema { position, .. }
            | Self::UnavailableValue { position, .. }
            | Self::NoPrimaryKey { position, .. }
            | Self::Gap { position, .. }
            | Self::Apply { position, .. } => Some(*position),
            _ => None,
        }
    }

    /// Whether `--dead-letter` may divert the offending message(s) and continue.
    pub fn is_dead_letterable(&self) -> bool {
        matches!(
            self,
            Self::Decode { .. } | Self::Transaction { .. } | Self::Schema { .. } | Self::NoPrimaryKey { .. } | Self::UnavailableValue { .. }
        )
    }
}
