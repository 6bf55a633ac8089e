//! Real services for tests and benchmarks, started on loopback ports in temporary
//! directories and stopped on drop. A missing service is an error that says what to
//! install, never a skipped test.

mod connect;
mod flaky_proxy;
mod kafka;
pub mod spark;

pub use connect::KafkaConnect;
pub use flaky_proxy::FlakyHttpProxy;
pub use kafka::{KafkaRecord, LocalKafkaBroker};
pub use spark::{SparkAnswer, SparkSession};

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

/// A free loopback port for `service` to listen on.
fn free_port(service: &'static str) -> Result<u16, ServiceError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| ServiceError::new(service, format!("no free port: {e}")))
}

/// Waits until `service` accepts connections on `port` (the server is started and
/// owned by the caller, which stops it on drop if this fails).
fn wait_listening(service: &'static str, port: u16, limit: Duration) -> Result<(), ServiceError> {
    let deadline = Instant::now() + limit;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(ServiceError::new(service, format!("did not listen on port {port} within {} s", limit.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A started server process on a loopback port, killed and reaped on drop.
struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    /// Waits until the process listens on its port; a server that does not is
    /// killed (by drop) before the error returns.
    /// A server that exited meanwhile (it could not bind: a parallel test's service
    /// took the free port first) is an error too, not whatever answers on the port.
    fn listening(child: Child, port: u16, service: &'static str, limit: Duration) -> Result<Self, ServiceError> {
        let mut process = Self { child, port };
        wait_listening(service, port, limit)?;
        if !matches!(process.child.try_wait(), Ok(None)) {
            return Err(ServiceError::new(service, format!("exited instead of listening on port {port}")));
        }
        Ok(process)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `nats-server -js` on a free loopback port with its store in a temporary
/// directory, stopped on drop: what the tests run against, and the NATS
/// benchmark when no server is given.
pub struct LocalNatsServer {
    process: ServerProcess,
    address: String,
    _dir: tempfile::TempDir,
}

impl LocalNatsServer {
    /// Starts the server and waits until it listens; fails saying what to install
    /// when `nats-server` is missing.
    ///
    /// The port is free when picked but may be taken by another service a parallel
    /// test starts before this server binds it: then the server exits and something
    /// else answers on the port. So the answer must be NATS's greeting from a server
    /// still running, else a new port is tried.
    pub fn start() -> Result<Self, ServiceError> {
        const ATTEMPTS: usize = 5;
        let mut last = ServiceError::new("nats-server", "not started".into());
        for _ in 0..ATTEMPTS {
            let dir = tempfile::tempdir().map_err(|e| ServiceError::new("nats-server", format!("temporary directory: {e}")))?;
            let port = free_port("nats-server")?;
            let child = Command::new("nats-server")
                .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
                .arg(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| ServiceError::new("nats-server", format!("cannot start it ({e}): install the Debian package nats-server (apt-get install -y nats-server)")))?;
            let process = match ServerProcess::listening(child, port, "nats-server", Duration::from_secs(10)) {
                Ok(process) => process,
                Err(error) => {
                    last = error;
                    continue;
                }
            };
            match nats_greets(port) {
                Ok(()) => return Ok(Self { process, address: format!("127.0.0.1:{port}"), _dir: dir }),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    /// `HOST:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }
}

/// Whether what listens on `port` greets as a NATS server does (`INFO {…}`).
fn nats_greets(port: u16) -> Result<(), ServiceError> {
    use std::io::Read;
    let failed = |reason: String| ServiceError::new("nats-server", reason);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| failed(format!("connect to port {port}: {e}")))?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| failed(e.to_string()))?;
    let mut greeting = [0u8; 4];
    stream.read_exact(&mut greeting).map_err(|e| failed(format!("no greeting on port {port}: {e}")))?;
    if &greeting != b"INFO" {
        return Err(failed(format!("port {port} is another service's")));
    }
    Ok(())
}

/// The venv's Python (`<target dir>/py-clients/bin/python`, made by
/// `scripts/test.sh`), else `python3`.
pub fn venv_python() -> std::ffi::OsString {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|target| target.join("py-clients/bin/python")))
        .filter(|path| path.exists())
        .map_or_else(|| "python3".into(), |path| path.into_os_string())
}

/// An S3-compatible server (`moto_server`, from PyPI's `moto[server]`) on a free
/// loopback port, stopped on drop. It honours ranged GETs and conditional PUTs.
/// Found in the venv `scripts/test.sh` makes (`<target dir>/py-clients`), or on
/// `PATH`.
pub struct LocalS3Server {
    process: ServerProcess,
}

impl LocalS3Server {
    /// Starts the server and waits until it answers; fails saying what to install
    /// when `moto_server` is missing.
    pub fn start() -> Result<Self, ServiceError> {
        Self::start_with(false)
    }

    /// [`Self::start`] with authentication enforced from the first request (moto's
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0`): unknown credentials get `403`. Buckets
    /// cannot be created through [`Self::create_bucket`] then.
    pub fn start_requiring_auth() -> Result<Self, ServiceError> {
        Self::start_with(true)
    }

    fn start_with(require_auth: bool) -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("moto_server", reason);
        let port = free_port("moto_server")?;
        let venv = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.ancestors().nth(3).map(|target| target.join("py-clients/bin/moto_server")))
            .filter(|path| path.exists());
        let program = venv.map_or_else(|| "moto_server".into(), |path| path.into_os_string());
        let mut command = Command::new(&program);
        if require_auth {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
        }
        let child = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                error(format!(
                    "cannot start {} ({e}): run scripts/test.sh, which installs moto[server] into <target dir>/py-clients, or pip install 'moto[server]'",
                    program.to_string_lossy()
                ))
            })?;
        Ok(Self { process: ServerProcess::listening(child, port, "moto_server", Duration::from_secs(30))? })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// Creates a bucket (path-style, unsigned: moto accepts it).
    pub fn create_bucket(&self, bucket: &str) -> Result<(), ServiceError> {
        use std::io::{Read, Write};
        let error = |reason: String| ServiceError::new("moto_server", reason);
        let mut stream = TcpStream::connect(("127.0.0.1", self.process.port)).map_err(|e| error(format!("connect: {e}")))?;
        write!(stream, "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.process.port)
            .map_err(|e| error(format!("create bucket {bucket}: {e}")))?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(|e| error(format!("create bucket {bucket}: {e}")))?;
        if !response.starts_with("HTTP/1.1 200") {
            return Err(error(format!("create bucket {bucket}: {}", response.lines().next().unwrap_or_default())));
        }
        Ok(())
    }
}
