//! TLS as libpq offers it: `sslmode` from `disable` to `verify-full`, a root
//! certificate file (or the system's roots), a client certificate, and the server
//! certificate's hash for SCRAM channel binding (`tls-server-end-point`).
//!
//! Managed PostgreSQL services (RDS, Cloud SQL, Azure, Supabase, Neon) refuse
//! unencrypted sessions, so TLS is what makes them mirrorable. rustls does the
//! protocol; the libpq semantics of each mode are ours:
//!
//! | mode | encrypted | chain checked | host name checked |
//! |---|---|---|---|
//! | `disable` | never | | |
//! | `allow` | only if the server refuses plain | no | no |
//! | `prefer` (default) | if the server offers it | no | no |
//! | `require` | always | only when a root certificate is given | no |
//! | `verify-ca` | always | yes | no |
//! | `verify-full` | always | yes | yes |

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use sha2::Digest;

use super::error::{WireError, WireResult};
use crate::small_files::{read_small_file, CERTIFICATE_FILE_LIMIT};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    Disable,
    Allow,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    /// Parses libpq's spelling.
    pub fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// Whether a session without TLS is refused.
    pub fn requires_tls(self) -> bool {
        matches!(self, SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// Where the certificates that sign the server's come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCertificates {
    /// A PEM file (libpq's `sslrootcert=FILE`).
    File(PathBuf),
    /// The operating system's trust store (libpq's `sslrootcert=system`), what a
    /// managed service's public CA chains to.
    System,
}

/// The TLS settings of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsOptions {
    pub mode: SslMode,
    /// `None`: no chain check, which `verify-ca` and `verify-full` refuse.
    pub root_certificates: Option<RootCertificates>,
    /// A PEM client certificate (chain) and its key, for `cert` authentication.
    pub client_certificate: Option<(PathBuf, PathBuf)>,
}

impl TlsOptions {
    /// No TLS at all (a scripted test server, a local socket tunnel).
    pub fn disabled() -> TlsOptions {
        TlsOptions { mode: SslMode::Disable, ..TlsOptions::default() }
    }
}

/// The byte stream under the framing: plain TCP or TLS over it.
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, BufferedSocket>>),
}

/// The socket under rustls, read through a large buffer. rustls reads its records
/// 4 KiB at a time; without the buffer a busy replication stream over TLS costs a
/// `read` system call per 4 KiB instead of one per 128 KiB as in plain mode.
pub(super) struct BufferedSocket {
    reader: std::io::BufReader<TcpStream>,
}

/// Matches the plain transport's read size.
const TLS_READ_BUFFER: usize = 128 * 1024;

impl Read for BufferedSocket {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buffer)
    }
}

impl Write for BufferedSocket {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.reader.get_mut().write(buffer)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.reader.get_mut().flush()
    }
}

impl Stream {
    /// The TCP socket, for timeouts and options.
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.sock.reader.get_ref(),
        }
    }

    /// The `tls-server-end-point` channel binding data (RFC 5929): a hash of the
    /// server's certificate. `None` without TLS, or when the certificate's signature
    /// hash is one the RFC leaves undefined (Ed25519, RSA-PSS).
    pub(super) fn server_end_point(&self) -> Option<Vec<u8>> {
        let Stream::Tls(tls) = self else { return None };
        let certificate = tls.conn.peer_certificates()?.first()?;
        end_point_hash(certificate)
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buffer),
            Stream::Tls(tls) => tls.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buffer),
            Stream::Tls(tls) => tls.write(buffer),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// The SSLRequest code (protocol 1234.5679).
const SSL_REQUEST_CODE: i32 = 80_877_103;

