//! The accept loop of the PostgreSQL endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use retina_query::RetinaSession;

use super::connection_limit::{refuse_too_many, ConnectionSlots, DEFAULT_MAX_CONNECTIONS};
use super::handler::RetinaHandlers;
use super::startup::ClientAuthentication;
use crate::accept_loop::AcceptLoop;
use crate::error::{ServerError, ServerResult};

/// Stack of each thread that runs connections. SQL is planned and run by recursive
/// walks over trees as deep as a statement's operator chains ([`retina_query::statement_limits`]
/// bounds them); DataFusion's derived `Clone` of such a tree is not stack-safe, and a
/// 1,000-term sum overflowed tokio's default 2 MiB and aborted the process. The stack
/// is reserved address space; only the pages a deep statement touches are memory.
const CONNECTION_STACK_BYTES: usize = 64 << 20;

/// A running PostgreSQL endpoint. Connections run on the server's own runtime, whose
/// threads have stacks deep enough for any statement the limits admit, whatever the
/// embedding runtime's settings. Dropping it (or [`PgServer::shutdown`]) stops
/// accepting and ends the open connections.
pub struct PgServer {
    accept: Option<AcceptLoop>,
    connections: Option<tokio::runtime::Runtime>,
}

impl PgServer {
    /// Binds `listen` (HOST:PORT; port 0 picks a free one) and starts serving on the
    /// current tokio runtime, to any user without a password.
    pub async fn start(listen: &str, session: Arc<RetinaSession>) -> ServerResult<Self> {
        Self::start_with_authentication(listen, session, ClientAuthentication::Trust).await
    }

    /// [`PgServer::start`] with the given client authentication.
    pub async fn start_with_authentication(
        listen: &str,
        session: Arc<RetinaSession>,
        authentication: ClientAuthentication,
    ) -> ServerResult<Self> {
        Self::start_with_limit(listen, session, authentication, DEFAULT_MAX_CONNECTIONS).await
    }

    /// [`PgServer::start_with_authentication`] serving at most `max_connections`
    /// clients at once; one more is refused with PostgreSQL's 53300.
    pub async fn start_with_limit(
        listen: &str,
        session: Arc<RetinaSession>,
        authentication: ClientAuthentication,
        max_connections: usize,
    ) -> ServerResult<Self> {
        let slots = ConnectionSlots::new(max_connections)?;
        let connections = tokio::runtime::Builder::new_multi_thread()
            .thread_name("retina-sql")
            .thread_stack_size(CONNECTION_STACK_BYTES)
            .enable_all()
            .build()
            .map_err(|e| ServerError::Config { reason: format!("cannot start the SQL runtime: {e}") })?;
        let spawner = connections.handle().clone();
        let handlers = Arc::new(RetinaHandlers::new(session, authentication));
        let bound = AcceptLoop::bind(listen, move |socket| {
            let handlers = Arc::clone(&handlers);
            let slot = slots.take();
            spawner.spawn(async move {
                let Some(_slot) = slot else { return refuse_too_many(socket).await };
                // A client that vanishes mid-protocol is its own problem; its streams
                // (and snapshots) are dropped with the task.
                if let Err(error) = pgwire::tokio::process_socket(socket, None, handlers).await {
                    tracing::debug!(%error, "a SQL connection ended with an error");
                }
            });
        })
        .await;
        let accept = match bound {
            Ok(accept) => accept,
            Err(error) => {
                // Inside an async context a runtime may not block as it drops.
                connections.shutdown_background();
                return Err(error);
            }
        };
        Ok(Self { accept: Some(accept), connections: Some(connections) })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.accept.as_ref().map_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)), AcceptLoop::local_addr)
    }

    /// Stops accepting connections, waits for the accept loop to end, and ends the
    /// open connections (waiting up to 2 s for their tasks to stop).
    pub async fn shutdown(mut self) {
        if let Some(accept) = self.accept.take() {
            accept.shutdown().await;
        }
        if let Some(connections) = self.connections.take() {
            let _ = tokio::task::spawn_blocking(move || connections.shutdown_timeout(std::time::Duration::from_secs(2))).await;
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // Possibly inside an async context, where a runtime may not block.
        if let Some(connections) = self.connections.take() {
            connections.shutdown_background();
        }
    }
}
