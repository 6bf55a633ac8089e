//! `retina ingest --data-dir DIR URI`: replay a finite CDC source (a Debezium JSON-lines
//! file, stdin, a JetStream stream until it idles, a bounded generator) or a
//! PostgreSQL database until the mirror caught up with it, into the lakehouse in DIR,
//! wait until everything is visible and flushed, and exit (non-zero when the source
//! failed).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use retina_cdc::ingest::{ingest_uri, StopWhen};
use retina_cdc::sink::tables::parse_primary_key_option;
use retina_cdc::sink::OnAbsentRow;
use retina_cdc::{Grouping, SinkOptions};
use retina_core::{Engine, EngineConfig};

#[derive(Args)]
pub struct IngestArgs {
    /// The lakehouse (Parquet files and catalog): a directory or an object-store URL
    /// (`s3://BUCKET/PREFIX?…`, `gs://…`, `az://…`), which this process leases.
    #[arg(long)]
    data_dir: PathBuf,
    /// The source: file:PATH, - (stdin), nats://HOST:PORT/STREAM, generator:chbench?rate=N&seconds=S,
    /// or postgres://USER@HOST/DB?OPTIONS (copied, then streamed until caught up).
    uri: String,
    /// Primary key of a table whose messages carry no key, or a key with fields that are no
    /// columns (added by a transform such as ByLogicalTableRouter): TABLE=COL[,COL...] (repeatable).
    #[arg(long = "primary-key", value_name = "TABLE=COL[,COL...]")]
    primary_keys: Vec<String>,
    /// Create tables of schemaless streams from their images: each column typed by its
    /// first non-null value; fields that appear later become columns.
    #[arg(long)]
    infer_schema: bool,
    /// Write bad input here and continue: a change event that cannot be applied takes
    /// its whole source transaction along; a line that is not even a readable event
    /// (malformed JSON, no op) goes alone.
    #[arg(long, value_name = "PATH")]
    dead_letter: Option<PathBuf>,
    /// The table of messages that carry no `source` block (a single-table file).
    #[arg(long, value_name = "NAME")]
    table: Option<String>,
    /// An update or delete of a row the lakehouse does not have (a stream that did not
    /// start with a snapshot): error, or upsert (insert the update's after-image,
    /// ignore the delete; both counted).
    #[arg(long, value_name = "error|upsert", default_value = "error")]
    on_absent_row: String,
    /// Grouping of events without transaction metadata: source-txid or event.
    #[arg(long, value_name = "MODE", default_value = "source-txid")]
    no_transaction_metadata_grouping: String,
    /// Live sources (NATS, generator): stop after this many seconds without a message.
    #[arg(long, default_value_t = 2.0)]
    idle_exit_seconds: f64,
    /// Seconds between checkpoints while the ingest runs (it always ends with one).
    #[arg(long, default_value_t = 5.0)]
    checkpoint_seconds: f64,
    #[command(flatten)]
    publish: super::publishing::PublishArgs,
    #[command(flatten)]
    compression: super::file_compression::CompressionArgs,
    /// Print the report as one JSON object on the last line.
    #[arg(long)]
    json: bool,
}

