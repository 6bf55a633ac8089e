//! A small blocking client of the PostgreSQL frontend/backend protocol (v3): startup
//! and authentication (trust, cleartext, MD5, SCRAM-SHA-256 with channel binding
//! over TLS), simple queries,
//! `COPY ... TO STDOUT`, and the CopyBoth stream of a logical replication session.
//!
//! TCP (`std::net::TcpStream`; the host may be a name or an IP), with TLS as libpq's
//! `sslmode` asks; no Unix sockets, no extended query protocol. That is all the PostgreSQL source
//! needs: catalog queries, the initial `COPY` inside an exported snapshot, and
//! `START_REPLICATION`. `postgres-protocol` provides the message encoding and the
//! SCRAM/MD5 computations; the framing of the hot paths (CopyData) is ours.
//!
//! - `connection`: [`PgConnection`], startup and session state.
//! - `authentication`: the password exchanges.
//! - `query`: `simple_query`, `query_rows`, `copy_out`.
//! - `copy_both`: `start_copy_both`, `read_copy_data`, `send_copy_data`.
//! - `transport`: the socket, the read buffer and message framing.
//! - `tls`: `sslmode`, certificates and channel binding data.
//! - `error`: [`WireError`].

// `WireError::Server` carries the server's fields as the API promises; errors are the
// cold path, so the larger `Result` is not worth boxing them for.
#![allow(clippy::result_large_err)]

mod authentication;
mod connection;
mod copy_both;
mod error;
mod query;
mod tls;
mod transport;

use std::time::Duration;

use bytes::Bytes;

pub use connection::PgConnection;
pub use error::{WireError, WireResult};
pub use tls::{RootCertificates, SslMode, TlsOptions};

/// Where and as whom to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectConfig {
    /// A host name or an IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    pub user: String,
    /// Needed when the server asks for a password (cleartext, MD5 or SCRAM-SHA-256).
    pub password: Option<String>,
    pub database: String,
    /// Shown in `pg_stat_activity` and `pg_stat_replication`, so an operator can tell
    /// Retina's sessions apart.
    pub application_name: String,
    /// Bounds the TCP connect and each wait for the server during startup. Zero
    /// means no bound (the operating system's connect timeout).
    pub connect_timeout: Duration,
    /// Whether and how the session is encrypted; libpq's default (`prefer`) when
    /// not set.
    pub tls: TlsOptions,
}

/// One result of a simple query: one per statement that returned rows or a command
/// tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Column names from RowDescription; empty for statements without rows.
    pub columns: Vec<String>,
    /// Text-format values; `None` is SQL NULL.
    pub rows: Vec<Vec<Option<String>>>,
    /// The CommandComplete tag, e.g. `SELECT 3`, `CREATE PUBLICATION`.
    pub tag: String,
}

/// What [`PgConnection::read_copy_data`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyBothEvent {
    /// One CopyData payload from the server (an XLogData `w` or keepalive `k`
    /// message, still encoded). It is a view into the connection's read buffer:
    /// holding it keeps that buffer chunk (128 KiB) alive, so copy out what must
    /// outlive the message.
    Data(Bytes),
    /// No complete message arrived within the timeout; nothing was lost (partial
    /// input stays buffered).
    Timeout,
    /// The server ended the copy (CopyDone / CommandComplete / ReadyForQuery); the
    /// session is back to accepting queries.
    End,
}
