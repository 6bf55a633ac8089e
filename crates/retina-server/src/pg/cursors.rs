//! `DECLARE … CURSOR FOR query`, `FETCH` and `CLOSE`: what clients use to read a
//! large result in pieces. psycopg's named cursors, SQLAlchemy's `stream_results`
//! (and so pandas `read_sql(..., chunksize=)`) and psycopg2's server-side cursors
//! send them; DataFusion has no cursors.
//!
//! A cursor runs its query when declared, at that moment's snapshot (as PostgreSQL
//! does), and keeps the result stream. `FETCH` takes the next rows from it. The
//! connection keeps its cursors in its session extensions, so a connection that
//! ends drops them with their snapshots; `COMMIT`/`ROLLBACK` close the cursors
//! declared `WITHOUT HOLD` (the default), as a transaction's end does in PostgreSQL.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{QueryResponse, Tag};
use pgwire::api::ClientInfo;
use pgwire::error::PgWireResult;
use pgwire::types::format::FormatOptions;
use retina_query::datafusion::arrow::datatypes::SchemaRef;
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::datafusion::logical_expr::LogicalPlan;
use retina_query::datafusion::sql::parser::Statement;
use retina_query::datafusion::sql::sqlparser::ast::{
    CloseCursor, DeclareType, FetchDirection, Query, Statement as SqlStatement, Value,
};
use retina_query::QueryStream;
use tokio::sync::Mutex;

use super::encode::{encode_batches, fields};
use super::errors::{stream_error, user_error};

/// A cursor statement, recognized before planning.
#[derive(Clone, Debug)]
pub enum CursorCommand {
    /// `DECLARE name … CURSOR [WITH HOLD] FOR query`.
    Declare { name: String, query: Box<Query>, hold: bool },
    /// `FETCH [FORWARD] [n | ALL | NEXT] FROM name`; `count` `None` is ALL.
    Fetch { name: String, count: Option<usize> },
    /// `CLOSE name` or `CLOSE ALL` (`None`).
    Close { name: Option<String> },
}

impl CursorCommand {
    /// The cursor command `statement` is, if it is one; `Err` for a form Retina does
    /// not support (backward or absolute fetches: results are read forward once).
    pub fn of(statement: &Statement) -> PgWireResult<Option<Self>> {
        let Statement::Statement(statement) = statement else { return Ok(None) };
        Ok(Some(match statement.as_ref() {
            SqlStatement::Declare { stmts } => {
                let [declare] = stmts.as_slice() else {
                    return Err(user_error("0A000", "DECLARE of several cursors at once is not supported"));
                };
                let (Some(DeclareType::Cursor), Some(query), [name]) = (&declare.declare_type, &declare.for_query, declare.names.as_slice())
                else {
                    return Err(user_error("0A000", "only DECLARE name CURSOR FOR query is supported"));
                };
                if declare.scroll == Some(true) {
                    return Err(user_error("0A000", "SCROLL cursors are not supported: a cursor reads its result forward once"));
                }
                Self::Declare { name: name.value.clone(), query: query.clone(), hold: declare.hold == Some(true) }
            }
            SqlStatement::Fetch { name, direction, .. } => {
                let count = |value: &Value| match value {
                    Value::Number(n, _) => n.parse::<usize>().map_err(|_| user_error("22023", format!("FETCH count {n} is not a row count"))),
                    other => Err(user_error("22023", format!("FETCH count {other} is not a row count"))),
                };
                let count = match direction {
                    FetchDirection::Next | FetchDirection::Forward { limit: None } => Some(1),
                    FetchDirection::Count { limit } | FetchDirection::Forward { limit: Some(limit) } => Some(count(&limit.value)?),
                    FetchDirection::All | FetchDirection::ForwardAll => None,
                    other => {
                        return Err(user_error("0A000", format!("FETCH {other} is not supported: a cursor reads its result forward once")));
                    }
                };
                Self::Fetch { name: name.value.clone(), count }
            }
            SqlStatement::Close { cursor } => Self::Close {
                name: match cursor {
                    CloseCursor::All => None,
                    CloseCursor::Specific { name } => Some(name.value.clone()),
                },
            },
            _ => return Ok(None),
        }))
    }
}

/// One open cursor.
struct Cursor {
    results: QueryStream,
    /// The part of a batch that the last FETCH did not take.
    pending: Option<RecordBatch>,
    column_names: Vec<Option<String>>,
    hold: bool,
}

/// A connection's open cursors, by name.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<String, Cursor>>,
}

