//! Apache Spark 4.0.1 with Delta Lake 4.0.0 and Iceberg 1.10.0 as an independent
//! reader of the published tables: one local JVM session
//! (`scripts/services/SparkRead.java`, Java 17 source-file mode, jars resolved by
//! `scripts/services/resolve_spark.sh` into `$RETINA_JARS/spark`) that answers one
//! query per line with one JSON line. A JVM takes 10-20 s to start: a test runs all
//! its queries in one session.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::ServiceError;

/// Spark 4 on Java 17 needs these packages opened to it.
const JAVA_OPTIONS: &[&str] = &[
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Xmx2g",
];

/// The folder of jars resolved for `component` (`kafka`, `connect`, `spark`), or an
/// error saying how to get them.
pub fn jars(component: &'static str) -> Result<PathBuf, ServiceError> {
    let cache = match std::env::var_os("RETINA_JARS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/retina-jars"),
    };
    let dir = cache.join(component);
    let resolved = std::fs::read_dir(&dir).map(|entries| entries.flatten().any(|e| e.path().extension().is_some_and(|x| x == "jar")));
    match resolved {
        Ok(true) => Ok(dir),
        _ => Err(ServiceError::new(
            component,
            format!(
                "no jars in {}: run scripts/services/resolve.sh (scripts/test.sh runs it; needs Java 17 and Maven) to fetch them from Maven Central",
                dir.display()
            ),
        )),
    }
}

/// The repository's `scripts/services` folder.
pub fn services_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/services")
}

/// The `java` of `JAVA_HOME`, else the one on the path.
pub fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if Path::new(&home).join("bin/java").exists() => Path::new(&home).join("bin/java"),
        _ => PathBuf::from("java"),
    }
}

/// One answer: column names and rows of JSON values, or Spark's error.
#[derive(Debug, Clone, PartialEq)]
pub struct SparkAnswer {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<serde_json::Value>>,
}

/// A running Spark session, ended on drop.
pub struct SparkSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl SparkSession {
    /// Starts the session (returns at once; the first query waits for Spark).
    pub fn start() -> Result<Self, ServiceError> {
        let jars = jars("spark")?;
        let error = |reason: String| ServiceError::new("spark", reason);
        let mut child = Command::new(java())
            .args(JAVA_OPTIONS)
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .arg(services_dir().join("SparkRead.java"))
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| error(format!("cannot start java ({e}): install a JDK 17 (Debian openjdk-17-jdk-headless)")))?;
        let stdin = child.stdin.take().ok_or_else(|| error("no stdin".into()))?;
        let stdout = BufReader::new(child.stdout.take().ok_or_else(|| error("no stdout".into()))?);
        Ok(Self { child, stdin, stdout })
    }

    /// Runs one query (one line: Spark SQL, or `ICEBERG <metadata.json> [snapshot]`);
    /// `Err` holds Spark's error text.
    pub fn query(&mut self, sql: &str) -> Result<SparkAnswer, String> {
        assert!(!sql.contains('\n'), "one query per line");
        writeln!(self.stdin, "{sql}").and_then(|()| self.stdin.flush()).map_err(|e| format!("spark session gone: {e}"))?;
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).map_err(|e| format!("spark session gone: {e}"))?;
        if read == 0 {
            return Err("the spark session ended (see scripts/services/SparkRead.java; run it by hand to see its log)".into());
        }
        let answer: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("not a JSON answer ({e}): {line}"))?;
        if let Some(error) = answer.get("error") {
            return Err(error.as_str().unwrap_or_default().to_string());
        }
        let strings = |value: &serde_json::Value| value.as_array().cloned().unwrap_or_default();
        let columns = strings(&answer["columns"]).iter().map(|c| c.as_str().unwrap_or_default().to_string()).collect();
        let rows = strings(&answer["rows"]).iter().map(strings).collect();
        Ok(SparkAnswer { columns, rows })
    }
}

impl Drop for SparkSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
