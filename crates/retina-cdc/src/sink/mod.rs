//! The sink (ARCHITECTURE.md §3.5): decoded messages in, mirror transactions out.
//!
//! For each message: decode it, find its table, turn its images into a row change,
//! hand it to the [`Reconstructor`]; each complete source transaction is submitted as
//! one mirror transaction with its source position (`Engine::submit_from`), unless it
//! is at or before the last applied one (a redelivery, dropped). Batches are sent by
//! the engine's group commit; the sink sends a partial batch whenever its source runs
//! dry, so freshness does not wait for a full batch.

mod change;
mod dead_letter;
mod failure;
pub mod decoding;
pub mod prepare;
pub mod reconstruct;
pub mod tables;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use retina_core::Engine;

use crate::debezium::{decode_line_with, Line, Message};
use crate::error::{CdcError, CdcResult};
use crate::position::{Position, SinkPosition, SourceOrder};
pub use dead_letter::DeadLetterWriter;
pub use failure::InFlight;
pub use change::SinkChange;
pub use reconstruct::{CompletedTransaction, Grouping, PendingChange, Reconstructor, Rejected};
pub use decoding::{Decoding, OnAbsentRow};
pub use prepare::Prepared;
use tables::TableResolver;

/// How the sink treats its stream.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// `--primary-key TABLE=COL[,COL...]`: keys of tables whose messages carry none.
    pub primary_keys: HashMap<String, Vec<String>>,
    /// `--infer-schema`: create schemaless tables from their images, a column per
    /// field typed by its first non-null value, and add fields that appear later.
    pub infer_schema: bool,
    /// `--no-transaction-metadata-grouping`.
    pub grouping: Grouping,
    /// `--dead-letter PATH`.
    pub dead_letter: Option<PathBuf>,
    /// `--table NAME`: the table of messages without a `source` block.
    pub table: Option<String>,
    /// `--on-absent-row error|upsert`.
    pub on_absent_row: OnAbsentRow,
}

impl Default for SinkOptions {
    fn default() -> Self {
        Self { primary_keys: HashMap::new(), infer_schema: false, grouping: Grouping::SourceTransaction, dead_letter: None, table: None, on_absent_row: OnAbsentRow::Error }
    }
}

/// Counters of one sink.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SinkStats {
    pub messages: u64,
    pub change_events: u64,
    pub tombstones: u64,
    pub transactions_applied: u64,
    pub row_changes_applied: u64,
    /// Transactions dropped as redeliveries of already applied ones.
    pub duplicate_transactions: u64,
    pub dead_letters: u64,
    /// With `--on-absent-row upsert`: updates of rows the mirror did not have, applied
    /// as inserts, and deletes of such rows, ignored (as of the last sync; counted by
    /// the engine, so shared by the sources of one engine).
    pub absent_row_upserts: u64,
    pub absent_row_deletes_ignored: u64,
}

impl SinkStats {
    /// Messages not applied exactly as sent, but diverted or adjusted on the user's
    /// request (dead letters, ...): `retina.sources` shows them, so nothing is
    /// silently lost.
    pub fn diverted(&self) -> u64 {
        self.dead_letters + self.absent_row_upserts + self.absent_row_deletes_ignored
    }
}

/// One source's sink into one engine.
pub struct Sink<'e> {
    engine: &'e Engine,
    source: String,
    tables: TableResolver,
    reconstructor: Reconstructor,
    dead_letter: Option<DeadLetterWriter>,
    /// Resume point: nothing at or before it is applied again.
    resume: Option<SinkPosition>,
    last_order: Option<SourceOrder>,
    in_flight: VecDeque<InFlight>,
    completed: Vec<CompletedTransaction>,
    last_position: Option<Position>,
    /// Resume offsets noted by the source, by transport position, not yet recorded.
    pending_offsets: VecDeque<(u64, String)>,
    /// Whether the source notes resume offsets (its positions are no use without).
    notes_offsets: bool,
    /// The transport position recorded last (submitted, or recovered).
    recorded_transport: Option<u64>,
    /// The last message dead-lettered since a position passed it.
    dead_lettered_through: Option<u64>,
    stats: SinkStats,
    /// Tables that got columns during this run: events bound (and decoded) before
    /// carry rows one value short, padded with NULL at submission.
    widened: Vec<retina_core::TableId>,
    /// The engine's absent-row counts when this sink started.
    absent_rows_before: (u64, u64),
}