/// The most cursors one connection may hold open. Each holds a query snapshot (and
/// keeps the low watermark, so memory GC, behind it); the engine has a fixed number
/// of snapshot slots for everyone, and 4,096 cursors in one transaction took them all:
/// every other query failed and publication froze. With the connection limit this
/// keeps every session's cursors within the slots ([`crate::ServerLimits::check`]).
pub const MAX_CURSORS_PER_CONNECTION: usize = 32;

/// The cursors of `client`'s connection.
pub fn cursors_of<C: ClientInfo>(client: &C) -> Arc<Cursors> {
    client.session_extensions().get_or_insert_with(Cursors::default)
}

fn no_such_cursor(name: &str) -> pgwire::error::PgWireError {
    user_error("34000", format!("cursor \"{name}\" does not exist"))
}

impl Cursors {
    /// Opens cursor `name` on a query's running `results`.
    pub async fn declare(&self, name: String, results: QueryStream, column_names: Vec<Option<String>>, hold: bool) -> PgWireResult<Tag> {
        let mut open = self.open.lock().await;
        if open.contains_key(&name) {
            return Err(user_error("42P03", format!("cursor \"{name}\" already exists")));
        }
        if open.len() >= MAX_CURSORS_PER_CONNECTION {
            return Err(user_error(
                "53000",
                format!("too many open cursors: a connection may hold {MAX_CURSORS_PER_CONNECTION}; CLOSE one first"),
            ));
        }
        open.insert(name, Cursor { results, pending: None, column_names, hold });
        Ok(Tag::new("DECLARE CURSOR"))
    }

    /// The result schema and column names of cursor `name` (what a FETCH from it
    /// describes).
    pub async fn describe(&self, name: &str) -> PgWireResult<(SchemaRef, Vec<Option<String>>)> {
        let open = self.open.lock().await;
        let cursor = open.get(name).ok_or_else(|| no_such_cursor(name))?;
        Ok((cursor.results.schema(), cursor.column_names.clone()))
    }

    /// The next `count` rows of cursor `name` (all that are left for `None`), encoded
    /// in `format`; tagged `FETCH n`.
    pub async fn fetch(
        &self,
        name: &str,
        count: Option<usize>,
        format: &Format,
        options: Option<Arc<FormatOptions>>,
    ) -> PgWireResult<QueryResponse> {
        let mut open = self.open.lock().await;
        let cursor = open.get_mut(name).ok_or_else(|| no_such_cursor(name))?;
        let mut wanted = count.unwrap_or(usize::MAX);
        let mut batches = Vec::new();
        while wanted > 0 {
            let batch = match cursor.pending.take() {
                Some(batch) => batch,
                None => match cursor.results.next().await {
                    Some(Ok(batch)) => batch,
                    Some(Err(error)) => return Err(stream_error(error)),
                    None => break,
                },
            };
            if batch.num_rows() > wanted {
                cursor.pending = Some(batch.slice(wanted, batch.num_rows() - wanted));
                batches.push(batch.slice(0, wanted));
                wanted = 0;
            } else {
                wanted -= batch.num_rows();
                batches.push(batch);
            }
        }
        let fields = Arc::new(fields(cursor.results.schema().as_ref(), format, options, &cursor.column_names)?);
        let rows = encode_batches(Arc::clone(&fields), stream::iter(batches.into_iter().map(Ok)));
        let mut response = QueryResponse::new(fields, rows);
        response.set_command_tag("FETCH"); // pgwire adds the row count
        Ok(response)
    }

    /// Closes cursor `name`, or every cursor for `None`.
    pub async fn close(&self, name: Option<&str>) -> PgWireResult<Tag> {
        let mut open = self.open.lock().await;
        match name {
            Some(name) => {
                open.remove(name).ok_or_else(|| no_such_cursor(name))?;
            }
            None => open.clear(),
        }
        Ok(Tag::new("CLOSE CURSOR"))
    }

    /// A transaction ended: its cursors without HOLD are gone.
    pub async fn end_transaction(&self) {
        self.open.lock().await.retain(|_, cursor| cursor.hold);
    }
}

/// The plan a DECLARE runs: its query.
pub fn declared_query(query: &Query) -> Statement {
    Statement::Statement(Box::new(SqlStatement::Query(Box::new(query.clone()))))
}

/// A planned cursor statement.
#[derive(Clone, Debug)]
pub enum PlannedCursor {
    Declare { name: String, plan: LogicalPlan, column_names: Vec<Option<String>>, hold: bool },
    /// `schema`/`column_names`: the cursor's, when it was open at Parse (what the
    /// statement describes).
    Fetch { name: String, count: Option<usize>, schema: Option<SchemaRef>, column_names: Vec<Option<String>> },
    Close { name: Option<String> },
}
