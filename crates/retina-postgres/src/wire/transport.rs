//! The socket under a [`PgConnection`](super::PgConnection): opening it, framing the
//! backend's messages out of a read buffer, and writing frontend messages.
//!
//! Why hand-rolled framing instead of only `backend::Message::parse`: the replication
//! stream and `COPY TO STDOUT` carry hundreds of thousands of CopyData messages per
//! second, so CopyData is cut straight out of the buffer (`split_to(..).freeze()`, no
//! copy, no allocation), and `postgres-protocol` does not know CopyBothResponse
//! (`W`), which starts the replication stream. Every other message goes through
//! `Message::parse`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use postgres_protocol::message::backend::Message;

use super::error::{WireError, WireResult};
use super::tls::{negotiate, Stream, TlsOptions};

/// How much we try to read per `read` call. Large, so one syscall brings in many small
/// replication messages.
const READ_CHUNK: usize = 128 * 1024;
/// A sanity bound on a message's declared length: PostgreSQL's own limit is 1 GiB
/// per field; a larger length means we are not talking to PostgreSQL or lost framing.
const MAX_MESSAGE_LEN: usize = (1 << 30) + (64 << 20);

const COPY_DATA_TAG: u8 = b'd';
const COPY_BOTH_RESPONSE_TAG: u8 = b'W';

/// One backend message, with the two kinds we frame ourselves split out.
pub(super) enum Incoming {
    /// A CopyData payload (without the tag and length).
    CopyData(Bytes),
    /// CopyBothResponse: the server entered the replication stream.
    CopyBothResponse,
    /// Any other message, parsed by `postgres-protocol`.
    Message(Message),
}

/// A connected socket plus its buffers.
pub(super) struct Transport {
    stream: Stream,
    /// Bytes received but not yet framed; may end with a partial message.
    read_buffer: BytesMut,
    /// Where each `read` lands before it is appended to `read_buffer`.
    scratch: Box<[u8]>,
    /// Reused for every outgoing message so sending allocates nothing.
    write_buffer: BytesMut,
    /// The wait limit of blocking reads (see `set_blocking_timeout`).
    blocking_timeout: Option<Duration>,
    /// The read timeout last set on the socket.
    applied_read_timeout: Option<Duration>,
}

/// What `fill` found.
enum Filled {
    More,
    TimedOut,
}

impl Transport {
    /// Opens a TCP connection to `host:port`, trying each resolved address in turn
    /// within `timeout` each (a zero timeout means the operating system's default),
    /// then sets up TLS as `tls` asks (no SSLRequest at all when it is disabled).
    pub(super) fn connect(host: &str, port: u16, timeout: Duration, tls: &TlsOptions) -> WireResult<Transport> {
        let address = display_address(host, port);
        let connect_error = |source| WireError::Connect { address: address.clone(), source };
        let candidates: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(connect_error)?.collect();
        let mut last_error = io::Error::new(io::ErrorKind::NotFound, "the host name resolved to no address");
        for candidate in candidates {
            let attempt =
                if timeout.is_zero() { TcpStream::connect(candidate) } else { TcpStream::connect_timeout(&candidate, timeout) };
            match attempt {
                Ok(stream) => {
                    // Status updates and queries are small and latency-sensitive.
                    stream.set_nodelay(true).map_err(connect_error)?;
                    let stream = match tls.mode {
                        super::tls::SslMode::Disable => Stream::Plain(stream),
                        _ => negotiate(stream, tls, host, &address, timeout)?,
                    };
                    return Ok(Transport {
                        stream,
                        read_buffer: BytesMut::with_capacity(READ_CHUNK),
                        scratch: vec![0; READ_CHUNK].into_boxed_slice(),
                        write_buffer: BytesMut::with_capacity(1024),
                        blocking_timeout: None,
                        // `negotiate` may have set the connect timeout on the socket.
                        applied_read_timeout: Some(Duration::ZERO),
                    });
                }
                Err(error) => last_error = error,
            }
        }
        Err(connect_error(last_error))
    }

