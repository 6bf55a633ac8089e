//! Table schemas: the user's columns as an Arrow schema plus the primary key, and the
//! hidden `_create_ts` column that every stored version carries.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};

/// Name of the hidden column holding each version's creating mirror-transaction ts.
pub const CREATE_TS_COLUMN: &str = "_create_ts";

/// A table's schema.
///
/// Invariants (checked by [`TableSchema::new`]): at least one column, column names
/// distinct, non-empty and without NUL, no column is named [`CREATE_TS_COLUMN`], every primary-key index is in range and distinct, and
/// every column type is one the write buffer can store ([`is_supported_type`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    name: String,
    columns: SchemaRef,
    primary_key: Vec<usize>,
}

impl TableSchema {
    pub fn new(name: impl Into<String>, columns: Schema, primary_key: Vec<usize>) -> CoreResult<Self> {
        let name = name.into();
        let invalid = |reason: String| CoreError::InvalidSchema { table: name.clone(), reason };
        if columns.fields().is_empty() {
            return Err(invalid("a table needs at least one column".into()));
        }
        for (at, field) in columns.fields().iter().enumerate() {
            if field.name().is_empty() || field.name().contains('\0') {
                return Err(invalid(format!("column #{} has the name {:?}: a column name must be non-empty and hold no NUL", at + 1, field.name())));
            }
            if columns.fields()[..at].iter().any(|earlier| earlier.name() == field.name()) {
                return Err(invalid(format!("column {} appears twice", field.name())));
            }
            if field.name() == CREATE_TS_COLUMN {
                return Err(invalid(format!("column name {CREATE_TS_COLUMN} is reserved")));
            }
            if !is_supported_type(field.data_type()) {
                return Err(invalid(format!(
                    "column {} has type {} which Retina cannot store yet",
                    field.name(),
                    field.data_type()
                )));
            }
        }
        if primary_key.is_empty() {
            return Err(invalid("a primary key is required".into()));
        }
        for (i, &column) in primary_key.iter().enumerate() {
            if column >= columns.fields().len() {
                return Err(invalid(format!("primary-key column index {column} is out of range")));
            }
            if primary_key[..i].contains(&column) {
                return Err(invalid(format!("primary-key column {column} is listed twice")));
            }
        }
        Ok(Self { name, columns: Arc::new(columns), primary_key })
    }

    /// Convenience: build from `(name, type, nullable)` triples and primary-key names.
    pub fn from_columns(
        name: impl Into<String>,
        columns: &[(&str, DataType, bool)],
        primary_key: &[&str],
    ) -> CoreResult<Self> {
        let name = name.into();
        let fields: Vec<Field> =
            columns.iter().map(|(n, t, nullable)| Field::new(*n, t.clone(), *nullable)).collect();
        let mut key = Vec::with_capacity(primary_key.len());
        for pk in primary_key {
            let index = columns.iter().position(|(n, _, _)| n == pk).ok_or_else(|| {
                CoreError::InvalidSchema { table: name.clone(), reason: format!("primary-key column {pk} does not exist") }
            })?;
            key.push(index);
        }
        Self::new(name, Schema::new(fields), key)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// This schema with `field` appended. Only nullable columns can be added: rows
    /// stored before read the new column as NULL (see [`crate::schema_evolution`]).
    pub fn with_column(&self, field: Field) -> CoreResult<Self> {
        let invalid = |reason: String| CoreError::InvalidSchema { table: self.name.clone(), reason };
        if !field.is_nullable() {
            return Err(invalid(format!("an added column must be nullable, {} is not", field.name())));
        }
        if self.columns.fields().iter().any(|f| f.name() == field.name()) {
            return Err(invalid(format!("column {} exists already", field.name())));
        }
        let mut fields: Vec<Field> = self.columns.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(field);
        Self::new(self.name.clone(), Schema::new(fields), self.primary_key.clone())
    }

    /// The user-visible columns (without `_create_ts`).
    pub fn columns(&self) -> &SchemaRef {
        &self.columns
    }

    pub fn primary_key(&self) -> &[usize] {
        &self.primary_key
    }

    pub fn column_count(&self) -> usize {
        self.columns.fields().len()
    }

    /// Column `index`'s name for an error message (`#index` when there is none).
    pub fn column_name(&self, index: usize) -> String {
        self.columns.fields().get(index).map_or_else(|| format!("#{index}"), |f| f.name().clone())
    }

    /// The stored schema: the user's columns followed by `_create_ts` (int64, not null).
    pub fn stored_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self.columns.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(CREATE_TS_COLUMN, DataType::Int64, false));
        Arc::new(Schema::new(fields))
    }

    /// Index of `_create_ts` in [`Self::stored_schema`].
    pub fn create_ts_index(&self) -> usize {
        self.column_count()
    }
}

