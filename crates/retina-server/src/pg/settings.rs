//! The settings a connection keeps: `search_path` and `statement_timeout`, set by
//! `SET` or given at start-up, kept in the connection's metadata (start-up
//! parameters sit beside them in the same map, under their own names) and read
//! when it plans ([`ClientSettings`]) and starts a statement ([`within_timeout`]).

use std::future::Future;
use std::time::Duration;

use pgwire::api::ClientInfo;
use pgwire::error::PgWireResult;
use retina_query::ClientSettings;

use super::errors::user_error;
use super::statement::{first_schema, timeout_value, SettingChange};

const SEARCH_PATH_SET: &str = "retina.search_path";
const STATEMENT_TIMEOUT_SET: &str = "retina.statement_timeout";

/// A start-up `-c name=value` of libpq's `options` (`PGOPTIONS`).
fn startup_option<'a>(options: Option<&'a String>, name: &str) -> Option<&'a str> {
    let words: Vec<&str> = options?.split_whitespace().collect();
    words.windows(2).find_map(|pair| match pair {
        ["-c", setting] => setting.strip_prefix(name)?.strip_prefix('='),
        _ => None,
    })
}

/// The connection's settings: what it set, else what it started with (pgjdbc's
/// `currentSchema` is the start-up parameter `search_path`; libpq's
/// `options=-c search_path=…` arrives inside `options`).
pub fn client_settings<C: ClientInfo>(client: &C) -> ClientSettings {
    let metadata = client.metadata();
    let options = metadata.get("options");
    let default_schema = match metadata.get(SEARCH_PATH_SET) {
        Some(set) => first_schema(set),
        None => metadata.get("search_path").and_then(|path| first_schema(path)).or_else(|| startup_option(options, "search_path").and_then(first_schema)),
    };
    let statement_timeout = match metadata.get(STATEMENT_TIMEOUT_SET) {
        Some(set) => timeout_value(set),
        None => metadata
            .get("statement_timeout")
            .and_then(|timeout| timeout_value(timeout))
            .or_else(|| startup_option(options, "statement_timeout").and_then(timeout_value)),
    };
    ClientSettings { default_schema, statement_timeout, user: metadata.get("user").cloned() }
}

/// Keeps a `SET` for the connection's later statements; a reset goes back to the
/// start-up value.
pub fn apply_setting<C: ClientInfo>(client: &mut C, change: SettingChange) {
    let metadata = client.metadata_mut();
    match change {
        SettingChange::SearchPath(Some(schema)) => {
            metadata.insert(SEARCH_PATH_SET.to_string(), format!("\"{schema}\""));
        }
        SettingChange::SearchPath(None) => {
            metadata.remove(SEARCH_PATH_SET);
        }
        SettingChange::StatementTimeout(timeout) => {
            // Set even when 0: it overrides a start-up value.
            let millis = timeout.map_or(0, |t| t.as_millis());
            metadata.insert(STATEMENT_TIMEOUT_SET.to_string(), millis.to_string());
        }
        SettingChange::ResetAll => {
            metadata.remove(SEARCH_PATH_SET);
            metadata.remove(STATEMENT_TIMEOUT_SET);
        }
    }
}

/// The error PostgreSQL gives a statement cut short by `statement_timeout`.
fn timeout_error() -> pgwire::error::PgWireError {
    user_error("57014", "canceling statement due to statement timeout")
}

/// Runs `work`, a statement's start: planning its execution and waiting for its
/// first rows, where an analytical query does its work (scans, joins,
/// aggregation). Rows after those are streamed lazily, after every statement of a
/// simple-query batch has started, so a deadline on them would cut the batch's
/// earlier results; they are not timed.
pub async fn within_timeout<T>(timeout: Option<Duration>, work: impl Future<Output = PgWireResult<T>>) -> PgWireResult<T> {
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, work).await.map_err(|_| timeout_error())?,
        None => work.await,
    }
}
