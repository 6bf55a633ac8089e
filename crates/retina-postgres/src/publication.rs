//! The publication: what Retina mirrors, chosen so that creating it never breaks the
//! application and works without superuser rights.
//!
//! - Never `FOR ALL TABLES`: once a table without a primary key or replica identity
//!   is in a publication that publishes updates, every UPDATE and DELETE the
//!   application makes on it fails at the source ("cannot update table … because it
//!   does not have a replica identity"), even after Retina stopped. And only a
//!   superuser may create one, which no managed service grants. So a publication
//!   Retina creates lists its tables (`FOR TABLE`): every table with an identity, or
//!   the `tables=` list, refusing a listed table without one.
//! - An existing publication is the DBA's: used as it is, with its column lists and
//!   row filters honoured by the copy (the stream honours them on the server).
//! - When creating is not allowed, the error gives the statement to run instead.

use crate::conninfo::PgSourceOptions;
use crate::error::{PgSourceError, PgSourceResult};
use crate::setup::{quote_identifier, quote_literal};
use crate::wire::PgConnection;

/// A table of the publication, with what of it is published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedTable {
    pub schema: String,
    pub table: String,
    /// The column list (PostgreSQL 15+), when the publication has one for this table.
    pub columns: Option<Vec<String>>,
    /// The row filter (PostgreSQL 15+) as the server prints it, e.g. `(region = 'eu'::text)`.
    pub row_filter: Option<String>,
    /// A partitioned table, published as one through its root
    /// (`publish_via_partition_root`).
    pub partitioned: bool,
}

impl PublishedTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// What [`ensure_publication`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublicationSetup {
    /// Whether it created the publication.
    pub created: bool,
    /// Tables left out of a publication it created, because they have no primary key
    /// or replica identity (`schema.table`).
    pub left_out: Vec<String>,
}

/// Every ordinary table of the database's own schemas, and whether it can be
/// mirrored with its updates and deletes: a primary key (identity `default` or
/// `full`) or an identity index. (`REPLICA IDENTITY FULL` without a key would not
/// break the application, but the mirror needs a key.) Unlogged and temporary tables
/// cannot be published at all. A partitioned table is one table, published through
/// its root (`publish_via_partition_root`), its partitions not on their own.
const CANDIDATE_TABLES: &str = "SELECT n.nspname, c.relname, \
       ((c.relreplident IN ('d', 'f') AND EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)) \
        OR (c.relreplident = 'i' AND EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisreplident))) \
     FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE ((c.relkind = 'r' AND NOT c.relispartition) OR (c.relkind = 'p' AND NOT c.relispartition)) \
       AND c.relpersistence = 'p' \
       AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' \
       AND n.nspname NOT LIKE 'pg\\_temp%' \
     ORDER BY 1, 2";

/// The publications the source reads: the main one, and with `no_identity=insert_only`
/// a companion `<name>_inserts` publishing only inserts and truncates, which is where
/// tables without identity go (a publication without updates and deletes puts no
/// demand on the application's UPDATEs and DELETEs).
pub fn publication_names(options: &PgSourceOptions) -> Vec<String> {
    let mut names = vec![options.publication.clone()];
    if options.insert_only_without_identity {
        names.push(inserts_publication(&options.publication));
    }
    names
}

fn inserts_publication(name: &str) -> String {
    format!("{name}_inserts")
}

fn publication_exists(connection: &mut PgConnection, name: &str) -> PgSourceResult<bool> {
    Ok(!connection
        .query_rows(&format!("SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = {}", quote_literal(name)))?
        .is_empty())
}

/// Makes sure the publications exist, creating them as described in the module docs.
pub fn ensure_publication(connection: &mut PgConnection, options: &PgSourceOptions) -> PgSourceResult<PublicationSetup> {
    let insert_only = options.insert_only_without_identity;
    let main_exists = publication_exists(connection, &options.publication)?;
    let inserts_name = inserts_publication(&options.publication);
    let inserts_exists = !insert_only || publication_exists(connection, &inserts_name)?;
    if main_exists && inserts_exists {
        if let Some(wanted) = &options.tables {
            check_existing_matches(connection, options, wanted)?;
        }
        return Ok(PublicationSetup::default());
    }
    let candidates: Vec<(String, String, bool)> = connection
        .query_rows(CANDIDATE_TABLES)?
        .into_iter()
        .filter_map(|row| {
            let mut fields = row.into_iter();
            Some((fields.next()??, fields.next()??, fields.next()?.as_deref() == Some("t")))
        })
        .collect();
    let (identified, keyless) = match &options.tables {
        Some(wanted) => choose_listed(&candidates, wanted, insert_only)?,
        None => {
            let (with, without): (Vec<_>, Vec<_>) = candidates.iter().partition(|(_, _, identified)| *identified);
            let names = |tables: Vec<&(String, String, bool)>| tables.into_iter().map(|(s, t, _)| (s.clone(), t.clone())).collect();
            (names(with), names(without))
        }
    };
    let mut setup = PublicationSetup::default();
    if !main_exists {
        create(connection, options, &create_statement(&options.publication, &identified, None))?;
        setup.created = true;
        if !insert_only {
            setup.left_out = keyless.iter().map(|(schema, table)| format!("{schema}.{table}")).collect();
        }
    }
    if !inserts_exists {
        create(connection, options, &create_statement(&inserts_name, &keyless, Some("insert, truncate")))?;
        setup.created = true;
    }
    Ok(setup)
}

