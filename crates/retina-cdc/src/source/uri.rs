//! Source URIs (ARCHITECTURE.md §5): `file:PATH`, `-`, `nats://HOST:PORT/STREAM[?durable=NAME]`,
//! `kafka://BROKER[,BROKER…]/TOPIC_PREFIX[?…]` (options in [`super::kafka::options`]),
//! `generator:chbench?rate=ROWS_PER_S[&seconds=S][&base_rows=N][&seed=N]`. Public so the
//! server (`retina serve --source`) parses the same URIs.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{CdcError, CdcResult};
use crate::sink::{Grouping, OnAbsentRow, SinkOptions};
use super::kafka::options::KafkaSpec;

/// Options any source URI may carry that shape how its messages are applied, not how
/// they are read: `table=NAME` (the table of messages without a `source` block, as
/// `--table`) and `on_absent_row=error|upsert` (as `--on-absent-row`). For `file:`
/// they follow a `?` after the path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    pub table: Option<String>,
    pub on_absent_row: Option<OnAbsentRow>,
    /// Set by the source kind, not by an option: a Kafka source hands over whole
    /// transactions, and events without metadata are each their own (grouping them
    /// by source transaction id would split a transaction spread over topics).
    pub grouping: Option<Grouping>,
}

impl ApplyOptions {
    /// Sets what the URI says in `options` (a URI option wins over the default and
    /// over the same command-line flag: it is the more specific of the two).
    pub fn apply_to(&self, options: &mut SinkOptions) {
        if let Some(table) = &self.table {
            options.table = Some(table.clone());
        }
        if let Some(mode) = self.on_absent_row {
            options.on_absent_row = mode;
        }
        if let Some(grouping) = self.grouping {
            options.grouping = grouping;
        }
    }

