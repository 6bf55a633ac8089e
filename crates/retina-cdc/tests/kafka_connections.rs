//! The Kafka client's connections send each request at once (TCP_NODELAY).
//!
//! rskafka shares one connection per broker among all partitions' fetches, so a
//! request is often written while an earlier one is unacknowledged. With Nagle's
//! algorithm on, the kernel held it until the broker's delayed ACK: `retina bench
//! freshness --source kafka` measured produce round trips of 43 ms at p90 (0.5 ms at
//! p50) and freshness p50 of 87 ms at 2K row changes/s, 27 ms without. rskafka 0.6
//! has no option for it, so `third_party/rskafka` carries the patch; this test fails
//! if the crate is ever taken from crates.io again without it.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::{getpeername, sockopt, SocketAddrAny};
use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};

/// This process's TCP sockets connected to `peer`, as duplicates (same socket, so
/// the same options) taken through a pidfd of the process itself.
fn sockets_connected_to(peer: SocketAddr) -> Vec<std::os::fd::OwnedFd> {
    let pidfd = pidfd_open(getpid(), PidfdFlags::empty()).expect("pidfd_open of this process (Linux 5.3+)");
    let expected = SocketAddrAny::from(peer);
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("an fd entry");
        let is_socket = std::fs::read_link(entry.path()).is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else { continue };
        if !is_socket {
            continue;
        }
        let socket = match pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) {
            Ok(socket) => socket,
            Err(Errno::BADF) => continue, // closed since the listing
            Err(e) => panic!("pidfd_getfd of this process's fd {fd}: {e} (needs Linux 5.6+ and ptrace access to itself)"),
        };
        if getpeername(&socket).ok().flatten().is_some_and(|address| address == expected) {
            found.push(socket);
        }
    }
    found
}

#[test]
fn kafka_connections_disable_nagles_algorithm() {
    // A broker that accepts and never answers: the client connects, sends its first
    // request and waits, which is all this test needs.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let broker = listener.local_addr().expect("its address");
    let accepted = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let _context = runtime.enter();
    let connecting = runtime.spawn(rskafka::client::ClientBuilder::new(vec![broker.to_string()]).build());
    let deadline = Instant::now() + Duration::from_secs(10);
    let sockets = loop {
        runtime.block_on(tokio::time::sleep(Duration::from_millis(20)));
        let sockets = sockets_connected_to(broker);
        if !sockets.is_empty() {
            break sockets;
        }
        assert!(Instant::now() < deadline, "the Kafka client never connected to {broker}");
    };
    for socket in &sockets {
        assert!(
            sockopt::tcp_nodelay(socket).expect("read TCP_NODELAY"),
            "a Kafka client connection to {broker} has Nagle's algorithm on: rskafka must come from third_party/rskafka"
        );
    }
    connecting.abort();
    drop(accepted);
}

/// The check above can fail: a plain connection, Nagle on by default, reads as such.
#[test]
fn a_plain_connection_reads_as_nagle_on() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let address = listener.local_addr().expect("its address");
    let _client = std::net::TcpStream::connect(address).expect("connect");
    let sockets = sockets_connected_to(address);
    assert_eq!(sockets.len(), 1, "the one connection to {address}");
    assert!(!sockopt::tcp_nodelay(&sockets[0]).expect("read TCP_NODELAY"));
}