/// Runs a CREATE PUBLICATION; a refusal for want of rights says what to ask for.
fn create(connection: &mut PgConnection, options: &PgSourceOptions, statement: &str) -> PgSourceResult<()> {
    match connection.simple_query(statement) {
        Ok(_) => Ok(()),
        Err(error) if error.code() == Some("42501") => Err(PgSourceError::Setup(format!(
            "user {} may not create the publication ({error}); ask the tables' owner or a superuser to run \
             `{statement}` and start again: Retina uses an existing publication as it is",
            options.connect.user
        ))),
        Err(error) => Err(error.into()),
    }
}

/// `CREATE PUBLICATION name FOR TABLE … [WITH (publish = …)]` (no tables: an empty
/// publication a DBA fills with `ALTER PUBLICATION … ADD TABLE`).
fn create_statement(name: &str, tables: &[(String, String)], publish: Option<&str>) -> String {
    let listed: Vec<String> =
        tables.iter().map(|(schema, table)| format!("{}.{}", quote_identifier(schema), quote_identifier(table))).collect();
    let mut statement = format!("CREATE PUBLICATION {}", quote_identifier(name));
    if !listed.is_empty() {
        statement.push_str(&format!(" FOR TABLE {}", listed.join(", ")));
    }
    // A partitioned table's changes then come as its root's: one mirror table.
    let mut with = vec!["publish_via_partition_root = true".to_string()];
    if let Some(publish) = publish {
        with.push(format!("publish = {}", quote_literal(publish)));
    }
    statement.push_str(&format!(" WITH ({})", with.join(", ")));
    statement
}

/// Tables as `(schema, table)`: those with an identity, and those without.
type Split = (Vec<(String, String)>, Vec<(String, String)>);

/// The `tables=` list resolved against the catalog and split by identity; a table
/// that does not exist, or has no identity while `insert_only` is off, is refused
/// with the fix.
fn choose_listed(candidates: &[(String, String, bool)], wanted: &[String], insert_only: bool) -> PgSourceResult<Split> {
    let mut split: Split = (Vec::new(), Vec::new());
    for entry in wanted {
        let (schema, table) = entry.split_once('.').unwrap_or(("public", entry));
        let chosen = (schema.to_string(), table.to_string());
        match candidates.iter().find(|(s, t, _)| s == schema && t == table) {
            None => {
                return Err(PgSourceError::Setup(format!(
                    "tables= names {schema}.{table}, which is not an ordinary, logged table of this database"
                )))
            }
            Some((_, _, true)) => split.0.push(chosen),
            Some((_, _, false)) if insert_only => split.1.push(chosen),
            Some((_, _, false)) => {
                return Err(PgSourceError::Setup(format!(
                    "table {schema}.{table} has no primary key or replica identity: in a publication, every UPDATE and \
                     DELETE your application makes on it would fail; give it a primary key or run \
                     ALTER TABLE {}.{} REPLICA IDENTITY FULL, or mirror its inserts only (no_identity=insert_only)",
                    quote_identifier(schema),
                    quote_identifier(table)
                )))
            }
        }
    }
    Ok(split)
}

/// An existing publication must publish exactly the `tables=` list, or the option
/// would be silently ignored.
fn check_existing_matches(connection: &mut PgConnection, options: &PgSourceOptions, wanted: &[String]) -> PgSourceResult<()> {
    let mut published: Vec<String> =
        published_tables(connection, &publication_names(options))?.iter().map(PublishedTable::qualified).collect();
    let mut asked: Vec<String> = wanted
        .iter()
        .map(|entry| if entry.contains('.') { entry.clone() } else { format!("public.{entry}") })
        .collect();
    published.sort();
    asked.sort();
    asked.dedup();
    if published == asked {
        return Ok(());
    }
    let all_tables = connection
        .query_rows(&format!("SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = {}", quote_literal(&options.publication)))?
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .as_deref()
        == Some("t");
    let what = if all_tables { "all tables".to_string() } else { published.join(", ") };
    Err(PgSourceError::Setup(format!(
        "publication {} already exists and publishes {what}, but tables= asks for {}; \
         drop tables= to mirror what it publishes, name another publication with publication=, \
         or have its owner run ALTER PUBLICATION {} SET TABLE …",
        options.publication,
        asked.join(", "),
        quote_identifier(&options.publication)
    )))
}

