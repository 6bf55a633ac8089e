//! Dropping a batch's invisible rows inside its own buffers.
//!
//! A scan masks freshly decoded batches that nobody else holds, and the mask keeps
//! almost every row (stale versions are a few percent). Arrow's filter kernel copies
//! every kept value into newly allocated buffers: for such a batch, that costs about
//! as much as decoding it. Here the kept runs of values are moved down within the
//! decoded buffers instead (no allocation, and the bytes moved are already in cache).
//!
//! Only what is safe to reuse is compacted: a buffer that is not uniquely owned, an
//! array with nulls or a type other than fixed-width primitives and UTF-8/binary
//! strings goes through Arrow's kernel, which gives the same result. No crate offers
//! an in-place filter for Arrow arrays.

use std::sync::Arc;

use arrow_array::types::{ByteArrayType, GenericBinaryType, GenericStringType};
use arrow_array::{make_array, Array, ArrayRef, BooleanArray, GenericByteArray, RecordBatch, RecordBatchOptions};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, Buffer, MutableBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType};
use arrow_select::filter::filter;

/// `batch` with only the rows whose bit in `keep` is set (as
/// `arrow_select::filter::filter_record_batch` would return it).
pub fn keep_rows(batch: RecordBatch, keep: &BooleanBuffer) -> Result<RecordBatch, ArrowError> {
    let kept = keep.count_set_bits();
    let schema = batch.schema();
    let columns: Vec<ArrayRef> = batch.columns().to_vec();
    drop(batch);
    let columns = columns.into_iter().map(|column| keep_values(column, keep, kept)).collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(schema, columns, &RecordBatchOptions::new().with_row_count(Some(kept)))
}

/// One column's kept rows: compacted in place when it can be, else through Arrow's
/// filter kernel.
fn keep_values(column: ArrayRef, keep: &BooleanBuffer, kept: usize) -> Result<ArrayRef, ArrowError> {
    if column.null_count() > 0 || column.nulls().is_some() {
        return filter(&column, &BooleanArray::new(keep.clone(), None));
    }
    let compacted = match column.data_type() {
        DataType::Utf8 => compact_bytes::<GenericStringType<i32>>(column, keep, kept),
        DataType::LargeUtf8 => compact_bytes::<GenericStringType<i64>>(column, keep, kept),
        DataType::Binary => compact_bytes::<GenericBinaryType<i32>>(column, keep, kept),
        DataType::LargeBinary => compact_bytes::<GenericBinaryType<i64>>(column, keep, kept),
        data_type => match data_type.primitive_width() {
            Some(1) => compact_fixed::<i8>(column, keep, kept),
            Some(2) => compact_fixed::<i16>(column, keep, kept),
            Some(4) => compact_fixed::<i32>(column, keep, kept),
            Some(8) => compact_fixed::<i64>(column, keep, kept),
            Some(16) => compact_fixed::<i128>(column, keep, kept),
            _ => Err(column),
        },
    };
    match compacted {
        Ok(array) => Ok(array),
        Err(column) => filter(&column, &BooleanArray::new(keep.clone(), None)),
    }
}

/// A fixed-width column (`T` of its width: the bits are moved, not interpreted).
fn compact_fixed<T: ArrowNativeType>(column: ArrayRef, keep: &BooleanBuffer, kept: usize) -> Result<ArrayRef, ArrayRef> {
    let data = column.to_data();
    // Held by the column and `data` alone: once the column goes, by `data` alone.
    let sole = data.buffers().len() == 1 && data.child_data().is_empty() && data.buffers()[0].strong_count() == 2;
    if !sole || data.buffers()[0].ptr_offset() != 0 {
        return Err(column);
    }
    drop(column);
    let (data_type, len, offset) = (data.data_type().clone(), data.len(), data.offset());
    let buffer = data.buffers()[0].clone();
    drop(data);
    let mut values = match buffer.into_mutable() {
        Ok(values) => values,
        Err(buffer) => return Err(rebuild(data_type, len, offset, vec![buffer])),
    };
    let slots: &mut [T] = values.typed_data_mut();
    let mut write = 0;
    for (start, end) in keep.set_slices() {
        let (from, to) = (offset + start, offset + end);
        if from != write {
            slots.copy_within(from..to, write);
        }
        write += to - from;
    }
    debug_assert_eq!(write, kept);
    values.truncate(kept * std::mem::size_of::<T>());
    Ok(rebuild(data_type, kept, 0, vec![values.into()]))
}

