//! The authentication exchange after the startup message: trust, cleartext password,
//! MD5 and SCRAM-SHA-256, bound to the TLS session (`SCRAM-SHA-256-PLUS`) when there
//! is one and the server offers it.

use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256, SCRAM_SHA_256_PLUS};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use fallible_iterator::FallibleIterator;

use super::error::{WireError, WireResult};
use super::transport::{describe_incoming, Incoming, Transport};
use super::ConnectConfig;

const CONTEXT: &str = "authenticating with the server";

/// Answers the server's authentication requests until AuthenticationOk, and says
/// whether SCRAM was bound to the TLS channel. A rejected password arrives as an
/// ErrorResponse (SQLSTATE `28P01`) and is returned as [`WireError::Server`].
pub(super) fn authenticate(transport: &mut Transport, config: &ConnectConfig, address: &str) -> WireResult<bool> {
    let mut channel_bound = false;
    loop {
        let message = match transport.read_message(CONTEXT)? {
            Incoming::Message(message) => message,
            other => return Err(unexpected(&other, address)),
        };
        match message {
            Message::AuthenticationOk => return Ok(channel_bound),
            Message::AuthenticationCleartextPassword => {
                let password = required_password(config, address, "a cleartext password")?;
                transport.send("sending the password", |buffer| {
                    frontend::password_message(password.as_bytes(), buffer)
                })?;
            }
            Message::AuthenticationMd5Password(body) => {
                let password = required_password(config, address, "an MD5 password")?;
                let hashed = md5_hash(config.user.as_bytes(), password.as_bytes(), body.salt());
                transport.send("sending the MD5 password", |buffer| frontend::password_message(hashed.as_bytes(), buffer))?;
            }
            Message::AuthenticationSasl(body) => {
                let mut mechanisms = Vec::new();
                let mut listed = body.mechanisms();
                while let Some(mechanism) = listed.next().map_err(|error| {
                    WireError::Protocol(format!("the server at {address} sent a malformed SASL mechanism list: {error}"))
                })? {
                    mechanisms.push(mechanism.to_string());
                }
                channel_bound = scram_sha_256(transport, config, address, &mechanisms)?;
            }
            Message::AuthenticationKerberosV5 => return Err(unsupported("Kerberos V5", address)),
            Message::AuthenticationScmCredential => return Err(unsupported("SCM credentials", address)),
            Message::AuthenticationGss | Message::AuthenticationGssContinue(_) => {
                return Err(unsupported("GSSAPI", address));
            }
            Message::AuthenticationSspi => return Err(unsupported("SSPI", address)),
            Message::ErrorResponse(body) => return Err(WireError::from_error_fields(body.fields())),
            Message::NoticeResponse(_) => {}
            other => return Err(unexpected(&Incoming::Message(other), address)),
        }
    }
}

/// The SCRAM-SHA-256 exchange: client-first, server-first, client-final, server-final.
/// Returns whether it was bound to the TLS channel (`SCRAM-SHA-256-PLUS`).
fn scram_sha_256(
    transport: &mut Transport,
    config: &ConnectConfig,
    address: &str,
    mechanisms: &[String],
) -> WireResult<bool> {
    let offers = |name: &str| mechanisms.iter().any(|mechanism| mechanism == name);
    let end_point = transport.server_end_point();
    // Bind when both sides can: that proves the TLS session ends at the server that
    // knows the password, not at a man in the middle. Without TLS, or with a
    // certificate whose hash the RFC leaves undefined, say "not supported" ('n'): a
    // 'y' would tell a binding-capable server that someone stripped PLUS from its list.
    let (mechanism, binding) = match end_point {
        Some(hash) if offers(SCRAM_SHA_256_PLUS) => (SCRAM_SHA_256_PLUS, ChannelBinding::tls_server_end_point(hash)),
        _ if offers(SCRAM_SHA_256) => (SCRAM_SHA_256, ChannelBinding::unsupported()),
        _ => {
            let offered = mechanisms.join(", ");
            let reason = if offers(SCRAM_SHA_256_PLUS) && !transport.is_tls() {
                format!("the server at {address} requires SCRAM with channel binding ({offered}), which needs TLS (sslmode=require)")
            } else {
                format!("the server at {address} offers only the SASL mechanisms {offered}")
            };
            return Err(WireError::UnsupportedAuthentication(reason));
        }
    };
    let password = required_password(config, address, "a SCRAM-SHA-256 password")?;
    let mut scram = ScramSha256::new(password.as_bytes(), binding);
    transport.send("sending the SCRAM client-first message", |buffer| {
        frontend::sasl_initial_response(mechanism, scram.message(), buffer)
    })?;

    let server_first = match next_authentication_message(transport, address)? {
        Message::AuthenticationSaslContinue(body) => body,
        other => return Err(unexpected(&Incoming::Message(other), address)),
    };
    scram.update(server_first.data()).map_err(|error| {
        WireError::Authentication(format!("the SCRAM server-first message from {address} is invalid: {error}"))
    })?;
    transport.send("sending the SCRAM client-final message", |buffer| frontend::sasl_response(scram.message(), buffer))?;

    let server_final = match next_authentication_message(transport, address)? {
        Message::AuthenticationSaslFinal(body) => body,
        other => return Err(unexpected(&Incoming::Message(other), address)),
    };
    scram.finish(server_final.data()).map_err(|error| {
        WireError::Authentication(format!("the server at {address} failed the SCRAM server signature check: {error}"))
    })?;
    Ok(mechanism == SCRAM_SHA_256_PLUS)
}

/// The next authentication step, with an ErrorResponse (e.g. wrong password) turned
/// into the server error it is.
fn next_authentication_message(transport: &mut Transport, address: &str) -> WireResult<Message> {
    loop {
        match transport.read_message(CONTEXT)? {
            Incoming::Message(Message::ErrorResponse(body)) => return Err(WireError::from_error_fields(body.fields())),
            Incoming::Message(Message::NoticeResponse(_)) => {}
            Incoming::Message(message) => return Ok(message),
            other => return Err(unexpected(&other, address)),
        }
    }
}

fn required_password<'a>(config: &'a ConnectConfig, address: &str, what: &str) -> WireResult<&'a str> {
    config.password.as_deref().ok_or_else(|| {
        WireError::Authentication(format!(
            "the server at {address} asks for {what} for user \"{}\" but no password was configured",
            config.user
        ))
    })
}

fn unsupported(method: &str, address: &str) -> WireError {
    WireError::UnsupportedAuthentication(format!("the server at {address} asks for {method} authentication"))
}

fn unexpected(message: &Incoming, address: &str) -> WireError {
    WireError::Protocol(format!("the server at {address} sent {} during authentication", describe_incoming(message)))
}
