//! Simple queries and `COPY ... TO STDOUT` on a [`PgConnection`].
//!
//! Both read to ReadyForQuery whatever happens (a server error, a failing callback,
//! a statement of the wrong kind), so the session stays usable afterwards; only a
//! lost stream or a FATAL error leaves it broken.

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::{DataRowBody, Message, RowDescriptionBody};
use postgres_protocol::message::frontend;

use super::connection::{Drained, PgConnection, SessionState};
use super::error::{WireError, WireResult};
use super::transport::Incoming;
use super::QueryResult;

impl PgConnection {
    /// Runs `sql` with the simple query protocol; `sql` may hold several statements
    /// (run in one implicit transaction unless it has its own BEGIN/COMMIT). Returns
    /// one [`QueryResult`] per statement that completed. An ErrorResponse becomes
    /// [`WireError::Server`] after the session is drained back to ReadyForQuery.
    ///
    /// Values arrive in text format; NULL is `None`.
    pub fn simple_query(&mut self, sql: &str) -> WireResult<Vec<QueryResult>> {
        self.require_state(&SessionState::Ready, "simple_query")?;
        let result = self.run_simple_query(sql);
        self.settle(result)
    }

    /// The rows of the last result of [`simple_query`](Self::simple_query) (empty
    /// when the last statement returned none).
    pub fn query_rows(&mut self, sql: &str) -> WireResult<Vec<Vec<Option<String>>>> {
        let mut results = self.simple_query(sql)?;
        Ok(results.pop().map(|result| result.rows).unwrap_or_default())
    }

