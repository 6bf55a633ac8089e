//! Retina's SQL front end (ARCHITECTURE.md §2, §5).
//!
//! - [`pg`]: the PostgreSQL wire protocol (simple and extended query protocols) over
//!   a shared [`retina_query::RetinaSession`], so `psql` and Postgres drivers work;
//! - [`metrics_http`]: `GET /metrics` in Prometheus text format ([`prometheus`]);
//! - [`client`]: a small blocking PostgreSQL client (`retina sql --connect`, tests),
//!   and [`text_result`]: results printed as a table, CSV or JSON.
//!
//! The endpoints bind loopback by default; the caller chooses the addresses. SQL
//! clients connect without a password unless the server is given one
//! ([`ClientAuthentication`]); then they authenticate with SCRAM-SHA-256.

mod accept_loop;
pub mod client;
pub mod error;
pub mod metrics_http;
pub mod pg;
pub mod prometheus;
pub mod text_result;

pub use error::{ServerError, ServerResult};
pub use metrics_http::MetricsServer;
pub use pg::password_file::scram_from_password_file;
pub use pg::server::PgServer;
pub use pg::startup::ClientAuthentication;

/// Default address of the SQL endpoint (PostgreSQL wire protocol).
pub const DEFAULT_SQL_LISTEN: &str = "127.0.0.1:5433";
/// Default address of the metrics endpoint.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9187";
