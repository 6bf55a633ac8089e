//! The source's relations bound to Retina tables: which Retina table a relation id
//! goes to, how each column is parsed, which columns form the key, and what a later
//! Relation message changed.
//!
//! Keys: REPLICA IDENTITY DEFAULT and USING INDEX give the identity columns, which
//! the server sends with every update and delete; FULL sends whole old rows, so the
//! table's primary key (from the catalog) is used. Without either, the table is an
//! error or, with `no_identity=insert_only`, mirrored insert-only with a synthetic
//! `_pg_row_id` key (the WAL position of the insert; for copied rows, their negative
//! ordinal).

use std::collections::HashMap;

use arrow_schema::{DataType, Field, Schema};
use retina_core::{Engine, Row, TableId, TableSchema, Value};

use crate::error::{PgSourceError, PgSourceResult};
use crate::lsn::Lsn;
use crate::pgoutput::{RelationBody, TupleValue};
use crate::types::{parse_value, PgType, TypeCatalog};

/// The synthetic key column of insert-only tables.
pub const ROW_ID_COLUMN: &str = "_pg_row_id";

/// One source column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundColumn {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
    pub kind: PgType,
}

/// A relation bound to its Retina table.
///
/// Invariant: the Retina table's columns are `columns` in order (plus
/// [`ROW_ID_COLUMN`] last when `insert_only`), and `key` indexes `columns` (empty
/// when `insert_only`).
#[derive(Clone, Debug)]
pub struct BoundRelation {
    pub oid: u32,
    /// `schema.table`, also the Retina table's name.
    pub name: String,
    pub table: TableId,
    pub columns: Vec<BoundColumn>,
    pub key: Vec<usize>,
    pub insert_only: bool,
}

/// What the binder needs from its configuration.
#[derive(Clone, Debug, Default)]
pub struct BindOptions {
    pub unsupported_types_as_text: bool,
    pub insert_only_without_identity: bool,
}

/// The relations seen so far.
#[derive(Default)]
pub struct RelationMap {
    relations: HashMap<u32, BoundRelation>,
    /// Tables that got columns since [`Self::take_widened`] was last called: rows of
    /// them converted before are one value short.
    widened: Vec<TableId>,
    /// Columns added to bound relations, see [`Self::take_added`].
    added: Vec<(u32, usize)>,
}

/// `namespace.name`, with PostgreSQL's empty namespace meaning `pg_catalog`.
pub fn qualified_name(body: &RelationBody) -> String {
    let namespace = if body.namespace.is_empty() { "pg_catalog" } else { &body.namespace };
    format!("{namespace}.{}", body.name)
}

