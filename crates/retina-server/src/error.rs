//! Errors of starting the endpoints.

pub type ServerResult<T> = Result<T, ServerError>;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },

    #[error("cannot read the password file {path}: {source}")]
    PasswordFile { path: String, source: std::io::Error },

    #[error("the password file {path} has no password on its first line: write the password (or a SCRAM-SHA-256 verifier) there")]
    EmptyPasswordFile { path: String },

    #[error("{reason}")]
    Config { reason: String },

    #[error("the password file {path} starts like a verifier but is {source}")]
    BadVerifier { path: String, source: crate::pg::scram::ScramError },
}
