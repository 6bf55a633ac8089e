//! `retina bench postgres`: whole-system figures of the PostgreSQL source against a
//! running server (`--url`, a superuser on a database with `wal_level = logical`).
//!
//! - **throughput**: a backlog of row changes (inserts then updates, in 10K-row
//!   transactions) is written with the source stopped; then the source starts and we
//!   time until all are applied. The same backlog is decoded by PostgreSQL alone
//!   (`pg_logical_slot_get_binary_changes` on a second slot) to tell whose limit it is.
//! - **freshness**: a client commits 10-row transactions at a steady rate; each
//!   applied transaction's source commit time is compared with when it is visible.
//! - **copy**: the initial copy speed of a large table.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use retina_core::storage::LakeStore;
use retina_core::{Engine, EngineConfig};
use serde::Serialize;

use retina_postgres::conninfo::PgSourceOptions;
use retina_postgres::error::{PgSourceError, PgSourceResult};
use retina_postgres::replicator::PgSource;
use retina_postgres::status::Phase;
use retina_postgres::wire::PgConnection;

use crate::measure::{cpu_seconds_of, process_cpu_seconds, threads_cpu_seconds, Latency};

/// What the throughput run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ThroughputFigures {
    pub row_changes: u64,
    pub seconds: f64,
    pub row_changes_per_second: f64,
    /// PostgreSQL decoding the same backlog alone, without us.
    pub postgres_decode_seconds: f64,
    pub postgres_decode_per_second: f64,
    /// CPU time (user + system) this process spent while applying the backlog, and
    /// as a share of the wall time: well below 1.0 (one core) means we wait on the
    /// server, not the other way round.
    pub retina_cpu_seconds: f64,
    pub retina_cpu_share: f64,
    /// The same for the PostgreSQL walsender process that decodes and sends to us
    /// (read from `/proc`, so only when the server runs on this machine): near 1.0
    /// means it is the bottleneck.
    pub walsender_cpu_share: Option<f64>,
    /// Our busiest thread during the run and its share of one core: a single thread
    /// near 1.0 would be our bottleneck even with cores to spare.
    pub busiest_thread: Option<(String, f64)>,
}

/// What the freshness run measured (milliseconds, source commit to visible).
#[derive(Clone, Debug, Serialize)]
pub struct FreshnessFigures {
    pub target_row_changes_per_second: u64,
    pub achieved_row_changes_per_second: f64,
    pub transactions: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What the copy run measured.
#[derive(Clone, Debug, Serialize)]
pub struct CopyFigures {
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_second: f64,
}

fn connect(url: &str) -> PgSourceResult<PgConnection> {
    Ok(PgConnection::connect(&PgSourceOptions::parse(url)?.connect, false)?)
}

fn with_options(url: &str, options: &str) -> String {
    if url.contains('?') {
        format!("{url}&{options}")
    } else {
        format!("{url}?{options}")
    }
}

fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> PgSourceResult<Option<T>>) -> PgSourceResult<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe()? {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(PgSourceError::Setup(format!("benchmark: {what} did not happen within {limit:?}")));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `source` on a thread until `done` says so; returns what `done` returned.
fn run_source<T>(engine: &Arc<Engine>, source: PgSource, done: impl FnMut(&retina_postgres::status::PgSourceStatus) -> Option<T>) -> PgSourceResult<T> {
    let status = source.status();
    let stop = source.stop_flag();
    let runner = {
        let engine = Arc::clone(engine);
        std::thread::Builder::new()
            .name("pg-replication".into())
            .spawn(move || source.run(&engine))
            .map_err(|e| PgSourceError::Setup(format!("cannot start the source thread: {e}")))?
    };
    let mut done = done;
    let outcome = wait_for(Duration::from_secs(3600), "the source run", || {
        let now = status.lock().clone();
        if let Some(error) = &now.error {
            return Err(PgSourceError::Setup(format!("the source failed: {error}")));
        }
        Ok(done(&now))
    });
    stop.store(true, Ordering::Relaxed);
    let ended = runner.join().map_err(|_| PgSourceError::Setup("the source thread panicked".into()))?;
    let value = outcome?;
    ended?;
    Ok(value)
}

fn drop_bench_objects(connection: &mut PgConnection, slots: &[&str], publication: &str, tables: &[&str]) -> PgSourceResult<()> {
    for slot in slots {
        // A walsender of an earlier run may still be winding down on it.
        connection.simple_query(&format!(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"
        ))?;
        wait_for(Duration::from_secs(10), "the slot's walsender to end", || {
            let active = connection
                .query_rows(&format!("SELECT 1 FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"))?;
            Ok(active.is_empty().then_some(()))
        })?;
        connection.simple_query(&format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ))?;
    }
    connection.simple_query(&format!("DROP PUBLICATION IF EXISTS {publication}"))?;
    for table in tables {
        connection.simple_query(&format!("DROP TABLE IF EXISTS {table}"))?;
    }
    Ok(())
}