impl RelationMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, oid: u32, lsn: Lsn) -> PgSourceResult<&BoundRelation> {
        self.relations.get(&oid).ok_or(PgSourceError::UnknownRelation { oid, lsn })
    }

    /// The columns added since the last call, as `(relation oid, column index)`: the
    /// mirror's existing rows read NULL there until [`crate::added_column`] fills them.
    pub fn take_added(&mut self) -> Vec<(u32, usize)> {
        std::mem::take(&mut self.added)
    }

    /// The tables widened since the last call (see the field).
    pub fn take_widened(&mut self) -> Vec<TableId> {
        std::mem::take(&mut self.widened)
    }

    pub fn contains(&self, oid: u32) -> bool {
        self.relations.contains_key(&oid)
    }

    /// Takes in a Relation message. A relation already bound must keep its shape:
    /// any change stops replay with an error naming it. `primary_key` is the table's
    /// primary key from the catalog, needed only for REPLICA IDENTITY FULL.
    pub fn bind(
        &mut self,
        engine: &Engine,
        body: &RelationBody,
        catalog: &TypeCatalog,
        primary_key: Option<&[String]>,
        options: &BindOptions,
        lsn: Lsn,
    ) -> PgSourceResult<&BoundRelation> {
        let name = qualified_name(body);
        let columns = bind_columns(&name, body, catalog, options)?;
        if let Some(known) = self.relations.get_mut(&body.oid) {
            if columns.len() > known.columns.len() && columns[..known.columns.len()] == known.columns[..] {
                // Columns added at the end: the Retina table gets them too.
                for column in &columns[known.columns.len()..] {
                    let field = Field::new(column.name.clone(), column.kind.data_type(), true);
                    engine.add_column(known.table, field)?;
                }
                self.added.extend((known.columns.len()..columns.len()).map(|index| (body.oid, index)));
                known.columns = columns;
                self.widened.push(known.table);
            } else if let Some(change) = describe_change(&known.columns, &columns) {
                return Err(PgSourceError::SchemaChange { table: name, change, lsn });
            } else {
                // A type change that stores the same (a longer varchar): read by the new type.
                known.columns = columns;
            }
            return Ok(&self.relations[&body.oid]);
        }
        let key = key_columns(body, primary_key);
        let insert_only = key.is_empty();
        if insert_only && !options.insert_only_without_identity {
            return Err(PgSourceError::NoIdentity { table: name });
        }
        let schema = retina_schema(&name, &columns, &key)?;
        let table = match engine.table_id(&name) {
            Some(table) => {
                let existing = engine.table(table)?.schema();
                let (have, want) = (existing.columns().fields(), schema.columns().fields());
                // Columns added at the source while we were not streaming.
                if want.len() > have.len() && want[..have.len()] == have[..] && !insert_only {
                    for field in &want[have.len()..] {
                        engine.add_column(table, field.as_ref().clone())?;
                    }
                    self.added.extend((have.len()..want.len()).map(|index| (body.oid, index)));
                } else if have != want {
                    return Err(PgSourceError::SchemaChange {
                        table: name,
                        change: format!(
                            "its columns ({}) differ from the mirrored table's ({})",
                            describe_fields(schema.columns()),
                            describe_fields(existing.columns())
                        ),
                        lsn,
                    });
                }
                table
            }
            None => engine.create_table(schema)?,
        };
        let bound = BoundRelation { oid: body.oid, name, table, columns, key, insert_only };
        Ok(self.relations.entry(body.oid).or_insert(bound))
    }
}

fn describe_fields(schema: &Schema) -> String {
    schema.fields().iter().map(|f| format!("{} {}", f.name(), f.data_type())).collect::<Vec<_>>().join(", ")
}

fn bind_columns(table: &str, body: &RelationBody, catalog: &TypeCatalog, options: &BindOptions) -> PgSourceResult<Vec<BoundColumn>> {
    body.columns
        .iter()
        .map(|column| {
            let kind = match catalog.column_kind(column.type_oid, column.type_modifier) {
                Some(kind) => kind,
                None if options.unsupported_types_as_text => PgType::Text,
                None => {
                    return Err(PgSourceError::UnsupportedType {
                        table: table.to_string(),
                        column: column.name.clone(),
                        type_name: catalog.name(column.type_oid),
                    })
                }
            };
            Ok(BoundColumn { name: column.name.clone(), type_oid: column.type_oid, type_modifier: column.type_modifier, kind })
        })
        .collect()
}

/// The Retina key: identity columns for DEFAULT / USING INDEX, the primary key for
/// FULL, nothing otherwise.
fn key_columns(body: &RelationBody, primary_key: Option<&[String]>) -> Vec<usize> {
    match body.replica_identity {
        b'd' | b'i' => body.columns.iter().enumerate().filter(|(_, c)| c.is_key).map(|(i, _)| i).collect(),
        b'f' => {
            let Some(names) = primary_key else { return Vec::new() };
            let positions: Option<Vec<usize>> =
                names.iter().map(|name| body.columns.iter().position(|c| &c.name == name)).collect();
            positions.unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

fn retina_schema(name: &str, columns: &[BoundColumn], key: &[usize]) -> PgSourceResult<TableSchema> {
    let mut fields: Vec<Field> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| Field::new(c.name.clone(), c.kind.data_type(), !key.contains(&i)))
        .collect();
    let key = if key.is_empty() {
        fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, false));
        vec![fields.len() - 1]
    } else {
        key.to_vec()
    };
    Ok(TableSchema::new(name, Schema::new(fields), key)?)
}

