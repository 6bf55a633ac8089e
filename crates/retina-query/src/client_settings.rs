//! A SQL client's own settings, which planning reads.

use std::time::Duration;

/// What one SQL client has set for itself and planning reads: the schema that
/// unqualified table names resolve in (`SET search_path`, pgjdbc's
/// `currentSchema`, `options=-c search_path=…`). DataFusion resolves in one schema,
/// so a path's first schema is that one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClientSettings {
    pub default_schema: Option<String>,
    /// `statement_timeout`: the server cancels a statement that runs longer (shown
    /// by `SHOW statement_timeout`; `None`: no limit).
    pub statement_timeout: Option<Duration>,
    /// The user the client connected as (`current_user`, `session_user`).
    pub user: Option<String>,
}

impl ClientSettings {
    /// `statement_timeout` as PostgreSQL shows it: `0`, or the largest unit that
    /// divides it (`500ms`, `5s`, `2min`, `1h`).
    pub fn statement_timeout_text(&self) -> String {
        let Some(timeout) = self.statement_timeout else { return "0".to_string() };
        let millis = timeout.as_millis();
        match millis {
            0 => "0".to_string(),
            m if m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
            m if m % 60_000 == 0 => format!("{}min", m / 60_000),
            m if m % 1000 == 0 => format!("{}s", m / 1000),
            m => format!("{m}ms"),
        }
    }
}