/// The tables the publications publish, with their column lists and row filters
/// where the server has them (PostgreSQL 15+).
pub fn published_tables(connection: &mut PgConnection, publications: &[String]) -> PgSourceResult<Vec<PublishedTable>> {
    let filters = connection.server_major_version().unwrap_or(0) >= 15;
    let extra = if filters { "attnames::text[]::text, rowfilter" } else { "NULL, NULL" };
    let names: Vec<String> = publications.iter().map(|name| quote_literal(name)).collect();
    let rows = connection.query_rows(&format!(
        "SELECT DISTINCT ON (schemaname, tablename) schemaname, tablename, {extra}, \
           (SELECT c.relkind = 'p' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = schemaname AND c.relname = tablename) \
         FROM pg_catalog.pg_publication_tables WHERE pubname IN ({}) ORDER BY 1, 2",
        names.join(", ")
    ))?;
    let mut tables = Vec::with_capacity(rows.len());
    for row in rows {
        let field = |i: usize| row.get(i).cloned().flatten();
        let (Some(schema), Some(table)) = (field(0), field(1)) else { continue };
        let columns = field(2).map(|text| parse_text_array(&text));
        let partitioned = field(4).as_deref() == Some("t");
        tables.push(PublishedTable { schema, table, columns, row_filter: field(3), partitioned });
    }
    Ok(tables)
}

/// A one-dimensional `text[]` in PostgreSQL's text form: `{a,"b c","d\"e"}`.
fn parse_text_array(text: &str) -> Vec<String> {
    let inner = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
    let mut items = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut escaped, mut any) = (false, false, false);
    for character in inner.chars() {
        match character {
            _ if escaped => {
                current.push(character);
                escaped = false;
            }
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                items.push(std::mem::take(&mut current));
                any = false;
                continue;
            }
            other => current.push(other),
        }
        any = true;
    }
    if any || !items.is_empty() {
        items.push(current);
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_arrays_parse_with_quotes_and_escapes() {
        assert_eq!(parse_text_array("{id,name}"), ["id", "name"]);
        assert_eq!(parse_text_array("{\"a b\",\"c\\\"d\",e}"), ["a b", "c\"d", "e"]);
        assert_eq!(parse_text_array("{}"), Vec::<String>::new());
    }

    #[test]
    fn created_publications_list_their_tables() {
        let tables = vec![("public".to_string(), "a".to_string()), ("Sales".to_string(), "b".to_string())];
        assert_eq!(
            create_statement("retina", &tables, None),
            "CREATE PUBLICATION \"retina\" FOR TABLE \"public\".\"a\", \"Sales\".\"b\" WITH (publish_via_partition_root = true)"
        );
        assert_eq!(create_statement("retina", &[], None), "CREATE PUBLICATION \"retina\" WITH (publish_via_partition_root = true)");
        assert_eq!(
            create_statement("r_inserts", &tables[..1], Some("insert, truncate")),
            "CREATE PUBLICATION \"r_inserts\" FOR TABLE \"public\".\"a\" WITH (publish_via_partition_root = true, publish = 'insert, truncate')"
        );
    }

    #[test]
    fn a_listed_table_without_identity_is_refused_with_the_fix() {
        let candidates = vec![("public".to_string(), "k".to_string(), true), ("public".to_string(), "log".to_string(), false)];
        let keyed = vec![("public".to_string(), "k".to_string())];
        assert_eq!(choose_listed(&candidates, &["k".to_string()], false).expect("keyed"), (keyed.clone(), vec![]));
        let error = choose_listed(&candidates, &["public.log".to_string()], false).expect_err("keyless").to_string();
        assert!(error.contains("REPLICA IDENTITY FULL") && error.contains("would fail"), "{error}");
        let both = choose_listed(&candidates, &["k".to_string(), "log".to_string()], true).expect("insert only");
        assert_eq!(both, (keyed, vec![("public".to_string(), "log".to_string())]));
        let error = choose_listed(&candidates, &["nope".to_string()], false).expect_err("missing").to_string();
        assert!(error.contains("public.nope"), "{error}");
    }
}