    /// Runs a `COPY ... TO STDOUT` and hands each CopyData payload to `on_data` as it
    /// arrives (for text format one row line with its `\n`, but that is the server's
    /// choice, not a promise). Returns the row count of the CommandComplete tag.
    ///
    /// If `on_data` fails, no more payloads are handed over; the rest of the copy is
    /// read and dropped (there is no way to stop a COPY OUT short of cancelling the
    /// query) and [`WireError::Callback`] carries the callback's message.
    pub fn copy_out(&mut self, sql: &str, on_data: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> WireResult<u64> {
        self.require_state(&SessionState::Ready, "copy_out")?;
        let result = self.run_copy_out(sql, on_data);
        self.settle(result)
    }

    fn run_simple_query(&mut self, sql: &str) -> WireResult<Drained<Vec<QueryResult>>> {
        const CONTEXT: &str = "reading the result of a simple query";
        self.transport.send("sending a simple query", |buffer| frontend::query(sql, buffer))?;
        let mut results = Vec::new();
        let mut current: Option<QueryResult> = None;
        // The first thing that went wrong; reported once the session is back at
        // ReadyForQuery.
        let mut failure: Option<WireError> = None;
        loop {
            let message = match self.next_message(CONTEXT)? {
                Incoming::Message(message) => message,
                Incoming::CopyData(_) => continue, // of a COPY TO STDOUT, reported below
                other @ Incoming::CopyBothResponse => {
                    return Err(self.unexpected(&other, "to simple_query (use start_copy_both to stream)"));
                }
            };
            match message {
                Message::RowDescription(body) => match column_names(&body) {
                    Ok(columns) => current = Some(QueryResult { columns, ..QueryResult::default() }),
                    Err(error) => keep_first(&mut failure, error),
                },
                Message::DataRow(body) => match current.as_mut() {
                    Some(result) => match decode_text_row(&body) {
                        Ok(row) => result.rows.push(row),
                        Err(error) => keep_first(&mut failure, error),
                    },
                    None => keep_first(
                        &mut failure,
                        WireError::Protocol(format!("the server at {} sent DataRow before RowDescription", self.address)),
                    ),
                },
                Message::CommandComplete(body) => {
                    let mut result = current.take().unwrap_or_default();
                    match body.tag() {
                        Ok(tag) => result.tag = tag.to_string(),
                        Err(error) => keep_first(&mut failure, malformed("CommandComplete", &self.address, error)),
                    }
                    results.push(result);
                }
                Message::EmptyQueryResponse | Message::CopyDone => {}
                Message::ErrorResponse(body) => {
                    let error = WireError::from_error_fields(body.fields());
                    if error.is_fatal() {
                        return Err(error);
                    }
                    keep_first(&mut failure, error);
                }
                Message::CopyOutResponse(_) => keep_first(
                    &mut failure,
                    WireError::Protocol("simple_query ran a COPY TO STDOUT; use copy_out for it".to_string()),
                ),
                Message::CopyInResponse(_) => {
                    self.refuse_copy_in("simple_query")?;
                    keep_first(&mut failure, WireError::Protocol("simple_query cannot feed COPY FROM STDIN".to_string()));
                }
                Message::ReadyForQuery(_) => return Ok(failure.map_or(Ok(results), Err)),
                other => return Err(self.unexpected(&Incoming::Message(other), "in the result of a simple query")),
            }
        }
    }

    fn run_copy_out(
        &mut self,
        sql: &str,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> WireResult<Drained<u64>> {
        const CONTEXT: &str = "reading the output of COPY TO STDOUT";
        self.transport.send("sending a COPY query", |buffer| frontend::query(sql, buffer))?;
        let mut callback_error: Option<String> = None;
        let mut failure: Option<WireError> = None;
        let mut row_count: Option<u64> = None;
        loop {
            let message = match self.next_message(CONTEXT)? {
                Incoming::CopyData(payload) => {
                    if callback_error.is_none() && failure.is_none() {
                        if let Err(message) = on_data(&payload) {
                            callback_error = Some(message);
                        }
                    }
                    continue;
                }
                Incoming::Message(message) => message,
                other @ Incoming::CopyBothResponse => {
                    return Err(self.unexpected(&other, "to copy_out (use start_copy_both to stream)"));
                }
            };
            match message {
                Message::CopyOutResponse(_) | Message::CopyDone | Message::EmptyQueryResponse => {}
                Message::CommandComplete(body) => match body.tag() {
                    Ok(tag) => match tag.strip_prefix("COPY ").and_then(|count| count.parse::<u64>().ok()) {
                        Some(count) => row_count = Some(count),
                        None => keep_first(
                            &mut failure,
                            WireError::Protocol(format!(
                                "copy_out ran a statement that is not COPY ... TO STDOUT (it completed with \"{tag}\")"
                            )),
                        ),
                    },
                    Err(error) => keep_first(&mut failure, malformed("CommandComplete", &self.address, error)),
                },
                Message::RowDescription(_) | Message::DataRow(_) => keep_first(
                    &mut failure,
                    WireError::Protocol("copy_out ran a statement that returns rows, not COPY ... TO STDOUT".to_string()),
                ),
                Message::ErrorResponse(body) => {
                    let error = WireError::from_error_fields(body.fields());
                    if error.is_fatal() {
                        return Err(error);
                    }
                    keep_first(&mut failure, error);
                }
                Message::CopyInResponse(_) => {
                    self.refuse_copy_in("copy_out")?;
                    keep_first(&mut failure, WireError::Protocol("copy_out cannot feed COPY FROM STDIN".to_string()));
                }
                Message::ReadyForQuery(_) => {
                    if let Some(message) = callback_error {
                        return Ok(Err(WireError::Callback(message)));
                    }
                    if let Some(error) = failure {
                        return Ok(Err(error));
                    }
                    return Ok(row_count.ok_or_else(|| {
                        WireError::Protocol(format!(
                            "copy_out: the server at {} finished without completing a COPY",
                            self.address
                        ))
                    }));
                }
                other => return Err(self.unexpected(&Incoming::Message(other), "in the output of COPY TO STDOUT")),
            }
        }
    }

    /// Answers CopyInResponse with CopyFail: the server then reports an error and
    /// returns to ReadyForQuery, which keeps the session in step.
    fn refuse_copy_in(&mut self, operation: &str) -> WireResult<()> {
        let reason = format!("{operation} does not send COPY FROM STDIN data");
        self.transport.send("sending CopyFail", |buffer| frontend::copy_fail(&reason, buffer))
    }
}

fn keep_first(failure: &mut Option<WireError>, error: WireError) {
    if failure.is_none() {
        *failure = Some(error);
    }
}

fn malformed(message: &str, address: &str, error: std::io::Error) -> WireError {
    WireError::Protocol(format!("the server at {address} sent a malformed {message}: {error}"))
}

fn column_names(body: &RowDescriptionBody) -> WireResult<Vec<String>> {
    body.fields()
        .map(|field| Ok(field.name().to_string()))
        .collect()
        .map_err(|error| WireError::Protocol(format!("malformed RowDescription: {error}")))
}

/// A DataRow's values as text (`client_encoding` is UTF8), NULL as `None`.
fn decode_text_row(body: &DataRowBody) -> WireResult<Vec<Option<String>>> {
    let buffer = body.buffer();
    let mut values = Vec::new();
    let mut ranges = body.ranges();
    loop {
        match ranges.next() {
            Ok(Some(Some(range))) => {
                let column = values.len();
                let bytes = buffer.get(range).ok_or_else(|| {
                    WireError::Protocol(format!("malformed DataRow: column {column} runs past the message"))
                })?;
                let text = std::str::from_utf8(bytes).map_err(|error| {
                    WireError::Protocol(format!("DataRow column {column} is not UTF-8 text: {error}"))
                })?;
                values.push(Some(text.to_string()));
            }
            Ok(Some(None)) => values.push(None),
            Ok(None) => return Ok(values),
            Err(error) => return Err(WireError::Protocol(format!("malformed DataRow: {error}"))),
        }
    }
}
