//! The source URI: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?OPTIONS]`.
//!
//! Options: `publication=NAME` (default `retina`), `slot=NAME` (default
//! `retina_slot`), `tables=SCHEMA.TABLE,...` (default: all tables), `protocol=1|2`
//! (default 2: large transactions stream before they commit), `copy_workers=N`
//! (default 2), `unsupported_types=error|text`, `no_identity=error|insert_only`,
//! `slot_wait=SECONDS` (default 30: how long a restart waits for the server to release
//! the slot from a previous connection), `max_reconnects=N|unlimited` (default
//! unlimited: attempts in a row to resume after a lost connection; 0 fails at once),
//! `on_table_error=pause|stop` (default pause: see [`crate::table_pause`]),
//! `resync=SCHEMA.TABLE,...` (paused tables to copy again at start).
//!
//! Security, as libpq spells it: `sslmode=disable|allow|prefer|require|verify-ca|verify-full`
//! (default `prefer`), `sslrootcert=FILE|system`, `sslcert=FILE` and `sslkey=FILE`
//! (a client certificate), `password_file=FILE` (its first line). Without a password
//! in the URI, `PGPASSWORD` and the password file (`PGPASSFILE`, `~/.pgpass`) are
//! read, and `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY` stand in for
//! the options (see [`crate::credentials`]).

use std::time::Duration;

use std::path::PathBuf;

use crate::credentials::{self, Environment, Target};
use crate::error::{PgSourceError, PgSourceResult};
use crate::reconnect::ReconnectPolicy;
use crate::wire::{ConnectConfig, RootCertificates, SslMode, TlsOptions};

/// The most copy sessions a source opens at once.
const MAX_COPY_WORKERS: usize = 64;

/// Everything the source needs to know.
#[derive(Clone, Debug)]
pub struct PgSourceOptions {
    pub connect: ConnectConfig,
    pub publication: String,
    pub slot: String,
    /// `None`: every table (`FOR ALL TABLES`).
    pub tables: Option<Vec<String>>,
    pub protocol_version: u8,
    pub copy_workers: usize,
    pub unsupported_types_as_text: bool,
    pub insert_only_without_identity: bool,
    pub slot_wait: Duration,
    /// Attempts in a row to start a new session after a lost connection.
    pub reconnect: ReconnectPolicy,
    /// `on_table_error=pause` (default): a table's own error pauses that table only;
    /// `stop`: it stops the source.
    pub pause_failing_tables: bool,
    /// Paused tables to copy again at start (`resync=SCHEMA.TABLE,…`).
    pub resync: Vec<String>,
}

fn percent_decode(text: &str) -> PgSourceResult<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).ok_or_else(|| PgSourceError::Config(format!("bad percent escape in '{text}'")))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| PgSourceError::Config(format!("bad percent escape in '{text}'")))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PgSourceError::Config(format!("'{text}' is not UTF-8 after percent decoding")))
}

/// SQL identifiers we put in commands must be plain: letters, digits, `_`, `$`.
fn identifier(option: &str, value: &str) -> PgSourceResult<String> {
    let plain = !value.is_empty()
        && value.len() <= 63
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'$')
        && !value.as_bytes()[0].is_ascii_digit();
    if !plain {
        return Err(PgSourceError::Config(format!(
            "{option}='{value}': use a lower-case name of letters, digits and underscores (at most 63)"
        )));
    }
    Ok(value.to_string())
}

/// The security options of the URI, before the environment fills the gaps.
#[derive(Default)]
struct Security {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<PathBuf>,
    sslkey: Option<PathBuf>,
    password_file: Option<PathBuf>,
}

