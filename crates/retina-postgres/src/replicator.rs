//! The PostgreSQL source's main loop: set up (or resume), copy, then stream.
//!
//! Exactly once: every mirror transaction carries its source transaction's commit
//! end LSN as its position (`lsn=X/Y`); the server is told as flushed only what the
//! engine reports as *durable* (checkpointed), so a crash at any moment resumes from
//! the slot at or before the durable point, and transactions at or before the
//! recovered position are dropped as redeliveries. The copy's transactions carry
//! `copy`; a restart that finds that (or nothing) drops the slot and copies again,
//! clearing the tables first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_core::{Engine, RowChange, TableId};

use crate::added_column::AddedValues;
use crate::conninfo::PgSourceOptions;
use crate::error::{PgSourceError, PgSourceResult};
use crate::initial_copy::{copy_tables, CopyTable, COPY_POSITION};
use crate::lsn::Lsn;
use crate::pgoutput::{LogicalMessage, OldTuple, PgOutputDecoder, ReplicationMessage, POSTGRES_EPOCH_MICROS};
use crate::publication::{ensure_publication, publication_names, published_tables};
use crate::publication::PublishedTable;
use crate::relation::{qualified_name, BindOptions, RelationMap};
use crate::position::SyncMarks;
pub use crate::position::{lsn_position, ResumePoint};
use crate::setup::{self, catalog_connection, quote_identifier, quote_literal};
use crate::status::{Phase, SharedStatus};
use crate::transaction::{SourceChange, SourceTransaction, TransactionAssembler};
use crate::types::{TypeCatalog, SESSION_SETTINGS};
use crate::wire::{CopyBothEvent, PgConnection};

/// How often the server hears from us at least (its default timeout is 60 s).
const FEEDBACK_INTERVAL: Duration = Duration::from_millis(500);

/// Every how many position polls (half a second each) the publication's tables are
/// read again, to find tables that joined it.
const PUBLICATION_POLL_ROUNDS: u32 = 4;

/// The longest a submitted transaction waits for its batch to be sent.
const MAX_BATCH_DELAY: Duration = Duration::from_millis(2);

/// A PostgreSQL source attached to one engine.
pub struct PgSource {
    pub(crate) options: PgSourceOptions,
    pub(crate) name: String,
    pub(crate) status: SharedStatus,
    stop: Arc<AtomicBool>,
    probe: Option<VisibilityProbe>,
}

/// Told `(mirror ts, source commit µs since the Unix epoch)` of every applied source
/// transaction, for freshness measurements (`engine.wait_visible(ts)` then compare).
pub type VisibilityProbe = std::sync::mpsc::Sender<(retina_core::Ts, i64)>;

impl PgSource {
    pub fn new(options: PgSourceOptions) -> Self {
        let name = options.source_name();
        Self { options, name, status: SharedStatus::default(), stop: Arc::new(AtomicBool::new(false)), probe: None }
    }

    /// Reports every applied transaction to `probe` (see [`VisibilityProbe`]).
    pub fn with_visibility_probe(mut self, probe: VisibilityProbe) -> Self {
        self.probe = Some(probe);
        self
    }

