//! Analysis corpus: real-looking pipeline SQL and the accesses we must find.

use super::*;

fn analyzer(dialect: SqlDialect) -> Analyzer {
    let mut c = TableCatalog::new();
    c.declare("staging.raw_events", &["event_date".to_string()]);
    c.declare("mart.sales", &["region".to_string(), "day".to_string()]);
    c.declare("logs", &["dt".to_string()]);
    Analyzer::new(dialect, c)
}

/// Accesses rendered as `MODE table {col=[v..];..}` strings, sorted.
fn run(dialect: SqlDialect, sql: &str) -> Vec<String> {
    let mut out: Vec<String> = analyzer(dialect)
        .analyze_raw("t", sql)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|a| {
            let parts: Vec<String> = a.constraint.iter().map(|(c, v)| format!("{c}={}", v.iter().cloned().collect::<Vec<_>>().join("|"))).collect();
            format!("{} {} {{{}}}", a.mode, a.table, parts.join(";"))
        })
        .collect();
    out.sort();
    out
}

fn db(sql: &str) -> Vec<String> {
    run(SqlDialect::Databricks, sql)
}

#[test]
fn paper_cleanup_and_update_status() {
    assert_eq!(
        db("DELETE FROM staging.raw_events WHERE status = 'processed' AND event_date = '2025-01-15'"),
        vec!["DELETE staging.raw_events {event_date=2025-01-15}"]
    );
    assert_eq!(
        db("UPDATE staging.raw_events SET status = 'reported' WHERE event_date = '2025-01-15' AND status = 'processed'"),
        vec!["UPDATE staging.raw_events {event_date=2025-01-15}"]
    );
}

#[test]
fn merge_with_partition_literals_and_subquery_source() {
    let sql = "MERGE INTO mart.sales AS t
               USING (SELECT * FROM staging.raw_events e WHERE e.event_date = '2025-01-15') AS s
               ON t.region = 'eu' AND t.day IN ('2025-01-15', '2025-01-16') AND t.id = s.id
               WHEN MATCHED THEN UPDATE SET t.amount = s.amount
               WHEN NOT MATCHED THEN INSERT (id, amount) VALUES (s.id, s.amount)";
    assert_eq!(
        db(sql),
        vec![
            "MERGE mart.sales {day=2025-01-15|2025-01-16;region=eu}",
            "READ staging.raw_events {event_date=2025-01-15}",
        ]
    );
    // A bare column in ON may be the source's: not a proof.
    assert_eq!(
        db("MERGE INTO mart.sales t USING src s ON region = 'eu' AND t.id = s.id WHEN MATCHED THEN DELETE"),
        vec!["MERGE mart.sales {}", "READ src {}"]
    );
}

#[test]
fn insert_overwrite_partition() {
    assert_eq!(
        run(SqlDialect::Hive, "INSERT OVERWRITE TABLE mart.sales PARTITION (region = 'eu', day) SELECT id, amount, day FROM staging.raw_events"),
        vec!["OVERWRITE mart.sales {region=eu}", "READ staging.raw_events {}"]
    );
    assert_eq!(
        db("INSERT OVERWRITE TABLE logs PARTITION (dt = '2025-01-01') SELECT * FROM staging.raw_events WHERE event_date = '2025-01-01'"),
        vec!["OVERWRITE logs {dt=2025-01-01}", "READ staging.raw_events {event_date=2025-01-01}"]
    );
}

#[test]
fn replace_where_overwrites_what_its_predicate_matches() {
    assert_eq!(
        db("INSERT INTO logs REPLACE WHERE dt = '2025-01-01' SELECT * FROM staging.raw_events WHERE event_date = '2025-01-01'"),
        vec!["OVERWRITE logs {dt=2025-01-01}", "READ staging.raw_events {event_date=2025-01-01}"]
    );
    // Not provable from the predicate: the whole table, as for DELETE.
    assert_eq!(db("INSERT INTO logs REPLACE WHERE dt > '2025-01-01' SELECT * FROM staging.raw_events"), vec!["OVERWRITE logs {}", "READ staging.raw_events {}"]);
    // Reads in the predicate count too.
    assert_eq!(
        db("INSERT INTO logs REPLACE WHERE dt IN (SELECT d FROM audit.days) VALUES (1)"),
        vec!["OVERWRITE logs {}", "READ audit.days {}"]
    );
}

#[test]
fn blind_append_vs_self_reading_insert() {
    assert_eq!(db("INSERT INTO logs SELECT * FROM staging.raw_events"), vec!["INSERT logs {}", "READ staging.raw_events {}"]);
    // Reads its own target: not blind, analysed as MERGE. Without a PARTITION
    // clause the append may land anywhere, so the MERGE covers the whole table.
    assert_eq!(
        db("INSERT INTO logs SELECT * FROM logs WHERE dt = '2025-01-01'"),
        vec!["MERGE logs {}", "READ logs {dt=2025-01-01}"]
    );
    assert_eq!(
        db("INSERT INTO logs PARTITION (dt = '2025-01-02') SELECT a FROM logs WHERE dt = '2025-01-01'"),
        vec!["MERGE logs {dt=2025-01-01|2025-01-02}", "READ logs {dt=2025-01-01}"]
    );
    assert_eq!(db("INSERT INTO logs VALUES (1, 2)"), vec!["INSERT logs {}"]);
}

