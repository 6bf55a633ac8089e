//! What one SQL statement from a client becomes.

use std::time::Duration;

use retina_query::datafusion::logical_expr::LogicalPlan;
use retina_query::datafusion::sql::parser::Statement;

use super::copy_out::CopyFormat;
use super::cursors::PlannedCursor;

/// A statement ready to execute.
#[derive(Clone, Debug)]
pub enum PgStatement {
    /// A read-only query, planned (parameters still as placeholders), with the names
    /// PostgreSQL would give its result columns ([`super::column_names`]).
    Query { sql: String, plan: LogicalPlan, column_names: Vec<Option<String>> },
    /// `COPY … TO STDOUT`: a planned query whose rows go out as COPY data.
    CopyOut { plan: LogicalPlan, column_names: Vec<Option<String>>, format: CopyFormat },
    /// A `SET`, `RESET` or `DISCARD ALL` of a setting the connection keeps
    /// ([`setting_change`]); `command` gives the tag to answer with.
    Setting { command: SessionCommand, change: SettingChange },
    /// A session or transaction command: nothing is ever written, so there is nothing
    /// to commit; a transaction's isolation level decides whether its queries share
    /// one snapshot ([`super::transaction`]), and its end closes its cursors.
    Session(SessionCommand),
    /// `DECLARE`, `FETCH` or `CLOSE` of a cursor ([`super::cursors`]).
    Cursor(PlannedCursor),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionCommand {
    Set,
    Reset,
    /// `BEGIN`/`START TRANSACTION`; `one_snapshot` for REPEATABLE READ and
    /// SERIALIZABLE, whose queries all read the snapshot the first one takes.
    Begin { one_snapshot: bool },
    /// `SET TRANSACTION ISOLATION LEVEL …` (before the transaction's first query).
    SetTransaction { one_snapshot: bool },
    Commit,
    Rollback,
    /// `SAVEPOINT`, `RELEASE` and `ROLLBACK TO`: psycopg wraps its type look-ups in a
    /// savepoint when a transaction is open.
    Savepoint,
    Release,
    RollbackTo,
    Discard,
    /// `DEALLOCATE [PREPARE] name` and `DEALLOCATE ALL`: psycopg sends the latter
    /// once it has prepared statements by itself (after five runs of one query).
    /// Accepted without effect: a later Parse of the same name replaces the
    /// statement.
    Deallocate,
    DeallocateAll,
}

impl SessionCommand {
    /// The command tag PostgreSQL answers with.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Set => "SET",
            Self::Reset => "RESET",
            Self::Begin { .. } => "BEGIN",
            Self::SetTransaction { .. } => "SET",
            Self::Commit => "COMMIT",
            Self::Rollback | Self::RollbackTo => "ROLLBACK",
            Self::Savepoint => "SAVEPOINT",
            Self::Release => "RELEASE",
            Self::Discard => "DISCARD ALL",
            Self::Deallocate => "DEALLOCATE",
            Self::DeallocateAll => "DEALLOCATE ALL",
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
        if keyword == "DEALLOCATE" {
            let target = words.find(|word| !word.eq_ignore_ascii_case("PREPARE"))?;
            return Some(if target.eq_ignore_ascii_case("ALL") { Self::DeallocateAll } else { Self::Deallocate });
        }
        let upper = text.to_ascii_uppercase();
        let one_snapshot = upper.contains("REPEATABLE READ") || upper.contains("SERIALIZABLE");
        match keyword.as_str() {
            "SET" if upper.contains("ISOLATION LEVEL") && upper.split_whitespace().nth(1) == Some("TRANSACTION") => {
                Some(Self::SetTransaction { one_snapshot })
            }
            "SET" => Some(Self::Set),
            "RESET" => Some(Self::Reset),
            "BEGIN" | "START" => Some(Self::Begin { one_snapshot }),
            "COMMIT" | "END" => Some(Self::Commit),
            "ROLLBACK" | "ABORT" => Some(Self::Rollback),
            "SAVEPOINT" => Some(Self::Savepoint),
            "RELEASE" => Some(Self::Release),
            "DISCARD" => Some(Self::Discard),
            _ => None,
        }
    }
}

/// A change to a setting the connection keeps; `None` values go back to the
/// connection's start-up value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingChange {
    /// The schema unqualified names resolve in.
    SearchPath(Option<String>),
    /// How long a statement may run before it is cancelled (`None`: no limit).
    StatementTimeout(Option<Duration>),
    /// `RESET ALL`, `DISCARD ALL`.
    ResetAll,
}

