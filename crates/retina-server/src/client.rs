//! A small blocking PostgreSQL client (simple and extended query protocol, text
//! results) for
//! `retina sql --connect` and tests. It speaks just what Retina's server needs:
//! startup without a password or with SCRAM-SHA-256 (`postgres-protocol`'s client
//! side, the one `tokio-postgres` uses), `Query`, Parse/Bind/Execute, and the replies.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};

use crate::text_result::{TextColumn, TextResult};

/// Authentication request codes (the first field of an `R` message).
const AUTH_OK: i32 = 0;
const AUTH_SASL: i32 = 10;
const AUTH_SASL_CONTINUE: i32 = 11;
const AUTH_SASL_FINAL: i32 = 12;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },

    #[error("connection: {0}")]
    Io(#[from] std::io::Error),

    /// An `ErrorResponse` from the server.
    #[error("ERROR: {message} (SQLSTATE {code})")]
    Server { code: String, message: String },

    #[error("the server asks for authentication method {method}, which retina sql does not support")]
    Authentication { method: i32 },

    #[error("the server asks for a password: set PGPASSWORD")]
    PasswordRequired,

    /// The SCRAM exchange failed on our side (e.g. the server could not prove it
    /// knows the password).
    #[error("SCRAM-SHA-256 authentication: {0}")]
    Scram(String),

    #[error("protocol violation: {0}")]
    Protocol(String),
}

pub type ClientResult<T> = Result<T, ClientError>;

/// The outcome of one statement of a query string.
#[derive(Debug)]
pub enum StatementOutcome {
    Rows(TextResult),
    /// A command without rows, with its tag (`SET`, `BEGIN`, ...).
    Command(String),
    Empty,
}

pub struct PgClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    cancel: Option<CancelToken>,
}

/// What a `CancelRequest` for a connection needs (from its BackendKeyData).
#[derive(Clone, Debug)]
pub struct CancelToken {
    addr: String,
    pid: i32,
    secret: Vec<u8>,
}

impl CancelToken {
    /// Asks the server, on a new connection, to cancel the query running on the
    /// token's connection.
    pub fn cancel(&self) -> ClientResult<()> {
        let mut stream =
            TcpStream::connect(&self.addr).map_err(|source| ClientError::Connect { addr: self.addr.clone(), source })?;
        let mut message = ((12 + self.secret.len()) as i32).to_be_bytes().to_vec();
        message.extend_from_slice(&80_877_102i32.to_be_bytes());
        message.extend_from_slice(&self.pid.to_be_bytes());
        message.extend_from_slice(&self.secret);
        stream.write_all(&message)?;
        Ok(())
    }
}

impl PgClient {
    /// Connects and completes the startup handshake as `user` on database `database`,
    /// without a password.
    pub fn connect(addr: &str, user: &str, database: &str) -> ClientResult<Self> {
        Self::connect_with_password(addr, user, database, None)
    }

