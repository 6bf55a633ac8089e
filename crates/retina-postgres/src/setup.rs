//! Server-side preparation: check what logical replication needs, find or create the
//! slot, and read the published tables' shapes from the catalog (the publication
//! itself: [`crate::publication`]).

use crate::conninfo::PgSourceOptions;
use crate::error::{PgSourceError, PgSourceResult};
use crate::lsn::Lsn;
use crate::pgoutput::{RelationBody, RelationColumn};
use crate::types::{TypeCatalog, SESSION_SETTINGS, TYPE_CATALOG_QUERY};
use crate::wire::PgConnection;

/// Quotes a literal for SQL text (the values are ours or validated names).
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Quotes an identifier.
pub fn quote_identifier(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// A normal (non-replication) connection with our session settings.
pub fn catalog_connection(options: &PgSourceOptions) -> PgSourceResult<PgConnection> {
    let mut connection = PgConnection::connect(&options.connect, false)?;
    connection.simple_query(SESSION_SETTINGS)?;
    Ok(connection)
}

fn single_value(connection: &mut PgConnection, sql: &str) -> PgSourceResult<Option<String>> {
    Ok(connection.query_rows(sql)?.into_iter().next().and_then(|row| row.into_iter().next().flatten()))
}

/// Checks `wal_level` and the replication privilege; says what to change if not.
pub fn check_server(connection: &mut PgConnection, options: &PgSourceOptions) -> PgSourceResult<()> {
    let wal_level = single_value(connection, "SHOW wal_level")?.unwrap_or_default();
    if wal_level != "logical" {
        return Err(PgSourceError::Setup(format!(
            "wal_level is '{wal_level}' on {}:{}; logical replication needs wal_level = logical in postgresql.conf (then restart the server)",
            options.connect.host, options.connect.port
        )));
    }
    let privileged = single_value(
        connection,
        // Amazon RDS and Aurora grant replication through membership in rds_replication.
        "SELECT rolreplication OR rolsuper OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r \
           WHERE r.rolname = 'rds_replication' AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')) \
         FROM pg_catalog.pg_roles WHERE rolname = current_user",
    )?;
    if privileged.as_deref() != Some("t") {
        let user = &options.connect.user;
        return Err(PgSourceError::Setup(format!(
            "user {user} lacks the REPLICATION privilege; run ALTER ROLE {} WITH REPLICATION as a superuser \
             (on Amazon RDS and Aurora: GRANT rds_replication TO {})",
            quote_identifier(user),
            quote_identifier(user)
        )));
    }
    Ok(())
}

/// The slot's state on the server, when it exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotState {
    pub confirmed_flush: Option<Lsn>,
    pub plugin: String,
    pub active: bool,
}

pub fn find_slot(connection: &mut PgConnection, slot: &str) -> PgSourceResult<Option<SlotState>> {
    let rows = connection.query_rows(&format!(
        "SELECT confirmed_flush_lsn, plugin, active FROM pg_catalog.pg_replication_slots \
         WHERE slot_name = {} AND database = current_database()",
        quote_literal(slot)
    ))?;
    let Some(row) = rows.into_iter().next() else { return Ok(None) };
    let field = |i: usize| row.get(i).cloned().flatten();
    Ok(Some(SlotState {
        confirmed_flush: field(0).and_then(|lsn| lsn.parse().ok()),
        plugin: field(1).unwrap_or_default(),
        active: field(2).as_deref() == Some("t"),
    }))
}

