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
    /// `SET search_path …` (`schema`: where unqualified names resolve) or a reset of
    /// it (`None`), kept by the connection ([`search_path_change`]); `command` gives
    /// the tag to answer with.
    SearchPath { command: SessionCommand, schema: Option<String> },
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

/// A statement that changes the connection's search path: `SET [SESSION|LOCAL]
/// search_path {=|TO} …` (`Some(Some(schema))`), `RESET search_path`, `RESET ALL` and
/// `DISCARD ALL` (`Some(None)`: back to the connection's start-up value).
pub fn search_path_change(statement: &Statement) -> Option<Option<String>> {
    let text = statement.to_string();
    let mut words = text.split_whitespace();
    let keyword = words.next()?.to_ascii_uppercase();
    match keyword.as_str() {
        "RESET" | "DISCARD" => {
            let what = words.next()?.to_ascii_lowercase();
            matches!(what.as_str(), "search_path" | "all").then_some(None)
        }
        "SET" => {
            let rest = text[keyword.len()..].trim_start();
            let rest = ["SESSION ", "LOCAL "]
                .iter()
                .find_map(|scope| rest.get(..scope.len()).filter(|head| head.eq_ignore_ascii_case(scope)).map(|_| &rest[scope.len()..]))
                .unwrap_or(rest)
                .trim_start();
            let value = rest.get(..11).filter(|name| name.eq_ignore_ascii_case("search_path")).map(|_| rest[11..].trim_start())?;
            let value = value.strip_prefix('=').or_else(|| {
                value.get(..3).filter(|to| to.eq_ignore_ascii_case("TO ")).map(|_| &value[3..])
            })?;
            Some(first_schema(value))
        }
        _ => None,
    }
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

    fn change(sql: &str) -> Option<Option<String>> {
        let mut statements = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {}).expect("parses");
        let statement = statements.pop_front().expect("one statement");
        search_path_change(&statement)
    }

    #[test]
    fn search_path_changes_are_recognized_and_their_first_schema_taken() {
        assert_eq!(change("SET search_path = chbench"), Some(Some("chbench".into())));
        assert_eq!(change("SET SESSION search_path TO '$user', ChBench, public"), Some(Some("chbench".into())));
        assert_eq!(change("set search_path to \"Mixed\""), Some(Some("Mixed".into())));
        assert_eq!(change("RESET search_path"), Some(None));
        assert_eq!(change("RESET ALL"), Some(None));
        assert_eq!(change("SET application_name = 'x'"), None);
        assert_eq!(change("SELECT 1"), None);
        assert_eq!(first_schema("\"$user\", public"), Some("public".into()));
        assert_eq!(first_schema("pg_catalog"), None);
    }
}