    /// Whether the session is encrypted.
    pub(super) fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// The channel binding data of a TLS session (see [`Stream::server_end_point`]).
    pub(super) fn server_end_point(&self) -> Option<Vec<u8>> {
        self.stream.server_end_point()
    }

    /// Builds one or more frontend messages with `build` in the reused write buffer
    /// and writes them out.
    pub(super) fn send(
        &mut self,
        context: &'static str,
        build: impl FnOnce(&mut BytesMut) -> io::Result<()>,
    ) -> WireResult<()> {
        self.write_buffer.clear();
        build(&mut self.write_buffer).map_err(|error| WireError::Protocol(format!("{context}: {error}")))?;
        self.stream.write_all(&self.write_buffer).map_err(|source| WireError::io(context, source))?;
        self.stream.flush().map_err(|source| WireError::io(context, source))
    }

    /// How long a blocking [`read_message`](Self::read_message) may wait (`None`:
    /// forever). The startup exchange bounds it by the connect timeout.
    pub(super) fn set_blocking_timeout(&mut self, timeout: Option<Duration>) {
        self.blocking_timeout = timeout;
    }

    /// Sets the socket's read timeout (`None` blocks forever) if it differs from the
    /// one set last, saving a `setsockopt` per read.
    fn apply_read_timeout(&mut self, timeout: Option<Duration>) -> WireResult<()> {
        if self.applied_read_timeout != timeout {
            self.stream
                .tcp()
                .set_read_timeout(timeout)
                .map_err(|source| WireError::io("setting the socket read timeout", source))?;
            self.applied_read_timeout = timeout;
        }
        Ok(())
    }

    /// The next message, blocking until it is complete (or until the blocking
    /// timeout, which is then an `Io` error naming `context`).
    pub(super) fn read_message(&mut self, context: &'static str) -> WireResult<Incoming> {
        loop {
            if let Some(message) = self.try_frame(context)? {
                return Ok(message);
            }
            self.apply_read_timeout(self.blocking_timeout)?;
            if let Filled::TimedOut = self.fill(context)? {
                return Err(WireError::io(
                    context,
                    io::Error::new(io::ErrorKind::TimedOut, "the server did not answer in time"),
                ));
            }
        }
    }

    /// The next message if one completes within `timeout`; `None` if not, with any
    /// partial message left in the buffer for the next call. Looks at the clock only
    /// when the buffer holds no complete message.
    ///
    /// The first read waits `timeout` itself, which, for a caller polling with the same
    /// timeout, is already the socket's setting: the common case of one read per call
    /// costs no `setsockopt`. Only a message split across reads needs the remaining
    /// time set.
    pub(super) fn read_message_within(&mut self, timeout: Duration, context: &'static str) -> WireResult<Option<Incoming>> {
        if let Some(message) = self.try_frame(context)? {
            return Ok(Some(message));
        }
        if timeout.is_zero() {
            return Ok(None);
        }
        let deadline = Instant::now() + timeout;
        let mut wait = timeout;
        loop {
            // The socket rejects a zero timeout; a microsecond floor keeps an almost
            // expired deadline a real (short) wait.
            self.apply_read_timeout(Some(wait.max(Duration::from_micros(1))))?;
            if let Filled::TimedOut = self.fill(context)? {
                return Ok(None);
            }
            if let Some(message) = self.try_frame(context)? {
                return Ok(Some(message));
            }
            wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                return Ok(None);
            }
        }
    }

    /// Cuts one complete message off the front of the read buffer, if there is one.
    fn try_frame(&mut self, context: &'static str) -> WireResult<Option<Incoming>> {
        let buffer = &mut self.read_buffer;
        if buffer.len() < 5 {
            return Ok(None);
        }
        let tag = buffer[0];
        let declared = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
        if !(4..=MAX_MESSAGE_LEN).contains(&declared) {
            return Err(WireError::Protocol(format!(
                "{context}: message '{}' declares an impossible length {declared} (is the other side a PostgreSQL server?)",
                printable(tag)
            )));
        }
        let total = declared + 1;
        if buffer.len() < total {
            buffer.reserve(total - buffer.len());
            return Ok(None);
        }
        match tag {
            COPY_DATA_TAG => {
                buffer.advance(5);
                Ok(Some(Incoming::CopyData(buffer.split_to(declared - 4).freeze())))
            }
            COPY_BOTH_RESPONSE_TAG => {
                // Overall format and per-column formats: meaningless for replication.
                buffer.advance(total);
                Ok(Some(Incoming::CopyBothResponse))
            }
            _ => match Message::parse(buffer) {
                Ok(Some(message)) => Ok(Some(Incoming::Message(message))),
                Ok(None) => Err(WireError::Protocol(format!(
                    "{context}: message '{}' was complete but did not parse",
                    printable(tag)
                ))),
                Err(error) => {
                    Err(WireError::Protocol(format!("{context}: malformed message '{}': {error}", printable(tag))))
                }
            },
        }
    }

    /// Reads whatever the socket has (up to one chunk) onto the read buffer.
    ///
    /// Reading into the fixed scratch chunk and appending costs one copy of the bytes
    /// actually received; reading straight into the buffer's spare capacity would
    /// need either `unsafe` or zero-filling the whole window before every read, which
    /// costs more when the stream trickles (one small message per read).
    fn fill(&mut self, context: &'static str) -> WireResult<Filled> {
        loop {
            match self.stream.read(&mut self.scratch) {
                Ok(0) => return Err(WireError::closed(context)),
                Ok(read) => {
                    self.read_buffer.extend_from_slice(&self.scratch[..read]);
                    return Ok(Filled::More);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Ok(Filled::TimedOut);
                }
                Err(error) => return Err(WireError::io(context, error)),
            }
        }
    }
}

