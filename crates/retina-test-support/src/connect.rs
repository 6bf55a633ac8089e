//! Kafka Connect 4.3 in distributed mode with Debezium 3.6.1's PostgreSQL connector,
//! as users deploy it: started by `scripts/services/connect.sh` from the jars
//! `scripts/services/resolve.sh` caches, configured through its REST API, and killed
//! with SIGKILL when a test wants a worker crash.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{free_port, spark::services_dir, ServiceError};

/// A running Connect worker, stopped on drop.
pub struct KafkaConnect {
    dir: tempfile::TempDir,
    port: u16,
    bootstrap: String,
    offset_flush_ms: u64,
}

impl KafkaConnect {
    /// Starts a worker against the brokers at `bootstrap`; its offsets are flushed
    /// every `offset_flush_ms` (what Debezium re-sends after a crash). Waits until
    /// its REST API answers.
    pub fn start(bootstrap: &str, offset_flush_ms: u64) -> Result<Self, ServiceError> {
        crate::spark::jars("connect")?;
        let dir = tempfile::tempdir().map_err(|e| ServiceError::new("kafka connect", format!("temp dir: {e}")))?;
        let port = free_port("kafka connect")?;
        let worker = Self { dir, port, bootstrap: bootstrap.to_string(), offset_flush_ms };
        worker.launch()?;
        Ok(worker)
    }

    fn launch(&self) -> Result<(), ServiceError> {
        let output = Command::new(services_dir().join("connect.sh"))
            .args(["start"])
            .arg(self.dir.path())
            .args([&self.bootstrap, &self.port.to_string()])
            .env("CONNECT_OFFSET_FLUSH_MS", self.offset_flush_ms.to_string())
            .output()
            .map_err(|e| ServiceError::new("kafka connect", format!("cannot run scripts/services/connect.sh: {e}")))?;
        if !output.status.success() {
            return Err(ServiceError::new(
                "kafka connect",
                format!("did not start: {}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
            ));
        }
        Ok(())
    }

    /// The worker JVM's pid.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("connect.pid")).ok()?.trim().parse().ok()
    }

    /// SIGKILL of the worker: what it had not flushed, Debezium sends again.
    pub fn kill(&self) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_file(self.dir.path().join("connect.pid"));
    }

    /// Starts the worker again on the same port and topics (after [`Self::kill`]).
    pub fn restart(&self) -> Result<(), ServiceError> {
        self.launch()
    }

    /// Creates (or replaces) connector `name` with `config` (a JSON object).
    pub fn put_connector(&self, name: &str, config: &serde_json::Value) -> Result<(), ServiceError> {
        let (status, body) = self.request("PUT", &format!("/connectors/{name}/config"), Some(&config.to_string()))?;
        if !(200..300).contains(&status) {
            return Err(ServiceError::new("kafka connect", format!("PUT connector {name}: HTTP {status}: {body}")));
        }
        Ok(())
    }

    /// Waits until connector `name` and its task run; a failed task is an error with
    /// its trace.
    pub fn wait_running(&self, name: &str, limit: Duration) -> Result<(), ServiceError> {
        let deadline = Instant::now() + limit;
        loop {
            let (status, body) = self.request("GET", &format!("/connectors/{name}/status"), None)?;
            if status == 200 {
                let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let tasks = value["tasks"].as_array().cloned().unwrap_or_default();
                if tasks.iter().any(|t| t["state"] == "FAILED") {
                    return Err(ServiceError::new("kafka connect", format!("connector {name} failed: {body}")));
                }
                if value["connector"]["state"] == "RUNNING" && !tasks.is_empty() && tasks.iter().all(|t| t["state"] == "RUNNING") {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(ServiceError::new("kafka connect", format!("connector {name} not running after {limit:?}: {body}")));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The worker's log (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("connect.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// One HTTP/1.1 request to the REST API: (status, body).
    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String), ServiceError> {
        let error = |reason: String| ServiceError::new("kafka connect", format!("{method} {path}: {reason}"));
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| error(e.to_string()))?;
        stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| error(e.to_string()))?;
        let body = body.unwrap_or("");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        );
        stream.write_all(request.as_bytes()).map_err(|e| error(e.to_string()))?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(|e| error(e.to_string()))?;
        let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).ok_or_else(|| error(format!("no status in {response:?}")))?;
        let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        // Chunked bodies (Jetty's default without a length): the JSON is inside.
        let body = match (body.find('{'), body.rfind('}')) {
            (Some(start), Some(end)) if end >= start => body[start..=end].to_string(),
            _ => body.to_string(),
        };
        Ok((status, body))
    }
}

impl Drop for KafkaConnect {
    fn drop(&mut self) {
        let _ = Command::new(services_dir().join("connect.sh")).arg("stop").arg(self.dir.path()).output();
    }
}
