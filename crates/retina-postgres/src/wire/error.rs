//! Errors of the wire client. Each says what failed and where (the server address,
//! the protocol state, the message), because the person reading it is an operator
//! looking at a replication source that stopped.

use std::fmt::Write as _;
use std::io;

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorFields;

pub type WireResult<T> = Result<T, WireError>;

/// Everything that can go wrong talking to a PostgreSQL server.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The TCP connection could not be opened (refused, unreachable, name not
    /// resolved, timed out).
    #[error("cannot connect to postgres at {address}: {source}")]
    Connect { address: String, source: io::Error },

    /// Reading or writing the socket failed, including the server closing the
    /// connection (`UnexpectedEof`) and a read timing out during startup.
    #[error("{context}: {source}")]
    Io { context: &'static str, source: io::Error },

    /// TLS could not be set up as `sslmode` asks: the server refused it, the
    /// certificate did not check out, or a certificate file could not be read.
    #[error("{0}")]
    Tls(String),

    /// The server answered with an ErrorResponse.
    #[error("{}", server_error_text(.severity, .code, .message, .detail.as_deref(), .hint.as_deref(), .position.as_deref()))]
    Server {
        /// `ERROR`, `FATAL` or `PANIC` (the non-localized severity when the server sends it).
        severity: String,
        /// The SQLSTATE, e.g. `42P01` (undefined table), `28P01` (wrong password).
        code: String,
        message: String,
        detail: Option<String>,
        hint: Option<String>,
        /// The 1-based character position in the query the error refers to.
        position: Option<String>,
    },

    /// Authentication cannot proceed on our side (e.g. the server asks for a password
    /// and none was configured, or the SCRAM exchange is malformed). A wrong password
    /// is not this: the server reports it as [`WireError::Server`] with code `28P01`.
    #[error("authentication failed: {0}")]
    Authentication(String),

    /// The server asks for an authentication method this client does not implement
    /// (GSSAPI, SSPI, Kerberos, SCRAM with channel binding only).
    #[error("unsupported authentication method: {0}")]
    UnsupportedAuthentication(String),

    /// The server sent something the protocol does not allow at this point, or the
    /// caller used the connection in the wrong state.
    #[error("protocol error: {0}")]
    Protocol(String),

    /// The caller's callback (e.g. the `copy_out` row sink) failed; the connection was
    /// drained and is still usable.
    #[error("{0}")]
    Callback(String),
}

impl WireError {
    /// The SQLSTATE of a server error, `None` for errors raised on our side.
    pub fn code(&self) -> Option<&str> {
        match self {
            WireError::Server { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the server ended the session with this error (`FATAL`/`PANIC`): the
    /// connection is gone afterwards and will not reach ReadyForQuery.
    pub fn is_fatal(&self) -> bool {
        matches!(self, WireError::Server { severity, .. } if severity == "FATAL" || severity == "PANIC")
    }

    pub(crate) fn io(context: &'static str, source: io::Error) -> Self {
        WireError::Io { context, source }
    }

    /// The server closed the socket while we were `context`.
    pub(crate) fn closed(context: &'static str) -> Self {
        WireError::Io { context, source: io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection") }
    }

    /// Builds a [`WireError::Server`] from the fields of an ErrorResponse (or of a
    /// NoticeResponse, which has the same layout).
    pub(crate) fn from_error_fields(mut fields: ErrorFields<'_>) -> Self {
        let mut severity_localized = None;
        let mut severity = None;
        let mut code = None;
        let mut message = None;
        let mut detail = None;
        let mut hint = None;
        let mut position = None;
        loop {
            match fields.next() {
                Ok(Some(field)) => {
                    let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
                    match field.type_() {
                        b'S' => severity_localized = Some(value),
                        b'V' => severity = Some(value),
                        b'C' => code = Some(value),
                        b'M' => message = Some(value),
                        b'D' => detail = Some(value),
                        b'H' => hint = Some(value),
                        b'P' => position = Some(value),
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    return WireError::Protocol(format!("malformed ErrorResponse from the server: {error}"));
                }
            }
        }
        WireError::Server {
            severity: severity.or(severity_localized).unwrap_or_else(|| "ERROR".to_string()),
            code: code.unwrap_or_else(|| "XX000".to_string()),
            message: message.unwrap_or_else(|| "(the server sent no message)".to_string()),
            detail,
            hint,
            position,
        }
    }
}

/// `SEVERITY CODE: message (DETAIL: ..) (HINT: ..) (POSITION: ..)`, the optional
/// parts only when present.
fn server_error_text(
    severity: &str,
    code: &str,
    message: &str,
    detail: Option<&str>,
    hint: Option<&str>,
    position: Option<&str>,
) -> String {
    let mut text = format!("{severity} {code}: {message}");
    for (label, value) in [("DETAIL", detail), ("HINT", hint), ("POSITION", position)] {
        if let Some(value) = value {
            let _ = write!(text, " ({label}: {value})");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_display_severity_code_and_optional_parts() {
        let error = WireError::Server {
            severity: "ERROR".into(),
            code: "42P01".into(),
            message: "relation \"t\" does not exist".into(),
            detail: None,
            hint: Some("create it".into()),
            position: Some("15".into()),
        };
        assert_eq!(error.to_string(), "ERROR 42P01: relation \"t\" does not exist (HINT: create it) (POSITION: 15)");
        assert_eq!(error.code(), Some("42P01"));
        assert!(!error.is_fatal());
        assert_eq!(WireError::Protocol("x".into()).code(), None);
    }
}
