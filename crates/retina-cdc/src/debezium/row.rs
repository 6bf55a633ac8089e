//! Decoding a row image (`before` / `after` / the message key) with a table's
//! [`TablePlan`] into column order.

use hashbrown::HashMap;
use retina_core::{Row, Value};
use serde_json::value::RawValue;

use super::image::{Image, Scalar};
use super::types::DebeziumType;
use super::value::value_of;
use crate::error::DecodeError;

/// One column of a table as the decoder sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnPlan {
    pub name: String,
    pub kind: DebeziumType,
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
    /// Whether a null field that is no column is read as absent rather than refused:
    /// a table inferred from a schemaless stream gets a column when the field's first
    /// non-null value gives it a type, and until then a null is what the missing
    /// column reads anyway.
    null_fields_may_be_absent: bool,
}

impl TablePlan {
    pub fn new(table: impl Into<String>, columns: Vec<ColumnPlan>, primary_key: Vec<usize>) -> Self {
        let by_name = columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        assert!(primary_key.iter().all(|&k| k < columns.len()), "primary-key index out of range");
        Self { table: table.into(), columns, by_name, primary_key, null_fields_may_be_absent: false }
    }

    /// This plan, reading a null field that is no column as absent (see the field).
    pub fn with_null_fields_absent(mut self) -> Self {
        self.null_fields_may_be_absent = true;
        self
    }

