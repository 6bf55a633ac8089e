//! An HTTP proxy in front of a test server that answers some requests with
//! `503 Service Unavailable` itself: the transient failures a real object store
//! gives under load, for testing that clients retry them.
//!
//! It handles one request per connection (it asks the upstream to close after
//! each, and closes too), which is enough for HTTP/1.1 clients: they reconnect.
//! Request bodies must carry `Content-Length` (object_store's do).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use crate::ServiceError;

/// The proxy; stops accepting when dropped.
pub struct FlakyHttpProxy {
    port: u16,
    failed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl FlakyHttpProxy {
    /// Proxies to `127.0.0.1:upstream_port`, answering every `fail_every`-th request
    /// with a 503 instead of forwarding it.
    pub fn start(upstream_port: u16, fail_every: u64) -> Result<Self, ServiceError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| ServiceError::new("flaky proxy", format!("bind: {e}")))?;
        let port = listener.local_addr().map_err(|e| ServiceError::new("flaky proxy", e.to_string()))?.port();
        let (failed, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (failing, stopping) = (Arc::clone(&failed), Arc::clone(&stop));
        std::thread::spawn(move || {
            let requests = AtomicU64::new(0);
            for client in listener.incoming() {
                if stopping.load(SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let fail = (requests.fetch_add(1, SeqCst) + 1) % fail_every.max(1) == 0;
                if fail {
                    failing.fetch_add(1, SeqCst);
                }
                std::thread::spawn(move || {
                    let _ = serve(client, upstream_port, fail);
                });
            }
        });
        Ok(Self { port, failed, stop })
    }

    /// `http://127.0.0.1:PORT`, the endpoint to give clients.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests answered with a 503 so far.
    pub fn failures(&self) -> u64 {
        self.failed.load(SeqCst)
    }
}

impl Drop for FlakyHttpProxy {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

/// Reads one request from `client`, then answers it with a 503 or forwards it.
fn serve(client: TcpStream, upstream_port: u16, fail: bool) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            content_length = value.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") {
            continue;
        }
        head.extend_from_slice(line.as_bytes());
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body)?;
    let mut client = client;
    if fail {
        return client.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port))?;
    upstream.write_all(&head)?;
    upstream.write_all(b"Connection: close\r\n\r\n")?;
    upstream.write_all(&body)?;
    let mut response = Vec::new();
    upstream.read_to_end(&mut response)?;
    client.write_all(&response)
}