/// Recognizes `SET [SESSION|LOCAL] {search_path|statement_timeout} {=|TO} …`,
/// `RESET` of either or `ALL`, and `DISCARD ALL`. Other settings are accepted
/// without effect ([`SessionCommand`]).
pub fn setting_change(statement: &Statement) -> Option<SettingChange> {
    let text = statement.to_string();
    let mut words = text.split_whitespace();
    let keyword = words.next()?.to_ascii_uppercase();
    match keyword.as_str() {
        "RESET" | "DISCARD" => match words.next()?.to_ascii_lowercase().as_str() {
            "search_path" => Some(SettingChange::SearchPath(None)),
            "statement_timeout" => Some(SettingChange::StatementTimeout(None)),
            "all" => Some(SettingChange::ResetAll),
            _ => None,
        },
        "SET" => {
            let rest = text[keyword.len()..].trim_start();
            let rest = ["SESSION ", "LOCAL "]
                .iter()
                .find_map(|scope| rest.get(..scope.len()).filter(|head| head.eq_ignore_ascii_case(scope)).map(|_| &rest[scope.len()..]))
                .unwrap_or(rest)
                .trim_start();
            let name_end = rest.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(rest.len());
            let (name, value) = (rest[..name_end].to_ascii_lowercase(), rest[name_end..].trim_start());
            let value = value.strip_prefix('=').or_else(|| value.get(..3).filter(|to| to.eq_ignore_ascii_case("TO ")).map(|_| &value[3..]))?;
            match name.as_str() {
                "search_path" => Some(SettingChange::SearchPath(first_schema(value))),
                "statement_timeout" => Some(SettingChange::StatementTimeout(timeout_value(value))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A `statement_timeout` value as PostgreSQL reads it: milliseconds, or a number
/// with a unit (`'5s'`, `'500ms'`, `'1min'`); 0 and `DEFAULT` mean no limit, and so
/// does a value it cannot read (PostgreSQL would refuse it; nothing is cut short).
pub fn timeout_value(value: &str) -> Option<Duration> {
    let value = value.trim().trim_matches('\'').trim();
    let digits = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let amount: u64 = value[..digits].parse().ok()?;
    let millis = match value[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "ms" => amount,
        "s" => amount.checked_mul(1000)?,
        "min" => amount.checked_mul(60_000)?,
        "h" => amount.checked_mul(3_600_000)?,
        _ => return None,
    };
    (millis > 0).then(|| Duration::from_millis(millis))
}

/// The schema a search path resolves unqualified names in: its first entry that
/// is a schema of tables (`$user` and `pg_catalog` are not), folded to lower case
/// unless quoted. `None` for a path of none of those (or `DEFAULT`).
pub fn first_schema(path: &str) -> Option<String> {
    path.split(',').map(str::trim).find_map(|entry| {
        let (name, quoted) = match entry.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
            Some(inner) => (inner.to_string(), true),
            None => match entry.strip_prefix('\'').and_then(|e| e.strip_suffix('\'')) {
                Some(inner) => (inner.to_string(), false),
                None => (entry.to_string(), false),
            },
        };
        let name = if quoted { name } else { name.to_lowercase() };
        let skipped = name.is_empty() || name == "$user" || name == "pg_catalog" || (!quoted && name == "default");
        (!skipped).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use retina_query::datafusion::sql::parser::DFParser;
    use retina_query::datafusion::sql::sqlparser::dialect::PostgreSqlDialect;

    use super::*;

    fn change(sql: &str) -> Option<SettingChange> {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parses");
        let statement = statements.pop_front().expect("one statement");
        setting_change(&statement)
    }

    fn path(schema: &str) -> Option<SettingChange> {
        Some(SettingChange::SearchPath(Some(schema.into())))
    }

    #[test]
    fn search_path_changes_are_recognized_and_their_first_schema_taken() {
        assert_eq!(change("SET search_path = chbench"), path("chbench"));
        assert_eq!(change("SET SESSION search_path TO '$user', ChBench, public"), path("chbench"));
        assert_eq!(change("set search_path to \"Mixed\""), path("Mixed"));
        assert_eq!(change("RESET search_path"), Some(SettingChange::SearchPath(None)));
        assert_eq!(change("RESET ALL"), Some(SettingChange::ResetAll));
        assert_eq!(change("SET application_name = 'x'"), None);
        assert_eq!(change("SELECT 1"), None);
        assert_eq!(first_schema("\"$user\", public"), Some("public".into()));
        assert_eq!(first_schema("pg_catalog"), None);
    }

    #[test]
    fn deallocate_is_a_session_command() {
        let command = |sql: &str| {
            let mut statements = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parses");
            SessionCommand::of(&statements.pop_front().expect("one statement"))
        };
        assert_eq!(command("DEALLOCATE ALL"), Some(SessionCommand::DeallocateAll));
        assert_eq!(command("DEALLOCATE PREPARE _pg3_0"), Some(SessionCommand::Deallocate));
        assert_eq!(command("DEALLOCATE _pg3_1").map(SessionCommand::tag), Some("DEALLOCATE"));
    }

    #[test]
    fn statement_timeouts_read_as_postgresql_reads_them() {
        let timeout = |ms: u64| Some(SettingChange::StatementTimeout(Some(Duration::from_millis(ms))));
        assert_eq!(change("SET statement_timeout = 1000"), timeout(1000));
        assert_eq!(change("SET statement_timeout TO '5s'"), timeout(5000));
        assert_eq!(change("SET SESSION statement_timeout = '2min'"), timeout(120_000));
        assert_eq!(change("SET statement_timeout = 0"), Some(SettingChange::StatementTimeout(None)));
        assert_eq!(change("RESET statement_timeout"), Some(SettingChange::StatementTimeout(None)));
        assert_eq!(timeout_value("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(timeout_value("soon"), None);
    }
}
