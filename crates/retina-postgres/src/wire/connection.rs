//! [`PgConnection`]: one session with a PostgreSQL server, its startup and the state
//! checks every operation shares. The operations themselves live beside it:
//! `query.rs` (simple queries, COPY OUT) and `copy_both.rs` (the replication stream).

use std::collections::HashMap;

use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::authentication::authenticate;
use super::error::{WireError, WireResult};
use super::transport::{describe_incoming, display_address, Incoming, Transport};
use super::tls::{SslMode, TlsOptions};
use super::ConnectConfig;

/// Startup parameters every session gets, besides user, database and application name.
///
/// - `client_encoding=UTF8`: text values are returned as Rust `String`s.
/// - `DateStyle=ISO`: date and timestamp text is `YYYY-MM-DD ...` whatever the server's
///   default, so the text decoders see one format. (In a replication session this also
///   governs pgoutput's text values: the walsender runs the output functions.)
/// - `extra_float_digits=3`: floats print with all their digits (the default on
///   PostgreSQL 12+, lossy rounding before), so text values round-trip exactly.
const SESSION_PARAMETERS: [(&str, &str); 3] =
    [("client_encoding", "UTF8"), ("DateStyle", "ISO"), ("extra_float_digits", "3")];

/// The result of an operation that read the session back to ReadyForQuery, so
/// even its error leaves the session usable (see [`PgConnection::settle`]).
pub(super) type Drained<T> = WireResult<T>;

/// Where a connection is in the protocol, so a misuse fails with a clear message
/// instead of desynchronizing the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SessionState {
    /// Between commands (after ReadyForQuery): queries may be sent.
    Ready,
    /// Inside a CopyBoth stream (after `start_copy_both`).
    CopyBoth,
    /// Framing was lost, the socket failed or the server ended the session; every
    /// further call fails with this reason.
    Broken(String),
}

/// A blocking session with a PostgreSQL server over TCP, encrypted as
/// `ConnectConfig::tls` asks (see [`super::tls`]).
pub struct PgConnection {
    pub(super) transport: Transport,
    pub(super) state: SessionState,
    /// Parameters the server reported (`server_version`, `integer_datetimes`, ...),
    /// kept up to date by ParameterStatus messages.
    parameters: HashMap<String, String>,
    backend_pid: i32,
    /// Kept for a future CancelRequest; unused today.
    #[allow(dead_code)]
    backend_secret_key: i32,
    /// `host:port`, for error texts.
    pub(super) address: String,
    /// Whether SCRAM authentication was bound to the TLS session.
    channel_bound: bool,
}

impl PgConnection {
    /// Opens a session. `replication = true` adds the startup parameter
    /// `replication=database`: a walsender session that accepts both SQL and
    /// replication commands (`IDENTIFY_SYSTEM`, `CREATE_REPLICATION_SLOT`,
    /// `START_REPLICATION`).
    ///
    /// `config.connect_timeout` bounds the TCP connect and, separately, each wait for
    /// the server during the startup exchange (authentication included), so an
    /// unresponsive server cannot hang the caller.
    pub fn connect(config: &ConnectConfig, replication: bool) -> WireResult<PgConnection> {
        if config.tls.mode == SslMode::Disable {
            return Self::connect_with(config, &config.tls, replication).map_err(with_tls_hint);
        }
        if config.tls.mode != SslMode::Allow {
            return Self::connect_with(config, &config.tls, replication);
        }
        // libpq's `allow`: plain first, TLS only if the server refuses the plain session.
        match Self::connect_with(config, &TlsOptions::disabled(), replication) {
            Err(WireError::Server { code, .. }) if code == "28000" => {
                Self::connect_with(config, &TlsOptions { mode: SslMode::Require, ..config.tls.clone() }, replication)
            }
            other => other,
        }
    }

    fn connect_with(config: &ConnectConfig, tls: &TlsOptions, replication: bool) -> WireResult<PgConnection> {
        let mut transport = Transport::connect(&config.host, config.port, config.connect_timeout, tls)?;
        let address = display_address(&config.host, config.port);

        let mut parameters: Vec<(&str, &str)> = vec![
            ("user", config.user.as_str()),
            ("database", config.database.as_str()),
            ("application_name", config.application_name.as_str()),
        ];
        parameters.extend(SESSION_PARAMETERS);
        if replication {
            parameters.push(("replication", "database"));
        }
        transport.send("sending the startup message", |buffer| frontend::startup_message(parameters, buffer))?;

        if !config.connect_timeout.is_zero() {
            transport.set_blocking_timeout(Some(config.connect_timeout));
        }
        let channel_bound = authenticate(&mut transport, config, &address)?;

        let mut connection = PgConnection {
            transport,
            state: SessionState::Ready,
            parameters: HashMap::new(),
            backend_pid: 0,
            backend_secret_key: 0,
            address,
            channel_bound,
        };
        connection.finish_startup()?;
        connection.transport.set_blocking_timeout(None);
        Ok(connection)
    }