/// A UTF-8 or binary column: values and offsets are both moved down.
fn compact_bytes<B: ByteArrayType>(column: ArrayRef, keep: &BooleanBuffer, kept: usize) -> Result<ArrayRef, ArrayRef> {
    let parts = column.as_any().downcast_ref::<GenericByteArray<B>>().map(|array| (array.offsets().clone(), array.values().clone()));
    let Some((offsets, values)) = parts else { return Err(column) };
    let offsets_buffer: Buffer = offsets.into_inner().into_inner();
    // Held by the column and the clones above alone.
    if offsets_buffer.strong_count() != 2 || values.strong_count() != 2 || offsets_buffer.ptr_offset() != 0 || values.ptr_offset() != 0 {
        return Err(column);
    }
    drop(column);
    let offsets_len = offsets_buffer.len();
    let restore = |offsets: Buffer, values: Buffer| -> ArrayRef {
        let offsets = OffsetBuffer::new(ScalarBuffer::<B::Offset>::new(offsets, 0, offsets_len / std::mem::size_of::<B::Offset>()));
        Arc::new(GenericByteArray::<B>::new(offsets, values, None))
    };
    let (mut offsets, mut bytes) = match (offsets_buffer.into_mutable(), values.into_mutable()) {
        (Ok(offsets), Ok(bytes)) => (offsets, bytes),
        (offsets, bytes) => {
            let back = |b: Result<MutableBuffer, Buffer>| b.map_or_else(|b| b, Buffer::from);
            return Err(restore(back(offsets), back(bytes)));
        }
    };
    let slots: &mut [B::Offset] = offsets.typed_data_mut();
    let bytes_slice = bytes.as_slice_mut();
    let (mut write_row, mut write_byte) = (0usize, 0usize);
    for (start, end) in keep.set_slices() {
        // Read before any write below can reach them (writes never pass reads).
        let (first, last) = (slots[start].as_usize(), slots[end].as_usize());
        if first != write_byte {
            bytes_slice.copy_within(first..last, write_byte);
        }
        for row in start..end {
            let length = slots[row + 1].as_usize() - slots[row].as_usize();
            slots[write_row] = B::Offset::usize_as(write_byte);
            write_byte += length;
            write_row += 1;
        }
    }
    debug_assert_eq!(write_row, kept);
    slots[write_row] = B::Offset::usize_as(write_byte);
    offsets.truncate((kept + 1) * std::mem::size_of::<B::Offset>());
    bytes.truncate(write_byte);
    let offsets = OffsetBuffer::new(ScalarBuffer::<B::Offset>::new(offsets.into(), 0, kept + 1));
    Ok(Arc::new(GenericByteArray::<B>::new(offsets, bytes.into(), None)))
}

/// A single-buffer array of `data_type` from its parts.
fn rebuild(data_type: DataType, len: usize, offset: usize, buffers: Vec<Buffer>) -> ArrayRef {
    let data = arrow_data::ArrayDataBuilder::new(data_type).len(len).offset(offset).buffers(buffers).build();
    match data {
        Ok(data) => make_array(data),
        // Unreachable: the parts are those of a valid array, or its compacted prefix.
        Err(error) => unreachable!("rebuilding a compacted array: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int32Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};
    use arrow_select::filter::filter_record_batch;
    use proptest::prelude::*;

    /// A batch whose buffers nothing else holds, and the addresses of its value buffers.
    fn fresh_batch(rows: usize, with_nulls: bool) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("qty", DataType::Int32, false),
            Field::new("amount", DataType::Float64, false),
            Field::new("tag", DataType::Utf8, with_nulls),
        ]));
        let tags: Vec<Option<String>> =
            (0..rows).map(|i| if with_nulls && i % 7 == 3 { None } else { Some(format!("tag-{}", "x".repeat(i % 5))) }).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i as i64 * 3))),
                Arc::new(Int32Array::from_iter_values((0..rows).map(|i| (i % 100) as i32))),
                Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64 * 0.5))),
                Arc::new(StringArray::from(tags)),
            ],
        )
        .expect("batch")
    }

    fn value_addresses(batch: &RecordBatch) -> Vec<usize> {
        batch.columns().iter().map(|c| c.to_data().buffers().last().map_or(0, |b| b.as_ptr() as usize)).collect()
    }

    #[test]
    fn kept_rows_are_moved_down_inside_the_decoded_buffers() {
        let batch = fresh_batch(1000, false);
        let expected = fresh_batch(1000, false);
        let addresses = value_addresses(&batch);
        let keep = BooleanBuffer::from_iter((0..1000).map(|i| i % 100 != 50 && i != 0 && i != 999));
        let out = keep_rows(batch, &keep).expect("keep rows");
        assert_eq!(out, filter_record_batch(&expected, &BooleanArray::new(keep.clone(), None)).expect("kernel"));
        assert_eq!(value_addresses(&out), addresses, "no column was copied out");
    }

    #[test]
    fn shared_buffers_and_nulls_go_through_the_kernel_with_the_same_result() {
        let batch = fresh_batch(300, true);
        let held = batch.clone(); // another holder: nothing may change under it
        let keep = BooleanBuffer::from_iter((0..300).map(|i| i % 3 != 0));
        let expected = filter_record_batch(&held, &BooleanArray::new(keep.clone(), None)).expect("kernel");
        let out = keep_rows(batch, &keep).expect("keep rows");
        assert_eq!(out, expected);
        assert_eq!(held, fresh_batch(300, true), "the other holder's batch is untouched");
        // A slice that does not start at row 0 cannot be compacted in place either.
        let sliced = fresh_batch(300, false).slice(10, 200);
        let keep = BooleanBuffer::from_iter((0..200).map(|i| i % 2 == 0));
        let expected = filter_record_batch(&sliced, &BooleanArray::new(keep.clone(), None)).expect("kernel");
        assert_eq!(keep_rows(sliced, &keep).expect("keep rows"), expected);
    }

    proptest! {
        #[test]
        fn matches_the_filter_kernel(rows in 0usize..600, prefix in 0usize..600, seed in any::<u64>(), density in 0u32..=100) {
            let prefix = prefix.min(rows);
            let keep = BooleanBuffer::from_iter((0..prefix).map(|i| {
                let x = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                (x >> 33) % 100 < u64::from(density)
            }));
            let expected = filter_record_batch(&fresh_batch(rows, false).slice(0, prefix), &BooleanArray::new(keep.clone(), None)).expect("kernel");
            let out = keep_rows(fresh_batch(rows, false).slice(0, prefix), &keep).expect("keep rows");
            prop_assert_eq!(out, expected);
        }
    }
}
