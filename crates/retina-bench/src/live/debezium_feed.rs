//! The demo's change stream as a source database ships it: each generated
//! transaction is encoded as Debezium JSON lines (BEGIN, its change events, END) and
//! sent to the CDC crate's one ingest driver, running on its own thread — decode
//! stage, transaction reconstruction, exactly-once positions, durable
//! acknowledgements — the path `retina ingest` and `retina serve --source` take.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use retina_cdc::debezium::{DebeziumEncoder, EncoderOptions};
use retina_cdc::ingest::{run, IngestReport, StopWhen};
use retina_cdc::source::channel::{ChannelSource, EncodedChunk};
use retina_cdc::{CdcResult, SinkOptions};
use retina_core::{Engine, RowChange, TableSchema};

use super::{ChangeFeed, ChangeFeedFactory, FeedError};

/// The source name the demo's sink records positions under.
const SOURCE: &str = "demo:chbench-debezium";

/// Chunks in flight between the workload and the driver: enough to ride out a
/// checkpoint, few enough that the workload cannot run far ahead of replay.
const CHANNEL_CHUNKS: usize = 64;

/// Builds a [`DebeziumReplay`] over the engine's tables.
pub struct DebeziumFeed;

impl ChangeFeedFactory for DebeziumFeed {
    fn feed(&mut self, engine: &Arc<Engine>) -> Result<Box<dyn ChangeFeed>, FeedError> {
        let mut tables = engine.tables();
        tables.sort_by_key(|table| table.id());
        // The encoder names tables by id: `schemas[i]` must be table `i`.
        if let Some((position, table)) = tables.iter().enumerate().find(|(i, t)| t.id().0 as usize != *i) {
            return Err(format!("table {} has id {} at position {position}; the demo expects dense ids", table.name(), table.id().0).into());
        }
        let schemas: Vec<TableSchema> = tables.iter().map(|table| TableSchema::clone(&table.schema())).collect();
        let encoder = DebeziumEncoder::new(&schemas, EncoderOptions::default())?;
        let (sender, chunks) = crossbeam_channel::bounded(CHANNEL_CHUNKS);
        let engine = Arc::clone(engine);
        let driver = std::thread::Builder::new().name("retina-demo-source".into()).spawn(move || {
            let mut source = ChannelSource::new(chunks);
            run(&engine, SOURCE, &mut source, SinkOptions::default(), StopWhen::default())
        })?;
        Ok(Box::new(DebeziumReplay { encoder, pending: EncodedChunk { text: String::new(), row_changes: 0 }, sender: Some(sender), driver: Some(driver) }))
    }
}

/// Encodes transactions as they are generated and hands them to the driver in
/// chunks, one per workload tick.
struct DebeziumReplay {
    encoder: DebeziumEncoder,
    pending: EncodedChunk,
    sender: Option<Sender<EncodedChunk>>,
    driver: Option<JoinHandle<CdcResult<IngestReport>>>,
}

impl DebeziumReplay {
    /// The driver's outcome once it has ended (its error, when it failed).
    fn join(&mut self) -> Result<(), FeedError> {
        self.sender.take();
        match self.driver.take().map(JoinHandle::join) {
            Some(Ok(Ok(_))) | None => Ok(()),
            Some(Ok(Err(error))) => Err(error.into()),
            Some(Err(_)) => Err("the demo's ingest driver panicked".into()),
        }
    }
}

impl ChangeFeed for DebeziumReplay {
    fn apply(&mut self, changes: Vec<RowChange>) -> Result<(), FeedError> {
        self.encoder.encode_transaction(&changes, &mut self.pending.text)?;
        self.pending.row_changes += changes.len() as u64;
        Ok(())
    }

    fn idle(&mut self) -> Result<(), FeedError> {
        if self.pending.text.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.pending, EncodedChunk { text: String::new(), row_changes: 0 });
        let sent = self.sender.as_ref().is_some_and(|sender| sender.send(chunk).is_ok());
        if sent {
            return Ok(());
        }
        // The driver stopped reading: it failed; report why.
        self.join()?;
        Err("the demo's ingest driver ended early".into())
    }

    fn finish(mut self: Box<Self>) -> Result<(), FeedError> {
        self.idle()?;
        self.join()
    }
}

impl Drop for DebeziumReplay {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