/// `host:port`, with brackets around IPv6 literals.
pub(super) fn display_address(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// A message tag for error texts.
pub(super) fn printable(tag: u8) -> char {
    if tag.is_ascii_graphic() { tag as char } else { '?' }
}

/// A message's name, for error texts.
pub(super) fn describe_incoming(message: &Incoming) -> &'static str {
    match message {
        Incoming::CopyData(_) => "CopyData",
        Incoming::CopyBothResponse => "CopyBothResponse",
        Incoming::Message(message) => match message {
            Message::AuthenticationOk
            | Message::AuthenticationCleartextPassword
            | Message::AuthenticationMd5Password(_)
            | Message::AuthenticationSasl(_)
            | Message::AuthenticationSaslContinue(_)
            | Message::AuthenticationSaslFinal(_)
            | Message::AuthenticationGss
            | Message::AuthenticationGssContinue(_)
            | Message::AuthenticationKerberosV5
            | Message::AuthenticationScmCredential
            | Message::AuthenticationSspi => "an Authentication request",
            Message::BackendKeyData(_) => "BackendKeyData",
            Message::BindComplete => "BindComplete",
            Message::CloseComplete => "CloseComplete",
            Message::CommandComplete(_) => "CommandComplete",
            Message::CopyData(_) => "CopyData",
            Message::CopyDone => "CopyDone",
            Message::CopyInResponse(_) => "CopyInResponse",
            Message::CopyOutResponse(_) => "CopyOutResponse",
            Message::DataRow(_) => "DataRow",
            Message::EmptyQueryResponse => "EmptyQueryResponse",
            Message::ErrorResponse(_) => "ErrorResponse",
            Message::NoData => "NoData",
            Message::NoticeResponse(_) => "NoticeResponse",
            Message::NotificationResponse(_) => "NotificationResponse",
            Message::ParameterDescription(_) => "ParameterDescription",
            Message::ParameterStatus(_) => "ParameterStatus",
            Message::ParseComplete => "ParseComplete",
            Message::PortalSuspended => "PortalSuspended",
            Message::ReadyForQuery(_) => "ReadyForQuery",
            Message::RowDescription(_) => "RowDescription",
            _ => "a message this client does not know",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_literals_get_brackets() {
        assert_eq!(display_address("::1", 5432), "[::1]:5432");
        assert_eq!(display_address("db.example", 5432), "db.example:5432");
        assert_eq!(display_address("127.0.0.1", 1), "127.0.0.1:1");
    }
}
