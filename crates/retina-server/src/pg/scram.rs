//! SCRAM-SHA-256 (RFC 5802, RFC 7677) on the server side, as PostgreSQL speaks it.
//!
//! Why here and not pgwire's `server-api-ring` feature: that feature also builds
//! X.509 parsing for channel binding (`x509-certificate`, `der`, `zeroize_derive`),
//! which changes the features of `syn` and so rebuilds every proc macro and all of
//! DataFusion; Retina serves no TLS, so channel binding is moot. The primitives used
//! here (`hmac`, `sha2`, `base64`, `rand`) are the ones `postgres-protocol` already
//! brings in, and the verifier is made by `postgres-protocol` itself.
//!
//! The server keeps only a verifier (salt, iterations, StoredKey, ServerKey), never
//! the password, exactly like PostgreSQL's `pg_authid.rolpassword`. The SCRAM user
//! name (`n=`) is ignored, as PostgreSQL does: the startup message names the user.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The one SASL mechanism offered (no `-PLUS`: channel binding needs TLS).
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// How PostgreSQL writes a SCRAM-SHA-256 verifier: `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
const VERIFIER_PREFIX: &str = "SCRAM-SHA-256$";

/// Random bytes in the server's part of the nonce (base64 encoded on the wire).
const SERVER_NONCE_BYTES: usize = 18;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramError {
    /// The client's message does not follow RFC 5802.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),

    /// The client asked for channel binding (`p=`), which needs TLS.
    #[error("SCRAM channel binding is not supported: connect without TLS channel binding")]
    ChannelBinding,

    /// The proof does not match the verifier.
    #[error("wrong password")]
    WrongPassword,

    /// A stored verifier string that cannot be parsed.
    #[error("not a SCRAM-SHA-256 verifier ({0}); expected SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>")]
    BadVerifier(&'static str),
}

/// What the server stores to check passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramVerifier {
    iterations: u32,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramVerifier {
    /// Keys stay out of logs: with them, an attacker can impersonate the server.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramVerifier").field("iterations", &self.iterations).finish_non_exhaustive()
    }
}

impl ScramVerifier {
    /// The verifier of a cleartext password (SASLprep-normalized, fresh random salt,
    /// 4096 iterations: what PostgreSQL and libpq produce).
    pub fn from_password(password: &str) -> Self {
        let encoded = postgres_protocol::password::scram_sha_256(password.as_bytes());
        // Our own dependency's output: it always parses. If a future version changed
        // the format, refusing every password is the safe failure.
        Self::parse(&encoded).unwrap_or(Self { iterations: 1, salt: Vec::new(), stored_key: Vec::new(), server_key: Vec::new() })
    }

    /// A secret as an operator writes it: a PostgreSQL SCRAM-SHA-256 verifier
    /// (`SCRAM-SHA-256$...`, e.g. copied from `pg_authid`), or else a password.
    pub fn from_secret(secret: &str) -> Result<Self, ScramError> {
        if secret.starts_with(VERIFIER_PREFIX) {
            Self::parse(secret)
        } else {
            Ok(Self::from_password(secret))
        }
    }

    /// Parses `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn parse(text: &str) -> Result<Self, ScramError> {
        let rest = text.strip_prefix(VERIFIER_PREFIX).ok_or(ScramError::BadVerifier("wrong prefix"))?;
        let (parameters, keys) = rest.split_once('$').ok_or(ScramError::BadVerifier("no keys"))?;
        let (iterations, salt) = parameters.split_once(':').ok_or(ScramError::BadVerifier("no salt"))?;
        let (stored_key, server_key) = keys.split_once(':').ok_or(ScramError::BadVerifier("no server key"))?;
        let iterations: u32 = iterations.parse().map_err(|_| ScramError::BadVerifier("iterations are not a number"))?;
        let decode = |field: &str, what| STANDARD.decode(field).map_err(|_| ScramError::BadVerifier(what));
        let verifier = Self {
            iterations,
            salt: decode(salt, "salt is not base64")?,
            stored_key: decode(stored_key, "StoredKey is not base64")?,
            server_key: decode(server_key, "ServerKey is not base64")?,
        };
        if verifier.iterations == 0 || verifier.salt.is_empty() {
            return Err(ScramError::BadVerifier("zero iterations or an empty salt"));
        }
        if verifier.stored_key.len() != 32 || verifier.server_key.len() != 32 {
            return Err(ScramError::BadVerifier("keys are not 32 bytes"));
        }
        Ok(verifier)
    }

    /// Answers the client's first message: the server-first message to send, and
    /// the exchange waiting for the client's final message.
    pub fn start(&self, client_first: &[u8]) -> Result<(String, ScramExchange), ScramError> {
        let client_first = std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (gs2_header, client_first_bare) = split_gs2_header(client_first)?;
        let client_nonce = client_nonce(client_first_bare)?;
        let server_nonce = STANDARD.encode(rand::random::<[u8; SERVER_NONCE_BYTES]>());
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!("r={nonce},s={},i={}", STANDARD.encode(&self.salt), self.iterations);
        let exchange = ScramExchange {
            verifier: self.clone(),
            gs2_header: gs2_header.to_string(),
            client_first_bare: client_first_bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((server_first, exchange))
    }
}

