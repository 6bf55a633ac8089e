//! What schema-reflecting clients read from the emulated `pg_catalog`: primary keys
//! through `pg_index` and `pg_constraint`, joined with `pg_class` and
//! `pg_attribute` the way SQLAlchemy's `get_pk_constraint` does.

mod support;

use arrow_schema::DataType;
use retina_core::TableSchema;
use support::{off, pretty, session, small_engine};

/// SQLAlchemy 2.0's primary-key query (`get_pk_constraint`), with its parameters
/// written in: `generate_subscripts` numbers the key's columns beside `unnest`.
const SQLALCHEMY_PK_QUERY: &str = "SELECT attr.conrelid, array_agg(CAST(attr.attname AS TEXT) ORDER BY attr.ord) AS cols, attr.conname \
    FROM (SELECT con.conrelid AS conrelid, con.conname AS conname, con.ord AS ord, pg_catalog.pg_attribute.attname AS attname \
    FROM pg_catalog.pg_attribute JOIN (SELECT pg_catalog.pg_constraint.conrelid AS conrelid, pg_catalog.pg_constraint.conname AS conname, \
    unnest(pg_catalog.pg_index.indkey) AS attnum, generate_subscripts(pg_catalog.pg_index.indkey, 1) AS ord \
    FROM pg_catalog.pg_constraint JOIN pg_catalog.pg_index ON pg_catalog.pg_constraint.conindid = pg_catalog.pg_index.indexrelid \
    WHERE pg_catalog.pg_constraint.contype = 'p') AS con ON pg_catalog.pg_attribute.attnum = con.attnum AND pg_catalog.pg_attribute.attrelid = con.conrelid \
    ) AS attr GROUP BY attr.conrelid, attr.conname ORDER BY attr.conname";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_keys_are_in_pg_index_and_pg_constraint_in_key_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = off(|| small_engine(dir.path()));
    off(|| {
        // The key's order is not the columns' order.
        let lines = TableSchema::from_columns(
            "shop.lines",
            &[("note", DataType::Utf8, true), ("line_no", DataType::Int32, false), ("order_id", DataType::Int64, false)],
            &["order_id", "line_no"],
        )
        .expect("schema");
        engine.create_table(lines).expect("lines");
        let items = TableSchema::from_columns("items", &[("id", DataType::Int64, false), ("price", DataType::Decimal128(12, 2), true)], &["id"])
            .expect("schema");
        engine.create_table(items).expect("items");
    });
    let session = session(&engine);
    let (_, keys) = session.collect(SQLALCHEMY_PK_QUERY).await.expect("the primary-key query");
    let text = pretty(&keys);
    assert!(text.contains("| [id]                | items_pkey |"), "{text}");
    assert!(text.contains("| [order_id, line_no] | lines_pkey |"), "{text}");
    let (_, index) = session
        .collect(
            "SELECT c.relname, i.indisprimary, i.indnkeyatts, n.nspname FROM pg_catalog.pg_index i \
             JOIN pg_catalog.pg_class c ON c.oid = i.indrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace ORDER BY c.relname",
        )
        .await
        .expect("pg_index");
    let text = pretty(&index);
    assert!(text.contains("| items   | true         | 1           | public  |"), "{text}");
    assert!(text.contains("| lines   | true         | 2           | shop    |"), "{text}");
    // pgjdbc's getIndexInfo and psql name an index's columns with pg_get_indexdef.
    let (_, definitions) = session
        .collect(
            "SELECT pg_get_indexdef(i.indexrelid, 0, true) AS def, pg_get_indexdef(i.indexrelid, 2, false) AS second, \
             pg_get_constraintdef(con.oid, true) AS con FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid \
             JOIN pg_catalog.pg_constraint con ON con.conindid = i.indexrelid WHERE c.relname = 'lines'",
        )
        .await
        .expect("index definitions");
    let text = pretty(&definitions);
    assert!(text.contains("CREATE UNIQUE INDEX lines_pkey ON shop.lines USING btree (order_id, line_no)"), "{text}");
    assert!(text.contains("| line_no ") && text.contains("PRIMARY KEY (order_id, line_no)"), "{text}");
    // A decimal's precision and scale, as SQLAlchemy's reflection reads them.
    let (_, types) = session
        .collect(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS t FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid WHERE c.relname = 'items' ORDER BY a.attnum",
        )
        .await
        .expect("column types");
    let text = pretty(&types);
    assert!(text.contains("| price   | numeric(12,2) |") && text.contains("| id      | bigint        |"), "{text}");
    // SQLAlchemy's get_schema_names: an escape character other than backslash.
    let (_, schemas) = session
        .collect("SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname NOT LIKE 'pg/_%' ESCAPE '/' AND nspname LIKE 'sh%' ORDER BY 1")
        .await
        .expect("LIKE with ESCAPE '/'");
    assert_eq!(pretty(&schemas).matches("| shop").count(), 1, "{}", pretty(&schemas));
}
