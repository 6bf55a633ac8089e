//! At most so many connections at once, as PostgreSQL's `max_connections`: with no
//! cap, 21,000 idle sockets reached the process's file-descriptor limit and new
//! clients hung. A connection beyond the cap gets PostgreSQL's own refusal
//! (`FATAL 53300 sorry, too many clients already`) after its startup message, so
//! every driver shows it as it would for PostgreSQL.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::cursors::MAX_CURSORS_PER_CONNECTION;
use crate::error::{ServerError, ServerResult};

/// The default of [`ConnectionSlots`]' cap.
pub const DEFAULT_MAX_CONNECTIONS: usize = 100;

/// Query snapshots the engine can hold at once (`retina_core::txn` slots), less a
/// reserve for replay's own (publication, storage GC).
const SNAPSHOTS_FOR_CLIENTS: usize = retina_core::txn::DEFAULT_SNAPSHOT_SLOTS - 256;

/// How long a refused client may take to send its startup message.
const REFUSAL_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The open connections, counted against a cap.
#[derive(Clone)]
pub struct ConnectionSlots {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One connection's place; dropping it frees the place.
pub struct ConnectionSlot {
    open: Arc<AtomicUsize>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, SeqCst);
    }
}

impl ConnectionSlots {
    /// A cap of `max` connections. Every connection may hold a running query and its
    /// cursors, each a snapshot: the cap must keep them all within the engine's
    /// snapshot slots, or one busy client could again stop everyone's queries.
    pub fn new(max: usize) -> ServerResult<Self> {
        let most = SNAPSHOTS_FOR_CLIENTS / (MAX_CURSORS_PER_CONNECTION + 1);
        if max == 0 || max > most {
            return Err(ServerError::Config {
                reason: format!(
                    "max connections {max}: between 1 and {most} (each connection may hold {MAX_CURSORS_PER_CONNECTION} \
                     cursors and a query, each a snapshot, and the engine holds {SNAPSHOTS_FOR_CLIENTS} for clients)"
                ),
            });
        }
        Ok(Self { open: Arc::new(AtomicUsize::new(0)), max })
    }

    /// A place for one more connection, if the cap allows.
    pub fn take(&self) -> Option<ConnectionSlot> {
        let taken = self.open.fetch_add(1, SeqCst);
        let slot = ConnectionSlot { open: Arc::clone(&self.open) };
        (taken < self.max).then_some(slot)
    }

    pub fn open(&self) -> usize {
        self.open.load(SeqCst)
    }
}

/// Answers a connection beyond the cap as PostgreSQL does: declines TLS if asked,
/// reads the startup message, sends `FATAL 53300` and closes.
pub async fn refuse_too_many(mut socket: TcpStream) {
    let refusal = async {
        let mut startup = read_startup_packet(&mut socket).await?;
        if is_ssl_or_gss_request(&startup) {
            socket.write_all(b"N").await?;
            startup = read_startup_packet(&mut socket).await?;
        }
        let _ = startup;
        socket.write_all(&fatal_response("53300", "sorry, too many clients already")).await?;
        socket.shutdown().await
    };
    let _ = tokio::time::timeout(REFUSAL_READ_TIMEOUT, refusal).await;
}

/// One startup-phase packet (length-prefixed, no type byte), at most 10,000 bytes as
/// PostgreSQL allows.
async fn read_startup_packet(socket: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let length = socket.read_u32().await? as usize;
    if !(8..=10_000).contains(&length) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "bad startup packet length"));
    }
    let mut body = vec![0; length - 4];
    socket.read_exact(&mut body).await?;
    Ok(body)
}

/// SSLRequest (80877103) or GSSENCRequest (80877104): 8 bytes, a magic code.
fn is_ssl_or_gss_request(body: &[u8]) -> bool {
    body.len() == 4 && matches!(u32::from_be_bytes([body[0], body[1], body[2], body[3]]), 80_877_103 | 80_877_104)
}

/// An `ErrorResponse` of severity FATAL.
fn fatal_response(code: &str, message: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (kind, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', code), (b'M', message)] {
        fields.push(kind);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut packet = vec![b'E'];
    packet.extend_from_slice(&((fields.len() + 4) as u32).to_be_bytes());
    packet.extend_from_slice(&fields);
    packet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_frees_places_and_keeps_snapshots_within_the_engine() {
        let slots = ConnectionSlots::new(2).expect("slots");
        let (a, b) = (slots.take(), slots.take());
        assert!(a.is_some() && b.is_some());
        assert!(slots.take().is_none(), "a third is refused");
        drop(a);
        assert!(slots.take().is_some(), "a freed place is taken again");
        assert!(ConnectionSlots::new(0).is_err());
        let error = ConnectionSlots::new(1_000_000).err().expect("beyond the snapshot slots").to_string();
        assert!(error.contains("max connections 1000000"), "{error}");
        assert!(ConnectionSlots::new(DEFAULT_MAX_CONNECTIONS).is_ok());
    }

    #[test]
    fn the_refusal_is_postgresqls_error_response() {
        let packet = fatal_response("53300", "sorry, too many clients already");
        assert_eq!(packet[0], b'E');
        assert_eq!(u32::from_be_bytes([packet[1], packet[2], packet[3], packet[4]]) as usize, packet.len() - 1);
        assert!(packet.windows(5).any(|w| w == b"53300"));
        assert!(is_ssl_or_gss_request(&80_877_103u32.to_be_bytes()));
        assert!(!is_ssl_or_gss_request(&196_608u32.to_be_bytes()));
    }
}