/// A SCRAM exchange after the server-first message.
#[derive(Debug)]
pub struct ScramExchange {
    verifier: ScramVerifier,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramExchange {
    /// Checks the client's final message; on success returns the server-final
    /// message (`v=<ServerSignature>`), which proves to the client that the server
    /// knows the verifier too.
    pub fn finish(&self, client_final: &[u8]) -> Result<String, ScramError> {
        let client_final = std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = client_final.rsplit_once(",p=").ok_or(ScramError::Malformed("no proof"))?;
        let mut attributes = without_proof.split(',');
        let channel_binding = attributes.next().and_then(|a| a.strip_prefix("c=")).ok_or(ScramError::Malformed("no c="))?;
        let nonce = attributes.next().and_then(|a| a.strip_prefix("r=")).ok_or(ScramError::Malformed("no r="))?;
        if channel_binding != STANDARD.encode(&self.gs2_header) {
            return Err(ScramError::Malformed("channel binding data differs from the first message"));
        }
        if nonce != self.nonce {
            return Err(ScramError::Malformed("nonce differs from the server's"));
        }
        let proof = STANDARD.decode(proof).map_err(|_| ScramError::Malformed("proof is not base64"))?;
        if proof.len() != self.verifier.stored_key.len() {
            return Err(ScramError::WrongPassword);
        }
        let auth_message = format!("{},{},{without_proof}", self.client_first_bare, self.server_first);
        let client_signature = hmac_sha256(&self.verifier.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        let stored_key = Sha256::digest(&client_key);
        if !constant_time_eq(&stored_key, &self.verifier.stored_key) {
            return Err(ScramError::WrongPassword);
        }
        let server_signature = hmac_sha256(&self.verifier.server_key, auth_message.as_bytes());
        Ok(format!("v={}", STANDARD.encode(server_signature)))
    }
}

/// Splits `gs2-header client-first-message-bare`. The header is `n,,` or `y,,`
/// (no channel binding; `y` = the client could but thinks we cannot); `p=` asks for
/// binding and an authzid is not supported (PostgreSQL refuses both the same way).
fn split_gs2_header(message: &str) -> Result<(&str, &str), ScramError> {
    let mut parts = message.splitn(3, ',');
    let flag = parts.next().ok_or(ScramError::Malformed("empty message"))?;
    let authzid = parts.next().ok_or(ScramError::Malformed("no GS2 header"))?;
    let bare = parts.next().ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        flag if flag.starts_with("p=") => return Err(ScramError::ChannelBinding),
        _ => return Err(ScramError::Malformed("unknown channel binding flag")),
    }
    if !authzid.is_empty() {
        return Err(ScramError::Malformed("authorization identities are not supported"));
    }
    Ok((&message[..flag.len() + authzid.len() + 2], bare))
}

/// The client nonce of `client-first-message-bare` (`n=<user>,r=<nonce>[,ext]`).
fn client_nonce(bare: &str) -> Result<&str, ScramError> {
    let mut attributes = bare.split(',');
    match attributes.next() {
        Some(user) if user.starts_with("n=") => {}
        Some(extension) if extension.starts_with("m=") => return Err(ScramError::Malformed("mandatory extensions are not supported")),
        _ => return Err(ScramError::Malformed("no user name attribute")),
    }
    let nonce = attributes.next().and_then(|a| a.strip_prefix("r=")).ok_or(ScramError::Malformed("no nonce"))?;
    // RFC 5802: printable ASCII except ','.
    if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(ScramError::Malformed("invalid nonce"));
    }
    Ok(nonce)
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(message);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// Equality whose time does not depend on where the inputs differ, so the proof
/// check leaks nothing about the stored key (the lengths are public: both are
/// SHA-256 digests).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

    use super::*;

