//! Keeping a batch's visible rows. A scan's mask keeps almost every row (stale
//! versions are a few percent).
//!
//! - A batch with a few holes is cut into zero-copy slices around them
//!   ([`keep_rows_into`]): copying the rows cost the same whether one was left out
//!   or eighty (`retina bench scan --stale-fraction 0.0001`, ~1 hole a batch: 1.07x
//!   a clean scan).
//! - Otherwise the kept runs are copied ([`keep_rows`]): Arrow's filter kernel,
//!   except for byte columns. For UTF-8 and binary columns the kernel's run copy
//!   still recomputes every kept row's offset one at a time, with checked
//!   conversions (`FilterBytes::extend_offsets_slices` in arrow-select 59): on
//!   `retina bench scan` that loop was 40% of the whole filter. Here each kept run is
//!   appended whole through Arrow's byte builder, whose offset shift vectorizes.

use std::sync::Arc;

use arrow_array::types::{ByteArrayType, GenericBinaryType, GenericStringType};
use arrow_array::builder::GenericByteBuilder;
use arrow_array::{Array, ArrayRef, BooleanArray, GenericByteArray, RecordBatch, RecordBatchOptions};
use arrow_buffer::{ArrowNativeType, BooleanBuffer};
use arrow_schema::{ArrowError, DataType};
use arrow_select::filter::FilterBuilder;

/// Slices are cut instead of rows copied while the kept runs average at least this
/// many rows: batches of that size still cost a query engine little per row
/// (`retina bench query --warehouses 10`: no slowdown measured with 512 or 1,024),
/// and at 512 a batch with one stale version in 1,000 rows is sliced too.
pub const MIN_SLICED_RUN_ROWS: usize = 512;

/// Appends `batch`'s rows whose bit in `keep` is set to `out`: as zero-copy slices
/// around the holes when the kept runs are long ([`MIN_SLICED_RUN_ROWS`]), else as
/// one batch with the rows copied ([`keep_rows`]).
pub fn keep_rows_into(batch: &RecordBatch, keep: &BooleanBuffer, out: &mut Vec<RecordBatch>) -> Result<(), ArrowError> {
    if keep.len() != batch.num_rows() {
        return Err(mask_length_error(keep, batch));
    }
    let runs: Vec<(usize, usize)> = keep.set_slices().collect();
    let kept: usize = runs.iter().map(|(start, end)| end - start).sum();
    if runs.is_empty() {
        return Ok(());
    }
    if kept / runs.len() >= MIN_SLICED_RUN_ROWS {
        out.extend(runs.iter().map(|&(start, end)| batch.slice(start, end - start)));
        return Ok(());
    }
    out.push(copy_runs(batch, keep, &runs, kept)?);
    Ok(())
}

fn mask_length_error(keep: &BooleanBuffer, batch: &RecordBatch) -> ArrowError {
    ArrowError::InvalidArgumentError(format!("a mask of {} rows for a batch of {}", keep.len(), batch.num_rows()))
}

/// `batch` with only the rows whose bit in `keep` is set: what
/// `arrow_select::filter::filter_record_batch` returns, computed faster for byte
/// columns.
pub fn keep_rows(batch: &RecordBatch, keep: &BooleanBuffer) -> Result<RecordBatch, ArrowError> {
    if keep.len() != batch.num_rows() {
        return Err(mask_length_error(keep, batch));
    }
    let runs: Vec<(usize, usize)> = keep.set_slices().collect();
    let kept = runs.iter().map(|(start, end)| end - start).sum();
    copy_runs(batch, keep, &runs, kept)
}

/// The rows of `batch` in `runs` (`keep`'s set ranges, `kept` rows) copied into one
/// batch.
fn copy_runs(batch: &RecordBatch, keep: &BooleanBuffer, runs: &[(usize, usize)], kept: usize) -> Result<RecordBatch, ArrowError> {
    let mask = BooleanArray::new(keep.clone(), None);
    let predicate = FilterBuilder::new(&mask).optimize().build();
    let columns = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Utf8 => keep_byte_runs::<GenericStringType<i32>>(column, runs, kept),
            DataType::LargeUtf8 => keep_byte_runs::<GenericStringType<i64>>(column, runs, kept),
            DataType::Binary => keep_byte_runs::<GenericBinaryType<i32>>(column, runs, kept),
            DataType::LargeBinary => keep_byte_runs::<GenericBinaryType<i64>>(column, runs, kept),
            _ => predicate.filter(column),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(batch.schema(), columns, &RecordBatchOptions::new().with_row_count(Some(kept)))
}

