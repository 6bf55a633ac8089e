//! The publication never breaks the application and works without superuser rights:
//! a publication Retina creates lists only tables with an identity; a listed table
//! without one is refused before anything is created; a DBA's existing publication is
//! used as it is, its column list and row filter honoured by the copy and the stream.

mod mirror;
mod support;

use std::time::Duration;

use mirror::{eventually, mirrored_rows, open_engine, RunningSource};
use support::PgCluster;

fn published(cluster: &PgCluster) -> String {
    cluster.psql("SELECT string_agg(pubname || ':' || schemaname || '.' || tablename, ',' ORDER BY pubname, tablename) FROM pg_publication_tables")
}

#[test]
fn a_created_publication_leaves_out_tables_without_identity_and_the_application_keeps_working() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE orders (id int PRIMARY KEY, total int); INSERT INTO orders VALUES (1, 10);
         CREATE TABLE audit (at timestamptz, what text); INSERT INTO audit VALUES (now(), 'boot');
         CREATE TABLE keyed_full (id int PRIMARY KEY, v text); ALTER TABLE keyed_full REPLICA IDENTITY FULL",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    assert_eq!(published(&cluster), "retina:public.keyed_full,retina:public.orders");
    assert_eq!(cluster.psql("SELECT puballtables FROM pg_publication WHERE pubname = 'retina'"), "f");
    assert_eq!(source.status.lock().left_out, ["public.audit"]);
    let mut shown = retina_core::SourceStatus::new("pg", "pg");
    source.status.lock().fill(&mut shown);
    assert!(shown.detail.as_deref().is_some_and(|d| d.contains("public.audit")), "{:?}", shown.detail);
    // The application's UPDATE and DELETE of the keyless table still work.
    cluster.psql("UPDATE audit SET what = 'started'; DELETE FROM audit; UPDATE orders SET total = 11 WHERE id = 1");
    eventually(Duration::from_secs(30), "the update arrives", || {
        let rows = mirrored_rows(&engine, "public.orders");
        (rows == ["1|11"]).then_some(()).ok_or(format!("{rows:?}"))
    });
    source.stop().expect("stops cleanly");
}

#[test]
fn a_listed_table_without_identity_is_refused_before_anything_is_created() {
    let cluster = PgCluster::new();
    cluster.psql("CREATE TABLE audit (what text); CREATE TABLE orders (id int PRIMARY KEY)");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let error = RunningSource::start(&engine, &format!("{}?tables=orders,audit", cluster.url("postgres")))
        .wait_for_end(Duration::from_secs(30))
        .expect_err("audit has no identity");
    let text = error.to_string();
    assert!(text.contains("table public.audit has no primary key or replica identity") && text.contains("REPLICA IDENTITY FULL"), "{text}");
    assert_eq!(cluster.psql("SELECT count(*) FROM pg_publication"), "0", "nothing was created");
    cluster.psql("UPDATE audit SET what = 'x'");

    // A publication that exists with other tables is not silently used instead.
    cluster.psql("CREATE PUBLICATION retina FOR ALL TABLES");
    let error = RunningSource::start(&engine, &format!("{}?tables=orders", cluster.url("postgres")))
        .wait_for_end(Duration::from_secs(30))
        .expect_err("tables= differs from the publication");
    assert!(error.to_string().contains("already exists and publishes all tables"), "{error}");
}

#[test]
fn a_non_superuser_mirrors_exactly_what_a_dbas_publication_publishes() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE people (id int PRIMARY KEY, name text, ssn text);
         INSERT INTO people VALUES (1, 'ann', '111-11'), (200, 'bob', '222-22');
         CREATE ROLE mirror LOGIN REPLICATION; GRANT SELECT ON people TO mirror;
         CREATE ROLE newcomer LOGIN REPLICATION; GRANT SELECT ON people TO newcomer",
    );
    let uri = |user: &str, query: &str| format!("postgres://{user}@127.0.0.1:{}/postgres?{query}", cluster.port());

    // Without a publication, a non-owner is told the statement to ask a DBA for.
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let error = RunningSource::start(&engine, &uri("newcomer", "slot=newcomer"))
        .wait_for_end(Duration::from_secs(30))
        .expect_err("may not create a publication");
    let text = error.to_string();
    assert!(text.contains("CREATE PUBLICATION \"retina\" FOR TABLE \"public\".\"people\"") && text.contains("ask"), "{text}");

    // The DBA's publication hides ssn and rows with id >= 100.
    cluster.psql("CREATE PUBLICATION retina FOR TABLE people (id, name) WHERE (id < 100)");
    let source = RunningSource::start(&engine, &uri("mirror", ""));
    source.wait_streaming();
    assert_eq!(mirrored_rows(&engine, "public.people"), ["1|ann"], "the copy honours the column list and the row filter");
    let table = engine.table(engine.table_id("public.people").expect("mirrored")).expect("table");
    let columns: Vec<String> = table.schema().columns().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(columns, ["id", "name"], "ssn is never stored, so never published to Delta or Iceberg");
    cluster.psql("INSERT INTO people VALUES (3, 'cy', '333-33'), (300, 'dee', '444-44'); UPDATE people SET name = 'ANN', ssn = '0' WHERE id = 1");
    eventually(Duration::from_secs(30), "the stream honours them too", || {
        let rows = mirrored_rows(&engine, "public.people");
        (rows == ["1|ANN", "3|cy"]).then_some(()).ok_or(format!("{rows:?}"))
    });
    source.stop().expect("stops cleanly");
}

#[test]
fn a_partitioned_table_is_mirrored_as_one_table_through_its_root() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE m (id int, region text, v int, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
         CREATE TABLE m_eu PARTITION OF m FOR VALUES IN ('eu'); CREATE TABLE m_us PARTITION OF m FOR VALUES IN ('us');
         INSERT INTO m VALUES (1, 'eu', 1), (2, 'us', 2)",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    assert_eq!(published(&cluster), "retina:public.m", "the root, not its partitions");
    assert_eq!(mirrored_rows(&engine, "public.m"), ["1|eu|1", "2|us|2"], "copied through the root");
    assert!(engine.table_id("public.m_eu").is_none());
    cluster.psql("INSERT INTO m VALUES (3, 'us', 3); UPDATE m SET v = 10 WHERE id = 1; DELETE FROM m WHERE id = 2");
    eventually(Duration::from_secs(30), "changes of every partition arrive as the root's", || {
        let rows = mirrored_rows(&engine, "public.m");
        (rows == ["1|eu|10", "3|us|3"]).then_some(()).ok_or(format!("{rows:?}"))
    });
    source.stop().expect("stops cleanly");
}

#[test]
fn a_slot_name_taken_by_another_database_says_to_choose_one() {
    let cluster = PgCluster::new();
    cluster.create_database("other");
    cluster.psql_in("other", "CREATE TABLE t (id int PRIMARY KEY)");
    cluster.psql("CREATE TABLE t (id int PRIMARY KEY)");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let first = RunningSource::start(&engine, &cluster.url("postgres"));
    first.wait_streaming();
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other_engine = open_engine(other_dir.path());
    let error = RunningSource::start(&other_engine, &cluster.url("other"))
        .wait_for_end(Duration::from_secs(30))
        .expect_err("the slot name is taken");
    assert!(error.to_string().contains("slot=NAME"), "{error}");
    first.stop().expect("stops cleanly");
}
