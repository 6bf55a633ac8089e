//! `kafka://BROKER[,BROKER…]/TOPIC_PREFIX?…`: what a Kafka source URI says.
//!
//! Options: `topics=A,B` (full topic names) or `topic_regex=RE` (default: every topic
//! named `<prefix>.…` but the transaction topic); `transaction_topic=NAME` (default
//! `<prefix>.transaction`; absent on the broker = no transaction metadata);
//! `tls=true`, `tls_ca=PATH`;
//! `sasl_mechanism=PLAIN|SCRAM-SHA-256|SCRAM-SHA-512`, `sasl_username=`,
//! `sasl_password=`; `group=NAME` (the consumer group the applied offsets are
//! committed to for lag tools, default `retina-<prefix>`), `commit_offsets=false`
//! (commit none); `fetch_wait_ms=` (how long a fetch waits on the broker for new
//! records, default 100: Kafka answers as soon as one arrives, but a broker that
//! does not, like tansu 0.6, delays every record by up to this long);
//! `max_partition_fetch_bytes=` (the most one fetch asks of a partition, as Kafka's
//! consumer setting of that name; default 4 MiB);
//! `transaction_timeout_s=` (default 30); `memory_budget_mb=`
//! (default 256); `allow_retention_gap=true` (start where the broker's log now
//! starts when earlier records are gone); and `table=`, `on_absent_row=` as for any
//! source.

use std::path::PathBuf;
use std::time::Duration;

/// Which topics carry the change events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicSelection {
    /// Every topic whose name starts with `<prefix>.`.
    Prefixed,
    List(Vec<String>),
    Regex(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    /// The mechanism's name in the Kafka protocol (and in the URI).
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct Sasl {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password (URIs end up in logs and `retina.sources`).
        f.debug_struct("Sasl").field("mechanism", &self.mechanism).field("username", &self.username).finish_non_exhaustive()
    }
}

/// A parsed `kafka://` URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSpec {
    pub brokers: Vec<String>,
    pub prefix: String,
    pub topics: TopicSelection,
    pub transaction_topic: String,
    /// `Some` = TLS, with an extra CA certificate file when given.
    pub tls: Option<Option<PathBuf>>,
    pub sasl: Option<Sasl>,
    pub transaction_timeout: Duration,
    pub memory_budget: usize,
    pub allow_retention_gap: bool,
    /// The consumer group applied offsets are committed to (`None`: no commits).
    pub group: Option<String>,
    pub fetch_wait_ms: i32,
    pub max_partition_fetch_bytes: i32,
}

impl KafkaSpec {
    /// The table change events of `topic` belong to when they carry no `source`
    /// block: Debezium names topics `<prefix>.<schema or db>.<table>` (SQL Server
    /// `<prefix>.<db>.<schema>.<table>`), so the prefix is dropped and the last two
    /// names are the table, as a source block would name it.
    pub fn table_of(&self, topic: &str) -> String {
        let rest = topic.strip_prefix(&self.prefix).and_then(|r| r.strip_prefix('.')).filter(|r| !r.is_empty()).unwrap_or(topic);
        match rest.rmatch_indices('.').nth(1) {
            Some((dot, _)) => rest[dot + 1..].to_string(),
            None => rest.to_string(),
        }
    }

    /// Whether `topic` carries change events of this source.
    pub fn selects(&self, topic: &str, regex: Option<&regex::Regex>) -> bool {
        if topic == self.transaction_topic {
            return false;
        }
        match &self.topics {
            TopicSelection::Prefixed => topic.strip_prefix(&self.prefix).is_some_and(|rest| rest.starts_with('.') && rest.len() > 1),
            TopicSelection::List(list) => list.iter().any(|t| t == topic),
            TopicSelection::Regex(_) => regex.is_some_and(|re| re.is_match(topic)),
        }
    }
}

