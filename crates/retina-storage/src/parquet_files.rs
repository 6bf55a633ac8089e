//! Encoding a virtual file as Parquet, and planning how a projection of one is read
//! back (the reading itself is [`crate::ranged_reads`]).

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderBuilder, RowSelection};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use retina_core::storage::PageBound;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use retina_core::schema_evolution::StoredColumns;
use retina_core::TableSchema;
use crate::column_encoding::{self, CompressionGoal};
use crate::recycled::{RecycledBuffer, ENCODE_BUFFERS};
use parquet::schema::types::ColumnPath;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

/// Rows per decoded batch when reading.
pub(crate) const READ_BATCH_ROWS: usize = 8192;

/// Dictionary bytes past which a column chunk's pages fall back to plain encoding.
/// Parquet's default (1 MiB) keeps a dictionary for a 64K-row file's unique keys,
/// and that one dictionary page must be fetched by every read of the column, so
/// page pruning saved no I/O on key columns; at 64 KiB high-cardinality columns
/// fall back to plain pages (no larger: a dictionary of unique values saves
/// nothing), while columns with few distinct values keep their dictionary.
const DICTIONARY_PAGE_BYTES: usize = 64 * 1024;

/// Encodes `batches` as one Parquet file with a single row group (the virtual file's
/// row group, so row offsets stay valid), page-level statistics and a page index so
/// readers can prune by `_create_ts` and by predicates. Each column's compression and
/// dictionary follow a sample of its values and the lake's `goal` ([`column_encoding`]).
pub(crate) fn encode(schema: &SchemaRef, batches: &[RecordBatch], goal: CompressionGoal) -> Result<RecycledBuffer, parquet::errors::ParquetError> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows.max(1)))
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("retina {}", env!("CARGO_PKG_VERSION")));
    for (index, field) in schema.fields().iter().enumerate() {
        let arrays: Vec<&ArrayRef> = batches.iter().filter_map(|batch| batch.columns().get(index)).collect();
        let choice = column_encoding::choose(&arrays, goal);
        let path = ColumnPath::new(vec![field.name().clone()]);
        if !choice.compress {
            properties = properties.set_column_compression(path.clone(), Compression::UNCOMPRESSED);
        }
        if !choice.dictionary {
            properties = properties.set_column_dictionary_enabled(path, false);
        }
    }
    let properties = properties.build();
    // Encoded pages are rarely larger than the arrays they come from.
    let expected = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    let mut out = ENCODE_BUFFERS.take(expected);
    let mut writer = ArrowWriter::try_new(out.as_mut_vec(), schema.clone(), Some(properties))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    Ok(out)
}

/// What to read of a file, planned from its metadata alone: which stored columns
/// its own width holds, and which rows the page index leaves in.
pub(crate) struct ReadPlan {
    stored: StoredColumns,
    /// Which of the file's rows are read (`None`: all of them).
    pub selected: Option<Vec<bool>>,
}

/// Plans reading the root columns `columns` (ascending) of `table`'s stored layout
/// from a file written under any version of its schema (the file's own width decides
/// what is read; see `retina_core::schema_evolution`), leaving out the pages
/// [`selected_rows`] rules out by `bounds`. Works on the sync and the async builder.
pub(crate) fn plan_read<T>(
    builder: ArrowReaderBuilder<T>,
    table: &TableSchema,
    columns: &[usize],
    bounds: &[PageBound],
) -> (ArrowReaderBuilder<T>, ReadPlan) {
    let stored = StoredColumns::plan(table, builder.schema().fields().len(), columns);
    let selected = if stored.is_identity() && is_flat_row_group(builder.metadata(), builder.schema().fields().len()) {
        selected_rows(builder.metadata(), bounds)
    } else {
        None
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), stored.physical().iter().copied());
    let mut builder = builder.with_projection(mask).with_batch_size(READ_BATCH_ROWS);
    if let Some(selected) = &selected {
        let rows = selected.len();
        builder = builder.with_row_selection(RowSelection::from_consecutive_ranges(kept_ranges(selected).into_iter(), rows));
    }
    (builder, ReadPlan { stored, selected })
}

impl ReadPlan {
    /// The decoded batches in `table`'s stored layout (added columns as NULL).
    pub(crate) fn conform(&self, table: &TableSchema, columns: &[usize], batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, ParquetError> {
        if self.stored.is_identity() {
            return Ok(batches);
        }
        batches
            .iter()
            .map(|batch| self.stored.assemble(table, columns, batch).map_err(|e| ParquetError::General(e.to_string())))
            .collect()
    }
}

/// Whether a file is one row group of flat columns (`fields` Arrow fields, one Parquet
/// leaf each), so that stored column i is Parquet leaf i and row offsets are the
/// file's: what page pruning and [`crate::kept_decode`] rely on.
pub(crate) fn is_flat_row_group(metadata: &ParquetMetaData, fields: usize) -> bool {
    metadata.num_row_groups() == 1 && metadata.file_metadata().schema_descr().num_columns() == fields
}

/// The rows of a file's single row group that may satisfy every bound, from the page
/// index: a page of a bound column is left out when its min/max lie outside the
/// bound or it holds only nulls (a null satisfies no comparison). `None` when the
/// file has no usable page index for any bound or nothing is left out. For a file
/// [`is_flat_row_group`] holds for, read in its own layout.
pub(crate) fn selected_rows(metadata: &ParquetMetaData, bounds: &[PageBound]) -> Option<Vec<bool>> {
    if bounds.is_empty() {
        return None;
    }
    let rows = metadata.row_groups().first().map_or(0, |group| group.num_rows().max(0) as usize);
    let (column_index, offset_index) = (metadata.column_index()?, metadata.offset_index()?);
    let (pages_min_max, locations) = (column_index.first()?, offset_index.first()?);
    let mut selected = vec![true; rows];
    let mut pruned_any = false;
    for bound in bounds {
        let (Some(index), Some(offsets)) = (pages_min_max.get(bound.column), locations.get(bound.column)) else { continue };
        let pages = offsets.page_locations();
        for (page, location) in pages.iter().enumerate() {
            let start = usize::try_from(location.first_row_index).ok()?.min(rows);
            let end = pages.get(page + 1).map_or(Some(rows), |next| usize::try_from(next.first_row_index).ok())?.min(rows);
            let keep = match index {
                ColumnIndexMetaData::INT32(index) if index.is_null_page(page) => false,
                ColumnIndexMetaData::INT64(index) if index.is_null_page(page) => false,
                ColumnIndexMetaData::INT32(index) => match (index.min_value(page), index.max_value(page)) {
                    (Some(&min), Some(&max)) => bound.may_match(i64::from(min), i64::from(max)),
                    _ => true,
                },
                ColumnIndexMetaData::INT64(index) => match (index.min_value(page), index.max_value(page)) {
                    (Some(&min), Some(&max)) => bound.may_match(min, max),
                    _ => true,
                },
                _ => true, // only integer-encoded columns take bounds
            };
            if !keep && start < end {
                selected[start..end].fill(false);
                pruned_any = true;
            }
        }
    }
    pruned_any.then_some(selected)
}

/// The runs of `true` in `selected`, as row ranges.
fn kept_ranges(selected: &[bool]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = None;
    for (row, &keep) in selected.iter().enumerate() {
        match (keep, start) {
            (true, None) => start = Some(row),
            (false, Some(from)) => {
                ranges.push(from..row);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        ranges.push(from..selected.len());
    }
    ranges
}
