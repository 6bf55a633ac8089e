//! When the source reconnects by itself, and how long it waits between attempts.
//!
//! A PostgreSQL restart, a failover or a dropped network path ends the replication
//! session; nothing about the mirror is wrong, so the source starts again from its
//! durable position (the slot keeps the WAL after it) instead of failing for good.
//! Errors that a new session cannot cure (a schema change the mirror cannot express,
//! a value that does not parse, wrong credentials) still stop it.

use std::time::Duration;

use crate::error::PgSourceError;
use crate::wire::WireError;

/// The first wait; each further attempt doubles it up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(10);

/// How many attempts in a row before the source gives up (`max_reconnects=N`;
/// `None`: never).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconnectPolicy {
    pub max_attempts: Option<u32>,
}

impl ReconnectPolicy {
    /// The wait before attempt `attempt` (1-based), or `None` when the policy allows
    /// no more.
    pub fn delay(&self, attempt: u32) -> Option<Duration> {
        if self.max_attempts.is_some_and(|max| attempt > max) {
            return None;
        }
        let doublings = attempt.saturating_sub(1).min(16);
        Some(FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY))
    }
}

impl PgSourceError {
    /// Whether a new session may succeed where this one failed: the connection was
    /// lost or refused, or the server is shutting down, starting up or full.
    pub fn is_connection_loss(&self) -> bool {
        match self {
            PgSourceError::Wire(wire) => wire.is_connection_loss(),
            PgSourceError::StreamEnded { .. } => true,
            _ => false,
        }
    }
}

impl WireError {
    /// See [`PgSourceError::is_connection_loss`].
    pub fn is_connection_loss(&self) -> bool {
        match self {
            WireError::Connect { .. } | WireError::Io { .. } => true,
            // 08: connection exception; 57P01-57P03: admin or crash shutdown, cannot
            // connect now (starting up, in recovery); 53300: too many connections;
            // 55006: the slot is still held by our previous session's walsender.
            WireError::Server { code, .. } => {
                code.starts_with("08") || matches!(code.as_str(), "57P01" | "57P02" | "57P03" | "53300" | "55006")
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str) -> WireError {
        WireError::Server {
            severity: "FATAL".into(),
            code: code.into(),
            message: "m".into(),
            detail: None,
            hint: None,
            position: None,
        }
    }

    #[test]
    fn the_wait_doubles_up_to_a_cap_and_the_limit_is_kept() {
        let unlimited = ReconnectPolicy::default();
        assert_eq!(unlimited.delay(1), Some(Duration::from_millis(200)));
        assert_eq!(unlimited.delay(2), Some(Duration::from_millis(400)));
        assert_eq!(unlimited.delay(7), Some(Duration::from_secs(10)));
        assert_eq!(unlimited.delay(u32::MAX), Some(Duration::from_secs(10)));
        let three = ReconnectPolicy { max_attempts: Some(3) };
        assert!(three.delay(3).is_some());
        assert_eq!(three.delay(4), None);
        assert_eq!(ReconnectPolicy { max_attempts: Some(0) }.delay(1), None);
    }

    #[test]
    fn connection_losses_are_told_apart_from_errors_a_new_session_repeats() {
        for code in ["57P01", "57P03", "08006", "53300"] {
            assert!(PgSourceError::from(server_error(code)).is_connection_loss(), "{code}");
        }
        for code in ["28P01", "42P01", "28000"] {
            assert!(!PgSourceError::from(server_error(code)).is_connection_loss(), "{code}");
        }
        let closed = WireError::Io { context: "reading", source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof) };
        assert!(PgSourceError::from(closed).is_connection_loss());
        assert!(!PgSourceError::Config("x".into()).is_connection_loss());
        assert!(!PgSourceError::from(WireError::Tls("bad certificate".into())).is_connection_loss());
    }
}
