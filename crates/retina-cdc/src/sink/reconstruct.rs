//! Transaction reconstruction (paper §3.3): group change events into source
//! transactions.
//!
//! With transaction metadata, a transaction is the events between its BEGIN and END
//! (matched by id, so transactions may interleave); at END the events are checked
//! against `event_count` and the per-table counts, and put in `total_order` order
//! (repairing reordering; a redelivered copy of an event, which repeats its
//! total_order, is dropped there; a missing order number is an error). Without
//! metadata, consecutive events of one source transaction id form a transaction, or
//! every event is its own (the `--no-transaction-metadata-grouping` choice).
//!
//! With dead letters on, an event that cannot be applied fails its whole transaction
//! ([`Reconstructor::fail`]): the transaction is rejected when it ends, all its
//! messages together, so a run that diverts bad input never applies part of one.

// Keyed by transaction ids, looked up for every event: hashbrown's seeded foldhash
// rather than SipHash (as in the Kafka source's reassembly).
use hashbrown::HashMap;

use crate::debezium::TransactionBlock;
use crate::error::CdcError;
use crate::position::{Position, SourceOrder};

/// How to group events that carry no transaction metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// Consecutive events with the same source transaction id (`txId`, gtid, binlog
    /// position) form one transaction; the default.
    SourceTransaction,
    /// Every event is its own transaction.
    PerEvent,
}

impl std::str::FromStr for Grouping {
    type Err = CdcError;
    fn from_str(text: &str) -> Result<Self, CdcError> {
        match text {
            "source-txid" | "source-transaction" => Ok(Self::SourceTransaction),
            "event" | "per-event" => Ok(Self::PerEvent),
            other => Err(CdcError::InvalidOption(format!(
                "--no-transaction-metadata-grouping {other:?}: expected source-txid or event"
            ))),
        }
    }
}

pub use super::change::PendingChange;
use super::change::pair_key_updates;


/// A complete source transaction, ready to become one mirror transaction.
#[derive(Debug)]
pub struct CompletedTransaction {
    pub id: String,
    pub changes: Vec<PendingChange>,
    pub first: Position,
    pub last: Position,
    /// The source order of its last event, when the connector gives one.
    pub order: Option<SourceOrder>,
}

/// A transaction that cannot be completed, with the raw messages it held (kept only
/// when dead-lettering is on) so they can be written out together.
#[derive(Debug)]
pub struct Rejected {
    /// Boxed: rejections are rare and the hot path's `Result` stays small.
    pub error: Box<CdcError>,
    pub messages: Vec<(Position, String)>,
}

struct OpenTransaction {
    begin: Position,
    /// Events as they arrived, redelivered copies included: they are dropped at END,
    /// after the sort, because a per-event search for an earlier copy is quadratic
    /// in the transaction's size when its pieces arrive out of order (the Kafka
    /// source hands them over topic by topic).
    events: Vec<(u64, PendingChange)>,
    raw: Vec<(Position, String)>,
    /// The first of its events that cannot be applied: the transaction is rejected
    /// with this error when it ends.
    failure: Option<Box<CdcError>>,
}

impl OpenTransaction {
    fn new(begin: Position) -> Self {
        Self { begin, events: Vec::new(), raw: Vec::new(), failure: None }
    }
}

/// The reconstruction state machine. Invariant: a transaction is handed out exactly
/// once, complete, in the order its END (or its successor's first event) arrived.
pub struct Reconstructor {
    grouping: Grouping,
    keep_raw: bool,
    open: HashMap<String, OpenTransaction>,
    group: Option<(String, OpenTransaction)>,
    generated_ids: u64,
    /// Failed groups closed since the sink last took them ([`Self::take_rejected`]).
    rejected: Vec<Rejected>,
}

impl Reconstructor {
    /// `keep_raw`: keep each open transaction's raw messages (for dead-lettering).
    pub fn new(grouping: Grouping, keep_raw: bool) -> Self {
        Self { grouping, keep_raw, open: HashMap::new(), group: None, generated_ids: 0, rejected: Vec::new() }
    }

