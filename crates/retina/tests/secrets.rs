//! Secrets planted in every place a user puts one (a PostgreSQL URL's password,
//! Kafka's `sasl_password`, NATS userinfo, an S3 endpoint's userinfo and keys) never
//! appear in anything a command prints, whether it starts or fails.

use std::process::Command;
use std::time::Duration;

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

const SECRETS: [&str; 5] = ["pgS3cretPw", "saslS3cret", "natsS3cret", "s3S3cretKey", "endpointS3cret"];

/// Runs `retina ARGS`, killed after `limit`, and returns everything it printed.
fn printed(args: &[&str], limit: Duration) -> String {
    let mut child = Command::new(RETINA)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run retina");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let output = child.wait_with_output().expect("output");
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn no_command_prints_a_planted_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    let lake = lake.to_str().expect("utf-8");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let sources = [
        format!("postgres://mirror:pgS3cretPw@127.0.0.1:{closed}/app?slot=s1"),
        format!("kafka://127.0.0.1:{closed}/dbz?sasl_mechanism=SCRAM-SHA-256&sasl_username=u&sasl_password=saslS3cret"),
        format!("nats://user:natsS3cret@127.0.0.1:{closed}/cdc"),
    ];
    let mut outputs = Vec::new();
    for source in &sources {
        outputs.push((format!("serve --source {source}"), printed(&["serve", "--data-dir", lake, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--source", source], Duration::from_secs(8))));
        outputs.push((format!("ingest {source}"), printed(&["ingest", "--data-dir", lake, source], Duration::from_secs(20))));
    }
    let s3 = format!("s3://bucket/lake?endpoint=http://ak:endpointS3cret@127.0.0.1:{closed}&aws_secret_access_key=s3S3cretKey&allow_http=true");
    outputs.push(("sql --data-dir s3://…".into(), printed(&["sql", "--data-dir", &s3, "-c", "SELECT 1"], Duration::from_secs(30))));
    outputs.push(("ingest --data-dir s3://…".into(), printed(&["ingest", "--data-dir", &s3, "file:/nonexistent.jsonl"], Duration::from_secs(30))));
    for (command, output) in &outputs {
        assert!(!output.is_empty(), "{command} said nothing: the test would prove nothing");
        for secret in SECRETS {
            assert!(!output.contains(secret), "retina {command} printed the secret {secret}:\n{output}");
        }
    }
    let failed_pg = &outputs[0].1;
    assert!(failed_pg.contains("***"), "the URI is shown, redacted: {failed_pg}");
}
