//! Query results to PostgreSQL rows. Column types map Arrow to PostgreSQL OIDs
//! (arrow-pg): Int16/32/64 to int2/int4/int8, Float32/64 to float4/float8,
//! Decimal128 to numeric, Utf8 to text, Boolean to bool, Date32 to date, Timestamp to
//! timestamp or timestamptz, Binary to bytea. Floats, timestamps and times in text
//! are written as PostgreSQL writes them ([`super::text_values`]), and nulls as SQL
//! NULL whatever their type ([`encode_cell`]).

use std::sync::Arc;

use arrow_pg::datatypes::arrow_schema_to_pg_fields;
use arrow_pg::encoder::{encode_value, Encoder};
use futures::{stream, Stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{DataRowEncoder, FieldInfo, QueryResponse};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;
use pgwire::types::format::FormatOptions;
use retina_query::datafusion::arrow::array::{Array, ArrayRef};
use retina_query::datafusion::arrow::datatypes::{Field, Schema};
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::pg_compat::numeric_typmod;
use retina_query::QueryStream;

use super::errors::stream_error;
use super::text_values::as_postgres_text;

/// The row description of a result schema: PostgreSQL's name for a column where
/// `names` gives one ([`super::column_names`]), and a decimal's precision and scale
/// as its type modifier (clients show the scale from it; -1 read as "no scale").
pub fn fields(
    schema: &Schema,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
    names: &[Option<String>],
) -> PgWireResult<Vec<FieldInfo>> {
    let fields = arrow_schema_to_pg_fields(schema, format, options)?;
    Ok(fields
        .into_iter()
        .zip(schema.fields().iter())
        .enumerate()
        .map(|(index, (field, arrow))| {
            let modifier = numeric_typmod(arrow.data_type()).unwrap_or_else(|| field.type_modifier());
            let name = names.get(index).cloned().flatten().unwrap_or_else(|| field.name().to_string());
            FieldInfo::new(name, field.table_id(), field.column_id(), field.datatype().clone(), field.format())
                .with_format_options(Arc::clone(field.format_options()))
                .with_type_size(field.type_size())
                .with_type_modifier(modifier)
        })
        .collect())
}

/// Starts a query response. The first batch is awaited here, so the expensive part of
/// most analytical queries (scans, joins, aggregation) runs while the caller can still
/// cancel it; an error at that point becomes the statement's error, not a truncated
/// result.
pub async fn query_response(
    mut results: QueryStream,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
    names: &[Option<String>],
) -> PgWireResult<QueryResponse> {
    let fields = Arc::new(fields(results.schema().as_ref(), format, options, names)?);
    let first = match results.next().await {
        Some(Ok(batch)) => Some(batch),
        Some(Err(error)) => return Err(stream_error(error)),
        None => None,
    };
    let batches = stream::iter(first.map(Ok)).chain(results).map(|batch| batch.map_err(stream_error));
    let rows = encode_batches(Arc::clone(&fields), batches);
    Ok(QueryResponse::new(fields, rows))
}

/// `batches` as rows described by `fields`; an error ends the rows with it.
pub fn encode_batches(
    fields: Arc<Vec<FieldInfo>>,
    batches: impl Stream<Item = PgWireResult<RecordBatch>> + Send + 'static,
) -> impl Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    batches.flat_map(move |batch| {
        let rows: Box<dyn Iterator<Item = PgWireResult<DataRow>> + Send + Sync> = match batch {
            Ok(batch) => match as_postgres_text(batch, &fields) {
                Ok(batch) => Box::new(data_rows(Arc::clone(&fields), batch)),
                Err(error) => Box::new(std::iter::once(Err(PgWireError::ApiError(Box::new(error))))),
            },
            Err(error) => Box::new(std::iter::once(Err::<DataRow, PgWireError>(error))),
        };
        stream::iter(rows)
    })
}


/// The rows of `batch`, each value through [`encode_cell`].
fn data_rows(fields: Arc<Vec<FieldInfo>>, batch: RecordBatch) -> impl Iterator<Item = PgWireResult<DataRow>> + Send + Sync {
    let mut encoder = DataRowEncoder::new(Arc::clone(&fields));
    (0..batch.num_rows()).map(move |row| {
        let schema = batch.schema_ref();
        for (column, array) in batch.columns().iter().enumerate() {
            encode_cell(&mut encoder, array, row, schema.field(column), &fields[column])?;
        }
        Ok(encoder.take_row())
    })
}

/// One value of a result through arrow-pg's encoder, except a null: arrow-pg reads
/// an interval's slot without checking it (a NULL interval went out as
/// `00:00:00`), so every null is written here as SQL NULL, whatever its type.
pub fn encode_cell<E: Encoder>(encoder: &mut E, array: &ArrayRef, row: usize, arrow_field: &Field, pg_field: &FieldInfo) -> PgWireResult<()> {
    if array.is_null(row) {
        return encoder.encode_field(&None::<i32>, pg_field);
    }
    encode_value(encoder, array, row, arrow_field, pg_field)
}