    /// Where the oldest transaction still open (or the pending no-metadata group)
    /// began: a restart must read from there again to see all of it.
    pub fn oldest_open_begin(&self) -> Option<Position> {
        self.open.values().map(|t| t.begin).chain(self.group.as_ref().map(|(_, g)| g.begin)).min_by_key(|p| p.value)
    }

    /// Transactions currently open (BEGIN seen, END not yet).
    pub fn open_transactions(&self) -> usize {
        self.open.len() + usize::from(self.group.is_some())
    }

    pub fn begin(&mut self, id: String, position: Position, raw: Option<&str>) {
        // A second BEGIN of an open transaction is a redelivery from its start (a
        // connector restart): the partial copy is replaced.
        let mut open = OpenTransaction::new(position);
        if self.keep_raw {
            open.raw.extend(raw.map(|r| (position, r.to_string())));
        }
        self.open.insert(id, open);
    }

    /// A change event. Completed transactions (a closed no-metadata group) go to `out`.
    pub fn change(
        &mut self,
        change: PendingChange,
        transaction: Option<&TransactionBlock>,
        source_transaction: Option<&str>,
        raw: Option<&str>,
        out: &mut Vec<CompletedTransaction>,
    ) -> Result<(), Rejected> {
        let position = change.position;
        if let Some(block) = transaction {
            let Some(open) = self.open.get_mut(&block.id) else {
                return Err(Rejected {
                    error: Box::new(CdcError::Transaction {
                        position,
                        transaction: block.id.clone(),
                        reason: format!("change event (total_order {}) outside its BEGIN/END", block.total_order),
                    }),
                    messages: self.raw_of(raw, position),
                });
            };
            if self.keep_raw {
                open.raw.extend(raw.map(|r| (position, r.to_string())));
            }
            open.events.push((block.total_order, change));
            return Ok(());
        }
        match (self.grouping, source_transaction) {
            (Grouping::SourceTransaction, Some(id)) => {
                let keep_raw = self.keep_raw;
                let group = self.group_of(id, position, out);
                if keep_raw {
                    group.raw.extend(raw.map(|r| (position, r.to_string())));
                }
                let next = group.events.len() as u64 + 1;
                group.events.push((next, change));
            }
            _ => {
                self.close_group(out);
                self.generated_ids += 1;
                let mut open = OpenTransaction::new(position);
                open.raw = self.raw_of(raw, position);
                open.events.push((1, change));
                out.push(complete(format!("event@{position}"), open, position)?);
            }
        }
        Ok(())
    }

    /// A change event that cannot be applied (`error`). With dead letters on, and the
    /// event's transaction open (its BEGIN seen) or a no-metadata group, the whole
    /// transaction fails: it is rejected when it ends, with every message it held and
    /// holds by then. Otherwise the event alone is rejected now. Completed
    /// transactions (a group this event closes) go to `out`.
    pub fn fail(
        &mut self,
        error: CdcError,
        position: Position,
        transaction: Option<&TransactionBlock>,
        source_transaction: Option<&str>,
        raw: Option<&str>,
        out: &mut Vec<CompletedTransaction>,
    ) -> Result<(), Rejected> {
        let whole = self.keep_raw && error.is_dead_letterable();
        let held = match (transaction, self.grouping, source_transaction) {
            (Some(block), _, _) if whole => self.open.get_mut(&block.id),
            (None, Grouping::SourceTransaction, Some(id)) if whole => Some(self.group_of(id, position, out)),
            (Some(_), _, _) | (None, Grouping::SourceTransaction, Some(_)) => None,
            // An event of no group ends the group before it, as in `change`.
            (None, _, _) => {
                self.close_group(out);
                None
            }
        };
        let Some(held) = held else {
            return Err(Rejected { error: Box::new(error), messages: self.raw_of(raw, position) });
        };
        held.raw.extend(raw.map(|r| (position, r.to_string())));
        held.failure.get_or_insert(Box::new(error));
        Ok(())
    }

    /// The no-metadata group of source transaction `id`, begun at `position` when
    /// new; a group of another transaction is closed first (to `out`).
    fn group_of(&mut self, id: &str, position: Position, out: &mut Vec<CompletedTransaction>) -> &mut OpenTransaction {
        if self.group.as_ref().is_some_and(|(current, _)| current != id) {
            self.close_group(out);
        }
        let (_, group) = self.group.get_or_insert_with(|| (id.to_string(), OpenTransaction::new(position)));
        group
    }