/// See the module documentation. `store` must be empty.
pub fn throughput(url: &str, store: Arc<dyn LakeStore>, config: EngineConfig, rows: u64) -> PgSourceResult<ThroughputFigures> {
    let mut sql = connect(url)?;
    let (publication, slot, decode_slot) = ("retina_bench_tp", "retina_bench_tp", "retina_bench_decode");
    drop_bench_objects(&mut sql, &[slot, decode_slot], publication, &["bench_tp"])?;
    sql.simple_query(&format!(
        "CREATE TABLE bench_tp (id int8 PRIMARY KEY, a int8 NOT NULL, b text NOT NULL); CREATE PUBLICATION {publication} FOR TABLE bench_tp"
    ))?;
    let engine = Arc::new(Engine::open(config, store)?);
    let uri = with_options(url, &format!("publication={publication}&slot={slot}"));
    // Set up the slot (empty copy), then stop: the backlog builds up without us.
    run_source(&engine, PgSource::new(PgSourceOptions::parse(&uri)?), |s| (s.phase == Phase::Streaming).then_some(()))?;
    sql.simple_query(&format!("SELECT pg_create_logical_replication_slot('{decode_slot}', 'pgoutput')"))?;
    const CHUNK: u64 = 10_000;
    let mut start = 0;
    while start < rows {
        let end = (start + CHUNK).min(rows);
        sql.simple_query(&format!("INSERT INTO bench_tp SELECT g, g, md5(g::text) FROM generate_series({}, {end}) g", start + 1))?;
        start = end;
    }
    let mut start = 0;
    while start < rows {
        let end = (start + CHUNK).min(rows);
        sql.simple_query(&format!("UPDATE bench_tp SET a = a + 1 WHERE id > {start} AND id <= {end}"))?;
        start = end;
    }
    let row_changes = 2 * rows;
    let began = Instant::now();
    let cpu_before = process_cpu_seconds().unwrap_or(0.0);
    let threads_before = threads_cpu_seconds();
    // The walsender serving our slot: its CPU from when we first see it to the end.
    let mut walsender: Option<(String, f64, Instant)> = None;
    let mut walsender_share = None;
    let mut busiest_thread = None;
    run_source(&engine, PgSource::new(PgSourceOptions::parse(&uri)?), |s| {
        if walsender.is_none() {
            let pid = sql
                .query_rows(&format!("SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"))
                .ok()
                .and_then(|rows| rows.into_iter().next())
                .and_then(|row| row.into_iter().next().flatten());
            walsender = pid.and_then(|pid| cpu_seconds_of(&pid).map(|cpu| (pid, cpu, Instant::now())));
        }
        let done = s.row_changes >= row_changes;
        if done {
            // Measured while the source thread still runs (its entry goes when it ends).
            let elapsed = began.elapsed().as_secs_f64();
            busiest_thread = threads_cpu_seconds()
                .into_iter()
                .map(|(tid, (name, cpu))| (name, (cpu - threads_before.get(&tid).map_or(0.0, |(_, before)| *before)) / elapsed))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((pid, cpu, since)) = &walsender {
                walsender_share = cpu_seconds_of(pid).map(|now| (now - cpu) / since.elapsed().as_secs_f64());
            }
        }
        done.then_some(())
    })?;
    engine.sync()?;
    let seconds = began.elapsed().as_secs_f64();
    let retina_cpu_seconds = process_cpu_seconds().unwrap_or(0.0) - cpu_before;
    let decode_began = Instant::now();
    sql.simple_query(&format!(
        "SELECT count(*) FROM pg_logical_slot_get_binary_changes('{decode_slot}', NULL, NULL, 'proto_version', '1', 'publication_names', '{publication}')"
    ))?;
    let postgres_decode_seconds = decode_began.elapsed().as_secs_f64();
    drop_bench_objects(&mut sql, &[slot, decode_slot], publication, &["bench_tp"])?;
    Ok(ThroughputFigures {
        row_changes,
        seconds,
        row_changes_per_second: row_changes as f64 / seconds,
        postgres_decode_seconds,
        postgres_decode_per_second: row_changes as f64 / postgres_decode_seconds,
        retina_cpu_seconds,
        retina_cpu_share: retina_cpu_seconds / seconds,
        walsender_cpu_share: walsender_share,
        busiest_thread,
    })
}