/// Column types the write buffer stores natively.
pub fn is_supported_type(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Boolean
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::Binary
            | DataType::Date32
            | DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _)
            | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
    ) || matches!(data_type, DataType::Decimal128(precision, scale) if is_storable_decimal(*precision, *scale))
}

/// Arrow's own bounds (1 to 38 digits, a scale of at most the precision), and no
/// negative scale, which Parquet's decimal type does not have.
fn is_storable_decimal(precision: u8, scale: i8) -> bool {
    (1..=38).contains(&precision) && u8::try_from(scale).is_ok_and(|scale| scale <= precision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_must_fit_arrow_and_parquet() {
        for (precision, scale, storable) in [(6, 6, true), (38, 0, true), (1, 0, true), (5, 6, false), (5, -2, false), (0, 0, false), (39, 2, false)] {
            assert_eq!(is_supported_type(&DataType::Decimal128(precision, scale)), storable, "({precision}, {scale})");
        }
    }

    #[test]
    fn stored_schema_appends_create_ts() {
        let schema = TableSchema::from_columns(
            "public.t",
            &[("id", DataType::Int64, false), ("name", DataType::Utf8, true)],
            &["id"],
        )
        .expect("valid schema");
        let stored = schema.stored_schema();
        assert_eq!(stored.fields().len(), 3);
        assert_eq!(stored.field(2).name(), CREATE_TS_COLUMN);
        assert_eq!(schema.create_ts_index(), 2);
    }

    #[test]
    fn rejects_reserved_name_missing_key_and_unsupported_type() {
        let reserved = TableSchema::from_columns("t", &[(CREATE_TS_COLUMN, DataType::Int64, false)], &["_create_ts"]);
        assert!(matches!(reserved, Err(CoreError::InvalidSchema { .. })));
        let missing = TableSchema::from_columns("t", &[("id", DataType::Int64, false)], &["nope"]);
        let message = missing.expect_err("missing key column").to_string();
        assert!(message.contains("nope") && message.contains('t'), "{message}");
        let unsupported = TableSchema::from_columns(
            "t",
            &[("id", DataType::Int64, false), ("l", DataType::LargeUtf8, true)],
            &["id"],
        );
        assert!(unsupported.expect_err("unsupported").to_string().contains("column l"));
        let no_key = TableSchema::new("t", Schema::new(vec![Field::new("id", DataType::Int64, false)]), vec![]);
        assert!(no_key.is_err());
    }

    /// A column named twice, or with a NUL (which breaks RowDescription), is refused
    /// when the table is created, naming table and column.
    #[test]
    fn rejects_duplicate_empty_and_nul_column_names() {
        let twice = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false), ("id", DataType::Utf8, true)], &["id"]);
        let message = twice.expect_err("a duplicate").to_string();
        assert!(message.contains("s.t") && message.contains("column id appears twice"), "{message}");
        let nul = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false), ("a\0b", DataType::Utf8, true)], &["id"]);
        assert!(nul.expect_err("a NUL").to_string().contains("column #2"));
        let empty = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false), ("", DataType::Utf8, true)], &["id"]);
        assert!(empty.is_err());
        let cases = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false), ("ID", DataType::Utf8, true)], &["id"]);
        assert!(cases.is_ok(), "PostgreSQL's quoted \"ID\" beside id is two columns; only publication refuses it");
    }
}
