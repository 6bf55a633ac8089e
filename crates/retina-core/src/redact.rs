//! Secrets out of everything Retina prints: one way to show a source URI or a data
//! location, used by every message, status view and error that names one.
//!
//! Hidden: the password of a URL's userinfo (`postgres://u:pw@h` → `postgres://u:***@h`,
//! `nats://u:pw@h`, an S3 endpoint's), and the value of every query option whose name
//! says it may be a credential (`password`, `sasl_password`, `secret`, `token`, any
//! `*key*`, `signature`, `credential`), also inside a nested URL option
//! (`?endpoint=http://u:pw@host`). Written by hand rather than through `url`: it must
//! also hide secrets in text that is not a valid URL (a typo is exactly when an error
//! names the URI), and never fail.

use std::fmt;

/// A URI or location as it may be shown: secrets replaced by `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedactedUri(String);

impl RedactedUri {
    pub fn new(uri: &str) -> Self {
        let (base, query) = match uri.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (uri, None),
        };
        let mut shown = hide_userinfo_password(base);
        if let Some(query) = query {
            shown.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if is_secret_option(key) => format!("{key}=***"),
                    Some((key, value)) => format!("{key}={}", hide_userinfo_password(value)),
                    None => pair.to_string(),
                })
                .collect();
            shown.push_str(&pairs.join("&"));
        }
        Self(shown)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RedactedUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RedactedUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// `uri` as it may be shown (see [`RedactedUri`]).
pub fn redacted(uri: &str) -> String {
    RedactedUri::new(uri).0
}

/// Whether a query option's name says its value may be a credential.
pub fn is_secret_option(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["secret", "token", "key", "password", "passwd", "signature", "credential"].iter().any(|word| key.contains(word))
}

/// `scheme://user:password@host…` with the password hidden; anything else as it is.
fn hide_userinfo_password(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else { return text.to_string() };
    let authority_start = scheme_end + 3;
    let rest = &text[authority_start..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    // The last '@' ends the userinfo: a password may itself hold '@'.
    let Some(at) = authority.rfind('@') else { return text.to_string() };
    let userinfo = &authority[..at];
    let shown_userinfo = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => userinfo.to_string(),
    };
    format!("{}{shown_userinfo}{}", &text[..authority_start], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_keys_and_tokens_are_hidden_wherever_they_sit() {
        let cases = [
            ("postgres://u:pw@db:5432/app?sslmode=require", "postgres://u:***@db:5432/app?sslmode=require"),
            ("postgres://u:p@ss@db/app", "postgres://u:***@db/app"),
            ("postgres://u@db/app", "postgres://u@db/app"),
            ("nats://user:hunter2@127.0.0.1:4222/cdc", "nats://user:***@127.0.0.1:4222/cdc"),
            ("kafka://b:9092/p?sasl_username=u&sasl_password=s3cr3t", "kafka://b:9092/p?sasl_username=u&sasl_password=***"),
            ("s3://lake/x?aws_secret_access_key=A&access_key_id=B&region=r", "s3://lake/x?aws_secret_access_key=***&access_key_id=***&region=r"),
            ("s3://lake/x?endpoint=http://ak:sk@127.0.0.1:9000", "s3://lake/x?endpoint=http://ak:***@127.0.0.1:9000"),
            ("postgres://db/app?password=pw&token=t", "postgres://db/app?password=***&token=***"),
            ("file:/data/x.jsonl", "file:/data/x.jsonl"),
            ("/data/dir", "/data/dir"),
            ("not a url: a:b@c", "not a url: a:b@c"),
        ];
        for (uri, shown) in cases {
            assert_eq!(redacted(uri), shown, "{uri}");
            assert_eq!(RedactedUri::new(uri).to_string(), shown);
            assert_eq!(format!("{:?}", RedactedUri::new(uri)), format!("{shown:?}"));
        }
    }
}
