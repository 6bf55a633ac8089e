//! [`Figures`] in the Prometheus text exposition format (version 0.0.4).

use std::fmt::Write;

use retina_query::Figures;

/// Renders every figure: the scalar metrics, the query latency histogram, and one
/// labelled series per source.
pub fn render(figures: &Figures) -> String {
    let mut out = String::with_capacity(4096);
    for metric in figures.metrics() {
        let _ = writeln!(out, "# HELP {} {}", metric.name, metric.help);
        let _ = writeln!(out, "# TYPE {} {}", metric.name, metric.kind);
        let _ = writeln!(out, "{} {}", metric.name, number(metric.value));
    }
    let q = &figures.queries;
    out.push_str("# HELP retina_query_latency_seconds Wall-clock latency of finished SQL queries\n");
    out.push_str("# TYPE retina_query_latency_seconds histogram\n");
    for (bound, count) in &q.cumulative_buckets {
        let _ = writeln!(out, "retina_query_latency_seconds_bucket{{le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "retina_query_latency_seconds_bucket{{le=\"+Inf\"}} {}", q.finished);
    let _ = writeln!(out, "retina_query_latency_seconds_sum {}", number(q.latency_seconds_total));
    let _ = writeln!(out, "retina_query_latency_seconds_count {}", q.finished);
    render_sources(&mut out, &figures.sources);
    out
}

/// The per-source series (transactions, lag, failure, reconnecting, paused tables).
fn render_sources(out: &mut String, sources: &[retina_core::SourceStatus]) {
    if sources.is_empty() {
        return;
    }
    out.push_str("# HELP retina_source_transactions_total Transactions submitted per source\n");
    out.push_str("# TYPE retina_source_transactions_total counter\n");
    for s in sources {
        let _ = writeln!(out, "retina_source_transactions_total{{source=\"{}\"}} {}", label(&s.name), s.transactions);
    }
    out.push_str("# HELP retina_source_row_changes_total Row changes submitted per source\n");
    out.push_str("# TYPE retina_source_row_changes_total counter\n");
    for s in sources {
        let _ = writeln!(out, "retina_source_row_changes_total{{source=\"{}\"}} {}", label(&s.name), s.row_changes);
    }
    out.push_str("# HELP retina_source_lag_transactions Transactions the sink is behind its source\n");
    out.push_str("# TYPE retina_source_lag_transactions gauge\n");
    for s in sources.iter().filter(|s| s.lag_transactions.is_some()) {
        let lag = s.lag_transactions.unwrap_or(0);
        let _ = writeln!(out, "retina_source_lag_transactions{{source=\"{}\"}} {lag}", label(&s.name));
    }
    for (metric, help, value) in [
        ("retina_source_lag_bytes", "Bytes of source log (PostgreSQL WAL) not applied yet", (|s: &retina_query::SourceStatus| s.lag_bytes) as fn(&retina_query::SourceStatus) -> Option<u64>),
        ("retina_source_lag_milliseconds", "Milliseconds since the newest applied source transaction committed, while behind", |s| s.lag_millis),
        ("retina_source_held_transactions", "Transactions held while their pieces arrive (Kafka reassembly)", |s| s.held_transactions),
        ("retina_source_held_bytes", "Bytes of the transactions held while their pieces arrive", |s| s.held_bytes),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for s in sources {
            if let Some(lag) = value(s) {
                let _ = writeln!(out, "{metric}{{source=\"{}\"}} {lag}", label(&s.name));
            }
        }
    }
    for (metric, help, value) in [
        ("retina_source_partition_lag_messages", "Records of a partition (Kafka) not applied yet", (|p: &retina_core::PartitionLag| p.lag_messages) as fn(&retina_core::PartitionLag) -> u64),
        ("retina_source_partition_lag_milliseconds", "Age of the newest record read from a lagging partition", |p| p.lag_millis),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} gauge");
        for s in sources {
            for p in &s.partitions {
                let _ = writeln!(
                    out,
                    "{metric}{{source=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
                    label(&s.name),
                    label(&p.topic),
                    p.partition,
                    value(p)
                );
            }
        }
    }
    out.push_str("# HELP retina_source_failed 1 if the source stopped with an error\n");
    out.push_str("# TYPE retina_source_failed gauge\n");
    for s in sources {
        let failed = u8::from(s.state == "failed");
        let _ = writeln!(out, "retina_source_failed{{source=\"{}\"}} {failed}", label(&s.name));
    }
    out.push_str("# HELP retina_source_reconnecting 1 while the source waits to resume after a lost connection\n");
    out.push_str("# TYPE retina_source_reconnecting gauge\n");
    for s in sources {
        let reconnecting = u8::from(s.state == "reconnecting");
        let _ = writeln!(out, "retina_source_reconnecting{{source=\"{}\"}} {reconnecting}", label(&s.name));
    }
    out.push_str("# HELP retina_source_table_paused 1 for each table a source paused after an error of the table's own\n");
    out.push_str("# TYPE retina_source_table_paused gauge\n");
    for s in sources {
        for table in &s.paused_tables {
            let _ = writeln!(out, "retina_source_table_paused{{source=\"{}\",table=\"{}\"}} 1", label(&s.name), label(table));
        }
    }
}

/// Prometheus accepts Go float syntax; integers print without a fraction.
fn number(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else if value.is_nan() {
        "NaN".into()
    } else {
        format!("{value}")
    }
}

/// Escapes a label value (backslash, quote, newline).
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_show_failure_reconnecting_and_paused_tables() {
        let mut paused = retina_core::SourceStatus::new("pg", "postgres://db");
        paused.state = "streaming".into();
        paused.paused_tables = vec!["public.bad".into()];
        let mut lost = retina_core::SourceStatus::new("pg2", "postgres://db2");
        lost.state = "reconnecting".into();
        let mut out = String::new();
        render_sources(&mut out, &[paused, lost]);
        for line in [
            "retina_source_failed{source=\"pg\"} 0",
            "retina_source_reconnecting{source=\"pg\"} 0",
            "retina_source_reconnecting{source=\"pg2\"} 1",
            "retina_source_table_paused{source=\"pg\",table=\"public.bad\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing in:\n{out}");
        }
        assert!(!out.contains("table_paused{source=\"pg2\""), "{out}");
    }

    #[test]
    fn numbers_and_labels_are_valid_exposition_text() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
