//! The existing rows of a column added at the source get the value PostgreSQL gives
//! them, not NULL.
//!
//! `ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 42` writes no row change to the
//! WAL: PostgreSQL keeps the constant as the column's "missing value"
//! (`pg_attribute.attmissingval`) and every older row reads it. A volatile default
//! (`DEFAULT clock_timestamp()`) rewrites the table instead, again without a change
//! in the stream. Either way the mirror would read NULL for those rows, silently and
//! for good; so when a Relation message first shows the column, its rows are set in
//! the same mirror transaction as the first change of the new shape:
//!
//! - a constant default: from `attmissingval`, exact;
//! - a volatile default: read from the table now, matched by key. A row changed at
//!   the source since then shows its newer value early; the stream's own change of
//!   it follows, so the mirror ends exact. A table without a key cannot be matched:
//!   that is an error naming the table, never a silent NULL.

use std::collections::HashMap;

use retina_core::rows::rows_of;
use retina_core::{Engine, RowChange, Value};

use crate::error::{PgSourceError, PgSourceResult};
use crate::initial_copy::split_copy_line;
use crate::lsn::Lsn;
use crate::relation::BoundRelation;
use crate::setup::{quote_identifier, quote_literal};
use crate::wire::PgConnection;

/// What the rows that existed before the column hold in it.
enum Existing {
    /// No default: NULL, which the mirror already reads.
    Null,
    Constant(Value),
    /// The table was rewritten: one value per row.
    PerRow,
}

/// The values an added column has in rows that existed before it.
pub struct AddedValues {
    index: usize,
    constant: Option<Value>,
    /// By row key (see [`key_text`]), for a volatile default.
    per_row: HashMap<String, Value>,
}

impl AddedValues {
    /// Reads what the source gives older rows in column `index` of `relation`;
    /// `None` when that is NULL.
    pub fn load(catalog: &mut PgConnection, relation: &BoundRelation, index: usize, lsn: Lsn) -> PgSourceResult<Option<Self>> {
        Ok(match existing_value(catalog, relation, index, lsn)? {
            Existing::Null => None,
            Existing::Constant(value) => Some(AddedValues { index, constant: Some(value), per_row: HashMap::new() }),
            Existing::PerRow => {
                Some(AddedValues { index, constant: None, per_row: source_values(catalog, relation, index, lsn)? })
            }
        })
    }

    /// The value for a row (of any width that includes its key columns); `None` for
    /// a row the source no longer has (its delete is still to come).
    pub fn value_for(&self, relation: &BoundRelation, row: &[Value]) -> Option<Value> {
        match &self.constant {
            Some(value) => Some(value.clone()),
            None => self.per_row.get(&key_text(relation, row)).cloned(),
        }
    }

    /// Upserts that give the mirror's existing rows their value.
    pub fn mirror_changes(&self, engine: &Engine, relation: &BoundRelation) -> PgSourceResult<Vec<RowChange>> {
        engine.sync()?;
        let snapshot = engine.snapshot()?;
        let rows = rows_of(&engine.scan(relation.table, &snapshot, None)?)?;
        let mut changes = Vec::with_capacity(rows.len());
        for mut row in rows {
            let Some(value) = self.value_for(relation, &row) else { continue };
            row[self.index] = value;
            changes.push(RowChange::Upsert { table: relation.table, row });
        }
        Ok(changes)
    }

    /// Gives a row of the old shape, buffered earlier in the same transaction, its
    /// value (insert-only tables keep their synthetic row id last).
    pub fn extend_row(&self, relation: &BoundRelation, row: &mut Vec<Value>) {
        let old_width = if relation.insert_only { self.index + 1 } else { self.index };
        if row.len() == old_width {
            let value = self.value_for(relation, row).unwrap_or(Value::Null);
            row.insert(self.index, value);
        }
    }
}

