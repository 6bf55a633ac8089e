//! `retina bench replay --source nats`: the CH-benCHmark-like stream as Debezium JSON
//! in a JetStream stream, replayed by the same ingest driver `retina serve
//! --source nats://…` runs (durable pull consumer, decode stage, sink, durable
//! acknowledgements). Without a server address the benchmark starts its own
//! `nats-server -js` in a temporary directory.

use std::time::{Duration, Instant};

use retina_cdc::error::{CdcError, CdcResult};
use retina_cdc::ingest::{run, StopWhen};
use retina_cdc::sink::SinkOptions;
use retina_cdc::source::generator::EncodedChunk;
use retina_cdc::source::nats::NatsSource;
use retina_test_support::LocalNatsServer;
use serde::Serialize;

use crate::debezium_replay::{encoded_workload, DebeziumReplayConfig};

const STREAM: &str = "retina-bench";
/// How long the driver waits on an empty stream before it counts as replayed; not
/// part of the measured time.
const IDLE_EXIT: Duration = Duration::from_millis(500);

#[derive(Clone, Debug, Serialize)]
pub struct NatsReplayReport {
    pub server: String,
    pub row_changes: u64,
    pub messages: u64,
    pub transactions: u64,
    /// Messages published per second (the benchmark's producer, not Retina).
    pub publish_messages_per_s: f64,
    /// JetStream to visible and checkpointed mirror transactions, per second.
    pub row_changes_per_s: f64,
    pub replay_seconds: f64,
    pub shards: usize,
}

fn bench_error(reason: String) -> CdcError {
    CdcError::Source { source_name: "bench nats".into(), reason }
}

/// Publishes every line of `chunks` to the benchmark stream (created, or purged when
/// it exists), pipelining publishes and awaiting their acknowledgements in windows.
fn publish(server: &str, chunks: &[EncodedChunk], purge: bool) -> CdcResult<u64> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| bench_error(format!("runtime: {e}")))?;
    runtime.block_on(async {
        let client = async_nats::connect(server).await.map_err(|e| bench_error(format!("connect {server}: {e}")))?;
        let jetstream = async_nats::jetstream::new(client);
        let config = async_nats::jetstream::stream::Config {
            name: STREAM.into(),
            subjects: vec![format!("{STREAM}.>")],
            ..Default::default()
        };
        let stream = jetstream.get_or_create_stream(config).await.map_err(|e| bench_error(format!("stream: {e}")))?;
        if purge {
            stream.purge().await.map_err(|e| bench_error(format!("purge: {e}")))?;
            let _ = stream.delete_consumer("retina-bench").await;
        }
        let subject = format!("{STREAM}.cdc");
        let mut published = 0u64;
        let mut window = Vec::with_capacity(4096);
        for chunk in chunks {
            for line in chunk.text.lines() {
                let ack = jetstream
                    .publish(subject.clone(), line.to_string().into())
                    .await
                    .map_err(|e| bench_error(format!("publish: {e}")))?;
                window.push(ack);
                published += 1;
                if window.len() == 4096 {
                    for ack in window.drain(..) {
                        ack.await.map_err(|e| bench_error(format!("publish ack: {e}")))?;
                    }
                }
            }
        }
        for ack in window {
            ack.await.map_err(|e| bench_error(format!("publish ack: {e}")))?;
        }
        Ok(published)
    })
}

/// Publishes the initial load and replays it (untimed), then publishes the changes
/// and times their replay through the ingest driver until visible and checkpointed.
pub fn replay_nats(config: &DebeziumReplayConfig, server: Option<&str>, data_dir: &std::path::Path) -> CdcResult<NatsReplayReport> {
    let own = if server.is_none() { Some(LocalNatsServer::start().map_err(|e| bench_error(e.to_string()))?) } else { None };
    let server = server.or(own.as_ref().map(LocalNatsServer::address)).unwrap_or_default().to_string();
    let (engine, load, changes) = encoded_workload(config, data_dir)?;
    let uri = format!("nats://{server}/{STREAM}?durable=retina-bench");
    publish(&server, &load, true)?;
    let mut source = NatsSource::connect(&server, STREAM, "retina-bench")?;
    run(&engine, &uri, &mut source, SinkOptions::default(), StopWhen::idle_for(IDLE_EXIT))?;
    drop(source);

    let start = Instant::now();
    let messages = publish(&server, &changes, false)?;
    let publish_messages_per_s = messages as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let mut source = NatsSource::connect(&server, STREAM, "retina-bench")?;
    let replayed = run(&engine, &uri, &mut source, SinkOptions::default(), StopWhen::idle_for(IDLE_EXIT))?;
    let replay_seconds = (start.elapsed().saturating_sub(IDLE_EXIT)).as_secs_f64();
    drop(own);
    let row_changes: u64 = changes.iter().map(|c| c.row_changes).sum();
    if replayed.stats.row_changes_applied != row_changes {
        return Err(bench_error(format!(
            "replayed {} row changes of {row_changes} published",
            replayed.stats.row_changes_applied
        )));
    }
    Ok(NatsReplayReport {
        server,
        row_changes,
        messages,
        transactions: replayed.stats.transactions_applied,
        publish_messages_per_s,
        row_changes_per_s: row_changes as f64 / replay_seconds,
        replay_seconds,
        shards: engine.config().shards,
    })
}