    /// Failed no-metadata groups closed since the last call, in stream order. They
    /// come before any transaction completed with them, so the sink writes their dead
    /// letters before it records a position past them.
    pub fn take_rejected(&mut self) -> Vec<Rejected> {
        std::mem::take(&mut self.rejected)
    }

    pub fn end(
        &mut self,
        id: &str,
        event_count: u64,
        data_collections: &[(String, u64)],
        position: Position,
        raw: Option<&str>,
    ) -> Result<CompletedTransaction, Rejected> {
        let Some(mut open) = self.open.remove(id) else {
            return Err(Rejected {
                error: Box::new(CdcError::Transaction { position, transaction: id.to_string(), reason: "END without BEGIN".into() }),
                messages: self.raw_of(raw, position),
            });
        };
        if self.keep_raw {
            open.raw.extend(raw.map(|r| (position, r.to_string())));
        }
        if let Some(error) = open.failure.take() {
            return Err(Rejected { error, messages: open.raw });
        }
        let reject = |reason: String, open: OpenTransaction| Rejected {
            error: Box::new(CdcError::Transaction { position, transaction: id.to_string(), reason }),
            messages: open.raw,
        };
        // A redelivered event repeats its total_order: the stable sort keeps the
        // first copy first, and the dedup keeps only it.
        open.events.sort_by_key(|(order, _)| *order);
        open.events.dedup_by_key(|(order, _)| *order);
        if open.events.len() as u64 != event_count {
            let reason = format!("END says event_count {event_count} but {} events arrived", open.events.len());
            return Err(reject(reason, open));
        }
        let mismatch = {
            // Counted in one pass: a transaction's events are many, its tables few.
            let mut per_table: HashMap<&str, u64> = HashMap::new();
            for (_, change) in &open.events {
                *per_table.entry(&*change.table).or_default() += 1;
            }
            data_collections.iter().find_map(|(table, expected)| {
                let actual = per_table.get(table.as_str()).copied().unwrap_or(0);
                (actual != *expected).then(|| format!("END says {expected} events for data collection {table} but {actual} arrived"))
            })
        };
        if let Some(reason) = mismatch {
            return Err(reject(reason, open));
        }
        if let Some((index, (order, _))) = open.events.iter().enumerate().find(|(i, (order, _))| *order != *i as u64 + 1) {
            let reason = format!("total_order {order} where {} was expected (a missing event)", index + 1);
            return Err(reject(reason, open));
        }
        complete(id.to_string(), open, position)
    }

    /// The source is idle: a no-metadata group is taken as complete and closed (the
    /// next event could still be of its transaction, but a stream that stops moving
    /// must become visible). A failed group stays open: events of its transaction
    /// may follow, and they go with it to the dead letters, never applied.
    pub fn close_group_at_idle(&mut self, out: &mut Vec<CompletedTransaction>) {
        if self.group.as_ref().is_some_and(|(_, group)| group.failure.is_none()) {
            self.close_group(out);
        }
    }

    /// Closes a no-metadata group (stream end, or an event of another transaction):
    /// its transaction is complete, or, when one of its events failed, rejected
    /// ([`Self::take_rejected`]).
    pub fn close_group(&mut self, out: &mut Vec<CompletedTransaction>) {
        if let Some((id, mut group)) = self.group.take() {
            if let Some(error) = group.failure.take() {
                self.rejected.push(Rejected { error, messages: group.raw });
                return;
            }
            let last = group.events.last().map_or(group.begin, |(_, c)| c.position);
            match complete(id, group, last) {
                Ok(completed) => out.push(completed),
                Err(rejected) => self.rejected.push(rejected),
            }
        }
    }

    /// The reader stops while the stream goes on: transactions still open (and a
    /// pending no-metadata group, which the next event could still extend) are
    /// dropped unapplied. Returns how many.
    pub fn abandon_open(&mut self) -> usize {
        let dropped = self.open_transactions();
        self.open.clear();
        self.group = None;
        dropped
    }