/// The rows in `runs` (ascending `start..end` ranges of row indexes) of a byte
/// column, `kept` rows in all. Arrow's builder appends a run's offsets shifted in
/// one pass and its bytes in one copy, and builds the array without validating
/// again what came from a valid array.
fn keep_byte_runs<T: ByteArrayType>(column: &ArrayRef, runs: &[(usize, usize)], kept: usize) -> Result<ArrayRef, ArrowError> {
    let array = column
        .as_any()
        .downcast_ref::<GenericByteArray<T>>()
        .ok_or_else(|| ArrowError::CastError(format!("{} is not a byte array", column.data_type())))?;
    let offsets = array.value_offsets();
    let bytes: usize = runs.iter().map(|&(start, end)| offsets[end].as_usize() - offsets[start].as_usize()).sum();
    let mut builder = GenericByteBuilder::<T>::with_capacity(kept, bytes);
    for &(start, end) in runs {
        builder.append_array(&array.slice(start, end - start))?;
    }
    Ok(Arc::new(builder.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, Float64Array, Int64Array, LargeStringArray, StringArray};
    use arrow_schema::{Field, Schema};
    use arrow_select::filter::filter_record_batch;
    use proptest::prelude::*;

    fn batch(rows: usize, nulls: bool) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("tag", DataType::Utf8, true),
            Field::new("note", DataType::LargeUtf8, false),
            Field::new("raw", DataType::Binary, true),
            Field::new("amount", DataType::Float64, true),
        ]));
        let tag = |i: usize| (!nulls || i % 7 != 3).then(|| format!("tag-{}é", "x".repeat(i % 5)));
        let raw = |i: usize| (!nulls || i % 5 != 1).then(|| vec![i as u8; i % 4]);
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i as i64 * 3))),
                Arc::new(StringArray::from_iter((0..rows).map(tag))),
                Arc::new(LargeStringArray::from_iter_values((0..rows).map(|i| "n".repeat(i % 9)))),
                Arc::new(BinaryArray::from_iter((0..rows).map(raw))),
                Arc::new(Float64Array::from_iter((0..rows).map(|i| (!nulls || i % 3 != 0).then_some(i as f64)))),
            ],
        )
        .expect("batch")
    }

    fn kernel(batch: &RecordBatch, keep: &BooleanBuffer) -> RecordBatch {
        filter_record_batch(batch, &BooleanArray::new(keep.clone(), None)).expect("kernel")
    }

    #[test]
    fn keeps_what_the_kernel_keeps_in_sliced_batches_with_nulls() {
        let whole = batch(1000, true);
        // A slice: offsets that do not start at zero, null bits at an offset.
        let sliced = whole.slice(13, 900);
        let keep = BooleanBuffer::from_iter((0..900).map(|i| i % 100 != 50 && i != 0 && i != 899));
        assert_eq!(keep_rows(&sliced, &keep).expect("keep"), kernel(&sliced, &keep));
    }

    #[test]
    fn a_batch_with_few_holes_is_cut_into_slices_of_its_own_buffers() {
        let source = batch(8192, true);
        let holes = [0, 3000, 5000, 8191];
        let keep = BooleanBuffer::from_iter((0..8192).map(|i| !holes.contains(&i)));
        let mut out = Vec::new();
        keep_rows_into(&source, &keep, &mut out).expect("keep");
        assert_eq!(out.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), vec![2999, 1999, 3190]);
        let values = |b: &RecordBatch| b.column(0).to_data().buffers()[0].as_ptr() as usize;
        assert_eq!(values(&out[0]), values(&source) + 8, "row 1 of the source's own buffer");
        let joined = arrow_select::concat::concat_batches(&source.schema(), &out).expect("concat");
        assert_eq!(joined, kernel(&source, &keep));
        // Many holes: one batch, copied.
        let keep = BooleanBuffer::from_iter((0..8192).map(|i| i % 100 != 50));
        let mut out = Vec::new();
        keep_rows_into(&source, &keep, &mut out).expect("keep");
        assert_eq!(out, vec![kernel(&source, &keep)]);
        // Nothing kept: nothing appended.
        let mut out = Vec::new();
        keep_rows_into(&source, &BooleanBuffer::new_unset(8192), &mut out).expect("keep");
        assert!(out.is_empty());
        assert!(keep_rows_into(&source, &BooleanBuffer::new_set(10), &mut out).is_err());
    }

    #[test]
    fn keeping_nothing_or_everything() {
        let batch = batch(64, true);
        for keep in [BooleanBuffer::new_unset(64), BooleanBuffer::new_set(64)] {
            let out = keep_rows(&batch, &keep).expect("keep");
            assert_eq!(out, kernel(&batch, &keep));
        }
    }

    #[test]
    fn a_mask_of_the_wrong_length_is_an_error() {
        let error = keep_rows(&batch(10, false), &BooleanBuffer::new_set(9)).expect_err("length");
        assert!(error.to_string().contains("a mask of 9 rows for a batch of 10"), "{error}");
    }

    proptest! {
        #[test]
        fn any_mask_keeps_what_the_kernel_keeps(bits in proptest::collection::vec(any::<bool>(), 0..300), nulls: bool, skip in 0usize..20) {
            let rows = bits.len();
            let source = batch(rows + skip, nulls).slice(skip, rows);
            let keep = BooleanBuffer::from_iter(bits);
            prop_assert_eq!(keep_rows(&source, &keep).expect("keep"), kernel(&source, &keep));
        }
    }
}