    /// The fields of `image` with a value that are no column: what a schemaless
    /// stream added since the table was inferred.
    pub fn unknown_fields<'i, 'a>(&self, image: &'i Image<'a>) -> Vec<(&'i str, &'i Scalar<'a>)> {
        image
            .fields
            .iter()
            .filter(|(name, scalar)| !matches!(scalar, Scalar::Null) && self.column_index(name).is_none())
            .map(|(name, scalar)| (name.as_ref(), scalar))
            .collect()
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
    /// Debezium's unavailable-value placeholder (unchanged TOAST) is an error here:
    /// only an update can keep a previous value ([`Self::decode_after`]).
    pub fn decode_row(&self, image: &Image<'_>) -> Result<Row, DecodeError> {
        let (row, unavailable) = self.decode_after(image)?;
        match unavailable.first() {
            None => Ok(row),
            Some(&index) => Err(DecodeError::bad_value(
                &self.columns[index].name,
                format!("holds Debezium's unavailable-value placeholder {UNAVAILABLE_VALUE:?} (unchanged TOAST), which only an update can take from the previous row"),
            )),
        }
    }

    /// [`Self::decode_row`] that also accepts Debezium's unavailable-value placeholder
    /// (`__debezium_unavailable_value`, base64 of it in bytes columns): such columns
    /// are NULL in the row and listed, in column order, for the caller to fill from
    /// the previous row. Nothing is looked up unless a placeholder is there.
    pub fn decode_after(&self, image: &Image<'_>) -> Result<(Row, Vec<usize>), DecodeError> {
        let mut unavailable = Vec::new();
        let mut row = vec![Value::Null; self.columns.len()];
        let mut seen = ColumnSet::new(self.columns.len());
        let mut next_guess = 0usize;
        for (name, scalar) in &image.fields {
            let Some(index) = self.locate(name, &mut next_guess) else {
                if self.null_fields_may_be_absent && matches!(scalar, Scalar::Null) {
                    continue;
                }
                return Err(DecodeError::bad_value(name.as_ref(), format!("is not a column of table {}", self.table)));
            };
            let column = &self.columns[index];
            if seen.contains(index) {
                // `{"id":1,"id":2}`: which one the source meant is unknown.
                return Err(DecodeError::bad_value(name.as_ref(), "appears twice in the image: which value the source meant is unknown"));
            }
            seen.insert(index);
            if is_unavailable(&column.kind, scalar) {
                unavailable.push(index);
                continue;
            }
            row[index] = value_of(&column.kind, scalar).map_err(|reason| DecodeError::bad_value(&column.name, reason))?;
        }
        for (index, column) in self.columns.iter().enumerate() {
            if !seen.contains(index) && !column.nullable {
                return Err(DecodeError::missing(&column.name));
            }
        }
        unavailable.sort_unstable();
        Ok((row, unavailable))
    }

    /// The value of column `index` in `image` when the image carries a real one: not
    /// absent, not null (a before-image under PostgreSQL's default or index replica
    /// identity nulls the columns it does not hold) and not the placeholder.
    pub fn real_value(&self, image: &Image<'_>, index: usize) -> Result<Option<Value>, DecodeError> {
        let column = &self.columns[index];
        let Some((_, scalar)) = image.fields.iter().find(|(name, _)| *name == column.name) else { return Ok(None) };
        if matches!(scalar, Scalar::Null) || is_unavailable(&column.kind, scalar) {
            return Ok(None);
        }
        value_of(&column.kind, scalar).map(Some).map_err(|reason| DecodeError::bad_value(&column.name, reason))
    }

    /// The primary-key values of an image (other fields are skipped unchecked, since a
    /// before-image or key may carry only key columns).
    pub fn decode_key(&self, image: &Image<'_>) -> Result<Vec<Value>, DecodeError> {
        let mut key = Vec::with_capacity(self.primary_key.len());
        for &index in &self.primary_key {
            let column = &self.columns[index];
            let scalar = image
                .fields
                .iter()
                .find(|(name, _)| *name == column.name)
                .map(|(_, scalar)| scalar)
                .ok_or_else(|| DecodeError::missing(&column.name))?;
            match value_of(&column.kind, scalar).map_err(|reason| DecodeError::bad_value(&column.name, reason))? {
                Value::Null => return Err(DecodeError::bad_value(&column.name, "primary-key column is null")),
                value => key.push(value),
            }
        }
        Ok(key)
    }

    /// [`Self::decode_row`] of raw JSON text.
    pub fn decode_row_json(&self, json: &RawValue) -> Result<Row, DecodeError> {
        self.decode_row(&parse_image(json)?)
    }

    /// [`Self::decode_key`] of raw JSON text (a message key).
    pub fn decode_key_json(&self, json: &RawValue) -> Result<Vec<Value>, DecodeError> {
        self.decode_key(&parse_image(json)?)
    }

    /// The primary-key values of a decoded full row.
    pub fn key_of_row(&self, row: &[Value]) -> Result<Vec<Value>, DecodeError> {
        self.primary_key
            .iter()
            .map(|&index| match &row[index] {
                Value::Null => Err(DecodeError::bad_value(&self.columns[index].name, "primary-key column is null")),
                value => Ok(value.clone()),
            })
            .collect()
    }

    /// Images usually list columns in table order: try the next one first.
    fn locate(&self, name: &str, next_guess: &mut usize) -> Option<usize> {
        let index = match self.columns.get(*next_guess) {
            Some(column) if column.name == name => *next_guess,
            _ => self.column_index(name)?,
        };
        *next_guess = index + 1;
        Some(index)
    }
}

/// Debezium's default `unavailable.value.placeholder`.
pub const UNAVAILABLE_VALUE: &str = "__debezium_unavailable_value";
/// The placeholder as it arrives in a bytes-based column: base64 of its UTF-8 bytes.
pub const UNAVAILABLE_VALUE_BASE64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

/// The placeholder of an unchanged TOASTed PostgreSQL array as Debezium writes it
/// (`UnchangedToastedArrayPlaceholder`), in [`Scalar::Array`]'s compact JSON: a
/// one-element `text[]`, `bytea[]` or `uuid[]` (the placeholder's name-based UUID),
/// or an `int[]`/`bigint[]` of the placeholder's bytes.
fn is_unavailable_array(json: &str) -> bool {
    const SINGLE_ELEMENT: [&str; 3] = [
        "[\"__debezium_unavailable_value\"]",
        "[\"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==\"]",
        "[\"b68a35a7-17ad-35b3-af2a-ae46edb4545a\"]",
    ];
    const BYTES: &str = "[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101]";
    SINGLE_ELEMENT.contains(&json) || json == BYTES
}

/// Whether `scalar` is the placeholder for `kind` (a length check first: this runs for
/// every string value of every image).
fn is_unavailable(kind: &DebeziumType, scalar: &Scalar<'_>) -> bool {
    let text = match scalar {
        Scalar::Str(text) => text,
        Scalar::Array(json) => return is_unavailable_array(json),
        // An unchanged TOASTed hstore in map mode: the placeholder as key and value.
        Scalar::Map(json) => return json.as_ref() == "{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}",
        _ => return false,
    };
    match text.len() {
        28 => text == UNAVAILABLE_VALUE,
        40 => {
            matches!(kind, DebeziumType::Binary | DebeziumType::Decimal { .. } | DebeziumType::Geometry) && text == UNAVAILABLE_VALUE_BASE64
        }
        _ => false,
    }
}

fn parse_image<'a>(json: &'a RawValue) -> Result<Image<'a>, DecodeError> {
    serde_json::from_str(json.get()).map_err(|e| DecodeError::MalformedJson(e.to_string()))
}

/// Which columns an image set, without an allocation for tables up to 128 columns.
enum ColumnSet {
    Small(u128),
    Large(Vec<bool>),
}

impl ColumnSet {
    fn new(columns: usize) -> Self {
        if columns <= 128 { Self::Small(0) } else { Self::Large(vec![false; columns]) }
    }

