//! Tables that join the publication after the initial copy (added by a DBA while the
//! source streams, or while it was stopped): copied in a snapshot of their own, then
//! streamed, with no gap and nothing applied twice, while the other tables go on.
//!
//! The technique is PostgreSQL's own table synchronisation (and supabase/etl's
//! table-sync workers): a temporary slot, created on a second replication connection,
//! exports a snapshot at its consistent point C; the table is copied in that
//! snapshot. The main stream's transactions that end at or before C hold changes of
//! that table the copy already has, so they are applied without them; from C on,
//! every change of it applies. Debezium's watermark snapshots were the alternative,
//! but they write to a signalling table at the source, and Retina needs no write
//! rights there.
//!
//! Crash safety lives in the source position every mirror transaction records:
//! `lsn=P;copying=T` on the copy's chunks (a restart copies T again, its partial rows
//! deleted first) and `lsn=P;sync=T@C` on every transaction until the stream passes C
//! (a restart keeps dropping T's changes up to C).

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use retina_core::{Engine, RowChange};

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::PgSourceResult;
use crate::initial_copy::{copy_tables, CopyTable};
use crate::lsn::Lsn;
use crate::pgoutput::{standby_status_update, POSTGRES_EPOCH_MICROS};
use crate::publication::{publication_names, published_tables};
use crate::relation::{BindOptions, RelationMap};
use crate::position::SyncMarks;
use crate::replicator::{bind_published, PgSource, StreamState};
use crate::setup;
use crate::types::TypeCatalog;
use crate::wire::PgConnection;

/// How often the main replication session hears from us while a copy runs, so its
/// walsender does not time out (PostgreSQL's default `wal_sender_timeout` is 60 s).
const KEEP_ALIVE: Duration = Duration::from_secs(5);

impl PgSource {
    /// Copies `table` (bound to its Retina table) in a snapshot of its own, and
    /// returns the snapshot's position C. Rows the mirror holds of it (an interrupted
    /// earlier copy) are deleted first. `resume` is the position of the last applied
    /// transaction, which the copy's chunks record together with `marks`;
    /// `keep_alive` is called every few seconds meanwhile.
    pub(crate) fn sync_table(
        &self,
        engine: &Engine,
        table: CopyTable,
        marks: &SyncMarks,
        resume: Lsn,
        keep_alive: &mut dyn FnMut() -> PgSourceResult<()>,
    ) -> PgSourceResult<Lsn> {
        let options = &self.options;
        let name = table.relation.name.clone();
        self.status.lock().syncing = Some(name.clone());
        let copying = SyncMarks { copying: Some(name.clone()), ..marks.clone() };
        let position = copying.position(resume);

        let mut snapshot_session = PgConnection::connect(&options.connect, true)?;
        let slot = sync_slot_name(&options.slot);
        let created = setup::create_temporary_slot(&mut snapshot_session, &slot)?;
        let leftovers: Vec<RowChange> = engine
            .live_keys(table.relation.table)?
            .into_iter()
            .map(|key| RowChange::Delete { table: table.relation.table, key })
            .collect();
        engine.submit_from(&self.name, position.clone(), leftovers)?;

        let copied = AtomicU64::new(0);
        let tables = [table];
        let report = std::thread::scope(|scope| {
            let copy = scope.spawn(|| copy_tables(engine, options, &self.name, &created.snapshot_name, &tables, &copied, &position, false));
            let mut last = Instant::now();
            while !copy.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
                if last.elapsed() >= KEEP_ALIVE {
                    keep_alive()?;
                    last = Instant::now();
                }
            }
            copy.join().unwrap_or_else(|_| Err(crate::error::PgSourceError::Setup("the table copy panicked".into())))
        })?;
        // The snapshot and its temporary slot are no longer needed.
        drop(snapshot_session);
        tracing::info!(source = %self.name, table = %name, rows = report.rows, at = %created.consistent_point, "table joined the publication and was copied");
        let mut status = self.status.lock();
        status.syncing = None;
        status.copied_rows += report.rows;
        status.synced.push(format!("{name} copied at {}", created.consistent_point));
        Ok(created.consistent_point)
    }
}

impl PgSource {
    /// Makes durable, before a joining table's mirror table is created, that its
    /// copy is under way: the table is in the catalog at once, its rows only with
    /// later checkpoints, so a crash in between must still find it to copy again.
    pub(crate) fn record_copying(&self, engine: &Engine, marks: &SyncMarks, resume: Lsn, table: &str) -> PgSourceResult<()> {
        let copying = SyncMarks { copying: Some(table.to_string()), ..marks.clone() };
        engine.submit_from(&self.name, copying.position(resume), Vec::new())?;
        engine.flush_and_checkpoint()?;
        Ok(())
    }