#[test]
fn ctes_and_nested_subqueries() {
    let sql = "WITH recent AS (SELECT * FROM staging.raw_events WHERE event_date IN ('2025-01-14', '2025-01-15')),
                    totals AS (SELECT device, count(*) c FROM recent GROUP BY device)
               SELECT * FROM totals t JOIN dim.devices d ON t.device = d.id
               WHERE EXISTS (SELECT 1 FROM audit.flags f WHERE f.id = d.id AND f.x IN (SELECT y FROM audit.more))";
    assert_eq!(
        db(sql),
        vec![
            "READ audit.flags {}",
            "READ audit.more {}",
            "READ dim.devices {}",
            "READ staging.raw_events {event_date=2025-01-14|2025-01-15}",
        ]
    );
    // A CTE that shadows nothing is not a table; a qualified name always is.
    assert_eq!(db("WITH logs AS (SELECT 1) SELECT * FROM logs, x.logs"), vec!["READ x.logs {}"]);
}

#[test]
fn quoted_qualified_and_case_insensitive_names() {
    assert_eq!(
        db("delete from `Staging`.`RAW_EVENTS` where `Event_Date` = '2025-01-15'"),
        vec!["DELETE staging.raw_events {event_date=2025-01-15}"]
    );
    assert_eq!(
        run(SqlDialect::Generic, "UPDATE \"Staging\".\"Raw_Events\" e SET status = 1 WHERE E.EVENT_DATE = '2025-01-15'"),
        vec!["UPDATE staging.raw_events {event_date=2025-01-15}"]
    );
    assert_eq!(db("SeLeCt * FrOm main.staging.raw_events WHERE event_date = '1'"), vec!["READ main.staging.raw_events {event_date=1}"]);
}

#[test]
fn unprovable_predicates_fall_back_to_whole_table() {
    for sql in [
        "DELETE FROM staging.raw_events WHERE event_date > '2025-01-01'",
        "DELETE FROM staging.raw_events WHERE event_date = '2025-01-01' OR status = 'x'",
        "DELETE FROM staging.raw_events WHERE date_trunc('day', event_date) = '2025-01-01'",
        "DELETE FROM staging.raw_events WHERE event_date NOT IN ('a')",
        "DELETE FROM staging.raw_events WHERE event_date = (SELECT max(d) FROM x)",
    ] {
        assert_eq!(db(sql)[0], "DELETE staging.raw_events {}", "{sql}");
    }
}

#[test]
fn update_from_join_and_delete_using() {
    assert_eq!(
        run(SqlDialect::Generic, "UPDATE mart.sales s SET amount = o.amount FROM staging.raw_events o WHERE s.region = 'eu' AND s.id = o.id"),
        vec!["READ staging.raw_events {}", "UPDATE mart.sales {region=eu}"]
    );
    assert_eq!(
        run(SqlDialect::Generic, "DELETE FROM logs USING staging.raw_events r WHERE logs.dt = '1' AND logs.id = r.id"),
        vec!["DELETE logs {dt=1}", "READ staging.raw_events {}"]
    );
}

#[test]
fn ddl_and_other_statements() {
    assert_eq!(db("CREATE TABLE mart.new AS SELECT * FROM logs"), vec!["DDL mart.new {}", "READ logs {}"]);
    assert_eq!(db("ALTER TABLE logs ADD COLUMN c INT"), vec!["DDL logs {}"]);
    assert_eq!(db("DROP TABLE IF EXISTS logs"), vec!["DDL logs {}"]);
    assert_eq!(db("TRUNCATE TABLE logs"), vec!["DELETE logs {}"]);
    assert_eq!(db("SET spark.sql.shuffle.partitions = 8; USE staging"), Vec::<String>::new());
    assert_eq!(db("OPTIMIZE logs WHERE dt = '2025-01-01'"), vec!["OPTIMIZE logs {dt=2025-01-01}"]);
}

#[test]
fn multi_statement_tasks_accumulate() {
    assert_eq!(
        db("INSERT INTO logs SELECT * FROM a; DELETE FROM logs WHERE dt = '1'; SELECT * FROM a"),
        vec!["DELETE logs {dt=1}", "INSERT logs {}", "READ a {}"]
    );
}

#[test]
fn parse_errors_name_task_and_position() {
    let err = analyzer(SqlDialect::Databricks).analyze_raw("Clean_up", "DELETE FROM WHERE x = 1").expect_err("bad SQL");
    let msg = err.to_string();
    assert!(msg.contains("Clean_up") && msg.contains("Line: 1"), "{msg}");
}