    /// Runs a whole exchange with `postgres-protocol`'s client (an implementation
    /// independent of ours, the one `tokio-postgres` uses).
    fn exchange(verifier: &ScramVerifier, password: &str) -> Result<(), ScramError> {
        let mut client = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
        let (server_first, exchange) = verifier.start(client.message())?;
        client.update(server_first.as_bytes()).map_err(|_| ScramError::Malformed("client rejected server-first"))?;
        let server_final = exchange.finish(client.message())?;
        client.finish(server_final.as_bytes()).map_err(|_| ScramError::Malformed("client rejected the server signature"))
    }

    #[test]
    fn the_right_password_passes_and_the_client_accepts_the_server_signature() {
        let verifier = ScramVerifier::from_password("pencil");
        assert_eq!(exchange(&verifier, "pencil"), Ok(()));
        // SASLprep: a non-ASCII space is a plain space after normalization.
        let verifier = ScramVerifier::from_password("a b");
        assert_eq!(exchange(&verifier, "a\u{00A0}b"), Ok(()));
    }

    #[test]
    fn a_wrong_password_is_refused() {
        let verifier = ScramVerifier::from_password("pencil");
        assert_eq!(exchange(&verifier, "Pencil"), Err(ScramError::WrongPassword));
        assert_eq!(exchange(&verifier, ""), Err(ScramError::WrongPassword));
    }

    #[test]
    fn a_postgres_verifier_is_accepted_as_a_secret() {
        let encoded = postgres_protocol::password::scram_sha_256(b"secret");
        let verifier = ScramVerifier::from_secret(&encoded).expect("verifier");
        assert_eq!(exchange(&verifier, "secret"), Ok(()));
        // A secret that is not a verifier is a password.
        assert_eq!(exchange(&ScramVerifier::from_secret("SCRAM").expect("password"), "SCRAM"), Ok(()));
    }

    #[test]
    fn malformed_verifiers_are_refused_with_the_reason() {
        for (text, reason) in [
            ("SCRAM-SHA-256$4096:c2FsdA==", "no keys"),
            ("SCRAM-SHA-256$x:c2FsdA==$a:b", "iterations are not a number"),
            ("SCRAM-SHA-256$4096:!!$a:b", "salt is not base64"),
            ("SCRAM-SHA-256$4096:c2FsdA==$YQ==:YQ==", "keys are not 32 bytes"),
            ("SCRAM-SHA-256$0:c2FsdA==$YQ==:YQ==", "zero iterations or an empty salt"),
        ] {
            assert_eq!(ScramVerifier::from_secret(text), Err(ScramError::BadVerifier(reason)), "{text}");
        }
    }

    #[test]
    fn protocol_violations_are_malformed_messages() {
        let verifier = ScramVerifier::from_password("pencil");
        for (client_first, expected) in [
            (&b"p=tls-server-end-point,,n=,r=abc"[..], ScramError::ChannelBinding),
            (b"n,a=admin,n=,r=abc", ScramError::Malformed("authorization identities are not supported")),
            (b"x,,n=,r=abc", ScramError::Malformed("unknown channel binding flag")),
            (b"n,,m=ext,n=,r=abc", ScramError::Malformed("mandatory extensions are not supported")),
            (b"n,,n=,x=abc", ScramError::Malformed("no nonce")),
            (b"n,,n=,r=", ScramError::Malformed("invalid nonce")),
            (b"n,,", ScramError::Malformed("no user name attribute")),
            (b"n", ScramError::Malformed("no GS2 header")),
            (b"\xff", ScramError::Malformed("not UTF-8")),
        ] {
            assert_eq!(verifier.start(client_first).err(), Some(expected), "{}", String::from_utf8_lossy(client_first));
        }
        let (server_first, exchange) = verifier.start(b"n,,n=,r=abc").expect("start");
        let nonce = server_first.split(',').next().and_then(|r| r.strip_prefix("r=")).expect("nonce").to_string();
        for (client_final, expected) in [
            (format!("c=biws,r={nonce}"), ScramError::Malformed("no proof")),
            (format!("c=eSws,r={nonce},p=AAAA"), ScramError::Malformed("channel binding data differs from the first message")),
            ("c=biws,r=abc,p=AAAA".to_string(), ScramError::Malformed("nonce differs from the server's")),
            (format!("c=biws,r={nonce},p=!!"), ScramError::Malformed("proof is not base64")),
            (format!("c=biws,r={nonce},p=AAAA"), ScramError::WrongPassword),
        ] {
            assert_eq!(exchange.finish(client_final.as_bytes()), Err(expected), "{client_final}");
        }
    }

    #[test]
    fn debug_output_hides_the_keys() {
        let shown = format!("{:?}", ScramVerifier::from_password("pencil"));
        assert_eq!(shown, "ScramVerifier { iterations: 4096, .. }");
    }
}
