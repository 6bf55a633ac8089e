//! Encoding a virtual file as Parquet, and reading a projection of one back.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use retina_core::schema_evolution::StoredColumns;
use retina_core::TableSchema;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

/// Rows per decoded batch when reading.
const READ_BATCH_ROWS: usize = 8192;

/// Encodes `batches` as one Parquet file with a single row group (the virtual file's
/// row group, so row offsets stay valid), page-level statistics and a page index so
/// readers can prune by `_create_ts` and by predicates.
pub(crate) fn encode(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows.max(1)))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("retina {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut out = Vec::with_capacity(rows * 16);
    let mut writer = ArrowWriter::try_new(&mut out, schema.clone(), Some(properties))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    Ok(out)
}

/// Decodes the root columns `columns` (ascending) of a Parquet file.
/// Reads `columns` of `table`'s stored layout from a file written under any version
/// of its schema (the file's own width decides what is read; see
/// `retina_core::schema_evolution`).
pub(crate) fn decode(bytes: Bytes, table: &TableSchema, columns: &[usize]) -> Result<Vec<RecordBatch>, ParquetError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let plan = StoredColumns::plan(table, builder.schema().fields().len(), columns);
    let mask = ProjectionMask::roots(builder.parquet_schema(), plan.physical().iter().copied());
    let reader = builder.with_projection(mask).with_batch_size(READ_BATCH_ROWS).build()?;
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    if plan.is_identity() {
        return Ok(batches);
    }
    batches
        .iter()
        .map(|batch| plan.assemble(table, columns, batch).map_err(|e| ParquetError::General(e.to_string())))
        .collect()
}