    /// At the end of a finite stream: the group is closed, and transactions still
    /// open are incomplete: each is rejected, oldest first ([`Self::take_rejected`];
    /// without dead letters the first stops the stream).
    pub fn finish(&mut self, position: Position, out: &mut Vec<CompletedTransaction>) {
        self.close_group(out);
        let mut open: Vec<_> = self.open.drain().collect();
        open.sort_by_key(|(_, t)| t.begin.value);
        for (id, mut transaction) in open {
            let error = transaction.failure.take().unwrap_or_else(|| {
                Box::new(CdcError::Transaction {
                    position,
                    transaction: id,
                    reason: format!("the stream ended before its END (BEGIN at {})", transaction.begin),
                })
            });
            self.rejected.push(Rejected { error, messages: transaction.raw });
        }
    }

    fn raw_of(&self, raw: Option<&str>, position: Position) -> Vec<(Position, String)> {
        raw.filter(|_| self.keep_raw).map(|r| vec![(position, r.to_string())]).unwrap_or_default()
    }
}

/// The transaction of `open`'s events (in order), a primary-key update sent as a
/// delete and an insert made one change; rejected when an insert that keeps values
/// has no delete to take them from.
fn complete(id: String, open: OpenTransaction, last: Position) -> Result<CompletedTransaction, Rejected> {
    let order = open.events.iter().filter_map(|(_, c)| c.order).max();
    let mut changes: Vec<PendingChange> = open.events.into_iter().map(|(_, change)| change).collect();
    if let Err(error) = pair_key_updates(&mut changes) {
        return Err(Rejected { error, messages: open.raw });
    }
    Ok(CompletedTransaction { id, first: open.begin, last, order, changes })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sink::SinkChange;
    use retina_core::TableId;

    fn event(table: &str, line: u64) -> PendingChange {
        PendingChange {
            change: SinkChange::truncate(TableId(0)),
            table: Arc::from(table),
            position: Position::line(line),
            order: None,
        }
    }

    fn block(total_order: u64) -> TransactionBlock {
        TransactionBlock { id: "tx".into(), total_order, data_collection_order: None }
    }

    fn failure(line: u64) -> CdcError {
        CdcError::Transaction { position: Position::line(line), transaction: "7".into(), reason: "a bad event".into() }
    }

    #[test]
    fn a_failed_event_fails_its_whole_group_when_dead_letters_are_kept_and_only_itself_otherwise() {
        let mut out = Vec::new();
        let mut kept = Reconstructor::new(Grouping::SourceTransaction, true);
        assert!(kept.change(event("a", 1), None, Some("7"), Some("one"), &mut out).is_ok());
        assert!(kept.fail(failure(2), Position::line(2), None, Some("7"), Some("two"), &mut out).is_ok());
        assert!(kept.change(event("a", 3), None, Some("7"), Some("three"), &mut out).is_ok());
        assert!(kept.change(event("a", 4), None, Some("8"), Some("four"), &mut out).is_ok());
        assert!(out.is_empty(), "the failed group completes nothing");
        let rejected = kept.take_rejected();
        assert_eq!(rejected.len(), 1);
        let lines: Vec<&str> = rejected[0].messages.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(lines, ["one", "two", "three"]);
        assert!(rejected[0].error.to_string().contains("a bad event"));
        kept.close_group(&mut out);
        assert_eq!(out.len(), 1, "the next group is whole");

        // Without dead letters the error stops the stream at once; one event per
        // transaction fails alone.
        for (grouping, keep_raw) in [(Grouping::SourceTransaction, false), (Grouping::PerEvent, true)] {
            let mut reconstructor = Reconstructor::new(grouping, keep_raw);
            assert!(reconstructor.change(event("a", 1), None, Some("7"), Some("one"), &mut out).is_ok());
            let alone = reconstructor.fail(failure(2), Position::line(2), None, Some("7"), Some("two"), &mut out).expect_err("at once");
            assert_eq!(alone.messages.len(), usize::from(keep_raw));
            assert!(reconstructor.take_rejected().is_empty());
        }
    }

    /// A failed group stays open at idle, so the rest of its transaction joins it;
    /// an event of no transaction ends it, as it ends a healthy one.
    #[test]
    fn a_failed_group_stays_open_at_idle_and_takes_the_rest_of_its_transaction() {
        let mut out = Vec::new();
        let mut reconstructor = Reconstructor::new(Grouping::SourceTransaction, true);
        assert!(reconstructor.fail(failure(1), Position::line(1), None, Some("7"), Some("bad first"), &mut out).is_ok());
        reconstructor.close_group_at_idle(&mut out);
        assert!(out.is_empty() && reconstructor.take_rejected().is_empty(), "still open");
        assert_eq!(reconstructor.oldest_open_begin(), Some(Position::line(1)), "a restart reads it again");
        assert!(reconstructor.change(event("a", 2), None, Some("7"), Some("after idle"), &mut out).is_ok());
        assert!(reconstructor.change(event("a", 3), None, None, Some("no transaction"), &mut out).is_ok());
        let rejected = reconstructor.take_rejected();
        assert_eq!(rejected.len(), 1);
        let lines: Vec<&str> = rejected[0].messages.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(lines, ["bad first", "after idle"]);
        assert_eq!(out.len(), 1, "the event of no transaction is its own");
        // A healthy group is closed at idle.
        assert!(reconstructor.change(event("a", 4), None, Some("8"), Some("ok"), &mut out).is_ok());
        reconstructor.close_group_at_idle(&mut out);
        assert_eq!(out.len(), 2);
        // A failing event of no transaction ends the group before it too.
        assert!(reconstructor.change(event("a", 5), None, Some("9"), Some("ok"), &mut out).is_ok());
        assert!(reconstructor.fail(failure(6), Position::line(6), None, None, Some("bad"), &mut out).is_err());
        assert_eq!(out.len(), 3);
    }

    /// At the end of the stream every open transaction is rejected, oldest first, a
    /// failed one with its own error.
    #[test]
    fn every_open_transaction_is_rejected_at_the_end() {
        let mut out = Vec::new();
        let mut reconstructor = Reconstructor::new(Grouping::SourceTransaction, true);
        let other = |total_order| TransactionBlock { id: "other".into(), total_order, data_collection_order: None };
        reconstructor.begin("tx".into(), Position::line(1), Some("begin tx"));
        reconstructor.begin("other".into(), Position::line(2), Some("begin other"));
        assert!(reconstructor.fail(failure(3), Position::line(3), Some(&other(1)), None, Some("bad"), &mut out).is_ok());
        reconstructor.finish(Position::line(4), &mut out);
        let rejected = reconstructor.take_rejected();
        let firsts: Vec<&str> = rejected.iter().map(|r| r.messages[0].1.as_str()).collect();
        assert_eq!(firsts, ["begin tx", "begin other"]);
        assert!(rejected[0].error.to_string().contains("ended before its END"), "{}", rejected[0].error);
        assert!(rejected[1].error.to_string().contains("a bad event"), "{}", rejected[1].error);
        assert_eq!(reconstructor.open_transactions(), 0);
    }

    #[test]
    fn a_failed_event_between_begin_and_end_fails_the_transaction_at_its_end() {
        let mut out = Vec::new();
        let mut reconstructor = Reconstructor::new(Grouping::SourceTransaction, true);
        reconstructor.begin("tx".into(), Position::line(1), Some("begin"));
        assert!(reconstructor.change(event("a", 2), Some(&block(1)), None, Some("event"), &mut out).is_ok());
        assert!(reconstructor.fail(failure(3), Position::line(3), Some(&block(2)), None, Some("bad"), &mut out).is_ok());
        let rejected = reconstructor.end("tx", 2, &[], Position::line(4), Some("end")).expect_err("failed");
        let lines: Vec<&str> = rejected.messages.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(lines, ["begin", "event", "bad", "end"]);
        assert!(rejected.error.to_string().contains("a bad event"));
        // An event outside any open transaction fails alone.
        let alone = reconstructor.fail(failure(5), Position::line(5), Some(&block(1)), None, Some("stray"), &mut out).expect_err("alone");
        assert_eq!(alone.messages.len(), 1);
    }

    /// Feeds `(total_order, table)` events of transaction "tx" on lines 2, 3, …
    fn open_with(events: &[(u64, &str)]) -> Reconstructor {
        let mut reconstructor = Reconstructor::new(Grouping::SourceTransaction, false);
        reconstructor.begin("tx".into(), Position::line(1), None);
        let mut out = Vec::new();
        for (index, (order, table)) in events.iter().enumerate() {
            let change = event(table, index as u64 + 2);
            assert!(reconstructor.change(change, Some(&block(*order)), None, None, &mut out).is_ok());
        }
        assert!(out.is_empty(), "nothing completes before END");
        reconstructor
    }

    #[test]
    fn out_of_order_events_with_redelivered_copies_complete_once_each_first_copy_kept() {
        // Order 2 arrives twice (lines 3 and 6) and order 1 twice (lines 4 and 7).
        let events = [(3, "b"), (2, "a"), (1, "a"), (2, "a"), (1, "a")];
        let mut reconstructor = open_with(&events);
        let collections = [("a".to_string(), 2), ("b".to_string(), 1)];
        let done = reconstructor.end("tx", 3, &collections, Position::line(7), None).map_err(|r| r.error);
        let done = done.expect("complete");
        let lines: Vec<u64> = done.changes.iter().map(|c| c.position.value).collect();
        assert_eq!(lines, [4, 3, 2], "total_order 1, 2, 3, each its first copy");
        assert_eq!(reconstructor.open_transactions(), 0);
    }

    /// A transaction of 100,000 events handed over out of order (odd orders, then
    /// even ones, as a source hands them over topic by topic). A per-event search
    /// for earlier copies took 17.8 s for 160,000 events in a release build; the
    /// bound leaves a debug build on a loaded machine 20 times what it needs.
    #[test]
    fn a_large_transaction_out_of_order_completes_in_linear_time() {
        let n = 100_000u64;
        let started = std::time::Instant::now();
        let mut reconstructor = Reconstructor::new(Grouping::SourceTransaction, false);
        reconstructor.begin("tx".into(), Position::line(1), None);
        let mut out = Vec::new();
        let orders = (1..=n).filter(|o| o % 2 == 1).chain((1..=n).filter(|o| o % 2 == 0));
        for (index, order) in orders.enumerate() {
            let change = event("a", index as u64 + 2);
            assert!(reconstructor.change(change, Some(&block(order)), None, None, &mut out).is_ok());
        }
        let done = reconstructor.end("tx", n, &[("a".to_string(), n)], Position::line(n + 2), None).map_err(|r| r.error);
        let done = done.expect("complete");
        assert_eq!(done.changes.len() as u64, n);
        assert_eq!(done.changes[1].position.value, n / 2 + 2, "total_order 2 was the first even one handed over");
        let elapsed = started.elapsed();
        assert!(elapsed < std::time::Duration::from_secs(5), "{n} events took {elapsed:?}");
    }

    #[test]
    fn a_data_collection_count_that_disagrees_names_the_table_and_both_counts() {
        let mut reconstructor = open_with(&[(1, "a"), (2, "b"), (3, "b")]);
        let collections = [("b".to_string(), 2), ("a".to_string(), 2), ("c".to_string(), 0)];
        let rejected = reconstructor.end("tx", 3, &collections, Position::line(5), None);
        let error = rejected.err().map(|r| r.error.to_string()).unwrap_or_default();
        assert!(error.contains("END says 2 events for data collection a but 1 arrived"), "{error}");

        let mut reconstructor = open_with(&[(1, "a"), (2, "b"), (3, "b")]);
        let collections = [("b".to_string(), 2), ("a".to_string(), 1), ("c".to_string(), 0)];
        assert!(reconstructor.end("tx", 3, &collections, Position::line(5), None).is_ok(), "a table with none agrees at 0");
    }

    #[test]
    fn a_redelivered_copy_does_not_stand_in_for_a_missing_event() {
        let mut reconstructor = open_with(&[(1, "a"), (1, "a"), (3, "a")]);
        let rejected = reconstructor.end("tx", 3, &[("a".to_string(), 3)], Position::line(5), None);
        let error = rejected.err().map(|r| r.error.to_string()).unwrap_or_default();
        assert!(error.contains("END says event_count 3 but 2 events arrived"), "{error}");
    }
}