    /// Before streaming from `start`: copies again a table whose copy a crash
    /// interrupted, and copies the published tables the mirror does not have yet
    /// (added while the source was stopped). Returns the marks to stream with.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sync_tables_missing_at_start(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        types: &TypeCatalog,
        relations: &mut RelationMap,
        bind: &BindOptions,
        start: Lsn,
        mut marks: SyncMarks,
    ) -> PgSourceResult<SyncMarks> {
        let interrupted = marks.copying.take();
        // Paused tables named by `resync=` are copied afresh, which ends their pause.
        let resync: Vec<String> = marks.paused.iter().filter(|table| self.options.resync.contains(table)).cloned().collect();
        marks.paused.retain(|table| !resync.contains(table));
        let mut synced = !resync.is_empty();
        for published in published_tables(catalog, &publication_names(&self.options))? {
            let name = published.qualified();
            let wanted = interrupted.as_deref() == Some(name.as_str()) || resync.contains(&name);
            if marks.paused.contains(&name) || (!wanted && engine.table_id(&name).is_some()) {
                continue;
            }
            let copied = self
                .record_copying(engine, &marks, start, &name)
                .and_then(|()| bind_published(engine, catalog, types, relations, bind, published, start))
                .and_then(|table| self.sync_table(engine, table, &marks, start, &mut || Ok(())));
            match copied {
                Ok(until) => marks.skips.push((name, until)),
                // Its shape or a value stops it again: paused, the others go on.
                Err(error) if error.table().is_some() && self.options.pause_failing_tables => {
                    self.status.lock().pause(name.clone(), error.to_string());
                    marks.paused.push(name);
                }
                Err(error) => return Err(error),
            }
            synced = true;
        }
        if synced || interrupted.is_some() {
            engine.submit_from(&self.name, marks.position(start), Vec::new())?;
            engine.flush_batch()?;
        }
        Ok(marks)
    }

    /// Tables that joined the publication and have no mirror table yet, bound from
    /// the catalog and queued for their copy.
    pub(crate) fn find_joined_tables(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        types: &TypeCatalog,
        relations: &mut RelationMap,
        bind: &BindOptions,
        stream: &mut StreamState,
    ) -> PgSourceResult<()> {
        for published in published_tables(catalog, &publication_names(&self.options))? {
            if engine.table_id(&published.qualified()).is_some() {
                continue;
            }
            self.record_copying(engine, &stream.marks, stream.last_submitted, &published.qualified())?;
            let table = bind_published(engine, catalog, types, relations, bind, published, stream.last_submitted)?;
            stream.pending_sync.push(table.relation.oid);
        }
        Ok(())
    }

    /// Copies the queued tables while the replication session is kept alive, then
    /// records their marks (durably with the next checkpoint).
    pub(crate) fn sync_pending(
        &self,
        engine: &Engine,
        catalog: &mut PgConnection,
        replication: &mut PgConnection,
        relations: &RelationMap,
        stream: &mut StreamState,
    ) -> PgSourceResult<()> {
        let published = published_tables(catalog, &publication_names(&self.options))?;
        let confirmed = stream.confirmed;
        let mut keep_alive = || -> PgSourceResult<()> {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0) - POSTGRES_EPOCH_MICROS;
            replication.send_copy_data(&standby_status_update(confirmed, confirmed, confirmed, now, false))?;
            Ok(())
        };
        for oid in std::mem::take(&mut stream.pending_sync) {
            let relation = relations.get(oid, stream.last_submitted)?.clone();
            let listed = published.iter().find(|table| table.qualified() == relation.name);
            let row_filter = listed.and_then(|table| table.row_filter.clone());
            let partitioned = listed.is_some_and(|table| table.partitioned);
            let name = relation.name.clone();
            let table = CopyTable { relation, row_filter, partitioned };
            let until = self.sync_table(engine, table, &stream.marks, stream.last_submitted, &mut keep_alive)?;
            stream.marks.skips.push((name, until));
            engine.submit_from(&self.name, stream.marks.position(stream.last_submitted), Vec::new())?;
            stream.unflushed = true;
            stream.unflushed_since = Instant::now();
        }
        stream.last_feedback = Instant::now();
        Ok(())
    }
}

/// The temporary slot of a table sync: the source's slot name with `_sync`, within
/// PostgreSQL's 63 characters.
fn sync_slot_name(slot: &str) -> String {
    let base: String = slot.chars().take(58).collect();
    format!("{base}_sync")
}
