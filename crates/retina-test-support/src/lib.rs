//! Real services for tests and benchmarks, started on loopback ports in temporary
//! directories and stopped on drop. A missing service is an error that says what to
//! install, never a skipped test.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A service that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{service}: {reason}")]
pub struct ServiceError {
    pub service: &'static str,
    pub reason: String,
}

impl ServiceError {
    fn new(service: &'static str, reason: String) -> Self {
        Self { service, reason }
    }
}

/// A `nats-server -js` on a free loopback port with its store in a temporary
/// directory, stopped on drop: what the tests run against, and the NATS
/// benchmark when no server is given.
pub struct LocalNatsServer {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Drop for LocalNatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LocalNatsServer {
    /// Starts the server and waits until it listens; fails saying what to install
    /// when `nats-server` is missing.
    pub fn start() -> Result<Self, ServiceError> {
        let dir = tempfile::tempdir().map_err(|e| ServiceError::new("nats-server", format!("temporary directory: {e}")))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| ServiceError::new("nats-server", format!("no free port: {e}")))?
            .port();
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ServiceError::new("nats-server", format!("cannot start it ({e}): install the Debian package nats-server (apt-get install -y nats-server)")))?;
        let server = Self { child, address: format!("127.0.0.1:{port}"), _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(ServiceError::new("nats-server", format!("did not listen on port {port} within 10 s")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// `HOST:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn port(&self) -> u16 {
        self.address.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_default()
    }
}