    /// After AuthenticationOk: collects BackendKeyData and the initial parameters
    /// until the first ReadyForQuery.
    fn finish_startup(&mut self) -> WireResult<()> {
        const CONTEXT: &str = "waiting for the server to finish the session startup";
        loop {
            match self.next_message(CONTEXT)? {
                Incoming::Message(Message::BackendKeyData(body)) => {
                    self.backend_pid = body.process_id();
                    self.backend_secret_key = body.secret_key();
                }
                Incoming::Message(Message::ReadyForQuery(_)) => return Ok(()),
                Incoming::Message(Message::ErrorResponse(body)) => {
                    return Err(WireError::from_error_fields(body.fields()));
                }
                other => return Err(self.unexpected(&other, "during the session startup")),
            }
        }
    }

    /// A server parameter reported at startup or later (`server_version`,
    /// `server_encoding`, `TimeZone`, ...).
    pub fn server_parameter(&self, name: &str) -> Option<&str> {
        self.parameters.get(name).map(String::as_str)
    }

    /// Whether the session is encrypted.
    pub fn is_tls(&self) -> bool {
        self.transport.is_tls()
    }

    /// Whether the password exchange was bound to the TLS session
    /// (`SCRAM-SHA-256-PLUS`), which a man in the middle cannot relay.
    pub fn is_channel_bound(&self) -> bool {
        self.channel_bound
    }

    /// The backend's process id (what `pg_stat_activity.pid` and
    /// `pg_terminate_backend` use).
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }

    /// The server's major version from `server_version` (e.g. `15` for `15.18 (Debian
    /// ...)`), or `None` if the server did not report a parsable one.
    pub fn server_major_version(&self) -> Option<u32> {
        let version = self.server_parameter("server_version")?;
        let digits: String = version.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }

    /// The next message that is not asynchronous: NoticeResponse and
    /// NotificationResponse are dropped, ParameterStatus updates the parameters.
    /// A transport failure marks the session broken.
    pub(super) fn next_message(&mut self, context: &'static str) -> WireResult<Incoming> {
        loop {
            let message = match self.transport.read_message(context) {
                Ok(message) => message,
                Err(error) => return Err(self.break_with(error)),
            };
            if let Some(message) = self.absorb_asynchronous(message) {
                return Ok(message);
            }
        }
    }

    /// Keeps what ParameterStatus says and drops notices and notifications; returns
    /// every other message.
    pub(super) fn absorb_asynchronous(&mut self, message: Incoming) -> Option<Incoming> {
        match message {
            Incoming::Message(Message::ParameterStatus(body)) => {
                if let (Ok(name), Ok(value)) = (body.name(), body.value()) {
                    self.parameters.insert(name.to_string(), value.to_string());
                }
                None
            }
            Incoming::Message(Message::NoticeResponse(_) | Message::NotificationResponse(_)) => None,
            other => Some(other),
        }
    }

    /// Fails unless the session is in `expected`, naming `operation`.
    pub(super) fn require_state(&self, expected: &SessionState, operation: &str) -> WireResult<()> {
        if &self.state == expected {
            return Ok(());
        }
        let why = match &self.state {
            SessionState::Ready => "the session is not streaming (call start_copy_both first)".to_string(),
            SessionState::CopyBoth => "the session is inside a CopyBoth replication stream".to_string(),
            SessionState::Broken(reason) => format!("the session is unusable after an earlier failure: {reason}"),
        };
        Err(WireError::Protocol(format!("{operation} on the connection to {}: {why}", self.address)))
    }

    /// Marks the session broken because of `error` and hands the error back.
    pub(super) fn break_with(&mut self, error: WireError) -> WireError {
        self.state = SessionState::Broken(error.to_string());
        error
    }

    /// Settles the session state after an operation that reads to ReadyForQuery.
    /// The operation's outer error means it stopped mid-stream (the socket failed,
    /// the server sent something impossible or FATAL): the stream position is
    /// unknown, so the session is broken. The inner result is what the caller sees
    /// once the session is back at ReadyForQuery (a server error, a failing callback),
    /// and leaves the session usable.
    pub(super) fn settle<T>(&mut self, outcome: WireResult<Drained<T>>) -> WireResult<T> {
        match outcome {
            Ok(result) => result,
            Err(error) => Err(self.break_with(error)),
        }
    }

    /// A protocol error for a message that has no business arriving `when`.
    pub(super) fn unexpected(&self, message: &Incoming, when: &str) -> WireError {
        WireError::Protocol(format!(
            "the server at {} sent {} {when}",
            self.address,
            describe_incoming(message)
        ))
    }
}

impl Drop for PgConnection {
    /// Says goodbye with Terminate so the server logs a clean disconnect; a failure
    /// (the socket is already dead) does not matter.
    fn drop(&mut self) {
        let _ = self.transport.send("sending Terminate", |buffer| {
            frontend::terminate(buffer);
            Ok(())
        });
    }
}

/// A server that refuses unencrypted sessions (managed services do) says "no
/// encryption" in its pg_hba refusal; with `sslmode=disable` the fix is on our side.
fn with_tls_hint(error: WireError) -> WireError {
    match error {
        WireError::Server { severity, code, message, detail, hint: None, position } if code == "28000" && message.contains("no encryption") => {
            WireError::Server {
                severity,
                code,
                message,
                detail,
                hint: Some("the server accepts only encrypted sessions: use sslmode=require (or verify-full)".into()),
                position,
            }
        }
        other => other,
    }
}