    /// Connects as `user` on `database`; `password` answers a SCRAM-SHA-256 request.
    pub fn connect_with_password(addr: &str, user: &str, database: &str, password: Option<&str>) -> ClientResult<Self> {
        let stream = TcpStream::connect(addr).map_err(|source| ClientError::Connect { addr: addr.to_string(), source })?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(3600)))?;
        let writer = stream.try_clone()?;
        let mut client = Self { reader: BufReader::new(stream), writer, cancel: None };
        let mut body = Vec::new();
        body.extend_from_slice(&196_608i32.to_be_bytes()); // protocol 3.0
        for (key, value) in [("user", user), ("database", database), ("application_name", "retina-sql")] {
            body.extend_from_slice(key.as_bytes());
            body.push(0);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut message = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        message.extend_from_slice(&body);
        client.writer.write_all(&message)?;
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, body) = client.read_message()?;
            match tag {
                b'R' => client.authenticate(read_i32(&body, 0)?, body.get(4..).unwrap_or_default(), password, &mut scram)?,
                b'K' => {
                    let pid = read_i32(&body, 0)?;
                    client.cancel = Some(CancelToken { addr: addr.to_string(), pid, secret: body[4..].to_vec() });
                }
                b'E' => return Err(server_error(&body)),
                b'Z' => return Ok(client),
                _ => {} // ParameterStatus, notices
            }
        }
    }

    /// Answers one Authentication message (`method`, then `data`): 0 is success; 10,
    /// 11 and 12 are the SASL start, continue and final steps of SCRAM-SHA-256.
    fn authenticate(
        &mut self,
        method: i32,
        data: &[u8],
        password: Option<&str>,
        scram: &mut Option<ScramSha256>,
    ) -> ClientResult<()> {
        let scram_error = |error: std::io::Error| ClientError::Scram(error.to_string());
        match method {
            AUTH_OK => Ok(()),
            AUTH_SASL => {
                let offers_scram = data.split(|&b| b == 0).any(|mechanism| mechanism == SCRAM_SHA_256.as_bytes());
                if !offers_scram {
                    return Err(ClientError::Authentication { method });
                }
                let password = password.ok_or(ClientError::PasswordRequired)?;
                // No TLS, so no channel binding: the GS2 header says "n".
                let exchange = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                let mut body = SCRAM_SHA_256.as_bytes().to_vec();
                body.push(0);
                body.extend_from_slice(&(exchange.message().len() as i32).to_be_bytes());
                body.extend_from_slice(exchange.message());
                self.send(b'p', &body)?;
                *scram = Some(exchange);
                Ok(())
            }
            AUTH_SASL_CONTINUE => {
                let exchange = scram.as_mut().ok_or_else(|| ClientError::Protocol("SASLContinue before SASL".into()))?;
                exchange.update(data).map_err(scram_error)?;
                let message = exchange.message().to_vec();
                self.send(b'p', &message)
            }
            AUTH_SASL_FINAL => {
                let exchange = scram.as_mut().ok_or_else(|| ClientError::Protocol("SASLFinal before SASL".into()))?;
                exchange.finish(data).map_err(scram_error)
            }
            method => Err(ClientError::Authentication { method }),
        }
    }

    /// A token to cancel this connection's running query from elsewhere.
    pub fn cancel_token(&self) -> Option<CancelToken> {
        self.cancel.clone()
    }

    /// Runs a query string (one or more statements). The first failing statement
    /// ends it with [`ClientError::Server`] (use [`Self::query_partial`] to keep the
    /// results of the statements before it).
    pub fn query(&mut self, sql: &str) -> ClientResult<Vec<StatementOutcome>> {
        let (outcomes, failure) = self.query_partial(sql)?;
        match failure {
            Some(error) => Err(error),
            None => Ok(outcomes),
        }
    }

    /// Runs a query string; returns the results of the statements that ran and the
    /// server's error for the one that failed, if any. `Err` only for connection and
    /// protocol failures.
    pub fn query_partial(&mut self, sql: &str) -> ClientResult<(Vec<StatementOutcome>, Option<ClientError>)> {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        self.send(b'Q', &body)?;
        let mut outcomes = Vec::new();
        let mut current: Option<TextResult> = None;
        let mut failure = None;
        loop {
            let (tag, body) = self.read_message()?;
            match tag {
                b'T' => current = Some(TextResult::new(row_description(&body)?)),
                b'D' => {
                    let result = current.as_mut().ok_or_else(|| ClientError::Protocol("DataRow before RowDescription".into()))?;
                    result.rows.push(data_row(&body)?);
                }
                b'C' => {
                    let tag = cstring(&body, 0)?.0;
                    outcomes.push(match current.take() {
                        Some(result) => StatementOutcome::Rows(result),
                        None => StatementOutcome::Command(tag),
                    });
                }
                b'I' => outcomes.push(StatementOutcome::Empty),
                b'E' => failure = Some(server_error(&body)),
                b'Z' => break,
                _ => {}
            }
        }
        Ok((outcomes, failure))
    }

    /// Runs one statement through the extended protocol (Parse, Bind, Describe,
    /// Execute, Sync) with text parameters `$1, $2, ...`; `None` is NULL. Columns are
    /// requested in text format.
    pub fn query_params(&mut self, sql: &str, params: &[Option<&str>]) -> ClientResult<StatementOutcome> {
        let mut parse = vec![0u8]; // unnamed statement
        parse.extend_from_slice(sql.as_bytes());
        parse.push(0);
        parse.extend_from_slice(&0i16.to_be_bytes()); // let the server infer types
        self.send(b'P', &parse)?;
        let mut bind = vec![0u8, 0u8]; // unnamed portal, unnamed statement
        bind.extend_from_slice(&0i16.to_be_bytes()); // all parameters in text format
        bind.extend_from_slice(&(params.len() as i16).to_be_bytes());
        for param in params {
            match param {
                Some(text) => {
                    bind.extend_from_slice(&(text.len() as i32).to_be_bytes());
                    bind.extend_from_slice(text.as_bytes());
                }
                None => bind.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        bind.extend_from_slice(&0i16.to_be_bytes()); // all results in text format
        self.send(b'B', &bind)?;
        self.send(b'D', &[b'P', 0])?;
        let mut execute = vec![0u8];
        execute.extend_from_slice(&0i32.to_be_bytes()); // no row limit
        self.send(b'E', &execute)?;
        self.send(b'S', &[])?;
        let mut outcome = StatementOutcome::Empty;
        let mut current: Option<TextResult> = None;
        let mut failure = None;
        loop {
            let (tag, body) = self.read_message()?;
            match tag {
                b'T' => current = Some(TextResult::new(row_description(&body)?)),
                b'D' => {
                    let result = current.as_mut().ok_or_else(|| ClientError::Protocol("DataRow before RowDescription".into()))?;
                    result.rows.push(data_row(&body)?);
                }
                b'C' => {
                    let tag = cstring(&body, 0)?.0;
                    outcome = match current.take() {
                        Some(result) => StatementOutcome::Rows(result),
                        None => StatementOutcome::Command(tag),
                    };
                }
                b'E' => failure = Some(server_error(&body)),
                b'Z' => break,
                _ => {} // ParseComplete, BindComplete, NoData, notices
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(outcome),
        }
    }

    fn send(&mut self, tag: u8, body: &[u8]) -> ClientResult<()> {
        let mut message = Vec::with_capacity(body.len() + 5);
        message.push(tag);
        message.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        message.extend_from_slice(body);
        self.writer.write_all(&message)?;
        Ok(())
    }

    fn read_message(&mut self) -> ClientResult<(u8, Vec<u8>)> {
        let mut head = [0u8; 5];
        self.reader.read_exact(&mut head)?;
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if !(4..=(1 << 30)).contains(&len) {
            return Err(ClientError::Protocol(format!("message length {len}")));
        }
        let mut body = vec![0u8; len as usize - 4];
        self.reader.read_exact(&mut body)?;
        Ok((head[0], body))
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        let _ = self.writer.write_all(&[b'X', 0, 0, 0, 4]); // Terminate
    }
}

fn read_i16(body: &[u8], at: usize) -> ClientResult<i16> {
    body.get(at..at + 2)
        .map(|b| i16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| ClientError::Protocol("message too short".into()))
}

fn read_i32(body: &[u8], at: usize) -> ClientResult<i32> {
    body.get(at..at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| ClientError::Protocol("message too short".into()))
}

/// A NUL-terminated string at `at`, and the offset after it.
fn cstring(body: &[u8], at: usize) -> ClientResult<(String, usize)> {
    let rest = body.get(at..).ok_or_else(|| ClientError::Protocol("message too short".into()))?;
    let end = rest.iter().position(|&b| b == 0).ok_or_else(|| ClientError::Protocol("unterminated string".into()))?;
    Ok((String::from_utf8_lossy(&rest[..end]).into_owned(), at + end + 1))
}

fn row_description(body: &[u8]) -> ClientResult<Vec<TextColumn>> {
    let count = read_i16(body, 0)?.max(0) as usize;
    let mut at = 2;
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        let (name, next) = cstring(body, at)?;
        let type_oid = read_i32(body, next + 6)? as u32;
        at = next + 18;
        columns.push(TextColumn { name, type_oid });
    }
    Ok(columns)
}

fn data_row(body: &[u8]) -> ClientResult<Vec<Option<String>>> {
    let count = read_i16(body, 0)?.max(0) as usize;
    let mut at = 2;
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let len = read_i32(body, at)?;
        at += 4;
        if len < 0 {
            values.push(None);
        } else {
            let bytes = body.get(at..at + len as usize).ok_or_else(|| ClientError::Protocol("value past message end".into()))?;
            values.push(Some(String::from_utf8_lossy(bytes).into_owned()));
            at += len as usize;
        }
    }
    Ok(values)
}

fn server_error(body: &[u8]) -> ClientError {
    let (mut code, mut message) = (String::from("XX000"), String::from("unknown error"));
    let mut at = 0;
    while let Some(&field) = body.get(at) {
        if field == 0 {
            break;
        }
        let Ok((value, next)) = cstring(body, at + 1) else { break };
        match field {
            b'C' => code = value,
            b'M' => message = value,
            _ => {}
        }
        at = next;
    }
    ClientError::Server { code, message }
}
