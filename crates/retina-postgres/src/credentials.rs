//! Where the password and the TLS files come from when the URI does not say, as
//! libpq looks for them: `PGPASSWORD`, then the password file (`PGPASSFILE`, else
//! `~/.pgpass`); `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`, else
//! `~/.postgresql/root.crt`, `postgresql.crt` and `postgresql.key`.
//!
//! Keeping the password out of the URI keeps it out of `ps`, shell history and
//! service files; the process environment is read once, into [`Environment`], so the
//! rules are tested without touching the real one.

use std::path::{Path, PathBuf};

use crate::error::{PgSourceError, PgSourceResult};
use crate::small_files::{read_small_file, SECRET_FILE_LIMIT};

/// The parts of the process environment the connection settings fall back to.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub password: Option<String>,
    pub passfile: Option<PathBuf>,
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
    pub sslcert: Option<PathBuf>,
    pub sslkey: Option<PathBuf>,
    /// The user's home folder, for `~/.pgpass` and `~/.postgresql/`.
    pub home: Option<PathBuf>,
}

impl Environment {
    /// Reads the variables libpq reads.
    pub fn from_process() -> Environment {
        let text = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        Environment {
            password: text("PGPASSWORD"),
            passfile: text("PGPASSFILE").map(PathBuf::from),
            sslmode: text("PGSSLMODE"),
            sslrootcert: text("PGSSLROOTCERT"),
            sslcert: text("PGSSLCERT").map(PathBuf::from),
            sslkey: text("PGSSLKEY").map(PathBuf::from),
            home: text("HOME").map(PathBuf::from),
        }
    }

    /// `~/.postgresql/NAME` if it exists.
    pub fn postgresql_file(&self, name: &str) -> Option<PathBuf> {
        let path = self.home.as_ref()?.join(".postgresql").join(name);
        path.is_file().then_some(path)
    }

    /// The password file: `PGPASSFILE` or `~/.pgpass`.
    fn passfile(&self) -> Option<PathBuf> {
        self.passfile.clone().or_else(|| Some(self.home.as_ref()?.join(".pgpass")))
    }
}

/// Who a password is looked up for.
pub struct Target<'a> {
    pub host: &'a str,
    pub port: u16,
    pub database: &'a str,
    pub user: &'a str,
}

/// The password for `target` when the URI gave none: the `password_file=` option's
/// file, then `PGPASSWORD`, then the first matching line of the password file.
pub fn password(password_file: Option<&Path>, environment: &Environment, target: &Target<'_>) -> PgSourceResult<Option<String>> {
    if let Some(path) = password_file {
        let bad = |error: String| PgSourceError::Config(format!("password_file={}: {error}", path.display()));
        let bytes = read_small_file(path, SECRET_FILE_LIMIT).map_err(bad)?;
        let contents = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        let password = contents.lines().next().unwrap_or("").to_string();
        if password.is_empty() {
            return Err(PgSourceError::Config(format!("password_file={}: the first line is empty", path.display())));
        }
        return Ok(Some(password));
    }
    if let Some(password) = &environment.password {
        return Ok(Some(password.clone()));
    }
    let Some(path) = environment.passfile() else { return Ok(None) };
    // ~/.pgpass may well not exist; a PGPASSFILE that cannot be read is a mistake to say.
    let contents = match read_small_file(&path, SECRET_FILE_LIMIT) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) if environment.passfile.is_none() => return Ok(None),
        Err(error) => return Err(PgSourceError::Config(format!("PGPASSFILE={}: {error}", path.display()))),
    };
    refuse_if_shared(&path)?;
    Ok(pgpass_lookup(&contents, target))
}

/// libpq ignores a password file others can read; we refuse it with the fix, since
/// a silently ignored file reads as a wrong password later.
#[cfg(unix)]
fn refuse_if_shared(path: &Path) -> PgSourceResult<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map(|metadata| metadata.permissions().mode()).unwrap_or(0);
    if mode & 0o077 != 0 {
        return Err(PgSourceError::Config(format!(
            "the password file {} can be read by group or others (mode {:o}): run chmod 0600 on it",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_if_shared(_path: &Path) -> PgSourceResult<()> {
    Ok(())
}

/// The first line of a `.pgpass` file matching `target`:
/// `hostname:port:database:username:password`, `*` matching anything, `\:` and `\\`
/// escaping, `#` starting a comment line.
pub fn pgpass_lookup(contents: &str, target: &Target<'_>) -> Option<String> {
    let port = target.port.to_string();
    let wanted = [target.host, port.as_str(), target.database, target.user];
    contents.lines().filter(|line| !line.starts_with('#')).find_map(|line| {
        let fields = split_escaped(line);
        if fields.len() < 5 {
            return None;
        }
        let matches = fields[..4].iter().zip(wanted).all(|(field, value)| field == "*" || field == value);
        // A password containing unescaped colons keeps them.
        matches.then(|| fields[4..].join(":"))
    })
}

fn split_escaped(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' => {
                if let (Some(next), Some(field)) = (characters.next(), fields.last_mut()) {
                    field.push(next);
                }
            }
            ':' => fields.push(String::new()),
            other => {
                if let Some(field) = fields.last_mut() {
                    field.push(other);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target<'static> {
        Target { host: "db.example", port: 5432, database: "shop", user: "rep" }
    }

    #[test]
    fn pgpass_takes_the_first_matching_line_with_wildcards_and_escapes() {
        let contents = "# comment\nother:5432:shop:rep:wrong\ndb.example:5432:*:rep:pa\\:ss\\\\w\n*:*:*:*:fallback\n";
        assert_eq!(pgpass_lookup(contents, &target()).as_deref(), Some("pa:ss\\w"));
        assert_eq!(pgpass_lookup("*:*:*:*:fallback", &target()).as_deref(), Some("fallback"));
        assert_eq!(pgpass_lookup("db.example:5433:*:*:x\nshort:line", &target()), None);
    }

    #[test]
    fn password_file_option_then_environment_then_pgpass() {
        let folder = tempfile::tempdir().expect("tempdir");
        let option_file = folder.path().join("secret");
        std::fs::write(&option_file, "from-file\n").expect("write");
        let passfile = folder.path().join("pgpass");
        std::fs::write(&passfile, "*:*:*:rep:from-pgpass\n").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let mut environment = Environment { passfile: Some(passfile.clone()), ..Environment::default() };
        assert_eq!(password(None, &environment, &target()).expect("pgpass").as_deref(), Some("from-pgpass"));
        environment.password = Some("from-env".into());
        assert_eq!(password(None, &environment, &target()).expect("env").as_deref(), Some("from-env"));
        assert_eq!(password(Some(&option_file), &environment, &target()).expect("file").as_deref(), Some("from-file"));

        let missing = folder.path().join("missing");
        let error = password(Some(&missing), &environment, &target()).expect_err("missing file").to_string();
        assert!(error.contains("password_file=") && error.contains("missing"), "{error}");
        std::fs::write(&option_file, "\n").expect("write");
        assert!(password(Some(&option_file), &environment, &target()).is_err(), "an empty password is refused");
    }

    #[cfg(unix)]
    #[test]
    fn a_password_file_others_can_read_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let folder = tempfile::tempdir().expect("tempdir");
        let passfile = folder.path().join("pgpass");
        std::fs::write(&passfile, "*:*:*:*:secret\n").expect("write");
        std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let environment = Environment { passfile: Some(passfile), ..Environment::default() };
        let error = password(None, &environment, &target()).expect_err("shared file").to_string();
        assert!(error.contains("chmod 0600") && !error.contains("secret"), "{error}");
    }
}
