//! Query results to PostgreSQL rows. Column types map Arrow to PostgreSQL OIDs
//! (arrow-pg): Int16/32/64 to int2/int4/int8, Float32/64 to float4/float8,
//! Decimal128 to numeric, Utf8 to text, Boolean to bool, Date32 to date, Timestamp to
//! timestamp or timestamptz, Binary to bytea.

use std::sync::Arc;

use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use futures::{stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldInfo, QueryResponse};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;
use pgwire::types::format::FormatOptions;
use retina_query::datafusion::arrow::datatypes::Schema;
use retina_query::QueryStream;

use super::errors::stream_error;

/// The row description of a result schema.
pub fn fields(schema: &Schema, format: &Format, options: Option<Arc<FormatOptions>>) -> PgWireResult<Vec<FieldInfo>> {
    arrow_schema_to_pg_fields(schema, format, options)
}

/// Starts a query response. The first batch is awaited here, so the expensive part of
/// most analytical queries (scans, joins, aggregation) runs while the caller can still
/// cancel it; an error at that point becomes the statement's error, not a truncated
/// result.
pub async fn query_response(
    mut results: QueryStream,
    format: &Format,
    options: Option<Arc<FormatOptions>>,
) -> PgWireResult<QueryResponse> {
    let fields = Arc::new(fields(results.schema().as_ref(), format, options)?);
    let first = match results.next().await {
        Some(Ok(batch)) => Some(batch),
        Some(Err(error)) => return Err(stream_error(error)),
        None => None,
    };
    let row_fields = Arc::clone(&fields);
    let batches = stream::iter(first.map(Ok)).chain(results);
    let rows = batches.flat_map(move |batch| {
        let rows: Box<dyn Iterator<Item = PgWireResult<DataRow>> + Send + Sync> = match batch {
            Ok(batch) => encode_recordbatch(Arc::clone(&row_fields), batch),
            Err(error) => Box::new(std::iter::once(Err::<DataRow, PgWireError>(stream_error(error)))),
        };
        stream::iter(rows)
    });
    Ok(QueryResponse::new(fields, rows))
}