impl<'e> Sink<'e> {
    /// A sink for `source` (its URI; positions are recorded under its
    /// [`crate::position::position_key`]). When the engine already knows a position
    /// for it (after recovery), replay resumes after it.
    pub fn new(engine: &'e Engine, source: impl Into<String>, options: SinkOptions) -> CdcResult<Self> {
        let uri = source.into();
        let source = crate::position::position_key(&uri);
        let dead_letter = options.dead_letter.as_deref().map(DeadLetterWriter::open).transpose()?;
        // After recovery the engine knows where this source's applied prefix ends:
        // from the recovered checkpoint, or newer once replay made more visible. Older
        // data dirs recorded it under the whole URI.
        let find = |name: &str| {
            let visible = engine.source_positions().into_iter().find(|p| p.source == name);
            visible.or_else(|| engine.recovered_positions().iter().find(|p| p.source == name).cloned())
        };
        let found = find(&source).or_else(|| if uri == source { None } else { find(&uri) });
        let resume = found.and_then(|p| SinkPosition::decode(&p.position));
        Ok(Self {
            engine,
            tables: TableResolver::new(options.primary_keys, options.infer_schema)
                .with_decoding(Decoding { default_table: options.table, on_absent_row: options.on_absent_row }),
            absent_rows_before: engine.absent_row_counts(),
            reconstructor: Reconstructor::new(options.grouping, dead_letter.is_some()),
            dead_letter,
            last_order: resume.as_ref().and_then(|r| r.order),
            pending_offsets: VecDeque::new(),
            notes_offsets: false,
            recorded_transport: resume.as_ref().map(|r| r.transport),
            dead_lettered_through: None,
            resume,
            in_flight: VecDeque::new(),
            completed: Vec::new(),
            last_position: None,
            stats: SinkStats::default(),
            widened: Vec::new(),
            source,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn stats(&self) -> &SinkStats {
        &self.stats
    }

    /// The transport position after which a restarted source must resume.
    pub fn resume_position(&self) -> Option<&SinkPosition> {
        self.resume.as_ref()
    }

    /// The source's resume offsets after the message at `transport`
    /// ([`crate::source::MessageSource::take_resume_offsets`]), recorded with the
    /// transaction that message ends. Noted before the message is handled.
    pub fn note_resume_offsets(&mut self, transport: u64, offsets: String) {
        self.notes_offsets = true;
        self.pending_offsets.push_back((transport, offsets));
    }

    /// The position of this source's newest *visible* transaction (not yet durable:
    /// acknowledge [`Self::durable_position`] instead).
    pub fn visible_position(&self) -> Option<SinkPosition> {
        self.own_position(self.engine.source_positions())
    }

    /// The position of this source's newest transaction held by the latest saved
    /// checkpoint: what may be acknowledged to the source (a crash goes back there).
    pub fn durable_position(&self) -> Option<SinkPosition> {
        self.own_position(self.engine.durable_positions())
    }

    /// This source's entry among the engine's per-source positions.
    fn own_position(&self, positions: Vec<retina_core::replay::SourcePosition>) -> Option<SinkPosition> {
        positions.into_iter().find(|p| p.source == self.source).and_then(|p| SinkPosition::decode(&p.position))
    }

    /// Handles one message at `position`.
    pub fn handle(&mut self, position: Position, line: &str) -> CdcResult<()> {
        self.stats.messages += 1;
        self.last_position = Some(position);
        if self.resume.as_ref().is_some_and(|r| position.value <= r.transport) {
            return Ok(()); // before the resume point: already applied
        }
        let result = self.accept(position, line);
        self.settle(result)
    }

    /// After a message: failed transactions it closed are dead-lettered first (they
    /// come before anything completed with them), then what completed is submitted,
    /// then the message's own rejection is handled.
    fn settle(&mut self, result: Result<(), Rejected>) -> CdcResult<()> {
        self.reject_failed()?;
        self.submit_completed()?;
        result.or_else(|rejected| self.reject(rejected))
    }

    /// Dead-letters the failed transactions the reconstructor closed.
    fn reject_failed(&mut self) -> CdcResult<()> {
        self.reconstructor.take_rejected().into_iter().try_for_each(|rejected| self.reject(rejected))
    }

    /// The source has nothing more right now: close a pending no-metadata group and
    /// send the partial batch (group commit) so it becomes visible.
    pub fn idle(&mut self) -> CdcResult<()> {
        let mut completed = std::mem::take(&mut self.completed);
        self.reconstructor.close_group_at_idle(&mut completed);
        self.completed = completed;
        self.reject_failed()?;
        self.submit_completed()?;
        self.pass_dead_letters()?;
        self.engine.flush_batch().map_err(|e| self.explain(e))?;
        self.count_absent_rows(); // of what the shards applied so far
        Ok(())
    }

    /// The finite stream ended: everything must be complete; waits until visible.
    pub fn finish(&mut self) -> CdcResult<()> {
        let position = self.last_position.unwrap_or(Position::line(0));
        let mut completed = std::mem::take(&mut self.completed);
        self.reconstructor.finish(position, &mut completed);
        self.completed = completed;
        self.settle(Ok(()))?;
        self.pass_dead_letters()?;
        self.engine.sync().map_err(|e| self.explain(e))?;
        self.count_absent_rows();
        Ok(())
    }

    /// Replay stops at an error: the transactions completed before it are sent, while
    /// an open one (a no-metadata group included) stays unapplied, so that a restart
    /// reads it again from its start; `idle` would close the group and apply part
    /// of the transaction the error is in.
    pub fn stop_at_error(&mut self) -> CdcResult<()> {
        self.submit_completed()?;
        self.engine.flush_batch().map_err(|e| self.explain(e))?;
        self.count_absent_rows();
        Ok(())
    }

    /// Takes the engine's absent-row counts (`--on-absent-row upsert`) into the stats.
    fn count_absent_rows(&mut self) {
        let (upserts, ignored) = self.engine.absent_row_counts();
        self.stats.absent_row_upserts = upserts.saturating_sub(self.absent_rows_before.0);
        self.stats.absent_row_deletes_ignored = ignored.saturating_sub(self.absent_rows_before.1);
    }

    /// The reader stops before the stream ends (a server shutting down): what is
    /// complete is applied and waited for; transactions still open are dropped, not
    /// applied. Their messages come after the recorded position of the last applied
    /// transaction, so a restart reads them again. Returns how many were dropped.
    pub fn stop(&mut self) -> CdcResult<usize> {
        self.submit_completed()?;
        self.pass_dead_letters()?;
        let dropped = self.reconstructor.abandon_open();
        self.engine.sync().map_err(|e| self.explain(e))?;
        self.count_absent_rows();
        Ok(dropped)
    }

    fn reject(&mut self, rejected: Rejected) -> CdcResult<()> {
        let Some(writer) = self.dead_letter.as_mut().filter(|_| rejected.error.is_dead_letterable()) else {
            return Err(*rejected.error);
        };
        let reason = rejected.error.to_string();
        for (position, message) in &rejected.messages {
            writer.write(*position, &reason, message)?;
            self.stats.dead_letters += 1;
        }
        let through = rejected.messages.iter().map(|(position, _)| position.value).max();
        self.dead_lettered_through = self.dead_lettered_through.max(through);
        Ok(())
    }

    /// When the source is idle or ends: records a position past the messages
    /// dead-lettered since the last recorded one, with an empty mirror transaction;
    /// otherwise a dead letter after the last applied transaction (at the end of a
    /// file) was read and written again by every restart. Once per idle moment, not
    /// per dead letter: it syncs the dead-letter file first. Not past an open
    /// transaction that began before them, and not for a source that noted no
    /// resume offsets for that message (its positions need them).
    fn pass_dead_letters(&mut self) -> CdcResult<()> {
        let Some(through) = self.dead_lettered_through.take() else { return Ok(()) };
        let transport = match self.reconstructor.oldest_open_begin() {
            Some(begin) if begin.value <= through => begin.value.saturating_sub(1),
            _ => through,
        };
        if !self.completed.is_empty() || self.recorded_transport.is_some_and(|recorded| recorded >= transport) {
            return Ok(());
        }
        let offsets = self.offsets_at(transport);
        if offsets.is_none() && self.notes_offsets {
            return Ok(());
        }
        if let Some(writer) = self.dead_letter.as_mut() {
            writer.sync()?;
        }
        let position = SinkPosition { transport, order: self.last_order, offsets };
        retina_core::submit_source_transaction(self.engine, &self.source, position.encode(), Vec::new(), &self.widened)
            .map_err(|e| self.explain(e))?;
        self.recorded_transport = Some(transport);
        Ok(())
    }

    /// Handles one message the decode stage already prepared (see
    /// [`prepare::prepare_known`]); `line` is the message read, for dead letters.
    pub fn handle_prepared(&mut self, position: Position, prepared: Prepared, line: &Line) -> CdcResult<()> {
        self.stats.messages += 1;
        self.last_position = Some(position);
        if self.resume.as_ref().is_some_and(|r| position.value <= r.transport) {
            return Ok(());
        }
        let full = self.dead_letter.is_some().then(|| line.full());
        let result = self.accept_prepared(position, prepared, full.as_deref());
        self.settle(result)
    }

    /// The schema texts of bound tables, which the thread reading the source leaves
    /// out of lines (see [`crate::debezium::elision`]).
    pub fn known_schemas(&self) -> crate::debezium::KnownSchemas {
        self.tables.known_schemas()
    }

    /// The tables resolved so far, for a decode stage on another thread.
    pub fn known_bindings(&self) -> Arc<parking_lot::RwLock<tables::KnownBindings>> {
        self.tables.known()
    }

    fn accept(&mut self, position: Position, line: &str) -> Result<(), Rejected> {
        let rejected = |error: CdcError| Rejected { error: Box::new(error), messages: vec![(position, line.to_string())] };
        let decoding = self.tables.decoding();
        let message = decode_line_with(line, decoding.default_table.as_deref()).map_err(|error| rejected(CdcError::Decode { position, table: None, error }))?;
        let prepared = match message {
            Message::Tombstone => Prepared::Tombstone,
            Message::Begin { id } => Prepared::Begin { id },
            Message::End { id, event_count, data_collections } => Prepared::End { id, event_count, data_collections },
            Message::Change(event) => {
                let prepared = self.tables.resolve(self.engine, &event, position).and_then(|binding| {
                    prepare::row_changes_with(&binding, &event, position, &decoding).map(|changes| (binding, changes))
                });
                match prepared {
                    Ok((binding, changes)) => prepare::change(*event, &binding, changes),
                    // The event's whole transaction fails, not the event alone.
                    Err(error) => {
                        let raw = self.dead_letter.is_some().then_some(line);
                        let (transaction, source_transaction) = (event.transaction.as_ref(), event.source_transaction.as_deref());
                        return self.reconstructor.fail(error, position, transaction, source_transaction, raw, &mut self.completed);
                    }
                }
            }
        };
        self.accept_prepared(position, prepared, self.dead_letter.is_some().then_some(line))
    }

    /// `raw_for_dead_letter` is the message's text when dead letters are written.
    fn accept_prepared(&mut self, position: Position, prepared: Prepared, raw_for_dead_letter: Option<&str>) -> Result<(), Rejected> {
        match prepared {
            Prepared::Tombstone => {
                self.stats.tombstones += 1;
                Ok(())
            }
            Prepared::Begin { id } => {
                self.reconstructor.begin(id, position, raw_for_dead_letter);
                Ok(())
            }
            Prepared::End { id, event_count, data_collections } => {
                let completed = self.reconstructor.end(&id, event_count, &data_collections, position, raw_for_dead_letter)?;
                self.completed.push(completed);
                Ok(())
            }
            Prepared::Change { table, changes, transaction, source_transaction, order } => {
                self.stats.change_events += 1;
                for change in changes {
                    let pending = PendingChange { change, table: Arc::clone(&table), position, order };
                    self.reconstructor.change(
                        pending,
                        transaction.as_ref(),
                        source_transaction.as_deref(),
                        raw_for_dead_letter,
                        &mut self.completed,
                    )?;
                }
                Ok(())
            }
        }
    }

    fn submit_completed(&mut self) -> CdcResult<()> {
        if self.completed.is_empty() {
            return Ok(());
        }
        // These positions may pass dead letters: those must be durable first.
        if let Some(writer) = self.dead_letter.as_mut() {
            writer.sync()?;
        }
        let hwm = self.engine.transaction_service().high_watermark();
        while self.in_flight.front().is_some_and(|t| t.ts < hwm) {
            self.in_flight.pop_front();
        }
        let oldest_open = self.reconstructor.oldest_open_begin();
        for transaction in std::mem::take(&mut self.completed) {
            if let (Some(order), Some(last)) = (transaction.order, self.last_order) {
                if order <= last {
                    self.stats.duplicate_transactions += 1;
                    continue;
                }
            }
            let transport = resume_transport(&transaction, oldest_open);
            let position = SinkPosition { transport, order: transaction.order, offsets: self.offsets_at(transport) };
            let count = transaction.changes.len() as u64;
            let mut changes = Vec::with_capacity(transaction.changes.len());
            for pending in transaction.changes {
                match pending.change {
                    SinkChange::Source(change) => changes.push(change),
                    // Paired with its delete, or rejected, when the transaction completed.
                    SinkChange::InsertKeeping { column, key, .. } => {
                        let (position, table) = (pending.position, pending.table.to_string());
                        let reason = "an insert keeping unchanged values was not paired with its delete".into();
                        return Err(CdcError::UnavailableValue { position, table, column, key, reason });
                    }
                }
            }
            let newly_widened = self.tables.take_widened();
            if !newly_widened.is_empty() {
                // Listed once per table, not once per added column: every later
                // transaction pads each listed table's rows.
                self.widened.extend(newly_widened);
                self.widened.sort_unstable();
                self.widened.dedup();
            }
            let submitted =
                retina_core::submit_source_transaction(self.engine, &self.source, position.encode(), changes, &self.widened);
            let ts = match submitted {
                Ok(submitted) => {
                    self.recorded_transport = Some(transport);
                    submitted.ts
                }
                Err(error) => {
                    let (first, last, id) = (transaction.first, transaction.last, transaction.id);
                    return Err(match error {
                        retina_core::CoreError::EngineStopped { .. } => self.explain(error),
                        other => CdcError::Apply { position: first, transaction: id, table: None, source: Box::new(other), detail: format!(" (ends at {last})") },
                    });
                }
            };
            if transaction.order.is_some() {
                self.last_order = transaction.order;
            }
            self.in_flight.push_back(InFlight { ts, id: transaction.id, first: transaction.first, last: transaction.last });
            self.stats.transactions_applied += 1;
            self.stats.row_changes_applied += count;
        }
        Ok(())
    }

    /// The resume offsets noted for `transport` (older ones are dropped: their
    /// transactions were recorded, or were duplicates).
    fn offsets_at(&mut self, transport: u64) -> Option<String> {
        while self.pending_offsets.front().is_some_and(|(at, _)| *at < transport) {
            self.pending_offsets.pop_front();
        }
        match self.pending_offsets.front() {
            Some((at, _)) if *at == transport => self.pending_offsets.pop_front().map(|(_, offsets)| offsets),
            _ => None,
        }
    }

    fn explain(&self, error: retina_core::CoreError) -> CdcError {
        let in_flight: Vec<InFlight> = self.in_flight.iter().cloned().collect();
        failure::explain(error, &in_flight)
    }
}


/// The transport position a restart may resume after once `transaction` is applied:
/// its last message, unless a transaction still open began before that (they
/// interleave). Then the restart must read that one from its BEGIN again, so the
/// position stays just before it, and the transactions in between are recognized on
/// the second reading by their source order. Without a source order they could not
/// be, so the position stays at the last message: a restart then stops with a clear
/// error about the open transaction's events rather than applying anything twice.
fn resume_transport(transaction: &reconstruct::CompletedTransaction, oldest_open: Option<Position>) -> u64 {
    match (oldest_open, transaction.order) {
        (Some(begin), Some(_)) if begin.value <= transaction.last.value => begin.value.saturating_sub(1),
        _ => transaction.last.value,
    }
}