/// Drops `slot` once no session holds it (waiting up to `wait`); a slot still held
/// then is left alone.
pub fn drop_slot_when_free(connection: &mut PgConnection, slot: &str, wait: std::time::Duration) -> PgSourceResult<()> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match find_slot(connection, slot)? {
            None => return Ok(()),
            Some(state) if !state.active => return drop_slot(connection, slot),
            Some(_) if std::time::Instant::now() >= deadline => return Ok(()),
            Some(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

pub fn drop_slot(connection: &mut PgConnection, slot: &str) -> PgSourceResult<()> {
    // No error if it is gone already.
    connection.simple_query(&format!(
        "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots WHERE slot_name = {}",
        quote_literal(slot)
    ))?;
    Ok(())
}

/// A slot just created, with the snapshot its consistent point corresponds to. The
/// snapshot lives as long as the replication connection that created it runs no
/// other command.
pub struct CreatedSlot {
    pub consistent_point: Lsn,
    pub snapshot_name: String,
}

pub fn create_slot(replication: &mut PgConnection, slot: &str) -> PgSourceResult<CreatedSlot> {
    create_slot_with(replication, slot, "")
}

/// A slot that lives as long as the session, for the snapshot of one table's copy.
pub fn create_temporary_slot(replication: &mut PgConnection, slot: &str) -> PgSourceResult<CreatedSlot> {
    create_slot_with(replication, slot, "TEMPORARY ")
}

fn create_slot_with(replication: &mut PgConnection, slot: &str, kind: &str) -> PgSourceResult<CreatedSlot> {
    let created = replication.simple_query(&format!(
        "CREATE_REPLICATION_SLOT {} {kind}LOGICAL pgoutput (SNAPSHOT 'export')",
        quote_identifier(slot)
    ));
    let results = match created {
        // Slots are per server, not per database: another database's source (or
        // another tool) has this name.
        Err(error) if error.code() == Some("42710") => {
            return Err(PgSourceError::Setup(format!(
                "a replication slot named {slot} already exists on this server, for another database or another \
                 program; give this source its own with the option slot=NAME (say, retina_ and the database's name)"
            )))
        }
        other => other?,
    };
    let row = results.last().and_then(|r| r.rows.first()).ok_or_else(|| {
        PgSourceError::Setup(format!("CREATE_REPLICATION_SLOT {slot} returned no row"))
    })?;
    let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    let consistent_point = field(1)
        .parse()
        .map_err(|e| PgSourceError::Setup(format!("CREATE_REPLICATION_SLOT {slot}: bad consistent point: {e}")))?;
    Ok(CreatedSlot { consistent_point, snapshot_name: field(2) })
}

pub fn load_types(connection: &mut PgConnection) -> PgSourceResult<TypeCatalog> {
    Ok(TypeCatalog::from_rows(&connection.query_rows(TYPE_CATALOG_QUERY)?))
}

/// A table's shape as pgoutput's Relation message would describe it (same key flags),
/// read from the catalog, for the initial copy.
pub fn relation_from_catalog(connection: &mut PgConnection, schema: &str, table: &str) -> PgSourceResult<RelationBody> {
    let regclass = quote_literal(&format!("{}.{}", quote_identifier(schema), quote_identifier(table)));
    let head = connection.query_rows(&format!(
        "SELECT c.oid, c.relreplident FROM pg_catalog.pg_class c WHERE c.oid = {regclass}::regclass"
    ))?;
    let (oid, identity) = match head.first().map(|row| (row.first().cloned().flatten(), row.get(1).cloned().flatten())) {
        Some((Some(oid), Some(identity))) => (oid, identity),
        _ => return Err(PgSourceError::Setup(format!("table {schema}.{table} is not in the catalog"))),
    };
    let replica_identity = identity.bytes().next().unwrap_or(b'd');
    let rows = connection.query_rows(&format!(
        "SELECT a.attname, a.atttypid, a.atttypmod, \
           c.relreplident = 'f' OR a.attnum = ANY(COALESCE((SELECT i.indkey::int2[] FROM pg_catalog.pg_index i \
             WHERE i.indrelid = c.oid AND CASE c.relreplident WHEN 'd' THEN i.indisprimary WHEN 'i' THEN i.indisreplident ELSE false END \
             LIMIT 1), '{{}}'::int2[])) \
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid \
         WHERE c.oid = {oid} AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum"
    ))?;
    let bad = |what: &str| PgSourceError::Setup(format!("table {schema}.{table}: unexpected catalog row ({what})"));
    let columns = rows
        .into_iter()
        .map(|row| {
            let field = |i: usize| row.get(i).cloned().flatten();
            Ok(RelationColumn {
                name: field(0).ok_or_else(|| bad("name"))?,
                type_oid: field(1).and_then(|v| v.parse().ok()).ok_or_else(|| bad("type"))?,
                type_modifier: field(2).and_then(|v| v.parse().ok()).ok_or_else(|| bad("typmod"))?,
                is_key: field(3).as_deref() == Some("t"),
            })
        })
        .collect::<PgSourceResult<Vec<_>>>()?;
    Ok(RelationBody {
        oid: oid.parse().map_err(|_| bad("oid"))?,
        namespace: schema.to_string(),
        name: table.to_string(),
        replica_identity,
        columns,
    })
}

/// The primary-key column names of a table (by oid), in key order; `None` without one.
pub fn primary_key(connection: &mut PgConnection, oid: u32) -> PgSourceResult<Option<Vec<String>>> {
    let rows = connection.query_rows(&format!(
        "SELECT a.attname FROM pg_catalog.pg_index i \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[]) \
         WHERE i.indrelid = {oid} AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)"
    ))?;
    let names: Vec<String> = rows.into_iter().filter_map(|row| row.into_iter().next().flatten()).collect();
    Ok((!names.is_empty()).then_some(names))
}
