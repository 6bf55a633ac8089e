//! The startup phase of a connection: who may connect.
//!
//! - [`ClientAuthentication::Trust`] (the default): any user, no password, like
//!   PostgreSQL's `trust`; the endpoint listens on loopback by default.
//! - [`ClientAuthentication::ScramSha256`]: every user must prove the one configured
//!   password with SCRAM-SHA-256 ([`super::scram`]); a wrong proof ends the
//!   connection with `FATAL 28P01 password authentication failed for user "..."`,
//!   PostgreSQL's own error.
//!
//! pgwire asks for one startup handler per connection, so the exchange state lives
//! in the handler.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use parking_lot::Mutex;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, DefaultServerParameterProvider,
    StartupHandler,
};
use pgwire::api::{
    ClientInfo, ConnectionManager, PgWireConnectionState, PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::scram::{ScramError, ScramExchange, ScramVerifier, MECHANISM};

/// How long a failed authentication waits before its error goes out.
const FAILED_AUTHENTICATION_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// How clients of a server authenticate.
#[derive(Clone, Debug, Default)]
pub enum ClientAuthentication {
    /// Any user name, no password.
    #[default]
    Trust,
    /// Any user name, with the password this verifier checks, over SCRAM-SHA-256.
    ScramSha256(Arc<ScramVerifier>),
}

/// Where one connection is in its startup.
#[derive(Debug, Default)]
enum Step {
    /// Nothing received yet (or trust: nothing more to do).
    #[default]
    AwaitingStartup,
    /// `AuthenticationSASL` sent; the client's SASLInitialResponse is next.
    AwaitingClientFirst,
    /// `AuthenticationSASLContinue` sent; the client's final message is next.
    AwaitingClientFinal(Box<ScramExchange>),
    /// Authenticated, or failed (the connection is being closed).
    Done,
}

/// The startup handler of one connection.
pub struct RetinaStartup {
    authentication: ClientAuthentication,
    connections: Arc<ConnectionManager>,
    pids: Arc<RandomPidSecretKeyGenerator>,
    step: Mutex<Step>,
}

impl RetinaStartup {
    pub fn new(
        authentication: ClientAuthentication,
        connections: Arc<ConnectionManager>,
        pids: Arc<RandomPidSecretKeyGenerator>,
    ) -> Self {
        Self { authentication, connections, pids, step: Mutex::new(Step::AwaitingStartup) }
    }

    /// Admits the client: a process id and cancel key, registration so a
    /// CancelRequest can find the connection, then AuthenticationOk, the server
    /// parameters, BackendKeyData and ReadyForQuery.
    async fn admit<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (pid, secret_key) = self.pids.generate(&*client);
        client.set_pid_and_secret_key(pid, secret_key.clone());
        let (handle, guard) = self.connections.register(pid, secret_key);
        client.session_extensions().insert(handle);
        client.session_extensions().insert(guard);
        let mut parameters = DefaultServerParameterProvider::default();
        // What `SHOW server_version` answers too (pgwire's default names pgwire).
        parameters.server_version = retina_query::pg_compat::server_version();
        finish_authentication(client, &parameters).await
    }

    /// One SASL message of the SCRAM exchange: the response to send, and whether the
    /// client is now authenticated.
    fn scram_step<C: ClientInfo>(
        &self,
        client: &C,
        verifier: &ScramVerifier,
        message: PasswordMessageFamily,
    ) -> PgWireResult<(Authentication, bool)> {
        let mut step = self.step.lock();
        match std::mem::replace(&mut *step, Step::Done) {
            Step::AwaitingClientFirst => {
                let initial = message.into_sasl_initial_response().map_err(|_| fatal("08P01", "malformed SASLInitialResponse"))?;
                if initial.auth_method != MECHANISM {
                    return Err(fatal(
                        "28000",
                        format!("SASL mechanism {} is not supported; the server offers {MECHANISM}", initial.auth_method),
                    ));
                }
                let data = initial.data.ok_or_else(|| scram_error(client, ScramError::Malformed("empty first message")))?;
                let (server_first, exchange) = verifier.start(&data).map_err(|error| scram_error(client, error))?;
                *step = Step::AwaitingClientFinal(Box::new(exchange));
                Ok((Authentication::SASLContinue(server_first.into_bytes().into()), false))
            }
            Step::AwaitingClientFinal(exchange) => {
                let response = message.into_sasl_response().map_err(|_| fatal("08P01", "malformed SASLResponse"))?;
                let server_final = exchange.finish(&response.data).map_err(|error| scram_error(client, error))?;
                Ok((Authentication::SASLFinal(server_final.into_bytes().into()), true))
            }
            Step::AwaitingStartup | Step::Done => Err(fatal("08P01", "unexpected password message")),
        }
    }
}

#[async_trait]
impl StartupHandler for RetinaStartup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match (message, &self.authentication) {
            (PgWireFrontendMessage::Startup(startup), authentication) => {
                protocol_negotiation(client, &startup).await?;
                save_startup_parameters_to_metadata(client, &startup);
                match authentication {
                    ClientAuthentication::Trust => {
                        *self.step.lock() = Step::Done;
                        self.admit(client).await
                    }
                    ClientAuthentication::ScramSha256(_) => {
                        *self.step.lock() = Step::AwaitingClientFirst;
                        client.set_state(PgWireConnectionState::AuthenticationInProgress);
                        client.send(PgWireBackendMessage::Authentication(Authentication::SASL(vec![MECHANISM.to_owned()]))).await?;
                        Ok(())
                    }
                }
            }
            (PgWireFrontendMessage::PasswordMessageFamily(message), ClientAuthentication::ScramSha256(verifier)) => {
                let stepped = self.scram_step(client, verifier, message);
                if stepped.is_err() {
                    // As PostgreSQL's auth_delay: a guesser gets one answer a second per
                    // connection (300 guesses took 1.2 s), and the connection cap bounds
                    // how many connections guess at once.
                    tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
                }
                let (response, authenticated) = stepped?;
                client.send(PgWireBackendMessage::Authentication(response)).await?;
                if authenticated {
                    self.admit(client).await?;
                }
                Ok(())
            }
            // Anything else before authentication completes (a query, a password
            // under trust) is a protocol violation; the connection ends.
            _ => Err(fatal("08P01", "expected a password message during authentication")),
        }
    }
}

/// An error that ends the connection (severity FATAL).
fn fatal(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message.into())))
}

/// A failed SCRAM step as PostgreSQL reports it: 28P01 with the user name for a
/// wrong password, 08P01 for a protocol violation.
fn scram_error<C: ClientInfo>(client: &C, error: ScramError) -> PgWireError {
    match error {
        ScramError::WrongPassword => {
            let user = client.metadata().get("user").cloned().unwrap_or_default();
            fatal("28P01", format!("password authentication failed for user \"{user}\""))
        }
        ScramError::ChannelBinding => fatal("0A000", error.to_string()),
        other => fatal("08P01", other.to_string()),
    }
}