/// See the module documentation. 10-row transactions at `rate` row changes/s.
pub fn freshness(url: &str, store: Arc<dyn LakeStore>, config: EngineConfig, rate: u64, seconds: u64) -> PgSourceResult<FreshnessFigures> {
    let mut sql = connect(url)?;
    let (publication, slot) = ("retina_bench_fresh", "retina_bench_fresh");
    drop_bench_objects(&mut sql, &[slot], publication, &["bench_fresh"])?;
    sql.simple_query(&format!(
        "CREATE TABLE bench_fresh (id int8 PRIMARY KEY, v int8 NOT NULL); CREATE PUBLICATION {publication} FOR TABLE bench_fresh"
    ))?;
    let engine = Arc::new(Engine::open(config, store)?);
    let uri = with_options(url, &format!("publication={publication}&slot={slot}"));
    let (probe, applied) = std::sync::mpsc::channel();
    let source = PgSource::new(PgSourceOptions::parse(&uri)?).with_visibility_probe(probe);
    let status = source.status();
    let stop = source.stop_flag();
    let runner = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || source.run(&engine))
    };
    wait_for(Duration::from_secs(60), "streaming", || Ok((status.lock().phase == Phase::Streaming).then_some(())))?;
    let observer = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || -> Vec<f64> {
            let mut latencies = Vec::new();
            for (ts, commit_micros) in applied {
                if engine.wait_visible(ts).is_err() {
                    break;
                }
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
                latencies.push((now - commit_micros) as f64 / 1000.0);
            }
            latencies
        })
    };
    const ROWS_PER_TRANSACTION: u64 = 10;
    let transactions = rate * seconds / ROWS_PER_TRANSACTION;
    let interval = Duration::from_secs_f64(ROWS_PER_TRANSACTION as f64 / rate as f64);
    let began = Instant::now();
    for t in 0..transactions {
        let due = began + interval * t as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let first = t * ROWS_PER_TRANSACTION;
        sql.simple_query(&format!(
            "INSERT INTO bench_fresh SELECT g, g FROM generate_series({}, {}) g",
            first + 1,
            first + ROWS_PER_TRANSACTION
        ))?;
    }
    let elapsed = began.elapsed().as_secs_f64();
    wait_for(Duration::from_secs(120), "catching up", || {
        let now = status.lock().clone();
        if let Some(error) = now.error {
            return Err(PgSourceError::Setup(format!("the source failed: {error}")));
        }
        Ok((now.transactions >= transactions).then_some(()))
    })?;
    stop.store(true, Ordering::Relaxed);
    runner.join().map_err(|_| PgSourceError::Setup("the source thread panicked".into()))??;
    let latencies = observer.join().map_err(|_| PgSourceError::Setup("the observer panicked".into()))?;
    let latency = Latency::of(latencies);
    drop_bench_objects(&mut sql, &[slot], publication, &["bench_fresh"])?;
    Ok(FreshnessFigures {
        target_row_changes_per_second: rate,
        achieved_row_changes_per_second: (transactions * ROWS_PER_TRANSACTION) as f64 / elapsed,
        transactions: latency.count,
        p50_ms: latency.p50_ms,
        p99_ms: latency.p99_ms,
        max_ms: latency.max_ms,
    })
}

/// See the module documentation: a `rows`-row table, copied by a fresh source.
pub fn copy(url: &str, store: Arc<dyn LakeStore>, config: EngineConfig, rows: u64) -> PgSourceResult<CopyFigures> {
    let mut sql = connect(url)?;
    let (publication, slot) = ("retina_bench_copy", "retina_bench_copy");
    drop_bench_objects(&mut sql, &[slot], publication, &["bench_copy"])?;
    sql.simple_query(&format!(
        "CREATE TABLE bench_copy (id int8 PRIMARY KEY, a int8 NOT NULL, price numeric(12, 2) NOT NULL, name text NOT NULL, at timestamptz NOT NULL);
         INSERT INTO bench_copy SELECT g, g * 7, (g % 100000) / 100.0, md5(g::text), timestamptz '2024-01-01' + g * interval '1 second' FROM generate_series(1, {rows}) g;
         CREATE PUBLICATION {publication} FOR TABLE bench_copy"
    ))?;
    let engine = Arc::new(Engine::open(config, store)?);
    let uri = with_options(url, &format!("publication={publication}&slot={slot}"));
    let began = Instant::now();
    let copied = run_source(&engine, PgSource::new(PgSourceOptions::parse(&uri)?), |s| (s.phase == Phase::Streaming).then_some(s.copied_rows))?;
    engine.sync()?;
    let seconds = began.elapsed().as_secs_f64();
    drop_bench_objects(&mut sql, &[slot], publication, &["bench_copy"])?;
    Ok(CopyFigures { rows: copied, seconds, rows_per_second: copied as f64 / seconds })
}
