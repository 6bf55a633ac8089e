//! `retina sql`: one-shot queries (`-c`, repeatable) or a line-based shell, against a
//! running server (`--connect`, default 127.0.0.1:5433) or a stopped data dir
//! (`--data-dir`, an embedded engine). Output as an aligned table, CSV or JSON. A
//! server started with `--password-file` takes the password from `PGPASSWORD`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use futures::StreamExt;
use retina_core::{Engine, EngineConfig};
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::client::{ClientError, PgClient, StatementOutcome};
use retina_server::text_result::{OutputFormat, TextResult};
use retina_storage::ParquetLakeStore;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

impl From<Format> for OutputFormat {
    fn from(format: Format) -> Self {
        match format {
            Format::Table => OutputFormat::Table,
            Format::Csv => OutputFormat::Csv,
            Format::Json => OutputFormat::Json,
        }
    }
}

#[derive(Args)]
pub struct SqlArgs {
    /// Address of a running `retina serve` (HOST:PORT).
    #[arg(long, conflicts_with = "data_dir")]
    connect: Option<String>,
    /// Query a data dir (or object-store URL) with an embedded, read-only engine
    /// instead of a server: it reads the latest checkpoint, also while a writer runs.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// SQL to run (repeatable); without it, read statements from stdin.
    #[arg(short = 'c', long = "command")]
    commands: Vec<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    #[arg(long, default_value = "retina")]
    user: String,
    #[arg(long, default_value = "retina")]
    database: String,
}

/// Runs SQL text: the results of the statements that ran, and the error of the one
/// that failed (which ends the text, as in PostgreSQL).
trait Backend {
    fn run(&mut self, sql: &str) -> (Vec<StatementOutcome>, Option<anyhow::Error>);
}

struct Remote(PgClient);

impl Backend for Remote {
    fn run(&mut self, sql: &str) -> (Vec<StatementOutcome>, Option<anyhow::Error>) {
        match self.0.query_partial(sql) {
            Ok((outcomes, failure)) => (outcomes, failure.map(anyhow::Error::new)),
            Err(error) => (Vec::new(), Some(anyhow::Error::new(error).context("the connection failed"))),
        }
    }
}

/// An embedded, read-only engine over a data dir (stopped, or with its writer running). Created and dropped outside the
/// runtime (its storage owns a tokio runtime of its own).
struct Embedded {
    runtime: tokio::runtime::Runtime,
    session: Option<Arc<RetinaSession>>,
    engine: Option<Arc<Engine>>,
}

impl Embedded {
    fn open(dir: &Path) -> anyhow::Result<Self> {
        let location = dir.to_str().with_context(|| format!("{} is not UTF-8", dir.display()))?;
        if !retina_storage::is_url(location) && !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        let shown = retina_storage::redacted(location);
        // A reader: no lock or lease, so it runs beside a writer (on its latest
        // checkpoint), and nothing is written.
        let store = ParquetLakeStore::open_reader(location).with_context(|| format!("opening the lake in {shown}"))?;
        let config = EngineConfig { gc_interval: None, ..EngineConfig::default() };
        // Recovers the lakehouse from its latest checkpoint.
        let engine = Arc::new(
            Engine::open(config, Arc::new(store)).with_context(|| format!("opening the lakehouse in {shown}"))?,
        );
        let session = Arc::new(RetinaSession::new(Arc::clone(&engine), SourceRegistry::new(), SessionOptions::default()));
        // Deep statements plan on deep stacks, as in the server (retina-server's CONNECTION_STACK_BYTES).
        let runtime = tokio::runtime::Builder::new_multi_thread().thread_stack_size(64 << 20).enable_all().build()?;
        Ok(Self { runtime, session: Some(session), engine: Some(engine) })
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.session.take();
        self.engine.take();
    }
}

impl Backend for Embedded {
    fn run(&mut self, sql: &str) -> (Vec<StatementOutcome>, Option<anyhow::Error>) {
        let Some(session) = self.session.as_ref().map(Arc::clone) else {
            return (Vec::new(), Some(anyhow::anyhow!("session closed")));
        };
        self.runtime.block_on(async move {
            let mut outcomes = Vec::new();
            let statements = match session.parse(sql) {
                Ok(statements) => statements,
                Err(error) => return (outcomes, Some(error.into())),
            };
            for statement in statements {
                let result: anyhow::Result<StatementOutcome> = async {
                    let plan = session.plan(statement).await?;
                    let mut stream = session.execute(plan).await?;
                    let schema = stream.schema();
                    let mut batches = Vec::new();
                    while let Some(batch) = stream.next().await {
                        batches.push(batch.map_err(retina_query::QueryError::from)?);
                    }
                    Ok(StatementOutcome::Rows(TextResult::from_batches(&schema, &batches)?))
                }
                .await;
                match result {
                    Ok(outcome) => outcomes.push(outcome),
                    Err(error) => return (outcomes, Some(error)),
                }
            }
            (outcomes, None)
        })
    }
}

pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    let mut backend: Box<dyn Backend> = match &args.data_dir {
        Some(dir) => Box::new(Embedded::open(dir)?),
        None => {
            let addr = args.connect.clone().unwrap_or_else(|| retina_server::DEFAULT_SQL_LISTEN.to_string());
            // Like libpq: the password of a server started with --password-file comes
            // from PGPASSWORD (never from the command line, where `ps` would show it).
            let password = std::env::var("PGPASSWORD").ok();
            let client = PgClient::connect_with_password(&addr, &args.user, &args.database, password.as_deref())
                .map_err(|error| match error {
                    ClientError::Connect { .. } => {
                        anyhow::Error::new(error).context(format!("is `retina serve` running on {addr}?"))
                    }
                    other => anyhow::Error::new(other).context(format!("cannot log in to {addr} as {}", args.user)),
                })?;
            Box::new(Remote(client))
        }
    };
    let format = OutputFormat::from(args.format);
    if !args.commands.is_empty() {
        for sql in &args.commands {
            let (outcomes, failure) = backend.run(sql);
            print_outcomes(&outcomes, format)?;
            if let Some(error) = failure {
                return Err(sql_error(error));
            }
        }
        return Ok(());
    }
    shell(backend.as_mut(), format)
}