    /// The name positions are recorded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn status(&self) -> SharedStatus {
        Arc::clone(&self.status)
    }

    /// Setting it ends [`Self::run`] at the next message boundary.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Runs until stopped (Ok) or an error (recorded in the status, too). A lost
    /// connection after the first successful start is not an error: the source waits
    /// (backing off) and starts a new session from the durable position, as often as
    /// the `max_reconnects` option allows.
    pub fn run(&self, engine: &Engine) -> PgSourceResult<()> {
        let mut started = false;
        let mut attempt = 0u32;
        let result = loop {
            let result = self.run_inner(engine, &mut started);
            let error = match result {
                Ok(()) => break Ok(()),
                Err(error) => error,
            };
            let delay = {
                let mut status = self.status.lock();
                if status.phase == Phase::Streaming {
                    attempt = 0;
                }
                attempt = attempt.saturating_add(1);
                let delay = self.options.reconnect.delay(attempt);
                let retry = started && error.is_connection_loss() && !self.stop.load(Ordering::Relaxed);
                match delay.filter(|_| retry) {
                    Some(delay) => {
                        tracing::warn!(source = %self.name, attempt, ?delay, %error, "connection lost; reconnecting");
                        status.phase = Phase::Reconnecting;
                        status.reconnect_attempts = attempt;
                        status.reconnects += 1;
                        status.error = Some(error.to_string());
                        delay
                    }
                    None => break Err(error),
                }
            };
            let until = Instant::now() + delay;
            while Instant::now() < until && !self.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
            }
            if self.stop.load(Ordering::Relaxed) {
                break Ok(());
            }
        };
        let mut status = self.status.lock();
        match &result {
            Ok(()) => status.phase = Phase::Stopped,
            Err(error) => {
                tracing::error!(source = %self.name, %error, "source failed");
                status.phase = Phase::Failed;
                status.error = Some(error.to_string());
            }
        }
        result
    }

    /// The position recorded for this source: visible first, else recovered. What an
    /// earlier run submitted becomes visible first, or its last transactions would be
    /// applied twice.
    fn recorded(&self, engine: &Engine) -> PgSourceResult<Option<(ResumePoint, SyncMarks)>> {
        engine.sync()?;
        let visible = engine.source_positions().into_iter().find(|p| p.source == self.name);
        let recovered = engine.recovered_positions().iter().find(|p| p.source == self.name).cloned();
        Ok(visible.or(recovered).and_then(|p| Some((ResumePoint::parse(&p.position)?, SyncMarks::parse(&p.position)))))
    }

    pub(crate) fn durable_lsn(&self, engine: &Engine) -> Option<Lsn> {
        let durable = engine.durable_positions().into_iter().find(|p| p.source == self.name)?;
        match ResumePoint::parse(&durable.position)? {
            ResumePoint::Lsn(lsn) => Some(lsn),
            ResumePoint::Copy => None,
        }
    }

    /// One session: set up (or resume), copy if needed, stream. Sets `started` once
    /// the server accepted the set-up, from when a lost connection is retried.
    fn run_inner(&self, engine: &Engine, started: &mut bool) -> PgSourceResult<()> {
        let options = &self.options;
        let mut catalog = catalog_connection(options)?;
        setup::check_server(&mut catalog, options)?;
        let publication = ensure_publication(&mut catalog, options)?;
        if publication.created {
            tracing::info!(source = %self.name, publication = %options.publication, "publication created");
            if !publication.left_out.is_empty() {
                tracing::warn!(
                    source = %self.name,
                    tables = ?publication.left_out,
                    "not mirrored: no primary key or replica identity (give them one, or use no_identity=insert_only)"
                );
            }
            self.status.lock().left_out = publication.left_out;
        }
        *started = true;
        let mut types = setup::load_types(&mut catalog)?;
        let bind = BindOptions {
            unsupported_types_as_text: options.unsupported_types_as_text,
            insert_only_without_identity: options.insert_only_without_identity,
        };
        let mut relations = RelationMap::new();
        let mut replication = PgConnection::connect(&options.connect, true)?;
        let (start, marks) = match self.recorded(engine)? {
            Some((ResumePoint::Lsn(lsn), marks)) => {
                if setup::find_slot(&mut catalog, &options.slot)?.is_none() {
                    return Err(PgSourceError::Setup(format!(
                        "the mirror was at {lsn} but replication slot {} no longer exists, so changes after it are lost to us; \
                         start with an empty data directory to copy again",
                        options.slot
                    )));
                }
                (lsn, marks)
            }
            _ => {
                let mut slot_created = false;
                match self.copy(engine, &mut catalog, &mut replication, &types, &mut relations, &bind, &mut slot_created) {
                    Ok(copied) => copied,
                    Err(error) => {
                        // The slot this copy created holds WAL at the source for a copy
                        // that has to start over anyway: let it go (it is free once this
                        // session closes).
                        if slot_created {
                            drop(replication);
                            let _ = setup::drop_slot_when_free(&mut catalog, &options.slot, Duration::from_secs(5));
                        }
                        return Err(error);
                    }
                }
            }
        };
        self.stream(engine, &mut catalog, &mut replication, &mut types, &mut relations, &bind, start, marks)
    }

    /// Creates the slot, copies every published table inside its snapshot, and
    /// returns the consistent point streaming starts from (with the tables paused on
    /// an error of their own). `slot_created` says whether it got as far as the slot.
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        replication: &mut PgConnection,
        types: &TypeCatalog,
        relations: &mut RelationMap,
        bind: &BindOptions,
        slot_created: &mut bool,
    ) -> PgSourceResult<(Lsn, SyncMarks)> {
        let options = &self.options;
        if let Some(slot) = setup::find_slot(catalog, &options.slot)? {
            // A previous run's walsender may still be letting go of it.
            let mut active = slot.active;
            let deadline = Instant::now() + options.slot_wait;
            while active && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
                active = setup::find_slot(catalog, &options.slot)?.is_some_and(|slot| slot.active);
            }
            if active {
                return Err(PgSourceError::Setup(format!(
                    "replication slot {} has been in use by another connection for {} s (option slot_wait)",
                    options.slot,
                    options.slot_wait.as_secs()
                )));
            }
            // Ours, from a copy that did not finish: its data goes too (below).
            setup::drop_slot(catalog, &options.slot)?;
        }
        self.status.lock().phase = Phase::Copying;
        let created = setup::create_slot(replication, &options.slot)?;
        *slot_created = true;
        self.status.lock().consistent_point = Some(created.consistent_point);
        let mut bound = Vec::new();
        let mut unbound = Vec::new();
        for published in published_tables(catalog, &publication_names(options))? {
            let name = published.qualified();
            match bind_published(engine, catalog, types, relations, bind, published, created.consistent_point) {
                Ok(table) => bound.push(table),
                // A type it cannot hold: that table is paused, the others copied.
                Err(error) if options.pause_failing_tables && error.table().is_some() => unbound.push((name, error.to_string())),
                Err(error) => return Err(error),
            }
        }
        // The copy reads every column, including any added since the mirror last ran.
        relations.take_added();
        // An interrupted copy left rows behind: they go in one transaction first.
        let mut leftovers = Vec::new();
        for CopyTable { relation, .. } in &bound {
            leftovers.extend(engine.live_keys(relation.table)?.into_iter().map(|key| RowChange::Delete { table: relation.table, key }));
        }
        if !leftovers.is_empty() {
            engine.submit_from(&self.name, COPY_POSITION.to_string(), leftovers)?;
        }
        let copied = AtomicU64::new(0);
        let report = copy_tables(
            engine,
            options,
            &self.name,
            &created.snapshot_name,
            &bound,
            &copied,
            COPY_POSITION,
            options.pause_failing_tables,
        )?;
        let mut marks = SyncMarks::default();
        {
            let mut status = self.status.lock();
            status.copied_rows = report.rows;
            for (table, error) in unbound.into_iter().chain(report.paused) {
                tracing::warn!(source = %self.name, %table, %error, "table paused in the initial copy; the others go on");
                marks.paused.push(table.clone());
                status.pause(table, error);
            }
        }
        // The copy is complete as of the consistent point (paused tables aside).
        engine.submit_from(&self.name, marks.position(created.consistent_point), Vec::new())?;
        engine.flush_batch()?;
        Ok((created.consistent_point, marks))
    }

    #[allow(clippy::too_many_arguments)]
    fn stream(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        replication: &mut PgConnection,
        types: &mut TypeCatalog,
        relations: &mut RelationMap,
        bind: &BindOptions,
        start: Lsn,
        marks: SyncMarks,
    ) -> PgSourceResult<()> {
        let marks = self.sync_tables_missing_at_start(engine, catalog, types, relations, bind, start, marks)?;
        {
            let mut status = self.status.lock();
            for table in &marks.paused {
                if !status.paused.iter().any(|(name, _)| name == table) {
                    status.pause(table.clone(), format!("paused before this start; resync={table} copies it again"));
                }
            }
        }
        self.start_replication(replication, start)?;
        let mut stream = StreamState {
            decoder: PgOutputDecoder::new(),
            assembler: TransactionAssembler::new(),
            resume: start,
            last_submitted: start,
            idle_point: Lsn::ZERO,
            confirmed: Lsn::ZERO,
            widened: Vec::new(),
            unflushed: false,
            unflushed_since: Instant::now(),
            last_feedback: Instant::now(),
            marks,
            pending_sync: Vec::new(),
            polls: 0,
            paused_oids: std::collections::HashSet::new(),
        };
        while !self.stop.load(Ordering::Relaxed) {
            let timeout = if stream.unflushed { Duration::from_millis(1) } else { Duration::from_millis(100) };
            let mut reply_now = false;
            match replication.read_copy_data(timeout)? {
                CopyBothEvent::Data(payload) => {
                    let message = ReplicationMessage::decode(payload)
                        .map_err(|source| PgSourceError::Decode { lsn: stream.last_submitted, source })?;
                    match message {
                        ReplicationMessage::XLogData { wal_start, wal_end, body, .. } => {
                            let logical = stream.decoder.decode(body).map_err(|source| PgSourceError::Decode { lsn: wal_start, source })?;
                            {
                                let mut status = self.status.lock();
                                status.server_wal_end = status.server_wal_end.max(wal_end);
                                status.received_lsn = status.received_lsn.max(wal_start);
                            }
                            let oid = logical.relation_oid();
                            if let Err(error) = self.handle(engine, catalog, types, relations, bind, &mut stream, logical, wal_start) {
                                // One table's error stops that table, not the source.
                                self.pause_table(engine, &mut stream, oid, error)?;
                            }
                            if !stream.pending_sync.is_empty() {
                                self.sync_pending(engine, catalog, replication, relations, &mut stream)?;
                            }
                        }
                        ReplicationMessage::Keepalive { wal_end, reply_requested, .. } => {
                            let mut status = self.status.lock();
                            status.server_wal_end = status.server_wal_end.max(wal_end);
                            status.received_lsn = status.received_lsn.max(wal_end);
                            if !stream.assembler.in_progress() {
                                stream.idle_point = stream.idle_point.max(wal_end);
                                // Nothing open: everything up to the keepalive is applied
                                // (the rest of the WAL was not for us), so no lag.
                                status.applied_lsn = status.applied_lsn.max(wal_end);
                            }
                            reply_now = reply_requested;
                        }
                    }
                }
                CopyBothEvent::Timeout => {
                    if stream.unflushed {
                        engine.flush_batch()?;
                        stream.unflushed = false;
                    }
                }
                CopyBothEvent::End => return Err(PgSourceError::StreamEnded { lsn: stream.last_submitted }),
            }
            // A steady stream never leaves the socket idle for the read timeout, so
            // the batch is also sent once its oldest transaction waited this long.
            if stream.unflushed && stream.unflushed_since.elapsed() >= MAX_BATCH_DELAY {
                engine.flush_batch()?;
                stream.unflushed = false;
            }
            if reply_now || stream.last_feedback.elapsed() >= FEEDBACK_INTERVAL {
                let poll = stream.last_feedback.elapsed() >= FEEDBACK_INTERVAL;
                if poll {
                    self.poll_server_position(catalog)?;
                    stream.polls += 1;
                    // Tables that join the publication without a change yet.
                    if stream.polls % PUBLICATION_POLL_ROUNDS == 0 {
                        self.find_joined_tables(engine, catalog, types, relations, bind, &mut stream)?;
                        if !stream.pending_sync.is_empty() {
                            self.sync_pending(engine, catalog, replication, relations, &mut stream)?;
                        }
                    }
                }
                // Asking for a keepalive each round lets an idle stream's applied
                // position follow the WAL the walsender skipped for us.
                self.send_feedback(engine, replication, &mut stream, reply_now || poll)?;
            }
        }
        if stream.unflushed {
            engine.flush_batch()?;
        }
        self.send_feedback(engine, replication, &mut stream, false)?;
        Ok(())
    }

    /// Starts the replication stream of the slot at `start` (waiting, up to
    /// `slot_wait`, for a previous session's walsender to let go of the slot) and
    /// says so in the status.
    fn start_replication(&self, replication: &mut PgConnection, start: Lsn) -> PgSourceResult<()> {
        let options = &self.options;
        replication.simple_query(SESSION_SETTINGS)?;
        let protocol = if options.protocol_version >= 2 && replication.server_major_version().unwrap_or(0) >= 14 { 2 } else { 1 };
        let streaming = if protocol >= 2 { ", streaming 'on'" } else { "" };
        let command = format!(
            "START_REPLICATION SLOT {} LOGICAL {start} (proto_version '{protocol}', publication_names {}{streaming})",
            quote_identifier(&options.slot),
            quote_literal(&publication_names(options).iter().map(|name| quote_identifier(name)).collect::<Vec<_>>().join(",")),
        );
        // After a restart the walsender of our previous connection may still hold the
        // slot for a moment (until the server notices the connection is gone).
        let deadline = Instant::now() + options.slot_wait;
        loop {
            match replication.start_copy_both(&command) {
                Ok(()) => break,
                Err(error) if error.code() == Some("55006") && Instant::now() < deadline && !self.stop.load(Ordering::Relaxed) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => return Err(error.into()),
            }
        }
        tracing::info!(source = %self.name, %start, "streaming");
        {
            let mut status = self.status.lock();
            status.phase = Phase::Streaming;
            status.error = None;
            status.reconnect_attempts = 0;
            status.applied_lsn = status.applied_lsn.max(start);
            status.received_lsn = status.received_lsn.max(start);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn handle(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        types: &mut TypeCatalog,
        relations: &mut RelationMap,
        bind: &BindOptions,
        stream: &mut StreamState,
        message: LogicalMessage,
        lsn: Lsn,
    ) -> PgSourceResult<()> {
        if let Some(oid) = message.relation_oid() {
            if stream.paused_oids.contains(&oid) {
                return Ok(());
            }
            // Paused before a restart: known by name.
            if let LogicalMessage::Relation { body, .. } = &message {
                if stream.marks.paused.contains(&qualified_name(body)) {
                    stream.paused_oids.insert(oid);
                    return Ok(());
                }
            }
        }
        match message {
            LogicalMessage::Begin { .. } => {
                stream.idle_point = Lsn::ZERO;
                stream.assembler.begin(lsn)?;
            }
            LogicalMessage::Commit { end_lsn, commit_time_micros, .. } => {
                let transaction = stream.assembler.commit(end_lsn, commit_time_micros + POSTGRES_EPOCH_MICROS)?;
                self.apply(engine, stream, transaction)?;
            }
            LogicalMessage::StreamStart { xid, .. } => {
                stream.idle_point = Lsn::ZERO;
                stream.assembler.stream_start(xid, lsn)?;
            }
            LogicalMessage::StreamStop => stream.assembler.stream_stop(),
            LogicalMessage::StreamCommit { xid, end_lsn, commit_time_micros, .. } => {
                let transaction = stream.assembler.stream_commit(xid, end_lsn, commit_time_micros + POSTGRES_EPOCH_MICROS)?;
                self.apply(engine, stream, transaction)?;
            }
            LogicalMessage::StreamAbort { xid, subxid } => stream.assembler.stream_abort(xid, subxid),
            LogicalMessage::Relation { xid, body } => {
                if !relations.contains(body.oid) && types_missing(types, &body) {
                    *types = setup::load_types(catalog)?;
                }
                // Not copied yet: it joined the publication after the copy.
                let joined = !relations.contains(body.oid) && engine.table_id(&qualified_name(&body)).is_none();
                if joined {
                    self.record_copying(engine, &stream.marks, stream.last_submitted, &qualified_name(&body))?;
                }
                let primary_key = if body.replica_identity == b'f' { setup::primary_key(catalog, body.oid)? } else { None };
                relations.bind(engine, &body, types, primary_key.as_deref(), bind, lsn)?;
                if joined {
                    stream.pending_sync.push(body.oid);
                }
                stream.widened.extend(relations.take_widened());
                for (oid, index) in relations.take_added() {
                    let relation = relations.get(oid, lsn)?;
                    let Some(values) = AddedValues::load(catalog, relation, index, lsn)? else { continue };
                    // Rows of the old shape this transaction changed before the DDL.
                    stream.assembler.patch_rows(xid, relation.table, |row| values.extend_row(relation, row));
                    let filled = values.mirror_changes(engine, relation)?;
                    stream.assembler.prepend(xid, filled.into_iter().map(SourceChange::Row).collect(), lsn)?;
                }
            }
            // New types (enums, domains) are looked up when a relation uses them.
            LogicalMessage::Type { .. } | LogicalMessage::Origin { .. } | LogicalMessage::Message { .. } => {}
            LogicalMessage::Insert { xid, relation, new } => {
                let relation = relations.get(relation, lsn)?;
                let row = relation.row(&new, None, lsn.0 as i64, lsn)?;
                stream.assembler.push(xid, SourceChange::Row(RowChange::Insert { table: relation.table, row }), lsn)?;
            }
            LogicalMessage::Update { xid, relation, old, new } => {
                let relation = relations.get(relation, lsn)?;
                relation.require_identity("update", lsn)?;
                let key = match &old {
                    Some(old) => relation.key(old.values(), lsn)?,
                    None => relation.key(&new, lsn)?,
                };
                let full_old = match &old {
                    Some(OldTuple::Full(values)) => Some(values.as_slice()),
                    _ => None,
                };
                let (row, keep) = relation.updated_row(&new, full_old, lsn)?;
                let change = if keep.is_empty() {
                    RowChange::Update { table: relation.table, key, row }
                } else {
                    RowChange::UpdateKeeping { table: relation.table, key, row, keep }
                };
                stream.assembler.push(xid, SourceChange::Row(change), lsn)?;
            }
            LogicalMessage::Delete { xid, relation, old } => {
                let relation = relations.get(relation, lsn)?;
                relation.require_identity("delete", lsn)?;
                let key = relation.key(old.values(), lsn)?;
                stream.assembler.push(xid, SourceChange::Row(RowChange::Delete { table: relation.table, key }), lsn)?;
            }
            LogicalMessage::Truncate { xid, relations: truncated, .. } => {
                for oid in truncated.into_iter().filter(|oid| !stream.paused_oids.contains(oid)) {
                    let table = relations.get(oid, lsn)?.table;
                    stream.assembler.push(xid, SourceChange::Truncate(table), lsn)?;
                }
            }
        }
        Ok(())
    }

    /// Submits one source transaction as one mirror transaction, unless a restart
    /// received it again.
    fn apply(&self, engine: &Engine, stream: &mut StreamState, transaction: SourceTransaction) -> PgSourceResult<()> {
        if transaction.end_lsn <= stream.resume {
            self.status.lock().duplicate_transactions += 1;
            return Ok(());
        }
        let mut changes = transaction.changes;
        stream.marks.filter(transaction.end_lsn, &mut changes, |name| engine.table_id(name));
        let submitted = retina_core::submit_source_transaction(
            engine,
            &self.name,
            stream.marks.position(transaction.end_lsn),
            changes,
            &stream.widened,
        )?;
        if !stream.widened.is_empty() && !stream.assembler.in_progress() {
            stream.widened.clear();
        }
        let (ts, count) = (submitted.ts, submitted.row_changes as u64);
        if let Some(probe) = &self.probe {
            let _ = probe.send((ts, transaction.commit_time_micros));
        }
        stream.last_submitted = transaction.end_lsn;
        if !stream.unflushed {
            stream.unflushed = true;
            stream.unflushed_since = Instant::now();
        }
        let mut status = self.status.lock();
        status.applied_lsn = status.applied_lsn.max(transaction.end_lsn);
        status.received_lsn = status.received_lsn.max(transaction.end_lsn);
        status.last_commit_micros = Some(transaction.commit_time_micros);
        status.transactions += 1;
        status.row_changes += count;
        Ok(())
    }
}

/// The streaming loop's state.
pub(crate) struct StreamState {
    pub(crate) decoder: PgOutputDecoder,
    pub(crate) assembler: TransactionAssembler,
    /// Transactions ending at or before this were applied before (re)start.
    pub(crate) resume: Lsn,
    pub(crate) last_submitted: Lsn,
    /// A keepalive position received while no transaction was open.
    pub(crate) idle_point: Lsn,
    pub(crate) confirmed: Lsn,
    /// Tables that got columns while rows of the old shape may still be buffered.
    pub(crate) widened: Vec<TableId>,
    /// Submitted transactions whose batch was not sent yet, since when.
    pub(crate) unflushed: bool,
    pub(crate) unflushed_since: Instant,
    pub(crate) last_feedback: Instant,
    /// Tables whose copy (made after the initial one) the stream has not passed yet.
    pub(crate) marks: SyncMarks,
    /// Relations that joined the publication and wait for their copy.
    pub(crate) pending_sync: Vec<u32>,
    /// Server-position polls so far; every few the publication is read again.
    pub(crate) polls: u32,
    /// Relations of paused tables (see `table_pause`), whose messages are skipped.
    pub(crate) paused_oids: std::collections::HashSet<u32>,
}


fn types_missing(types: &TypeCatalog, body: &crate::pgoutput::RelationBody) -> bool {
    body.columns.iter().any(|c| types.column_kind(c.type_oid, c.type_modifier).is_none())
}

/// Binds a published table from the catalog (with only its published columns, as
/// the stream carries them) for a copy.
pub(crate) fn bind_published(
    engine: &Engine,
    catalog: &mut PgConnection,
    types: &TypeCatalog,
    relations: &mut RelationMap,
    bind: &BindOptions,
    published: PublishedTable,
    lsn: Lsn,
) -> PgSourceResult<CopyTable> {
    let mut body = setup::relation_from_catalog(catalog, &published.schema, &published.table)?;
    if let Some(list) = &published.columns {
        body.columns.retain(|column| list.contains(&column.name));
    }
    let primary_key = setup::primary_key(catalog, body.oid)?;
    let relation = relations.bind(engine, &body, types, primary_key.as_deref(), bind, lsn)?.clone();
    Ok(CopyTable { relation, row_filter: published.row_filter, partitioned: published.partitioned })
}
