//! `retina demo`: the embedded main job. A CH-benCHmark-like change stream, encoded
//! as Debezium JSON and replayed by the CDC sink ([`retina_bench::live::DebeziumFeed`]), goes into a
//! data dir at a target rate while analytical queries run on fresh snapshots; a
//! summary follows.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use retina_bench::live::{self, Latency, LiveConfig};

use super::progress::TerminalProgress;

/// Marks a data dir as written by the demo, so a rerun may replace it.
const DEMO_MARKER: &str = ".retina-demo";

#[derive(Args)]
pub struct DemoArgs {
    /// Where the lakehouse files go. A previous demo's dir is replaced; any other
    /// non-empty dir is refused.
    #[arg(long, default_value = "retina-demo")]
    data_dir: PathBuf,
    /// How long to replay.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Target row changes per second.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Rows in the initial database.
    #[arg(long, default_value_t = 200_000)]
    base_rows: u64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Open the SQL endpoint (PostgreSQL protocol) once the base data is loaded and
    /// keep it open after the summary, until Ctrl-C.
    #[arg(long)]
    serve: bool,
    /// Address of the SQL endpoint with `--serve`.
    #[arg(long, default_value = retina_server::DEFAULT_SQL_LISTEN)]
    listen: String,
    /// Print the summary as one JSON object on the last line too.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    publish: super::publishing::PublishArgs,
}

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    if !(args.seconds > 0.0) {
        bail!("--seconds must be positive, got {}", args.seconds);
    }
    prepare_data_dir(&args.data_dir)?;
    eprintln!(
        "retina demo: {} s of CH-benCHmark-like changes at {} row changes/s into {}",
        args.seconds,
        args.rate,
        args.data_dir.display()
    );
    let publish = args.publish.options()?;
    let config = LiveConfig { base_rows: args.base_rows, seconds: args.seconds, rate: args.rate, seed: args.seed, publish };
    let mut progress = TerminalProgress::new();
    let mut sql = None;
    let listen = args.serve.then_some(args.listen.as_str());
    let (report, engine) = live::run_with(
        &config,
        &args.data_dir,
        &mut |phase, done, total| progress.update(phase, done, total),
        &mut live::DebeziumFeed,
        &mut |engine| sql = Some(super::demo_sql::DemoSql::start(engine, listen)),
    )?;
    progress.finish();
    let mut sql = sql.transpose()?;
    let sql_latencies = match sql.as_mut() {
        Some(sql) => sql.stop_queries()?,
        None => Vec::new(),
    };

    let latency = |l: &Latency| format!("p50 {:>8.2} ms  p99 {:>8.2} ms  ({} runs)", l.p50_ms, l.p99_ms, l.count);
    println!("Summary");
    println!("  base rows                 {}", report.base_rows);
    println!("  replayed                  {} row changes in {} transactions over {:.1} s", report.row_changes, report.transactions, report.seconds);
    println!("  throughput                {:.0} row changes/s", report.row_changes_per_s);
    println!("  freshness                 {}", latency(&report.freshness));
    println!("  CH-Q1 (order lines)       {}", latency(&report.q1_latency));
    println!("  new orders vs undelivered {}", latency(&report.consistency_latency));
    println!("  stock level               {}", latency(&report.stock_level_latency));
    for (name, sql_latency) in &sql_latencies {
        println!("  SQL {name:<21} {}", latency(sql_latency));
    }
    println!("  consistency violations    {}", report.consistency_violations);
    println!("  visibility memory         {:.3} bits per tuple over {} versions", report.visibility_bits_per_tuple, report.stored_versions);
    println!("  Parquet files flushed     {}", report.files_flushed);
    println!("  watermarks                HWM {}  LWM {}", report.high_watermark, report.low_watermark);
    println!("  data dir                  {}", args.data_dir.display());
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    if report.consistency_violations > 0 {
        bail!("{} snapshots saw new_order and undelivered orders disagree", report.consistency_violations);
    }
    if let (true, Some(sql)) = (args.serve, sql.as_mut()) {
        sql.serve_until_interrupted()?;
    }
    drop(sql);
    // Clean shutdown: a final checkpoint, so the data dir opens again as it is now.
    // Through the shared handle: a query task may still hold the engine for a moment,
    // and skipping the checkpoint then would lose everything not yet in a checkpoint.
    engine.flush_and_checkpoint().context("closing the lakehouse (flush and checkpoint)")?;
    Ok(())
}

fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let empty = dir.read_dir().with_context(|| format!("reading {}", dir.display()))?.next().is_none();
        if !empty {
            if !dir.join(DEMO_MARKER).exists() {
                bail!("{} is not empty and was not written by `retina demo`; pick another --data-dir", dir.display());
            }
            std::fs::remove_dir_all(dir).with_context(|| format!("removing the previous demo in {}", dir.display()))?;
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(DEMO_MARKER), b"written by retina demo; a rerun replaces this directory\n")?;
    Ok(())
}