impl Security {
    /// TLS settings and password from the URI, else the environment, else libpq's
    /// default files.
    fn apply(self, connect: &mut ConnectConfig, environment: &Environment) -> PgSourceResult<()> {
        let mode_text = self.sslmode.or_else(|| environment.sslmode.clone());
        let mode = match mode_text {
            Some(text) => SslMode::parse(&text).ok_or_else(|| {
                PgSourceError::Config(format!(
                    "bad value '{text}' for sslmode (use disable, allow, prefer, require, verify-ca or verify-full)"
                ))
            })?,
            None => SslMode::default(),
        };
        let root_certificates = match self.sslrootcert.or_else(|| environment.sslrootcert.clone()) {
            Some(text) if text == "system" => Some(RootCertificates::System),
            Some(text) => Some(RootCertificates::File(PathBuf::from(text))),
            None => environment.postgresql_file("root.crt").map(RootCertificates::File),
        };
        let certificate = self.sslcert.or_else(|| environment.sslcert.clone());
        let key = self.sslkey.or_else(|| environment.sslkey.clone());
        let client_certificate = match (certificate, key) {
            (Some(certificate), Some(key)) => Some((certificate, key)),
            (Some(_), None) | (None, Some(_)) => {
                return Err(PgSourceError::Config("sslcert and sslkey go together: give both or neither".into()))
            }
            (None, None) => environment.postgresql_file("postgresql.crt").zip(environment.postgresql_file("postgresql.key")),
        };
        connect.tls = TlsOptions { mode, root_certificates, client_certificate };
        if connect.password.is_none() || self.password_file.is_some() {
            let target = Target { host: &connect.host, port: connect.port, database: &connect.database, user: &connect.user };
            connect.password = credentials::password(self.password_file.as_deref(), environment, &target)?;
        }
        Ok(())
    }
}

impl PgSourceOptions {
    /// Parses the URI; what it leaves out comes from the process environment as libpq
    /// takes it.
    pub fn parse(uri: &str) -> PgSourceResult<Self> {
        Self::parse_with(uri, &Environment::from_process())
    }