/// What differs between the bound columns and a new Relation message's, if anything.
fn describe_change(old: &[BoundColumn], new: &[BoundColumn]) -> Option<String> {
    for column in new {
        match old.iter().find(|o| o.name == column.name) {
            None => {
                return Some(if new.len() > old.len() {
                    format!("column {} was added", column.name)
                } else {
                    format!("column {} appeared (renamed?)", column.name)
                })
            }
            // Only a change of what the mirror stores matters: varchar(10) to
            // varchar(20) or to text is still text.
            Some(o) if o.kind.data_type() != column.kind.data_type() => {
                return Some(format!(
                    "column {} changed type from {} to {}, which the mirrored column cannot hold as it is",
                    column.name,
                    o.kind.data_type(),
                    column.kind.data_type()
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(gone) = old.iter().find(|o| !new.iter().any(|n| n.name == o.name)) {
        return Some(format!("column {} was dropped", gone.name));
    }
    let order_differs = old.iter().zip(new).any(|(o, n)| o.name != n.name);
    order_differs.then(|| "its columns were reordered".to_string())
}

impl BoundRelation {
    /// Parses column `index` from its text form (`None`: NULL).
    pub(crate) fn text_value(&self, index: usize, text: Option<&[u8]>, lsn: Option<Lsn>) -> PgSourceResult<Value> {
        let column = &self.columns[index];
        let Some(text) = text else { return Ok(Value::Null) };
        parse_value(&column.kind, text).map_err(|reason| {
            let value: String = String::from_utf8_lossy(text).chars().take(64).collect();
            let at = lsn.map(|lsn| format!("at WAL position {lsn}")).unwrap_or_else(|| "in the initial copy".into());
            PgSourceError::Value {
                table: self.name.clone(),
                column: column.name.clone(),
                detail: format!("cannot read '{value}' {at} as {}: {reason}", column.kind.data_type()),
            }
        })
    }

    fn value(&self, index: usize, value: &TupleValue, lsn: Lsn) -> PgSourceResult<Value> {
        match value {
            TupleValue::Null => Ok(Value::Null),
            TupleValue::Text(text) => self.text_value(index, Some(text), Some(lsn)),
            TupleValue::Binary(_) => Err(PgSourceError::Protocol { lsn, reason: format!("table {}: binary tuple values were not requested", self.name) }),
            TupleValue::UnchangedToast => {
                Err(PgSourceError::UnchangedToast { table: self.name.clone(), column: self.columns[index].name.clone(), lsn })
            }
        }
    }

    /// A row of the initial copy from its text fields.
    pub fn copied_row(&self, fields: &[Option<&[u8]>], row_id: i64) -> PgSourceResult<Row> {
        if fields.len() != self.columns.len() {
            return Err(PgSourceError::Setup(format!(
                "table {}: a copied row has {} fields, the table {} columns",
                self.name,
                fields.len(),
                self.columns.len()
            )));
        }
        let mut row = Vec::with_capacity(self.columns.len() + 1);
        for (i, field) in fields.iter().enumerate() {
            row.push(self.text_value(i, *field, None)?);
        }
        if self.insert_only {
            row.push(Value::Int64(row_id));
        }
        Ok(row)
    }

    fn check_width(&self, tuple: &[TupleValue], lsn: Lsn) -> PgSourceResult<()> {
        if tuple.len() != self.columns.len() {
            return Err(PgSourceError::Protocol {
                lsn,
                reason: format!("table {}: a row has {} columns, the relation {}", self.name, tuple.len(), self.columns.len()),
            });
        }
        Ok(())
    }

    /// A full row from a new tuple. Unchanged TOASTed columns take their value from
    /// `old` (a REPLICA IDENTITY FULL image); without one they are an error, never a
    /// default. `row_id` fills the synthetic key of insert-only tables.
    pub fn row(&self, new: &[TupleValue], old: Option<&[TupleValue]>, row_id: i64, lsn: Lsn) -> PgSourceResult<Row> {
        self.check_width(new, lsn)?;
        let mut row = Vec::with_capacity(self.columns.len() + 1);
        for (i, value) in new.iter().enumerate() {
            let value = match (value, old) {
                (TupleValue::UnchangedToast, Some(old)) if old.len() == new.len() => self.value(i, &old[i], lsn)?,
                _ => self.value(i, value, lsn)?,
            };
            row.push(value);
        }
        if self.insert_only {
            row.push(Value::Int64(row_id));
        }
        Ok(row)
    }

    /// The after-image of an update, and the columns whose values it lacks: TOASTed
    /// values the update left unchanged, which the server does not send without
    /// REPLICA IDENTITY FULL. They hold NULL here and keep the mirror's current values
    /// when applied ([`retina_core::RowChange::UpdateKeeping`]): the row is there.
    pub fn updated_row(&self, new: &[TupleValue], old: Option<&[TupleValue]>, lsn: Lsn) -> PgSourceResult<(Row, Vec<usize>)> {
        self.check_width(new, lsn)?;
        let full_old = old.filter(|old| old.len() == new.len());
        let mut row = Vec::with_capacity(self.columns.len());
        let mut keep = Vec::new();
        for (i, value) in new.iter().enumerate() {
            let value = match (value, full_old) {
                (TupleValue::UnchangedToast, Some(old)) => self.value(i, &old[i], lsn)?,
                (TupleValue::UnchangedToast, None) => {
                    keep.push(i);
                    Value::Null
                }
                _ => self.value(i, value, lsn)?,
            };
            row.push(value);
        }
        Ok((row, keep))
    }

    /// The key values of a tuple (a new row, a 'K' key image or an 'O' full image).
    pub fn key(&self, tuple: &[TupleValue], lsn: Lsn) -> PgSourceResult<Vec<Value>> {
        self.check_width(tuple, lsn)?;
        self.key.iter().map(|&i| self.value(i, &tuple[i], lsn)).collect()
    }

    /// An update or delete of an insert-only table cannot be mirrored.
    pub fn require_identity(&self, operation: &str, lsn: Lsn) -> PgSourceResult<()> {
        if self.insert_only {
            return Err(PgSourceError::Protocol {
                lsn,
                reason: format!("table {} is mirrored insert-only (no identity) but the source sent an {operation}", self.name),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::RelationColumn;

    fn column(name: &str, oid: u32, key: bool) -> RelationColumn {
        RelationColumn { is_key: key, name: name.into(), type_oid: oid, type_modifier: -1 }
    }

    fn bound(columns: &[(&str, u32)]) -> Vec<BoundColumn> {
        columns
            .iter()
            .map(|(n, oid)| BoundColumn {
                name: n.to_string(),
                type_oid: *oid,
                type_modifier: -1,
                kind: TypeCatalog::default().column_kind(*oid, -1).unwrap_or(PgType::Text),
            })
            .collect()
    }

    #[test]
    fn keys_follow_the_replica_identity() {
        let body = |identity| RelationBody {
            oid: 1,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: identity,
            columns: vec![column("a", 23, false), column("b", 23, true)],
        };
        assert_eq!(key_columns(&body(b'd'), None), vec![1]);
        assert_eq!(key_columns(&body(b'i'), None), vec![1]);
        assert_eq!(key_columns(&body(b'f'), Some(&["a".to_string()])), vec![0]);
        assert!(key_columns(&body(b'f'), None).is_empty());
        assert!(key_columns(&body(b'n'), None).is_empty());
        assert_eq!(qualified_name(&RelationBody { namespace: String::new(), ..body(b'd') }), "pg_catalog.t");
    }

    #[test]
    fn changes_are_named() {
        let old = bound(&[("id", 20), ("v", 23)]);
        assert_eq!(describe_change(&old, &old), None);
        assert_eq!(describe_change(&old, &bound(&[("id", 20), ("v", 23), ("w", 25)])).as_deref(), Some("column w was added"));
        assert_eq!(describe_change(&old, &bound(&[("id", 20)])).as_deref(), Some("column v was dropped"));
        let widened = describe_change(&old, &bound(&[("id", 20), ("v", 20)])).expect("int to bigint");
        assert!(widened.starts_with("column v changed type from Int32 to Int64"), "{widened}");
        // varchar (1043) to text (25): both stored as text, so no change for the mirror.
        let text = bound(&[("id", 20), ("v", 1043)]);
        assert_eq!(describe_change(&text, &bound(&[("id", 20), ("v", 25)])), None);
        assert_eq!(describe_change(&old, &bound(&[("id", 20), ("x", 23)])).as_deref(), Some("column x appeared (renamed?)"));
    }
}
