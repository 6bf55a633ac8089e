//! The wire client against a scripted fake server, for what a real server will not
//! do on cue: a message split across a read timeout, a server-initiated CopyDone,
//! authentication methods we refuse, and garbage framing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use retina_postgres::wire::{ConnectConfig, CopyBothEvent, PgConnection, WireError};

/// The server end of one scripted session.
struct ServerSide {
    stream: TcpStream,
}

impl ServerSide {
    /// Reads the startup message and returns its parameters.
    fn read_startup(&mut self) -> Vec<(String, String)> {
        let mut length = [0u8; 4];
        self.stream.read_exact(&mut length).expect("startup length");
        let mut body = vec![0u8; u32::from_be_bytes(length) as usize - 4];
        self.stream.read_exact(&mut body).expect("startup body");
        assert_eq!(&body[..4], &196_608u32.to_be_bytes(), "protocol 3.0");
        let fields: Vec<String> = body[4..]
            .split(|&byte| byte == 0)
            .filter(|field| !field.is_empty())
            .map(|field| String::from_utf8(field.to_vec()).expect("utf-8"))
            .collect();
        fields.chunks(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect()
    }

    /// Reads one frontend message: tag and body.
    fn read_message(&mut self) -> (u8, Vec<u8>) {
        let mut header = [0u8; 5];
        self.stream.read_exact(&mut header).expect("message header");
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0u8; length - 4];
        self.stream.read_exact(&mut body).expect("message body");
        (header[0], body)
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// The usual successful startup: AuthenticationOk, parameters, key, ready.
    fn accept_session(&mut self) -> Vec<(String, String)> {
        let parameters = self.read_startup();
        let mut reply = message(b'R', &0i32.to_be_bytes());
        reply.extend(parameter_status("server_version", "15.99"));
        reply.extend(message(b'K', &[0, 0, 0x10, 0x92, 0, 0, 0, 1]));
        reply.extend(ready());
        self.send(&reply);
        parameters
    }
}

fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

fn cstrings(parts: &[&str]) -> Vec<u8> {
    parts.iter().flat_map(|part| part.bytes().chain([0])).collect()
}

fn parameter_status(name: &str, value: &str) -> Vec<u8> {
    message(b'S', &cstrings(&[name, value]))
}

fn ready() -> Vec<u8> {
    message(b'Z', b"I")
}

fn copy_data(payload: &[u8]) -> Vec<u8> {
    message(b'd', payload)
}

/// Runs `script` as the server of one connection on a free port.
fn scripted_server(script: impl FnOnce(ServerSide) + Send + 'static) -> (u16, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        script(ServerSide { stream });
    });
    (port, handle)
}

fn config(port: u16, password: Option<&str>) -> ConnectConfig {
    ConnectConfig {
        host: "localhost".to_string(),
        port,
        user: "retina".to_string(),
        password: password.map(str::to_string),
        database: "db".to_string(),
        application_name: "scripted".to_string(),
        connect_timeout: Duration::from_secs(5),
        tls: retina_postgres::wire::TlsOptions::disabled(),
    }
}