    /// [`parse`](Self::parse) with the environment given.
    pub fn parse_with(uri: &str, environment: &Environment) -> PgSourceResult<Self> {
        let rest = uri
            .strip_prefix("postgres://")
            .or_else(|| uri.strip_prefix("postgresql://"))
            .ok_or_else(|| PgSourceError::Config(format!("'{}' does not start with postgres://", retina_core::redact::RedactedUri::new(uri))))?;
        let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, database) = main.split_once('/').unwrap_or((main, ""));
        let (credentials, host_port) = match authority.rsplit_once('@') {
            Some((credentials, host)) => (Some(credentials), host),
            None => (None, authority),
        };
        let (user, password) = match credentials {
            Some(credentials) => match credentials.split_once(':') {
                // The password's own text never goes into an error.
                Some((user, password)) => (
                    percent_decode(user)?,
                    Some(percent_decode(password).map_err(|_| {
                        PgSourceError::Config("the password in the URI has a bad percent escape (write % as %25), or is not UTF-8".into())
                    })?),
                ),
                None => (percent_decode(credentials)?, None),
            },
            None => ("postgres".to_string(), None),
        };
        let bad_port =
            |port: &str| PgSourceError::Config(format!("bad port '{port}' in '{}'", retina_core::redact::RedactedUri::new(uri)));
        // An IPv6 address comes in brackets: `[::1]` or `[::1]:5432`.
        let (host, port_text) = match host_port.strip_prefix('[') {
            Some(bracketed) => {
                let (address, after) = bracketed.split_once(']').ok_or_else(|| {
                    PgSourceError::Config(format!("'{}': an IPv6 host has no closing ']'", retina_core::redact::RedactedUri::new(uri)))
                })?;
                match after {
                    "" => (address, None),
                    _ => (address, Some(after.strip_prefix(':').ok_or_else(|| bad_port(after))?)),
                }
            }
            None => match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            },
        };
        let port = match port_text {
            Some(port) => port.parse::<u16>().map_err(|_| bad_port(port))?,
            None => 5432,
        };
        if host.is_empty() {
            return Err(PgSourceError::Config(format!("'{}' names no host", retina_core::redact::RedactedUri::new(uri))));
        }
        let database = if database.is_empty() { user.clone() } else { percent_decode(database)? };
        let mut options = Self {
            connect: ConnectConfig {
                host: host.to_string(),
                port,
                user,
                password,
                database,
                application_name: "retina".into(),
                connect_timeout: Duration::from_secs(10),
                tls: TlsOptions::default(),
            },
            publication: "retina".into(),
            slot: "retina_slot".into(),
            tables: None,
            protocol_version: 2,
            copy_workers: 2,
            unsupported_types_as_text: false,
            insert_only_without_identity: false,
            slot_wait: Duration::from_secs(30),
            reconnect: ReconnectPolicy::default(),
            pause_failing_tables: true,
            resync: Vec::new(),
        };
        let mut security = Security::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| PgSourceError::Config(format!("option '{pair}' has no value")))?;
            let value = percent_decode(value)?;
            let bad = || PgSourceError::Config(format!("bad value '{value}' for option {key}"));
            match key {
                "publication" => options.publication = identifier(key, &value)?,
                "slot" => options.slot = identifier(key, &value)?,
                "tables" => {
                    let tables: Vec<String> = value.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
                    if tables.is_empty() {
                        return Err(PgSourceError::Config("tables= names no table (leave it out to mirror every table with an identity)".into()));
                    }
                    for table in &tables {
                        let (schema, name) = table.split_once('.').unwrap_or(("public", table));
                        identifier("tables", schema)?;
                        identifier("tables", name)?;
                    }
                    options.tables = Some(tables);
                }
                "protocol" => options.protocol_version = matches!(value.as_str(), "1" | "2").then(|| value.as_bytes()[0] - b'0').ok_or_else(bad)?,
                // Each worker is a session at the source: a bound keeps its connections in reason.
                "copy_workers" => {
                    options.copy_workers = value.parse().ok().filter(|n| (1..=MAX_COPY_WORKERS).contains(n)).ok_or_else(|| {
                        PgSourceError::Config(format!("bad value '{value}' for option copy_workers (1 to {MAX_COPY_WORKERS})"))
                    })?
                }
                "unsupported_types" => options.unsupported_types_as_text = match value.as_str() {
                    "error" => false,
                    "text" => true,
                    _ => return Err(bad()),
                },
                "no_identity" => options.insert_only_without_identity = match value.as_str() {
                    "error" => false,
                    "insert_only" => true,
                    _ => return Err(bad()),
                },
                "application_name" => options.connect.application_name = value,
                "slot_wait" => options.slot_wait = Duration::from_secs(value.parse().map_err(|_| bad())?),
                "max_reconnects" => {
                    options.reconnect.max_attempts = match value.as_str() {
                        "unlimited" => None,
                        number => Some(number.parse().map_err(|_| bad())?),
                    }
                }
                "on_table_error" => options.pause_failing_tables = match value.as_str() {
                    "pause" => true,
                    "stop" => false,
                    _ => return Err(bad()),
                },
                "resync" => {
                    options.resync = value
                        .split(',')
                        .map(str::trim)
                        .filter(|table| !table.is_empty())
                        .map(|table| if table.contains('.') { table.to_string() } else { format!("public.{table}") })
                        .collect();
                }
                "sslmode" => security.sslmode = Some(value),
                "sslrootcert" => security.sslrootcert = Some(value),
                "sslcert" => security.sslcert = Some(PathBuf::from(value)),
                "sslkey" => security.sslkey = Some(PathBuf::from(value)),
                "password_file" => security.password_file = Some(PathBuf::from(value)),
                _ => return Err(PgSourceError::Config(format!("unknown option '{key}' (known: publication, slot, tables, protocol, copy_workers, unsupported_types, no_identity, slot_wait, application_name, max_reconnects, on_table_error, resync, sslmode, sslrootcert, sslcert, sslkey, password_file)"))),
            }
        }
        security.apply(&mut options.connect, environment)?;
        if options.insert_only_without_identity && options.publication.len() + "_inserts".len() > 63 {
            return Err(PgSourceError::Config(format!(
                "publication='{}': with no_identity=insert_only the name must leave room for the suffix _inserts (at most 55 characters)",
                options.publication
            )));
        }
        Ok(options)
    }

    /// The name positions are recorded under: the URI without its password.
    pub fn source_name(&self) -> String {
        let c = &self.connect;
        format!("postgres://{}@{}:{}/{}?slot={}", c.user, c.host, c.port, c.database, self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_uri() {
        let options = PgSourceOptions::parse(
            "postgres://rep%40x:p%3Ass@db.local:6543/shop?publication=pub1&slot=s1&tables=public.a,b&protocol=1&copy_workers=4&unsupported_types=text&no_identity=insert_only",
        )
        .expect("parse");
        assert_eq!(options.connect.user, "rep@x");
        assert_eq!(options.connect.password.as_deref(), Some("p:ss"));
        assert_eq!((options.connect.host.as_str(), options.connect.port, options.connect.database.as_str()), ("db.local", 6543, "shop"));
        assert_eq!((options.publication.as_str(), options.slot.as_str()), ("pub1", "s1"));
        assert_eq!(options.tables, Some(vec!["public.a".to_string(), "b".to_string()]));
        assert_eq!((options.protocol_version, options.copy_workers), (1, 4));
        assert!(options.unsupported_types_as_text && options.insert_only_without_identity);
        assert_eq!(options.source_name(), "postgres://rep@x@db.local:6543/shop?slot=s1", "no password in the name");
    }

    #[test]
    fn defaults_and_errors() {
        let options = PgSourceOptions::parse("postgres://127.0.0.1").expect("parse");
        assert_eq!((options.connect.user.as_str(), options.connect.port, options.connect.database.as_str()), ("postgres", 5432, "postgres"));
        assert_eq!((options.publication.as_str(), options.slot.as_str(), options.protocol_version), ("retina", "retina_slot", 2));
        for (uri, needle) in [
            ("mysql://x", "does not start"),
            ("postgres://h:99999/db", "bad port"),
            ("postgres:///db", "no host"),
            ("postgres://h/db?slot=Bad-Name", "slot='Bad-Name'"),
            ("postgres://h/db?protocol=3", "protocol"),
            ("postgres://h/db?colour=red", "unknown option 'colour'"),
            ("postgres://h/db?tables=x;drop", "tables="),
            ("postgres://h/db?sslmode=verify_full", "sslmode"),
            ("postgres://h/db?sslcert=/c.pem", "sslcert and sslkey"),
            ("postgres://h/db?password_file=/no/such/file", "password_file=/no/such/file"),
            ("postgres://h/db?password_file=/dev/zero", "not a regular file"),
            ("postgres://[::1/db", "no closing ']'"),
            ("postgres://h/db?tables=", "names no table"),
            ("postgres://h/db?copy_workers=99999999", "1 to 64"),
            ("postgres://[::1]x/db", "bad port"),
        ] {
            let error = PgSourceOptions::parse_with(uri, &Environment::default()).expect_err(uri).to_string();
            assert!(error.contains(needle), "{uri}: {error}");
        }
    }

    #[test]
    fn security_options_and_their_environment_fallbacks() {
        let options = PgSourceOptions::parse_with(
            "postgres://rep@h/db?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/c.pem&sslkey=/k.pem",
            &Environment::default(),
        )
        .expect("parse");
        let tls = &options.connect.tls;
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_certificates, Some(RootCertificates::File("/ca.pem".into())));
        assert_eq!(tls.client_certificate, Some(("/c.pem".into(), "/k.pem".into())));
        assert_eq!(options.connect.password, None);

        let environment = Environment {
            password: Some("from-env".into()),
            sslmode: Some("require".into()),
            sslrootcert: Some("system".into()),
            ..Environment::default()
        };
        let options = PgSourceOptions::parse_with("postgres://rep@h/db", &environment).expect("parse");
        assert_eq!(options.connect.tls.mode, SslMode::Require);
        assert_eq!(options.connect.tls.root_certificates, Some(RootCertificates::System));
        assert_eq!(options.connect.password.as_deref(), Some("from-env"));
        let options = PgSourceOptions::parse_with("postgres://rep:inline@h/db?sslmode=disable", &environment).expect("parse");
        assert_eq!(options.connect.password.as_deref(), Some("inline"), "the URI's password wins");
        assert_eq!(options.connect.tls.mode, SslMode::Disable, "the URI's sslmode wins");
        let default = PgSourceOptions::parse_with("postgres://h/db", &Environment::default()).expect("parse");
        assert_eq!(default.connect.tls.mode, SslMode::Prefer);
    }

    #[test]
    fn ipv6_hosts_come_in_brackets_and_a_bad_password_escape_is_not_echoed() {
        let environment = Environment::default();
        let options = PgSourceOptions::parse_with("postgres://u@[::1]:6543/db", &environment).expect("ipv6 with a port");
        assert_eq!((options.connect.host.as_str(), options.connect.port), ("::1", 6543));
        let options = PgSourceOptions::parse_with("postgres://u@[::1]/db", &environment).expect("ipv6 alone");
        assert_eq!((options.connect.host.as_str(), options.connect.port), ("::1", 5432));
        for uri in ["postgres://u:S3cretPw%zz@h/db", "postgres://u:S3cretPw%ff@h/db", "postgres://u:S3cretPw%@h/db"] {
            let error = PgSourceOptions::parse_with(uri, &environment).expect_err(uri).to_string();
            assert!(!error.contains("S3cret") && error.contains("password"), "{error}");
        }
    }
}
