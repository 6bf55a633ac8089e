//! The accept loop both endpoints share: bind, hand every connection to a task,
//! stop on request or drop.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{ServerError, ServerResult};

/// A bound listener whose accept loop runs on the current tokio runtime until
/// [`AcceptLoop::shutdown`] or drop; connections already handed out finish on their own.
pub(crate) struct AcceptLoop {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    handle: Option<JoinHandle<()>>,
}

impl AcceptLoop {
    /// Binds `listen` (HOST:PORT; port 0 picks a free one) and calls `on_connection`
    /// for every accepted socket (it should spawn, not block).
    pub(crate) async fn bind(listen: &str, on_connection: impl Fn(TcpStream) + Send + 'static) -> ServerResult<Self> {
        let listener =
            TcpListener::bind(listen).await.map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: listen.to_string(), source })?;
        let (stop, mut stopped) = watch::channel(false);
        let handle = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((socket, _peer)) => on_connection(socket),
                        // Accept errors (e.g. out of file descriptors) are transient:
                        // back off instead of spinning.
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    },
                }
            }
        });
        Ok(Self { addr, stop, handle: Some(handle) })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and waits for the loop to end.
    pub(crate) async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