#[test]
fn copy_both_keeps_partial_messages_across_timeouts_and_ends_on_server_copy_done() {
    let (to_server, server_waits) = mpsc::channel::<()>();
    let (port, server) = scripted_server(move |mut server| {
        let parameters = server.accept_session();
        for expected in [("user", "retina"), ("database", "db"), ("replication", "database"), ("client_encoding", "UTF8")] {
            assert!(
                parameters.iter().any(|(name, value)| (name.as_str(), value.as_str()) == expected),
                "startup lacks {expected:?}: {parameters:?}"
            );
        }
        let (tag, body) = server.read_message();
        assert_eq!(tag, b'Q');
        assert_eq!(body, cstrings(&["START_REPLICATION SLOT s LOGICAL 0/0"]));
        server.send(&message(b'W', &[0, 0, 0]));

        // One message in two halves with a pause the client spends timing out.
        let whole = copy_data(b"w-first-message");
        server.send(&whole[..7]);
        server_waits.recv().expect("the client timed out once");
        server.send(&whole[7..]);

        // Many small messages in one write, with asynchronous messages among them.
        let mut burst = Vec::new();
        for index in 0..10_000u32 {
            burst.extend(copy_data(&index.to_be_bytes()));
            if index == 5_000 {
                burst.extend(message(b'N', &[b'S', b'N', b'O', b'T', b'I', b'C', b'E', 0, 0]));
                burst.extend(parameter_status("application_name", "renamed"));
            }
        }
        server.send(&burst);

        // The status update arrives as one CopyData.
        let (tag, body) = server.read_message();
        assert_eq!((tag, body.as_slice()), (b'd', b"r-status".as_slice()));

        // The server ends the copy; the client must answer with CopyDone.
        server.send(&message(b'c', &[]));
        let (tag, _) = server.read_message();
        assert_eq!(tag, b'c', "the client answers CopyDone");
        let mut end = message(b'C', &cstrings(&["START_REPLICATION"]));
        end.extend(ready());
        server.send(&end);

        // The session is usable again.
        let (tag, _) = server.read_message();
        assert_eq!(tag, b'Q');
        let mut reply = message(b'T', &[0, 1, b'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 255, 255, 255, 255, 255, 255, 0, 0]);
        reply.extend(message(b'D', &[0, 1, 0, 0, 0, 2, b'h', b'i']));
        reply.extend(message(b'C', &cstrings(&["SELECT 1"])));
        reply.extend(ready());
        server.send(&reply);
        let (tag, _) = server.read_message();
        assert_eq!(tag, b'X', "Terminate on drop");
    });

    let mut connection = PgConnection::connect(&config(port, None), true).expect("connect");
    assert_eq!(connection.backend_pid(), 0x1092);
    assert_eq!(connection.server_major_version(), Some(15));
    connection.start_copy_both("START_REPLICATION SLOT s LOGICAL 0/0").expect("copy both");

    assert!(matches!(connection.read_copy_data(Duration::from_millis(50)).expect("read"), CopyBothEvent::Timeout));
    to_server.send(()).expect("signal the server");
    match connection.read_copy_data(Duration::from_secs(5)).expect("read") {
        CopyBothEvent::Data(payload) => assert_eq!(&payload[..], b"w-first-message"),
        other => panic!("expected the reassembled message, got {other:?}"),
    }
    for index in 0..10_000u32 {
        match connection.read_copy_data(Duration::from_secs(5)).expect("read") {
            CopyBothEvent::Data(payload) => assert_eq!(&payload[..], &index.to_be_bytes()),
            other => panic!("expected message {index}, got {other:?}"),
        }
    }
    assert_eq!(connection.server_parameter("application_name"), Some("renamed"));

    connection.send_copy_data(b"r-status").expect("send");
    assert!(matches!(connection.read_copy_data(Duration::from_secs(5)).expect("read"), CopyBothEvent::End));
    assert_eq!(connection.query_rows("SELECT 'hi'").expect("usable after the stream"), vec![vec![Some("hi".to_string())]]);
    drop(connection);
    server.join().expect("the server script passed");
}

#[test]
fn unsupported_authentication_methods_are_named() {
    for (request, expected) in [
        (message(b'R', &7i32.to_be_bytes()), "GSSAPI"),
        (message(b'R', &9i32.to_be_bytes()), "SSPI"),
        (message(b'R', &[&10i32.to_be_bytes()[..], &cstrings(&["SCRAM-SHA-256-PLUS", ""])].concat()), "channel binding"),
    ] {
        let (port, server) = scripted_server(move |mut server| {
            server.read_startup();
            server.send(&request);
        });
        let error = PgConnection::connect(&config(port, Some("pw")), false).err().expect("refused");
        assert!(
            matches!(&error, WireError::UnsupportedAuthentication(text) if text.contains(expected)),
            "expected {expected}: {error:?}"
        );
        server.join().expect("server");
    }
}

#[test]
fn an_impossible_message_length_is_a_protocol_error_and_breaks_the_session() {
    let (port, server) = scripted_server(|mut server| {
        server.accept_session();
        server.read_message();
        server.send(&[b'T', 0, 0, 0, 1]);
        // Keep the socket open until the client is done.
        let mut rest = Vec::new();
        let _ = server.stream.read_to_end(&mut rest);
    });
    let mut connection = PgConnection::connect(&config(port, None), false).expect("connect");
    let error = connection.simple_query("SELECT 1").expect_err("garbage");
    assert!(matches!(&error, WireError::Protocol(text) if text.contains("impossible length")), "{error:?}");
    let later = connection.simple_query("SELECT 1").expect_err("broken");
    assert!(matches!(&later, WireError::Protocol(text) if text.contains("unusable")), "{later:?}");
    drop(connection);
    server.join().expect("server");
}

#[test]
fn a_silent_server_fails_the_startup_within_the_connect_timeout() {
    let (port, server) = scripted_server(|mut server| {
        server.read_startup();
        std::thread::sleep(Duration::from_millis(1500));
    });
    let started = std::time::Instant::now();
    let error = PgConnection::connect(&ConnectConfig { connect_timeout: Duration::from_millis(300), ..config(port, None) }, false)
        .err()
        .expect("no answer");
    assert!(started.elapsed() < Duration::from_millis(1400), "{:?}", started.elapsed());
    assert!(
        matches!(&error, WireError::Io { source, .. } if source.kind() == std::io::ErrorKind::TimedOut),
        "{error:?}"
    );
    server.join().expect("server");
}