/// What `pg_attribute` says about the column's existing rows.
fn existing_value(catalog: &mut PgConnection, relation: &BoundRelation, index: usize, lsn: Lsn) -> PgSourceResult<Existing> {
    let column = &relation.columns[index];
    let rows = catalog.query_rows(&format!(
        "SELECT a.atthasmissing, a.attmissingval::text, a.atthasdef FROM pg_catalog.pg_attribute a \
         WHERE a.attrelid = {} AND a.attname = {} AND NOT a.attisdropped",
        relation.oid,
        quote_literal(&column.name)
    ))?;
    // Gone again (dropped since): the next Relation message says so.
    let Some(row) = rows.into_iter().next() else { return Ok(Existing::Null) };
    let field = |i: usize| row.get(i).cloned().flatten();
    if field(0).as_deref() == Some("t") {
        let text = field(1).as_deref().and_then(first_array_element);
        return Ok(Existing::Constant(relation.text_value(index, text.as_deref().map(str::as_bytes), Some(lsn))?));
    }
    if field(2).as_deref() != Some("t") {
        return Ok(Existing::Null);
    }
    if relation.insert_only {
        return Err(PgSourceError::SchemaChange {
            table: relation.name.clone(),
            change: format!(
                "column {} was added with a volatile default, which gave each existing row its own value, \
                 and a table without a key cannot be matched row by row; copy it again (a fresh slot and data directory)",
                column.name
            ),
            lsn,
        });
    }
    Ok(Existing::PerRow)
}

/// The column's current value per row at the source, by the row's key.
fn source_values(
    catalog: &mut PgConnection,
    relation: &BoundRelation,
    index: usize,
    lsn: Lsn,
) -> PgSourceResult<HashMap<String, Value>> {
    let (schema, name) = relation.name.split_once('.').unwrap_or(("public", &relation.name));
    let mut selected: Vec<String> = relation.key.iter().map(|&k| quote_identifier(&relation.columns[k].name)).collect();
    selected.push(quote_identifier(&relation.columns[index].name));
    let sql = format!(
        "COPY (SELECT {} FROM {}.{}) TO STDOUT",
        selected.join(", "),
        quote_identifier(schema),
        quote_identifier(name)
    );
    let mut values = HashMap::new();
    let (mut scratch, mut ranges) = (Vec::new(), Vec::new());
    let mut failure = None;
    catalog.copy_out(&sql, &mut |line| {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        split_copy_line(line, &mut scratch, &mut ranges)?;
        let field = |i: usize| ranges.get(i).copied().flatten().map(|(start, end)| &scratch[start..end]);
        let parsed = (|| -> PgSourceResult<(String, Value)> {
            let mut key = Vec::with_capacity(relation.key.len());
            for (position, &column) in relation.key.iter().enumerate() {
                key.push(relation.text_value(column, field(position), Some(lsn))?);
            }
            let value = relation.text_value(index, field(relation.key.len()), Some(lsn))?;
            Ok((format!("{key:?}"), value))
        })();
        match parsed {
            Ok((key, value)) => {
                values.insert(key, value);
                Ok(())
            }
            Err(error) => {
                let text = error.to_string();
                failure = Some(error);
                Err(text)
            }
        }
    })?;
    match failure {
        Some(error) => Err(error),
        None => Ok(values),
    }
}

/// A row's key as a map key. `Value` has no `Hash`; its `Debug` text is the same for
/// equal values of one column type, which both sides share here.
fn key_text(relation: &BoundRelation, row: &[Value]) -> String {
    let key: Vec<&Value> = relation.key.iter().map(|&k| &row[k]).collect();
    format!("{:?}", key.into_iter().cloned().collect::<Vec<Value>>())
}

/// The one element of `attmissingval`'s text (`{42}`, `{"a b"}`).
fn first_array_element(text: &str) -> Option<String> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    if inner == "NULL" {
        return None;
    }
    let Some(quoted) = inner.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) else {
        return Some(inner.to_string());
    };
    let mut out = String::with_capacity(quoted.len());
    let mut characters = quoted.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' => out.extend(characters.next()),
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_values_are_read_from_their_array_text() {
        assert_eq!(first_array_element("{42}").as_deref(), Some("42"));
        assert_eq!(first_array_element("{\"a \\\"b\\\" c\"}").as_deref(), Some("a \"b\" c"));
        assert_eq!(first_array_element("{NULL}"), None);
        assert_eq!(first_array_element("{\"NULL\"}").as_deref(), Some("NULL"));
        assert_eq!(first_array_element("42"), None);
    }
}
