//! What one SQL statement from a client becomes.

use retina_query::datafusion::logical_expr::LogicalPlan;

use super::copy_out::CopyFormat;
use retina_query::datafusion::sql::parser::Statement;

/// A statement ready to execute.
#[derive(Clone, Debug)]
pub enum PgStatement {
    /// A read-only query, planned (parameters still as placeholders), with the names
    /// PostgreSQL would give its result columns ([`super::column_names`]).
    Query { sql: String, plan: LogicalPlan, column_names: Vec<Option<String>> },
    /// `COPY … TO STDOUT`: a planned query whose rows go out as COPY data.
    CopyOut { plan: LogicalPlan, column_names: Vec<Option<String>>, format: CopyFormat },
    /// A session or transaction command Retina accepts without effect: every query
    /// already runs in its own consistent snapshot, and there is nothing to commit.
    Session(SessionCommand),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionCommand {
    Set,
    Reset,
    Begin,
    Commit,
    Rollback,
    /// `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`: psycopg wraps its type look-ups in a
    /// savepoint when a transaction is open.
    Savepoint,
    Release,
    RollbackTo,
    Discard,
}

impl SessionCommand {
    /// The command tag PostgreSQL answers with.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Set => "SET",
            Self::Reset => "RESET",
            Self::Begin => "BEGIN",
            Self::Commit => "COMMIT",
            Self::Rollback | Self::RollbackTo => "ROLLBACK",
            Self::Savepoint => "SAVEPOINT",
            Self::Release => "RELEASE",
            Self::Discard => "DISCARD ALL",
        }
    }

    /// Recognizes session commands by their leading keyword, which is stable across
    /// parser versions (the AST shapes of `SET` and transactions are not).
    pub fn of(statement: &Statement) -> Option<Self> {
        let text = statement.to_string();
        let mut words = text.split_whitespace();
        let keyword = words.next().unwrap_or("").to_ascii_uppercase();
        if keyword == "ROLLBACK" && words.next().is_some_and(|word| word.eq_ignore_ascii_case("TO")) {
            return Some(Self::RollbackTo);
        }
        match keyword.as_str() {
            "SET" => Some(Self::Set),
            "RESET" => Some(Self::Reset),
            "BEGIN" | "START" => Some(Self::Begin),
            "COMMIT" | "END" => Some(Self::Commit),
            "ROLLBACK" | "ABORT" => Some(Self::Rollback),
            "SAVEPOINT" => Some(Self::Savepoint),
            "RELEASE" => Some(Self::Release),
            "DISCARD" => Some(Self::Discard),
            _ => None,
        }
    }
}
