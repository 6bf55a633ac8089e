//! The demo's change stream as a source database ships it: each generated
//! transaction is encoded as Debezium JSON lines (BEGIN, its change events, END) and
//! replayed by the CDC sink — decoding, transaction reconstruction, exactly-once
//! positions — the path `retina ingest` and `retina serve --source` take.

use retina_bench::live::{ChangeFeed, ChangeFeedFactory, FeedError};
use retina_cdc::debezium::{DebeziumEncoder, EncoderOptions};
use retina_cdc::{Position, Sink, SinkOptions};
use retina_core::{Engine, RowChange, TableSchema};

/// The source name the demo's sink records positions under.
const SOURCE: &str = "demo:chbench-debezium";

/// Builds a [`DebeziumReplay`] over the engine's tables.
pub struct DebeziumFeed;

impl ChangeFeedFactory for DebeziumFeed {
    fn feed<'e>(&mut self, engine: &'e Engine) -> Result<Box<dyn ChangeFeed + 'e>, FeedError> {
        let mut tables = engine.tables();
        tables.sort_by_key(|table| table.id());
        // The encoder names tables by id: `schemas[i]` must be table `i`.
        if let Some((position, table)) = tables.iter().enumerate().find(|(i, t)| t.id().0 as usize != *i) {
            return Err(format!("table {} has id {} at position {position}; the demo expects dense ids", table.name(), table.id().0).into());
        }
        let schemas: Vec<TableSchema> = tables.iter().map(|table| TableSchema::clone(&table.schema())).collect();
        let encoder = DebeziumEncoder::new(&schemas, EncoderOptions::default())?;
        let sink = Sink::new(engine, SOURCE, SinkOptions::default())?;
        Ok(Box::new(DebeziumReplay { encoder, sink, text: String::new(), line: 0 }))
    }
}

/// Encodes and replays one transaction at a time.
struct DebeziumReplay<'e> {
    encoder: DebeziumEncoder,
    sink: Sink<'e>,
    text: String,
    /// Position of the last line handed to the sink (line numbers of the stream).
    line: u64,
}

impl ChangeFeed for DebeziumReplay<'_> {
    fn apply(&mut self, changes: Vec<RowChange>) -> Result<(), FeedError> {
        self.text.clear();
        self.encoder.encode_transaction(&changes, &mut self.text)?;
        for line in self.text.lines() {
            self.line += 1;
            self.sink.handle(Position::line(self.line), line)?;
        }
        Ok(())
    }

    fn idle(&mut self) -> Result<(), FeedError> {
        Ok(self.sink.idle()?)
    }
}