fn sql_error(error: anyhow::Error) -> anyhow::Error {
    match error.downcast_ref::<retina_query::QueryError>() {
        Some(query) => anyhow::anyhow!("ERROR: {query} (SQLSTATE {})", query.sqlstate()),
        None => error,
    }
}

/// Runs `sql`, prints its results and its error; returns 1 if it failed.
fn run_and_print(backend: &mut dyn Backend, sql: &str, format: OutputFormat) -> anyhow::Result<usize> {
    let (outcomes, failure) = backend.run(sql);
    print_outcomes(&outcomes, format)?;
    Ok(match failure {
        Some(error) => {
            eprintln!("{:#}", sql_error(error));
            1
        }
        None => 0,
    })
}

fn print_outcomes(outcomes: &[StatementOutcome], format: OutputFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for outcome in outcomes {
        match outcome {
            StatementOutcome::Rows(result) => out.write_all(result.render(format).as_bytes())?,
            StatementOutcome::Command(tag) if format == OutputFormat::Table => writeln!(out, "{tag}")?,
            StatementOutcome::Command(_) | StatementOutcome::Empty => {}
        }
    }
    out.flush()?;
    Ok(())
}

/// Statements being typed: lines accumulate until one ends with `;`.
#[derive(Default)]
struct StatementBuffer {
    text: String,
}

/// What a line of input asks for.
enum LineOutcome {
    Quit,
    /// A complete statement (or several) to run.
    Run(String),
    More,
}

impl StatementBuffer {
    fn push(&mut self, line: &str) -> LineOutcome {
        let trimmed = line.trim();
        if self.text.is_empty() && (trimmed == "\\q" || trimmed == "quit" || trimmed == "exit") {
            return LineOutcome::Quit;
        }
        self.text.push_str(line);
        self.text.push('\n');
        if trimmed.ends_with(';') {
            LineOutcome::Run(std::mem::take(&mut self.text))
        } else {
            LineOutcome::More
        }
    }

    fn prompt(&self) -> &'static str {
        if self.text.is_empty() {
            "retina=> "
        } else {
            "retina-> "
        }
    }
}

/// Reads statements from stdin, each ended by `;`; `\q` quits. Errors are printed
/// and the shell goes on. On a terminal, lines can be edited and the history is kept
/// in `~/.retina_sql_history`.
fn shell(backend: &mut dyn Backend, format: OutputFormat) -> anyhow::Result<()> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return interactive_shell(backend, format);
    }
    let mut buffer = StatementBuffer::default();
    let mut failures = 0;
    for line in std::io::stdin().lock().lines() {
        match buffer.push(&line?) {
            LineOutcome::Quit => break,
            LineOutcome::Run(sql) => failures += run_and_print(backend, &sql, format)?,
            LineOutcome::More => {}
        }
    }
    if !buffer.text.trim().is_empty() {
        failures += run_and_print(backend, &buffer.text, format)?;
    }
    if failures > 0 {
        bail!("{failures} statement(s) failed");
    }
    Ok(())
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".retina_sql_history"))
}

fn interactive_shell(backend: &mut dyn Backend, format: OutputFormat) -> anyhow::Result<()> {
    use rustyline::error::ReadlineError;
    eprintln!("retina sql: end statements with ';', \\q to quit");
    let mut editor = rustyline::DefaultEditor::new().context("starting the line editor")?;
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is the first session, not an error.
        let _ = editor.load_history(path);
    }
    let mut buffer = StatementBuffer::default();
    loop {
        match editor.readline(buffer.prompt()) {
            Ok(line) => match buffer.push(&line) {
                LineOutcome::Quit => break,
                LineOutcome::Run(sql) => {
                    let _ = editor.add_history_entry(sql.trim());
                    run_and_print(backend, &sql, format)?;
                }
                LineOutcome::More => {}
            },
            // Ctrl-C drops the statement being typed, as in psql.
            Err(ReadlineError::Interrupted) => buffer = StatementBuffer::default(),
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error).context("reading a line"),
        }
    }
    if let Some(path) = &history {
        if let Err(error) = editor.save_history(path) {
            eprintln!("retina sql: could not save the history to {}: {error}", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_semicolons_and_quit_only_between_statements() {
        let mut buffer = StatementBuffer::default();
        assert_eq!(buffer.prompt(), "retina=> ");
        assert!(matches!(buffer.push("SELECT 1"), LineOutcome::More));
        assert_eq!(buffer.prompt(), "retina-> ");
        // Inside a statement, `\q` is just text.
        assert!(matches!(buffer.push("\\q"), LineOutcome::More));
        match buffer.push("  , 2;") {
            LineOutcome::Run(sql) => assert_eq!(sql, "SELECT 1\n\\q\n  , 2;\n"),
            _ => panic!("a complete statement"),
        }
        assert_eq!(buffer.prompt(), "retina=> ");
        assert!(matches!(buffer.push(" \\q "), LineOutcome::Quit));
        assert!(matches!(buffer.push("exit"), LineOutcome::Quit));
    }
}
