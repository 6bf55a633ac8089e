//! `retina serve --password-file PATH`: the one password every SQL client must give.
//!
//! A file rather than a flag or an environment variable, so the secret shows neither
//! in `ps` nor in `/proc/<pid>/environ`, and can be a mounted secret. Its first line
//! (without the line break; spaces are part of the password) is either the password
//! or a PostgreSQL SCRAM-SHA-256 verifier (`SCRAM-SHA-256$4096:...`, as in
//! `pg_authid.rolpassword`), so the cleartext need not be on the server at all.

use std::path::Path;
use std::sync::Arc;

use super::scram::ScramVerifier;
use super::startup::ClientAuthentication;
use crate::error::{ServerError, ServerResult};

/// Reads `path` and returns SCRAM-SHA-256 authentication with its password.
pub fn scram_from_password_file(path: &Path) -> ServerResult<ClientAuthentication> {
    let shown = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ServerError::PasswordFile { path: shown(), source })?;
    let first_line = text.lines().next().unwrap_or_default();
    if first_line.is_empty() {
        return Err(ServerError::EmptyPasswordFile { path: shown() });
    }
    let verifier =
        ScramVerifier::from_secret(first_line).map_err(|source| ServerError::BadVerifier { path: shown(), source })?;
    Ok(ClientAuthentication::ScramSha256(Arc::new(verifier)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
        let path = dir.path().join("password");
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn the_first_line_is_the_secret() {
        let dir = tempfile::tempdir().expect("tempdir");
        for text in ["s3cret\n", "s3cret", "s3cret\r\nignored\n"] {
            let auth = scram_from_password_file(&write(&dir, text)).expect("a password");
            assert!(matches!(auth, ClientAuthentication::ScramSha256(_)), "{text:?}");
        }
        let verifier = postgres_protocol::password::scram_sha_256(b"s3cret");
        let ClientAuthentication::ScramSha256(parsed) = scram_from_password_file(&write(&dir, &verifier)).expect("a verifier") else {
            panic!("expected SCRAM");
        };
        assert_eq!(*parsed, ScramVerifier::parse(&verifier).expect("parse"));
    }

    #[test]
    fn unreadable_empty_and_malformed_files_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope");
        let error = scram_from_password_file(&missing).expect_err("missing");
        assert!(error.to_string().starts_with(&format!("cannot read the password file {}:", missing.display())), "{error}");
        for text in ["", "\n", "\nsecond line"] {
            let error = scram_from_password_file(&write(&dir, text)).expect_err("empty");
            assert!(error.to_string().contains("has no password on its first line"), "{text:?}: {error}");
        }
        let error = scram_from_password_file(&write(&dir, "SCRAM-SHA-256$4096:c2FsdA==")).expect_err("malformed");
        assert!(error.to_string().contains("not a SCRAM-SHA-256 verifier (no keys)"), "{error}");
    }
}
