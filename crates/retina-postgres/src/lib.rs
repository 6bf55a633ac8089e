//! Retina's PostgreSQL source (ARCHITECTURE.md §3.5): logical replication with the built-in
//! `pgoutput` plugin, an initial copy inside the slot's exported snapshot, one mirror
//! transaction per source transaction, and flush-LSN feedback only for durable work.
//!
//! - [`wire`]: a small blocking client of the PostgreSQL frontend/backend protocol
//!   (startup, authentication, simple queries, COPY OUT, the CopyBoth replication
//!   stream). Why our own: upstream `tokio-postgres` has no replication mode; the
//!   crates.io replication clients (`pgwire-replication`, `pg_walstream`) stream from
//!   an existing slot but do not run the catalog queries and the `COPY` inside an
//!   exported snapshot that the initial copy needs, so we would need a second client
//!   anyway. `postgres-protocol` gives us the message framing and SCRAM.
//! - [`lsn`]: log sequence numbers.
//! - [`pgoutput`]: the decoder of the logical replication messages (v1 and v2).
//! - [`types`]: PostgreSQL types to Arrow columns and text values to [`retina_core::Value`]s.
//! - [`relation`]: the relations the stream describes, bound to Retina tables.
//! - [`added_column`]: rows that existed before an added column get its default.
//! - [`catch_up`]: running until the mirror caught up with the server, then stopping.
//! - [`conninfo`]: the source URI and its options.
//! - [`credentials`]: the password and TLS files from the environment, as libpq finds them.
//! - [`setup`]: checks and slot creation.
//! - [`publication`]: the publication, created so it never breaks the application.
//! - [`initial_copy`]: the snapshot copy of existing rows.
//! - [`transaction`]: source transactions rebuilt from the stream (v1 and v2).
//! - [`position`]: the recorded source position and what a restart reads from it.
//! - [`feedback`]: standby status updates and the server's WAL position.
//! - [`reconnect`]: which failures a new session cures, and the backoff between attempts.
//! - [`replicator`]: [`PgSource`], the main loop and exactly-once positions.
//! - [`table_pause`]: one table's error pauses that table, not the source.
//! - [`table_sync`]: tables that join the publication later, copied then streamed.
//! - [`status`]: progress and lag for `retina.sources` and `/metrics`.

pub mod added_column;
pub mod catch_up;
pub mod conninfo;
pub mod credentials;
pub mod error;
pub mod feedback;
pub mod initial_copy;
pub mod lsn;
pub mod pgoutput;
pub mod position;
pub mod publication;
pub mod reconnect;
pub mod relation;
pub mod replicator;
pub mod setup;
mod small_files;
pub mod status;
pub mod table_pause;
pub mod table_sync;
pub mod transaction;
pub mod types;
pub mod wire;

pub use error::{PgSourceError, PgSourceResult};
pub use conninfo::PgSourceOptions;
pub use lsn::Lsn;
pub use replicator::PgSource;
pub use status::{Phase, PgSourceStatus, SharedStatus};
