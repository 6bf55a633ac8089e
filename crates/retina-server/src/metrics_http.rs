//! A minimal HTTP/1.1 endpoint for `GET /metrics` (Prometheus text format).
//!
//! Deliberately tiny (no HTTP framework): one request per connection, the request
//! head capped at 8 KiB, a 5 s read timeout, `Connection: close`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use retina_query::RetinaSession;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::accept_loop::AcceptLoop;
use crate::error::ServerResult;
use crate::prometheus;

const MAX_HEAD: usize = 8 * 1024;

/// A running metrics endpoint; stops when dropped.
pub struct MetricsServer {
    accept: AcceptLoop,
}

impl MetricsServer {
    pub async fn start(listen: &str, session: Arc<RetinaSession>) -> ServerResult<Self> {
        let accept = AcceptLoop::bind(listen, move |socket| {
            let session = Arc::clone(&session);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), serve(socket, &session)).await;
            });
        })
        .await?;
        Ok(Self { accept })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.accept.local_addr()
    }

    pub async fn shutdown(self) {
        self.accept.shutdown().await;
    }
}

/// What to answer to a request line.
fn route(request_line: &str, session: &RetinaSession) -> (&'static str, String) {
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => ("200 OK", prometheus::render(&session.figures())),
        ("GET", "/") => ("200 OK", "Retina metrics endpoint: GET /metrics\n".into()),
        ("GET", _) => ("404 Not Found", format!("no such path {path}; try /metrics\n")),
        _ => ("405 Method Not Allowed", "only GET is supported\n".into()),
    }
}

async fn serve(mut socket: TcpStream, session: &RetinaSession) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..read]);
        if head.len() > MAX_HEAD {
            return respond(&mut socket, "431 Request Header Fields Too Large", "request head too large\n").await;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let request_line = text.lines().next().unwrap_or("");
    let (status, body) = route(request_line, session);
    respond(&mut socket, status, &body).await
}

async fn respond(socket: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}