    fn insert(&mut self, index: usize) {
        match self {
            Self::Small(bits) => *bits |= 1 << index,
            Self::Large(flags) => flags[index] = true,
        }
    }

    fn contains(&self, index: usize) -> bool {
        match self {
            Self::Small(bits) => *bits & (1 << index) != 0,
            Self::Large(flags) => flags[index],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> TablePlan {
        TablePlan::new(
            "s.t",
            vec![
                ColumnPlan { name: "id".into(), kind: DebeziumType::Int64, nullable: false },
                ColumnPlan { name: "name".into(), kind: DebeziumType::Utf8, nullable: true },
                ColumnPlan { name: "qty".into(), kind: DebeziumType::Int32, nullable: false },
            ],
            vec![0],
        )
    }

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).expect("test JSON")
    }

    #[test]
    fn decodes_rows_in_any_field_order() {
        let row = plan().decode_row_json(&raw(r#"{"qty":3,"id":1,"name":"a\"b"}"#)).expect("row");
        assert_eq!(row, vec![Value::Int64(1), Value::Utf8("a\"b".into()), Value::Int32(3)]);
        let row = plan().decode_row_json(&raw(r#"{"id":1,"qty":3}"#)).expect("missing nullable column is null");
        assert_eq!(row[1], Value::Null);
    }

    #[test]
    fn a_column_named_twice_in_an_image_is_an_error() {
        let error = plan().decode_row_json(&raw(r#"{"id":1,"name":"a","id":2}"#)).expect_err("duplicate").to_string();
        assert!(error.contains("id") && error.contains("appears twice"), "{error}");
    }

    #[test]
    fn errors_name_the_column() {
        let plan = plan();
        let missing = plan.decode_row_json(&raw(r#"{"id":1}"#)).expect_err("qty missing");
        assert_eq!(missing, DecodeError::missing("qty"));
        let mistyped = plan.decode_row_json(&raw(r#"{"id":1,"qty":"x"}"#)).expect_err("mistyped");
        assert!(mistyped.to_string().starts_with("field qty:"), "{mistyped}");
        let unknown = plan.decode_row_json(&raw(r#"{"id":1,"qty":1,"extra":2}"#)).expect_err("unknown column");
        assert!(unknown.to_string().contains("extra") && unknown.to_string().contains("s.t"), "{unknown}");
        let not_object = plan.decode_row_json(&raw("[1]")).expect_err("array");
        assert!(matches!(not_object, DecodeError::MalformedJson(_)));
    }

    #[test]
    fn unavailable_value_placeholders_are_listed_not_stored() {
        let plan = TablePlan::new(
            "s.docs",
            vec![
                ColumnPlan { name: "id".into(), kind: DebeziumType::Int64, nullable: false },
                ColumnPlan { name: "body".into(), kind: DebeziumType::Utf8, nullable: true },
                ColumnPlan { name: "data".into(), kind: DebeziumType::Binary, nullable: true },
                ColumnPlan { name: "note".into(), kind: DebeziumType::Utf8, nullable: true },
            ],
            vec![0],
        );
        let image: Image = serde_json::from_str(
            r#"{"id":1,"body":"__debezium_unavailable_value","data":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==","note":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="}"#,
        )
        .expect("image");
        let (row, unavailable) = plan.decode_after(&image).expect("after");
        assert_eq!(unavailable, vec![1, 2], "the base64 form is a placeholder only in a bytes column");
        assert_eq!(row, vec![Value::Int64(1), Value::Null, Value::Null, Value::Utf8(UNAVAILABLE_VALUE_BASE64.into())]);
        let error = plan.decode_row(&image).expect_err("no previous row for an insert").to_string();
        assert!(error.contains("body") && error.contains("__debezium_unavailable_value"), "{error}");
        let before: Image = serde_json::from_str(r#"{"id":1,"body":"old","data":null}"#).expect("before");
        assert_eq!(plan.real_value(&before, 1), Ok(Some(Value::Utf8("old".into()))));
        assert_eq!(plan.real_value(&before, 2), Ok(None), "null in a before-image is not a value to keep");
        assert_eq!(plan.real_value(&before, 3), Ok(None));
    }

    #[test]
    fn keys_come_from_partial_images() {
        let plan = plan();
        assert_eq!(plan.decode_key_json(&raw(r#"{"id":7,"name":null,"whatever":1}"#)), Ok(vec![Value::Int64(7)]));
        assert_eq!(plan.decode_key_json(&raw(r#"{"name":"x"}"#)), Err(DecodeError::missing("id")));
        assert!(plan.decode_key_json(&raw(r#"{"id":null}"#)).is_err());
    }
}
