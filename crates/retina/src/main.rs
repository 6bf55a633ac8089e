//! The `retina` command line (ARCHITECTURE.md §5). Each subcommand lives in its own
//! module under `commands/`; this file only parses arguments and dispatches.

mod allocator;
mod commands;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "retina", version, about = "Retina: a real-time transactional lakehouse")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    match cli.command {
        Command::Demo(args) => commands::demo::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Jobs(args) => commands::jobs::run(args),
        Command::Ingest(args) => commands::ingest::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Sql(args) => commands::sql::run(args),
    }
}
