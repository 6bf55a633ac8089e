//! Turning an engine failure back into the source's terms. The engine reports a failed
//! mirror transaction by its ts (and names the table and key); the sink knows which
//! source transaction (positions, id) got that ts.

use crate::error::CdcError;
use crate::position::Position;
use retina_core::Ts;

/// What the sink remembers of a submitted, not yet visible transaction.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub ts: Ts,
    pub id: String,
    pub first: Position,
    pub last: Position,
}

/// Maps an engine error to the source transaction it happened in, naming the table when
/// the message has it.
pub fn explain(error: retina_core::CoreError, in_flight: &[InFlight]) -> CdcError {
    let message = error.to_string();
    let Some(ts) = number_after(&message, "at ts ") else {
        return CdcError::Engine(error);
    };
    let Some(transaction) = in_flight.iter().find(|t| t.ts.0 == ts) else {
        return CdcError::Engine(error);
    };
    let table = text_between(&message, "table ", ":");
    let mut detail = String::new();
    if message.contains("that has no live row") {
        detail.push_str(ABSENT_ROW_HINT);
    }
    if transaction.first != transaction.last {
        // The transaction spans several messages: name where it starts and ends.
        detail.push_str(&format!("; the transaction ends at {}", transaction.last));
    }
    CdcError::Apply { position: transaction.first, transaction: transaction.id.clone(), table, source: Box::new(error), detail }
}

/// What to do about an update or delete of a row the mirror does not have.
const ABSENT_ROW_HINT: &str = "; if the stream did not start with a snapshot of the table (or is an excerpt), \
    pass --on-absent-row upsert (source URI option on_absent_row=upsert) to apply such updates as inserts and ignore such deletes";

fn number_after(text: &str, marker: &str) -> Option<u64> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn text_between(text: &str, start: &str, end: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let rest = &text[from..];
    Some(rest[..rest.find(end).unwrap_or(rest.len())].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_numbers_and_text_in_engine_messages() {
        let message = "replay engine stopped: table public.t: delete at ts 17 of key id=4 that has no live row";
        assert_eq!(number_after(message, "at ts "), Some(17));
        assert_eq!(text_between(message, "table ", ":").as_deref(), Some("public.t"));
    }
}
