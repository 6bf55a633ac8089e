//! The accept loop of the PostgreSQL endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use retina_query::RetinaSession;

use super::handler::RetinaHandlers;
use super::startup::ClientAuthentication;
use crate::accept_loop::AcceptLoop;
use crate::error::ServerResult;

/// A running PostgreSQL endpoint. Dropping it (or [`PgServer::shutdown`]) stops
/// accepting; connections already open finish their current work and close when
/// their client does or the runtime ends.
pub struct PgServer {
    accept: AcceptLoop,
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
        let handlers = Arc::new(RetinaHandlers::new(session, authentication));
        let accept = AcceptLoop::bind(listen, move |socket| {
            let handlers = Arc::clone(&handlers);
            tokio::spawn(async move {
                // A client that vanishes mid-protocol is its own problem; its streams
                // (and snapshots) are dropped with the task.
                let _ = pgwire::tokio::process_socket(socket, None, handlers).await;
            });
        })
        .await?;
        Ok(Self { accept })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.accept.local_addr()
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn shutdown(self) {
        self.accept.shutdown().await;
    }
}