/// Asks the server for TLS on a fresh socket and, if it agrees, runs the handshake.
/// Returns the plain socket when the server declines and `options.mode` allows that.
pub(super) fn negotiate(
    mut tcp: TcpStream,
    options: &TlsOptions,
    host: &str,
    address: &str,
    timeout: Duration,
) -> WireResult<Stream> {
    let failed = |what: &'static str| move |source| WireError::io(what, source);
    let mut request = [0u8; 8];
    request[..4].copy_from_slice(&8i32.to_be_bytes());
    request[4..].copy_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    tcp.write_all(&request).map_err(failed("asking the server for TLS"))?;
    if !timeout.is_zero() {
        tcp.set_read_timeout(Some(timeout)).map_err(failed("setting the socket read timeout"))?;
    }
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).map_err(failed("waiting for the server's answer to the TLS request"))?;
    match answer[0] {
        b'S' => {}
        b'N' if !options.mode.requires_tls() => return Ok(Stream::Plain(tcp)),
        b'N' => {
            return Err(WireError::Tls(format!(
                "the server at {address} does not accept TLS (ssl = off), and sslmode={} requires it",
                mode_name(options.mode)
            )))
        }
        // A server older than 7.0 or not PostgreSQL at all.
        other => {
            return Err(WireError::Protocol(format!(
                "the server at {address} answered the TLS request with byte {other:#04x}, not 'S' or 'N'"
            )))
        }
    }
    let config = client_config(options)?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|error| WireError::Tls(format!("'{host}' is not a valid TLS server name: {error}")))?;
    let mut connection = ClientConnection::new(Arc::new(config), name)
        .map_err(|error| WireError::Tls(format!("starting TLS with {address}: {error}")))?;
    let mut socket = BufferedSocket { reader: std::io::BufReader::with_capacity(TLS_READ_BUFFER, tcp) };
    while connection.is_handshaking() {
        connection.complete_io(&mut socket).map_err(|error| handshake_error(error, address, options.mode))?;
    }
    Ok(Stream::Tls(Box::new(StreamOwned::new(connection, socket))))
}

/// A handshake failure with what to do about it: most are a certificate the
/// configured roots do not sign or a name that does not match.
fn handshake_error(error: io::Error, address: &str, mode: SslMode) -> WireError {
    let certificate_error = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()).and_then(|inner| match inner {
        rustls::Error::InvalidCertificate(certificate) => Some(certificate),
        _ => None,
    });
    let help = match certificate_error {
        Some(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }) => {
            " (the certificate does not name this host: connect by a name it lists, or use sslmode=verify-ca)"
        }
        Some(_) if mode != SslMode::Prefer && mode != SslMode::Allow => {
            " (sslrootcert must name the CA that signed the server's certificate, or be 'system' for a public CA)"
        }
        _ => "",
    };
    WireError::Tls(format!("TLS handshake with {address} failed: {error}{help}"))
}

fn mode_name(mode: SslMode) -> &'static str {
    match mode {
        SslMode::Disable => "disable",
        SslMode::Allow => "allow",
        SslMode::Prefer => "prefer",
        SslMode::Require => "require",
        SslMode::VerifyCa => "verify-ca",
        SslMode::VerifyFull => "verify-full",
    }
}

/// The rustls configuration `options` asks for.
fn client_config(options: &TlsOptions) -> WireResult<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| WireError::Tls(format!("TLS: {error}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (&options.root_certificates, options.mode) {
        (None, SslMode::VerifyCa | SslMode::VerifyFull) => {
            return Err(WireError::Tls(format!(
                "sslmode={} checks the server's certificate and needs sslrootcert=FILE (the CA's PEM) or sslrootcert=system",
                mode_name(options.mode)
            )))
        }
        (None, _) => Arc::new(AnyCertificate { provider: provider.clone() }),
        (Some(roots), mode) => {
            let store = Arc::new(root_store(roots)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                .build()
                .map_err(|error| WireError::Tls(format!("sslrootcert: {error}")))?;
            if mode == SslMode::VerifyFull { webpki } else { Arc::new(ChainOnly { webpki }) }
        }
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match &options.client_certificate {
        None => Ok(builder.with_no_client_auth()),
        Some((certificate, key)) => {
            let chain = certificates(certificate, "sslcert")?;
            let bad_key = |error: &dyn std::fmt::Display| WireError::Tls(format!("sslkey {}: {error}", key.display()));
            let bytes = read_small_file(key, CERTIFICATE_FILE_LIMIT).map_err(|error| bad_key(&error))?;
            let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| bad_key(&format!("no PEM private key in it ({error})")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| WireError::Tls(format!("sslcert/sslkey: {error}")))
        }
    }
}

fn root_store(roots: &RootCertificates) -> WireResult<rustls::RootCertStore> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        RootCertificates::File(path) => {
            for certificate in certificates(path, "sslrootcert")? {
                store
                    .add(certificate)
                    .map_err(|error| WireError::Tls(format!("sslrootcert {}: {error}", path.display())))?;
            }
        }
        RootCertificates::System => {
            let loaded = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(loaded.certs);
            if added == 0 {
                return Err(WireError::Tls(
                    "sslrootcert=system: the system trust store has no usable certificate (install ca-certificates)".into(),
                ));
            }
        }
    }
    Ok(store)
}