/// Parses what follows `kafka://`. `take_apply` is offered every option this module
/// does not know (`table=`, `on_absent_row=`) and says whether it took it.
pub fn parse(
    rest: &str,
    take_apply: &mut dyn FnMut(&str, &str) -> Result<bool, String>,
) -> Result<KafkaSpec, String> {
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (brokers, prefix) = location.split_once('/').ok_or("expected kafka://BROKER[,BROKER…]/TOPIC_PREFIX")?;
    let brokers: Vec<String> = brokers.split(',').filter(|b| !b.is_empty()).map(str::to_string).collect();
    if brokers.is_empty() || prefix.is_empty() || prefix.contains('/') {
        return Err("expected kafka://BROKER[,BROKER…]/TOPIC_PREFIX".into());
    }
    if let Some(bad) = brokers.iter().find(|b| !b.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())) {
        return Err(format!("broker {bad:?} is not HOST:PORT"));
    }
    let mut spec = KafkaSpec {
        brokers,
        prefix: prefix.to_string(),
        topics: TopicSelection::Prefixed,
        transaction_topic: format!("{prefix}.transaction"),
        tls: None,
        sasl: None,
        transaction_timeout: Duration::from_secs(30),
        memory_budget: 256 << 20,
        allow_retention_gap: false,
        group: Some(format!("retina-{prefix}")),
        fetch_wait_ms: 100,
        max_partition_fetch_bytes: 4 << 20,
    };
    let mut commit_offsets = true;
    let (mut mechanism, mut username, mut password) = (None, None, None);
    let mut tls_ca = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let non_empty = || if value.is_empty() { Err(format!("{key}= needs a value")) } else { Ok(value.to_string()) };
        match key {
            "topics" => spec.topics = TopicSelection::List(non_empty()?.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect()),
            "topic_regex" => {
                let pattern = non_empty()?;
                regex::Regex::new(&pattern).map_err(|e| format!("topic_regex: {e}"))?;
                spec.topics = TopicSelection::Regex(pattern);
            }
            "transaction_topic" => spec.transaction_topic = non_empty()?,
            "tls" => match value {
                "true" => spec.tls = Some(spec.tls.clone().flatten()),
                "false" => spec.tls = None,
                _ => return Err("tls must be true or false".into()),
            },
            "tls_ca" => tls_ca = Some(PathBuf::from(non_empty()?)),
            "sasl_mechanism" => {
                let known = [SaslMechanism::Plain, SaslMechanism::ScramSha256, SaslMechanism::ScramSha512];
                let found = known.into_iter().find(|m| m.name() == value);
                mechanism = Some(found.ok_or("sasl_mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")?);
            }
            "group" => spec.group = Some(non_empty()?),
            "fetch_wait_ms" => {
                let wait = value.parse::<i32>().ok().filter(|ms| (0..=60_000).contains(ms));
                spec.fetch_wait_ms = wait.ok_or("fetch_wait_ms must be a whole number of milliseconds from 0 to 60000")?;
            }
            "max_partition_fetch_bytes" => {
                let bytes = value.parse::<i32>().ok().filter(|b| (1024..=256 << 20).contains(b));
                spec.max_partition_fetch_bytes = bytes.ok_or("max_partition_fetch_bytes must be a whole number of bytes from 1024 to 268435456")?;
            }
            "commit_offsets" => commit_offsets = value.parse().map_err(|_| "commit_offsets must be true or false")?,
            "sasl_username" => username = Some(non_empty()?),
            "sasl_password" => password = Some(value.to_string()),
            "transaction_timeout_s" => {
                let seconds = value.parse::<f64>().ok().filter(|s| *s > 0.0 && s.is_finite());
                spec.transaction_timeout = Duration::from_secs_f64(seconds.ok_or("transaction_timeout_s must be a positive number of seconds")?);
            }
            "memory_budget_mb" => {
                let megabytes = value.parse::<usize>().ok().filter(|m| *m > 0);
                spec.memory_budget = megabytes.ok_or("memory_budget_mb must be a positive whole number")? << 20;
            }
            "allow_retention_gap" => {
                spec.allow_retention_gap = value.parse().map_err(|_| "allow_retention_gap must be true or false")?;
            }
            other => {
                if !take_apply(other, value)? {
                    return Err(format!(
                        "unknown parameter {other:?} (known: topics, topic_regex, transaction_topic, tls, tls_ca, \
                         sasl_mechanism, sasl_username, sasl_password, group, commit_offsets, fetch_wait_ms, \
                         max_partition_fetch_bytes, transaction_timeout_s, memory_budget_mb, allow_retention_gap, table, on_absent_row)"
                    ));
                }
            }
        }
    }
    if !commit_offsets {
        spec.group = None;
    }
    if let Some(ca) = tls_ca {
        spec.tls = Some(Some(ca));
    }
    spec.sasl = match (mechanism, username, password) {
        (None, None, None) => None,
        (Some(mechanism), Some(username), Some(password)) => Some(Sasl { mechanism, username, password }),
        _ => return Err("SASL needs all of sasl_mechanism, sasl_username and sasl_password".into()),
    };
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_plain(rest: &str) -> Result<KafkaSpec, String> {
        parse(rest, &mut |_, _| Ok(false))
    }

    #[test]
    fn a_topic_names_its_table_as_a_source_block_would() {
        let spec = parse_plain("b:9092/srv").expect("spec");
        assert_eq!(spec.table_of("srv.inventory.orders"), "inventory.orders");
        assert_eq!(spec.table_of("srv.db.dbo.orders"), "dbo.orders", "SQL Server: schema.table");
        assert_eq!(spec.table_of("srv.orders"), "orders");
        assert_eq!(spec.table_of("other.shop.items"), "shop.items", "another prefix (topics= list)");
        assert_eq!(spec.table_of("items"), "items");
    }

    #[test]
    fn defaults_follow_debeziums_topic_names() {
        let spec = parse_plain("127.0.0.1:9092/dbserver1").unwrap();
        assert_eq!(spec.brokers, ["127.0.0.1:9092"]);
        assert_eq!(spec.transaction_topic, "dbserver1.transaction");
        assert!(spec.selects("dbserver1.public.stock", None));
        assert!(!spec.selects("dbserver1.transaction", None));
        assert!(!spec.selects("dbserver10.public.stock", None));
        assert!(!spec.selects("__debezium-heartbeat.dbserver1", None));
        assert_eq!(spec.group.as_deref(), Some("retina-dbserver1"));
    }

    #[test]
    fn every_option_parses() {
        let spec = parse_plain(
            "a:1,b:2/p?topics=p.s.x,p.s.y&transaction_topic=p.tx&tls_ca=/ca.pem&sasl_mechanism=SCRAM-SHA-512\
             &sasl_username=u&sasl_password=secret&transaction_timeout_s=2.5&memory_budget_mb=8&allow_retention_gap=true&group=lag-watch&fetch_wait_ms=5\
             &max_partition_fetch_bytes=1048576",
        )
        .unwrap();
        assert_eq!(spec.brokers, ["a:1", "b:2"]);
        assert_eq!(spec.topics, TopicSelection::List(vec!["p.s.x".into(), "p.s.y".into()]));
        assert_eq!(spec.transaction_topic, "p.tx");
        assert_eq!(spec.tls, Some(Some(PathBuf::from("/ca.pem"))));
        assert_eq!(spec.sasl.as_ref().map(|s| s.mechanism), Some(SaslMechanism::ScramSha512));
        assert!(!format!("{spec:?}").contains("secret"), "the password is never printed");
        assert_eq!(spec.transaction_timeout, Duration::from_millis(2500));
        assert_eq!(spec.memory_budget, 8 << 20);
        assert!(spec.allow_retention_gap);
        assert_eq!(spec.group.as_deref(), Some("lag-watch"));
        assert_eq!(spec.fetch_wait_ms, 5);
        assert_eq!(spec.max_partition_fetch_bytes, 1 << 20);
        assert_eq!(parse_plain("a:1/p?commit_offsets=false").unwrap().group, None);
        let regex = parse_plain("a:1/p?topic_regex=p\\.s\\.(x|z)").unwrap();
        let compiled = regex::Regex::new("p\\.s\\.(x|z)").unwrap();
        assert!(regex.selects("p.s.z", Some(&compiled)) && !regex.selects("p.s.y", Some(&compiled)));
    }

    #[test]
    fn bad_options_say_what_is_wrong() {
        for (bad, says) in [
            ("a:1", "expected kafka://"),
            ("a/p", "not HOST:PORT"),
            ("a:1/p?sasl_mechanism=PLAIN", "SASL needs"),
            ("a:1/p?sasl_mechanism=GSSAPI&sasl_username=u&sasl_password=p", "sasl_mechanism must be"),
            ("a:1/p?topic_regex=(", "topic_regex"),
            ("a:1/p?memory_budget_mb=0", "memory_budget_mb"),
            ("a:1/p?colour=red", "unknown parameter \"colour\""),
            ("a:1/p?group=", "group= needs a value"),
            ("a:1/p?commit_offsets=maybe", "commit_offsets must be"),
            ("a:1/p?fetch_wait_ms=-1", "fetch_wait_ms must be"),
            ("a:1/p?max_partition_fetch_bytes=512", "max_partition_fetch_bytes must be"),
        ] {
            let error = parse_plain(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
