//! Decoding a row image (`before` / `after` / the message key) with a table's
//! [`TablePlan`], straight from JSON tokens into column order.

use std::cell::RefCell;
use std::fmt;

use hashbrown::HashMap;
use retina_core::{Row, Value};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::types::ColumnKind;
use super::value::ValueSeed;
use crate::error::DecodeError;

/// One column of a table as the decoder sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnPlan {
    pub name: String,
    pub kind: ColumnKind,
    pub nullable: bool,
}

/// How to decode the images of one table: its columns in table order, by name.
///
/// Invariant: `by_name` maps every column's name to its index and nothing else;
/// every primary-key index is in range.
#[derive(Clone, Debug)]
pub struct TablePlan {
    table: String,
    columns: Vec<ColumnPlan>,
    by_name: HashMap<String, usize>,
    primary_key: Vec<usize>,
}

impl TablePlan {
    pub fn new(table: impl Into<String>, columns: Vec<ColumnPlan>, primary_key: Vec<usize>) -> Self {
        let by_name = columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        assert!(primary_key.iter().all(|&k| k < columns.len()), "primary-key index out of range");
        Self { table: table.into(), columns, by_name, primary_key }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn columns(&self) -> &[ColumnPlan] {
        &self.columns
    }

    pub fn primary_key(&self) -> &[usize] {
        &self.primary_key
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The full row of an image. A column absent from the image is null (an error if
    /// the column is not nullable); a field that is no column is an error naming it.
    pub fn decode_row(&self, image: &RawValue) -> Result<Row, DecodeError> {
        let mut row = vec![Value::Null; self.columns.len()];
        let mut seen = vec![false; self.columns.len()];
        self.run(image, Mode::FullRow, &mut row, &mut seen)?;
        for (index, column) in self.columns.iter().enumerate() {
            if !seen[index] && !column.nullable {
                return Err(DecodeError::missing(&column.name));
            }
        }
        Ok(row)
    }

    /// The primary-key values of an image (other fields are skipped unchecked, since a
    /// before-image or key may carry only key columns).
    pub fn decode_key(&self, image: &RawValue) -> Result<Vec<Value>, DecodeError> {
        let mut row = vec![Value::Null; self.columns.len()];
        let mut seen = vec![false; self.columns.len()];
        self.run(image, Mode::KeyOnly, &mut row, &mut seen)?;
        self.key_of(&row, &seen)
    }

    /// The primary-key values of a decoded full row.
    pub fn key_of_row(&self, row: &[Value]) -> Result<Vec<Value>, DecodeError> {
        self.key_of(row, &vec![true; row.len()])
    }

    fn key_of(&self, row: &[Value], seen: &[bool]) -> Result<Vec<Value>, DecodeError> {
        self.primary_key
            .iter()
            .map(|&index| {
                let name = &self.columns[index].name;
                match (&row[index], seen[index]) {
                    (_, false) => Err(DecodeError::missing(name)),
                    (Value::Null, true) => Err(DecodeError::bad_value(name, "primary-key column is null")),
                    (value, true) => Ok(value.clone()),
                }
            })
            .collect()
    }

    fn run(&self, image: &RawValue, mode: Mode, row: &mut [Value], seen: &mut [bool]) -> Result<(), DecodeError> {
        let failure = RefCell::new(None);
        let seed = RowSeed { plan: self, mode, row, seen, failure: &failure };
        let mut deserializer = serde_json::Deserializer::from_str(image.get());
        match seed.deserialize(&mut deserializer) {
            Ok(()) => Ok(()),
            Err(error) => Err(failure.into_inner().unwrap_or_else(|| DecodeError::MalformedJson(error.to_string()))),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    FullRow,
    KeyOnly,
}

/// Fills `row` from a JSON object. The precise error (with the column name) goes to
/// `failure`, because serde's error type cannot carry it.
struct RowSeed<'p> {
    plan: &'p TablePlan,
    mode: Mode,
    row: &'p mut [Value],
    seen: &'p mut [bool],
    failure: &'p RefCell<Option<DecodeError>>,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a row image object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut next_guess = 0usize;
        while let Some(field) = map.next_key::<FieldName<'de>>()? {
            let name = field.as_str();
            // Images usually list columns in table order: try the next one first.
            let index = match self.plan.columns.get(next_guess) {
                Some(column) if column.name == name => Some(next_guess),
                _ => self.plan.column_index(name),
            };
            let Some(index) = index else {
                if self.mode == Mode::KeyOnly {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                *self.failure.borrow_mut() = Some(DecodeError::bad_value(
                    name,
                    format!("is not a column of table {}", self.plan.table),
                ));
                return Err(de::Error::custom("unknown column"));
            };
            next_guess = index + 1;
            if self.mode == Mode::KeyOnly && !self.plan.primary_key.contains(&index) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let column = &self.plan.columns[index];
            match map.next_value_seed(ValueSeed(&column.kind)) {
                Ok(value) => {
                    self.row[index] = value;
                    self.seen[index] = true;
                }
                Err(error) => {
                    let message = error.to_string();
                    let detail = message.split(" at line ").next().unwrap_or(&message).to_string();
                    *self.failure.borrow_mut() = Some(DecodeError::bad_value(&column.name, detail));
                    return Err(error);
                }
            }
        }
        Ok(())
    }
}

/// A JSON object key, borrowed when it has no escapes.
enum FieldName<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl FieldName<'_> {
    fn as_str(&self) -> &str {
        match self {
            Self::Borrowed(s) => s,
            Self::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = FieldName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(FieldName::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(FieldName::Owned(v.to_string()))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> TablePlan {
        TablePlan::new(
            "s.t",
            vec![
                ColumnPlan { name: "id".into(), kind: ColumnKind::Int64, nullable: false },
                ColumnPlan { name: "name".into(), kind: ColumnKind::Utf8, nullable: true },
                ColumnPlan { name: "qty".into(), kind: ColumnKind::Int32, nullable: false },
            ],
            vec![0],
        )
    }

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).expect("test JSON")
    }

    #[test]
    fn decodes_rows_in_any_field_order() {
        let row = plan().decode_row(&raw(r#"{"qty":3,"id":1,"name":"a\"b"}"#)).expect("row");
        assert_eq!(row, vec![Value::Int64(1), Value::Utf8("a\"b".into()), Value::Int32(3)]);
        let row = plan().decode_row(&raw(r#"{"id":1,"qty":3}"#)).expect("missing nullable column is null");
        assert_eq!(row[1], Value::Null);
    }

    #[test]
    fn errors_name_the_column() {
        let plan = plan();
        let missing = plan.decode_row(&raw(r#"{"id":1}"#)).expect_err("qty missing");
        assert_eq!(missing, DecodeError::missing("qty"));
        let mistyped = plan.decode_row(&raw(r#"{"id":1,"qty":"x"}"#)).expect_err("mistyped");
        assert!(mistyped.to_string().starts_with("field qty:"), "{mistyped}");
        let unknown = plan.decode_row(&raw(r#"{"id":1,"qty":1,"extra":2}"#)).expect_err("unknown column");
        assert!(unknown.to_string().contains("extra") && unknown.to_string().contains("s.t"), "{unknown}");
        let not_object = plan.decode_row(&raw("[1]")).expect_err("array");
        assert!(matches!(not_object, DecodeError::MalformedJson(_)));
    }

    #[test]
    fn keys_come_from_partial_images() {
        let plan = plan();
        assert_eq!(plan.decode_key(&raw(r#"{"id":7,"name":null,"whatever":1}"#)), Ok(vec![Value::Int64(7)]));
        assert_eq!(plan.decode_key(&raw(r#"{"name":"x"}"#)), Err(DecodeError::missing("id")));
        assert!(plan.decode_key(&raw(r#"{"id":null}"#)).is_err());
    }
}