fn certificates(path: &Path, option: &str) -> WireResult<Vec<CertificateDer<'static>>> {
    let bad = |error: &dyn std::fmt::Display| WireError::Tls(format!("{option} {}: {error}", path.display()));
    let bytes = read_small_file(path, CERTIFICATE_FILE_LIMIT).map_err(|error| bad(&error))?;
    let certificates = CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>().map_err(|error| bad(&error))?;
    if certificates.is_empty() {
        return Err(bad(&"no PEM certificate in it"));
    }
    Ok(certificates)
}

/// `prefer` and `require` without a root certificate: encryption without
/// authentication of the server, as libpq does. The handshake signature is still
/// checked, so the session is bound to whoever holds the certificate's key.
#[derive(Debug)]
struct AnyCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca` (and `require` with a root certificate): the chain must lead to a
/// trusted root, whatever host name the certificate carries.
#[derive(Debug)]
struct ChainOnly {
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, certificate, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, certificate, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// RFC 5929 §4.1: the certificate hashed with its signature's hash function, SHA-256
/// in place of MD5 and SHA-1; undefined for signatures without one hash (Ed25519,
/// RSA-PSS), which PostgreSQL refuses to bind as well.
fn end_point_hash(certificate: &[u8]) -> Option<Vec<u8>> {
    let algorithm = signature_algorithm_oid(certificate)?;
    // DER bodies of the OIDs (without tag and length).
    const RSA_MD5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x04];
    const RSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
    const RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
    const RSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c];
    const RSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
    const ECDSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
    const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
    const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
    const ECDSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04];
    Some(match algorithm {
        RSA_MD5 | RSA_SHA1 | RSA_SHA256 | ECDSA_SHA1 | ECDSA_SHA256 => sha2::Sha256::digest(certificate).to_vec(),
        RSA_SHA384 | ECDSA_SHA384 => sha2::Sha384::digest(certificate).to_vec(),
        RSA_SHA512 | ECDSA_SHA512 => sha2::Sha512::digest(certificate).to_vec(),
        _ => return None,
    })
}

/// The OID of `Certificate.signatureAlgorithm`: `SEQUENCE { tbsCertificate SEQUENCE,
/// signatureAlgorithm SEQUENCE { OID, params }, signature BIT STRING }`. Only this one
/// field is needed, so a three-step DER walk instead of an X.509 parser.
fn signature_algorithm_oid(certificate: &[u8]) -> Option<&[u8]> {
    let (certificate_body, _) = der_element(certificate, 0x30)?;
    let (_, after_tbs) = der_element(certificate_body, 0x30)?;
    let (algorithm, _) = der_element(after_tbs, 0x30)?;
    let (oid, _) = der_element(algorithm, 0x06)?;
    Some(oid)
}

/// One DER element with tag `tag` at the start of `input`: its body and what follows.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let first = *input.get(1)?;
    let (length, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 {
            return None;
        }
        let bytes = input.get(2..2 + count)?;
        (bytes.iter().fold(0usize, |length, byte| (length << 8) | *byte as usize), 2 + count)
    };
    let body = input.get(header..header.checked_add(length)?)?;
    Some((body, &input[header + length..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_libpq_spells_them() {
        for (text, mode) in [
            ("disable", SslMode::Disable),
            ("allow", SslMode::Allow),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(SslMode::parse(text), Some(mode));
            assert_eq!(mode_name(mode), text);
        }
        assert_eq!(SslMode::parse("verify_full"), None);
        assert_eq!(SslMode::default(), SslMode::Prefer, "libpq's default");
    }

    #[test]
    fn verify_modes_without_a_root_certificate_are_refused() {
        for mode in [SslMode::VerifyCa, SslMode::VerifyFull] {
            let error = client_config(&TlsOptions { mode, ..TlsOptions::default() }).expect_err("needs roots").to_string();
            assert!(error.contains("sslrootcert"), "{error}");
        }
        assert!(client_config(&TlsOptions { mode: SslMode::Require, ..TlsOptions::default() }).is_ok());
    }

    #[test]
    fn der_walk_refuses_truncated_input() {
        assert_eq!(der_element(&[0x30, 0x05, 1, 2], 0x30), None);
        assert_eq!(der_element(&[0x30, 0x85, 1, 1, 1, 1, 1], 0x30), None);
        assert_eq!(der_element(&[0x31, 0x00], 0x30), None);
        assert_eq!(der_element(&[0x30, 0x01, 7, 9], 0x30), Some((&[7u8][..], &[9u8][..])));
        assert_eq!(end_point_hash(&[0x30, 0x03, 0x30, 0x01, 0x00]), None);
    }
}
