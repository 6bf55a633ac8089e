//! The accept loop of the PostgreSQL endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use retina_query::RetinaSession;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::handler::RetinaHandlers;
use crate::error::{ServerError, ServerResult};

/// A running PostgreSQL endpoint. Dropping it (or [`PgServer::shutdown`]) stops
/// accepting; connections already open finish their current work and close when
/// their client does or the runtime ends.
pub struct PgServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept_loop: Option<JoinHandle<()>>,
}

impl PgServer {
    /// Binds `listen` (HOST:PORT; port 0 picks a free one) and starts serving on the
    /// current tokio runtime.
    pub async fn start(listen: &str, session: Arc<RetinaSession>) -> ServerResult<Self> {
        let listener =
            TcpListener::bind(listen).await.map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        let handlers = Arc::new(RetinaHandlers::new(session));
        let (stop, mut stopped) = watch::channel(false);
        let accept_loop = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((socket, _peer)) => {
                            let handlers = Arc::clone(&handlers);
                            tokio::spawn(async move {
                                // A client that vanishes mid-protocol is its own problem;
                                // its streams (and snapshots) are dropped with the task.
                                let _ = pgwire::tokio::process_socket(socket, None, handlers).await;
                            });
                        }
                        // Accept errors (e.g. out of file descriptors) are transient:
                        // back off instead of spinning.
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                    },
                }
            }
        });
        Ok(Self { addr, stop, accept_loop: Some(accept_loop) })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(handle) = self.accept_loop.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
