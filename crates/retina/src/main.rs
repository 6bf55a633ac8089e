//! The `retina` command line (ARCHITECTURE.md §5). Each subcommand lives in its own
//! module under `commands/`; this file only parses arguments and dispatches.

mod allocator;
mod commands;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "retina", version, about = "Retina: a real-time transactional lakehouse")]
struct Cli {
    /// How log lines go to stderr: `text` or `json` (one object a line). Which: the
    /// RUST_LOG filter (`info`, `retina_postgres=debug`, …; default `warn`).
    #[arg(long, global = true, value_name = "text|json", default_value = "text")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

/// Installs the one logger every crate writes to through `tracing`.
fn init_logging(format: &str) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        "text" => builder.init(),
        "json" => builder.json().init(),
        other => anyhow::bail!("--log-format {other}: use text or json"),
    }
    Ok(())
}

#[derive(Subcommand)]
enum Command {
    /// The embedded main job: a CH-benCHmark-like change stream replayed into a data dir
    /// while snapshot queries run; prints a summary at the end.
    Demo(commands::demo::DemoArgs),
    /// Whole-system benchmarks; `--json` prints one JSON object on the last line.
    Bench(commands::bench::BenchArgs),
    /// The partition-aware meta-scheduler for data-pipeline jobs.
    Jobs(commands::jobs::JobsArgs),
    /// Replay a finite CDC source (Debezium JSON lines, a JetStream stream until idle,
    /// a bounded generator) into a data dir, then exit.
    Ingest(commands::ingest::IngestArgs),
    /// Replay sources into a data dir and serve SQL (PostgreSQL protocol) and metrics.
    Serve(commands::serve::ServeArgs),
    /// Run SQL against a running server or a stopped data dir.
    Sql(commands::sql::SqlArgs),
}

fn main() -> anyhow::Result<()> {
    allocator::configure();
    let cli = Cli::parse();
    init_logging(&cli.log_format)?;
    match cli.command {
        Command::Demo(args) => commands::demo::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Jobs(args) => commands::jobs::run(args),
        Command::Ingest(args) => commands::ingest::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Sql(args) => commands::sql::run(args),
    }
}