    /// Takes `key=value` if it is one of these options; `Ok(false)` if it is not.
    fn take(&mut self, key: &str, value: &str, invalid: &dyn Fn(&str) -> CdcError) -> CdcResult<bool> {
        match key {
            "table" if !value.is_empty() => self.table = Some(value.to_string()),
            "table" => return Err(invalid("table= needs a table name")),
            "on_absent_row" => {
                self.on_absent_row = Some(value.parse().map_err(|_| invalid("on_absent_row must be error or upsert"))?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A parsed source URI.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceSpec {
    File(PathBuf),
    Stdin,
    Nats { server: String, stream: String, durable: String },
    Kafka(Box<KafkaSpec>),
    Generator(GeneratorSpec),
}

/// `generator:chbench?...`.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorSpec {
    /// Row changes per second; `None` = as fast as possible.
    pub rate: Option<u64>,
    /// Stop after this long (`None` = run until the caller stops).
    pub duration: Option<Duration>,
    /// Stop after this many row changes.
    pub changes: Option<u64>,
    pub base_rows: u64,
    pub seed: u64,
}

impl Default for GeneratorSpec {
    fn default() -> Self {
        Self { rate: None, duration: None, changes: None, base_rows: 100_000, seed: 42 }
    }
}

pub fn parse_source_uri(uri: &str) -> CdcResult<SourceSpec> {
    parse_source_uri_with_options(uri).map(|(spec, _)| spec)
}

/// [`parse_source_uri`] with the URI's [`ApplyOptions`].
pub fn parse_source_uri_with_options(uri: &str) -> CdcResult<(SourceSpec, ApplyOptions)> {
    let invalid = |reason: &str| CdcError::InvalidUri { uri: redacted(uri), reason: reason.to_string() };
    let mut apply = ApplyOptions::default();
    if uri == "-" {
        return Ok((SourceSpec::Stdin, apply));
    }
    if let Some(path) = uri.strip_prefix("file:") {
        let mut path = path.strip_prefix("//").unwrap_or(path);
        // `?table=..&on_absent_row=..` after the path; a `?` followed by anything else
        // is part of the file name.
        if let Some((file, query)) = path.rsplit_once('?') {
            let mut options = ApplyOptions::default();
            let mut all_known = !query.is_empty();
            for (key, value) in query_pairs(query) {
                all_known &= options.take(key, value, &invalid)?;
            }
            if all_known {
                (path, apply) = (file, options);
            }
        }
        if path.is_empty() {
            return Err(invalid("file: needs a path"));
        }
        return Ok((SourceSpec::File(PathBuf::from(path)), apply));
    }
    if let Some(rest) = uri.strip_prefix("nats://") {
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (server, stream) = location.split_once('/').ok_or_else(|| invalid("expected nats://HOST:PORT/STREAM"))?;
        if server.is_empty() || stream.is_empty() || stream.contains('/') {
            return Err(invalid("expected nats://HOST:PORT/STREAM"));
        }
        let mut durable = "retina".to_string();
        for (key, value) in query_pairs(query) {
            match key {
                "durable" if !value.is_empty() => durable = value.to_string(),
                other if apply.take(other, value, &invalid)? => {}
                other => return Err(invalid(&format!("unknown parameter {other:?} (known: durable, table, on_absent_row)"))),
            }
        }
        return Ok((SourceSpec::Nats { server: server.to_string(), stream: stream.to_string(), durable }, apply));
    }
    if let Some(rest) = uri.strip_prefix("kafka://") {
        let mut take = |key: &str, value: &str| apply.take(key, value, &invalid).map_err(|e| e.to_string());
        let spec = super::kafka::options::parse(rest, &mut take).map_err(|reason| invalid(&reason))?;
        apply.grouping = Some(Grouping::PerEvent);
        return Ok((SourceSpec::Kafka(Box::new(spec)), apply));
    }
    if let Some(rest) = uri.strip_prefix("generator:") {
        let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
        if name != "chbench" {
            return Err(invalid("the only generator is chbench"));
        }
        let mut spec = GeneratorSpec::default();
        for (key, value) in query_pairs(query) {
            let number = || value.parse::<u64>().map_err(|_| invalid(&format!("{key}={value:?} is not a whole number")));
            match key {
                "rate" => spec.rate = Some(number()?).filter(|r| *r > 0),
                "seconds" => {
                    let seconds = value.parse::<f64>().ok().filter(|s| *s > 0.0 && s.is_finite());
                    spec.duration = Some(Duration::from_secs_f64(seconds.ok_or_else(|| invalid("seconds must be positive"))?));
                }
                "changes" => spec.changes = Some(number()?),
                "base_rows" => spec.base_rows = number()?,
                "seed" => spec.seed = number()?,
                "on_absent_row" if apply.take(key, value, &invalid)? => {}
                other => return Err(invalid(&format!("unknown parameter {other:?} (known: rate, seconds, changes, base_rows, seed)"))),
            }
        }
        return Ok((SourceSpec::Generator(spec), apply));
    }
    Err(invalid("expected file:PATH, -, nats://HOST:PORT/STREAM, kafka://BROKER/TOPIC_PREFIX or generator:chbench?rate=N"))
}

/// `uri` with its secrets (a URL's password, `sasl_password=`, tokens) replaced by
/// `***`: the name positions are recorded under and `retina.sources` shows, so a
/// password never reaches a data dir, a log or a query result. The one redaction
/// every command uses: [`retina_core::redact`].
pub fn redacted(uri: &str) -> String {
    retina_core::redact::redacted(uri)
}

fn query_pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme() {
        assert_eq!(parse_source_uri("-").ok(), Some(SourceSpec::Stdin));
        assert_eq!(parse_source_uri("file:/tmp/x.jsonl").ok(), Some(SourceSpec::File("/tmp/x.jsonl".into())));
        assert_eq!(
            parse_source_uri("nats://127.0.0.1:4222/cdc?durable=d1").ok(),
            Some(SourceSpec::Nats { server: "127.0.0.1:4222".into(), stream: "cdc".into(), durable: "d1".into() })
        );
        match parse_source_uri("generator:chbench?rate=1000&seconds=2.5&seed=3").expect("generator") {
            SourceSpec::Generator(spec) => {
                assert_eq!(spec.rate, Some(1000));
                assert_eq!(spec.duration, Some(Duration::from_millis(2500)));
                assert_eq!(spec.seed, 3);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn apply_options_ride_on_any_uri() {
        let (spec, apply) = parse_source_uri_with_options("file:/tmp/x.jsonl?table=shop.items&on_absent_row=upsert").expect("file");
        assert_eq!(spec, SourceSpec::File("/tmp/x.jsonl".into()));
        assert_eq!(apply, ApplyOptions { table: Some("shop.items".into()), on_absent_row: Some(OnAbsentRow::Upsert), grouping: None });
        let mut options = SinkOptions::default();
        apply.apply_to(&mut options);
        assert_eq!((options.table.as_deref(), options.on_absent_row), (Some("shop.items"), OnAbsentRow::Upsert));
        // A `?` that starts no known option is part of the file name.
        assert_eq!(parse_source_uri("file:/tmp/what?.jsonl").ok(), Some(SourceSpec::File("/tmp/what?.jsonl".into())));
        let (spec, apply) = parse_source_uri_with_options("nats://h:4222/cdc?on_absent_row=error&durable=d").expect("nats");
        assert_eq!(spec, SourceSpec::Nats { server: "h:4222".into(), stream: "cdc".into(), durable: "d".into() });
        assert_eq!(apply.on_absent_row, Some(OnAbsentRow::Error));
        let (_, apply) = parse_source_uri_with_options("generator:chbench?rate=5&on_absent_row=upsert").expect("generator");
        assert_eq!(apply.on_absent_row, Some(OnAbsentRow::Upsert));
        let (spec, apply) = parse_source_uri_with_options("kafka://127.0.0.1:9092/srv?on_absent_row=upsert&table=x").expect("kafka");
        assert!(matches!(spec, SourceSpec::Kafka(kafka) if kafka.transaction_topic == "srv.transaction"));
        assert_eq!(apply, ApplyOptions { table: Some("x".into()), on_absent_row: Some(OnAbsentRow::Upsert), grouping: Some(Grouping::PerEvent) });
        for bad in ["file:/tmp/x?on_absent_row=skip", "nats://h:1/s?table=", "nats://h:1/s?on_absent_row=maybe"] {
            let error = parse_source_uri(bad).expect_err(bad).to_string();
            assert!(error.contains(bad) && (error.contains("on_absent_row") || error.contains("table")), "{error}");
        }
    }

    #[test]
    fn passwords_are_redacted_from_names() {
        assert_eq!(
            redacted("kafka://h:1/p?sasl_username=u&sasl_password=s3cret&tls=true"),
            "kafka://h:1/p?sasl_username=u&sasl_password=***&tls=true"
        );
        assert_eq!(redacted("file:/x.jsonl"), "file:/x.jsonl");
    }

    #[test]
    fn rejects_bad_uris_with_a_reason() {
        for bad in ["file:", "nats://host", "nats://h:1/", "generator:tpch", "generator:chbench?rate=x", "kafka://x", "nats://h:1/s?x=1", "kafka://h:1/p?x=1", "kafka://h:1/p?on_absent_row=maybe"] {
            let error = parse_source_uri(bad).expect_err(bad).to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}