pub fn run(args: IngestArgs) -> anyhow::Result<()> {
    let mut primary_keys = HashMap::new();
    for option in &args.primary_keys {
        let (table, columns) = parse_primary_key_option(option)?;
        primary_keys.insert(table, columns);
    }
    let grouping: Grouping = args.no_transaction_metadata_grouping.parse()?;
    let on_absent_row: OnAbsentRow = args.on_absent_row.parse()?;
    if super::serve_sources::is_postgres(&args.uri)
        && (!args.primary_keys.is_empty() || args.infer_schema || args.dead_letter.is_some() || args.table.is_some())
    {
        anyhow::bail!(
            "--primary-key, --infer-schema, --dead-letter and --table are for change-event streams; \
             a PostgreSQL source takes keys and types from the database's catalog"
        );
    }
    let options = SinkOptions {
        primary_keys,
        infer_schema: args.infer_schema,
        grouping,
        dead_letter: args.dead_letter,
        table: args.table,
        on_absent_row,
    };
    let location = args.data_dir.to_str().with_context(|| format!("{} is not UTF-8", args.data_dir.display()))?;
    let shown = retina_storage::redacted(location);
    let publish = args.publish.options()?;
    let store = super::serve::open_lake(location, publish, args.compression.goal(), "ingest")?;
    // Opens (and recovers) the lakehouse: a source ingested before resumes after its
    // recorded position, so re-running an ingest applies nothing twice.
    let config = EngineConfig {
        checkpoint_interval: Some(super::serve::checkpoint_interval(args.checkpoint_seconds)?),
        ..EngineConfig::default()
    };
    let store = Arc::new(store);
    let engine = Engine::open(config, Arc::clone(&store) as _).with_context(|| format!("opening the engine on {shown}"))?;
    let quiet = Duration::from_secs_f64(args.idle_exit_seconds.max(0.0));
    if super::serve_sources::is_postgres(&args.uri) {
        return ingest_postgres(engine, &args.uri, quiet, &shown);
    }
    let stop = StopWhen::idle_for(quiet);
    let report = ingest_uri(&engine, &args.uri, options, stop)?;
    // Everything visible, flushed and checkpointed (with the source position), so a
    // later process can open DIR, query it, and resume after `visible_position`.
    engine.close().context("closing the lakehouse (flush and checkpoint)")?;
    let stats = &report.stats;
    println!(
        "ingested {} from {}: {} transactions, {} row changes in {:.2} s; {} duplicates dropped, {} dead letters, {} absent-row upserts, {} absent-row deletes ignored; position {}",
        shown,
        report.source,
        stats.transactions_applied,
        stats.row_changes_applied,
        report.seconds,
        stats.duplicate_transactions,
        stats.dead_letters,
        stats.absent_row_upserts,
        stats.absent_row_deletes_ignored,
        report.visible_position.as_deref().unwrap_or("-"),
    );
    let publication = store.publication_status();
    if let Some(cut) = &publication.cut {
        println!(
            "published ts {} as open tables ({} tables; {} publications, {:.1} ms each on average, {:.1} ms at most){}",
            cut.ts,
            cut.tables.len(),
            publication.publications,
            publication.total_millis / publication.publications.max(1) as f64,
            publication.max_millis,
            publication.error.as_deref().map_or(String::new(), |e| format!("; last error: {e}")),
        );
    } else if let Some(error) = &publication.error {
        println!("not published: {error}");
    }
    if args.json {
        let mut json = serde_json::to_value(&report)?;
        json["publications"] = serde_json::json!(publication.publications);
        json["publication_ms_mean"] = serde_json::json!(publication.total_millis / publication.publications.max(1) as f64);
        json["publication_ms_max"] = serde_json::json!(publication.max_millis);
        json["published_ts"] = serde_json::json!(publication.cut.as_ref().map(|c| c.ts));
        json["published_tables"] = serde_json::json!(publication.cut.as_ref().map(|c| c.tables.iter().map(|t| &t.table).collect::<Vec<_>>()));
        // A table no format describes is left out of every cut: a script must see why.
        json["publication_error"] = serde_json::json!(publication.error);
        println!("{json}");
    }
    Ok(())
}

/// Mirrors a PostgreSQL database until caught up (no transaction for `quiet` after
/// reaching the server's position), then closes the lakehouse. What was applied
/// before a failure is still made durable, and the failure is the exit status.
fn ingest_postgres(engine: Engine, uri: &str, quiet: Duration, shown: &str) -> anyhow::Result<()> {
    use retina_core::redact::RedactedUri;
    use retina_postgres::{PgSource, PgSourceOptions};
    let options = PgSourceOptions::parse(uri).with_context(|| format!("source {}", RedactedUri::new(uri)))?;
    let source = PgSource::new(options);
    let started = std::time::Instant::now();
    let result = source.run_until_caught_up(&engine, quiet);
    engine.close().context("closing the lakehouse (flush and checkpoint)")?;
    result.with_context(|| format!("source {}", source.name()))?;
    let status = source.status().lock().clone();
    println!(
        "ingested {shown} from {}: {} rows copied, {} transactions, {} row changes streamed in {:.2} s; {} duplicates dropped; position {}",
        source.name(),
        status.copied_rows,
        status.transactions,
        status.row_changes,
        started.elapsed().as_secs_f64(),
        status.duplicate_transactions,
        status.applied_lsn,
    );
    // What is not mirrored is said every time, not only in a log line the first time.
    if !status.left_out.is_empty() {
        println!("  not mirrored (no primary key or replica identity): {}", status.left_out.join(", "));
    }
    for (table, error) in &status.paused {
        println!("  paused, not up to date: {table}: {error} (fix the cause, then ingest again with resync={table})");
    }
    Ok(())
}
