//! Decoding a column chunk's pages straight into the rows a scan keeps.
//!
//! A scan drops the row versions its snapshot cannot see. Decoding every row with
//! parquet-rs and then copying the kept ones out (`retina_core::keep_rows`) writes each
//! kept value twice; with 1% of the rows stale, spread evenly, that second write was
//! the whole of `retina bench scan`'s 1.10-1.13x (stop 41), and skipping the stale rows
//! through a Parquet `RowSelection` cost more (1.35x: its decoders pay per run of rows).
//! Here a page's values are copied from the page (or gathered through its dictionary)
//! run by run of kept rows, straight into the output: one write per kept value.
//!
//! Only what Retina's writer produces is decoded here: one flat column chunk of a
//! required or optional (never repeated) column, data pages v1 or v2, PLAIN or
//! dictionary encoded, of the types whose Arrow layout is the Parquet value's bytes
//! (32/64-bit integers and floats, dates, timestamps in the stored unit) or
//! variable-width bytes (`Utf8`, `Binary`). [`ColumnKind::of`] says which columns
//! qualify; the store reads anything else with parquet-rs.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType,
};
use arrow_array::{ArrayRef, ArrowPrimitiveType, BinaryArray, PrimitiveArray, StringArray};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, TimeUnit};
use parquet::basic::{Encoding, LogicalType, TimeUnit as ParquetTimeUnit, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;

use crate::hybrid_rle;

/// How a qualifying column's values are laid out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ColumnKind {
    /// Fixed-width values whose Arrow bytes are the Parquet PLAIN bytes.
    Fixed { width: usize, data_type: DataType },
    /// Length-prefixed bytes; `utf8` output is validated as UTF-8.
    Bytes { utf8: bool },
}

impl ColumnKind {
    /// The layout of a column chunk read as `data_type`, or `None` when this module
    /// does not decode it (the caller then reads the file with parquet-rs).
    pub(crate) fn of(chunk: &ColumnChunkMetaData, data_type: &DataType) -> Option<Self> {
        let descr = chunk.column_descr();
        // Fixed-width values are taken as native bytes: little-endian only.
        if descr.max_rep_level() != 0 || descr.max_def_level() > 1 || cfg!(target_endian = "big") {
            return None;
        }
        let supported = |encoding: Encoding| {
            matches!(encoding, Encoding::PLAIN | Encoding::RLE | Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY)
        };
        if !chunk.encodings().all(supported) {
            return None;
        }
        let logical = descr.logical_type_ref();
        let fixed = |width| Some(Self::Fixed { width, data_type: data_type.clone() });
        match (descr.physical_type(), data_type) {
            (PhysicalType::INT32, DataType::Int32) if plain_integer(logical, 32) => fixed(4),
            (PhysicalType::INT32, DataType::Date32) if matches!(logical, Some(LogicalType::Date)) => fixed(4),
            (PhysicalType::INT64, DataType::Int64) if plain_integer(logical, 64) => fixed(8),
            (PhysicalType::INT64, DataType::Timestamp(unit, _)) => match (logical, unit) {
                (Some(LogicalType::Timestamp(stored)), unit) => match (&stored.unit, unit) {
                    (ParquetTimeUnit::MILLIS, TimeUnit::Millisecond)
                    | (ParquetTimeUnit::MICROS, TimeUnit::Microsecond)
                    | (ParquetTimeUnit::NANOS, TimeUnit::Nanosecond) => fixed(8),
                    _ => None,
                },
                _ => None,
            },
            (PhysicalType::FLOAT, DataType::Float32) => fixed(4),
            (PhysicalType::DOUBLE, DataType::Float64) => fixed(8),
            (PhysicalType::BYTE_ARRAY, DataType::Utf8) => Some(Self::Bytes { utf8: true }),
            (PhysicalType::BYTE_ARRAY, DataType::Binary) if logical.is_none() => Some(Self::Bytes { utf8: false }),
            _ => None,
        }
    }
}

/// Whether a column's logical type leaves its values signed integers of `bits`.
fn plain_integer(logical: Option<&LogicalType>, bits: i8) -> bool {
    match logical {
        None => true,
        Some(LogicalType::Integer(integer)) => integer.bit_width == bits && integer.is_signed,
        Some(_) => false,
    }
}

/// The rows of a row group a read keeps, as ascending, disjoint runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeptRuns {
    runs: Vec<Range<usize>>,
    kept: usize,
}

impl KeptRuns {
    /// Rows `0..rows` except those whose bit is set in `dropped` (bit `row % 64` of
    /// word `row / 64`; missing words drop nothing).
    pub(crate) fn without(dropped: &[u64], rows: usize) -> Self {
        let mut runs: Vec<Range<usize>> = Vec::new();
        let mut push = |range: Range<usize>| match runs.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ if range.is_empty() => {}
            _ => runs.push(range),
        };
        for start in (0..rows).step_by(64) {
            let end = (start + 64).min(rows);
            let mut word = dropped.get(start / 64).copied().unwrap_or(0);
            let mut at = start;
            while word != 0 {
                let row = start + word.trailing_zeros() as usize;
                if row >= end {
                    break;
                }
                push(at..row);
                at = row + 1;
                word &= word - 1;
            }
            push(at..end);
        }
        let kept = runs.iter().map(Range::len).sum();
        Self { runs, kept }
    }
}

type Result<T> = std::result::Result<T, ParquetError>;

fn corrupt(what: impl std::fmt::Display) -> ParquetError {
    ParquetError::General(what.to_string())
}

/// Decodes the kept rows of one column chunk of `rows` rows from its `pages`.
pub(crate) fn decode_column(pages: &mut dyn PageReader, kind: &ColumnKind, nullable: bool, rows: usize, keep: &KeptRuns) -> Result<ArrayRef> {
    let mut column = ColumnDecoder::new(kind, keep.kept)?;
    let mut runs = keep.runs.iter().cloned().peekable();
    let mut first_row = 0;
    let mut pieces = Vec::new();
    while let Some(page) = pages.get_next_page()? {
        let page = match page {
            Page::DictionaryPage { buf, num_values, encoding, .. } => {
                if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                    return Err(corrupt(format!("a dictionary page encoded as {encoding}")));
                }
                column.dictionary = Some(Dictionary::read(kind, &buf, num_values as usize)?);
                continue;
            }
            Page::DataPage { buf, num_values, encoding, def_level_encoding, .. } => {
                let (levels, values) = if nullable {
                    if def_level_encoding != Encoding::RLE {
                        return Err(corrupt(format!("definition levels encoded as {def_level_encoding}")));
                    }
                    let length = buf.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
                    let end = length.map(|length| length + 4).filter(|&end| end <= buf.len());
                    let end = end.ok_or_else(|| corrupt("definition levels run past their page"))?;
                    (Some(buf.slice(4..end)), buf.slice(end..))
                } else {
                    (None, buf)
                };
                DataPage { rows: num_values as usize, encoding, levels, values }
            }
            Page::DataPageV2 { buf, num_values, encoding, def_levels_byte_len, rep_levels_byte_len, .. } => {
                let split = def_levels_byte_len as usize;
                if rep_levels_byte_len != 0 || split > buf.len() {
                    return Err(corrupt("a v2 page's levels run past it or hold repetition levels"));
                }
                let levels = nullable.then(|| buf.slice(..split));
                DataPage { rows: num_values as usize, encoding, levels, values: buf.slice(split..) }
            }
        };
        let page_rows = first_row..first_row + page.rows;
        if page_rows.end > rows {
            return Err(corrupt(format!("pages hold more than the row group's {rows} rows")));
        }
        // The kept runs that overlap this page, in page-local rows.
        pieces.clear();
        while let Some(run) = runs.peek_mut() {
            if run.start >= page_rows.end {
                break;
            }
            let end = run.end.min(page_rows.end);
            pieces.push(run.start - first_row..end - first_row);
            if run.end <= page_rows.end {
                runs.next();
            } else {
                run.start = page_rows.end;
            }
        }
        column.page(&page, &pieces)?;
        first_row = page_rows.end;
    }
    if first_row != rows {
        return Err(corrupt(format!("pages hold {first_row} of the row group's {rows} rows")));
    }
    column.finish()
}

/// A data page's parts.
struct DataPage {
    rows: usize,
    encoding: Encoding,
    /// Definition levels (RLE/bit-packed, width 1) of an optional column.
    levels: Option<bytes::Bytes>,
    values: bytes::Bytes,
}

/// A column chunk's dictionary.
enum Dictionary {
    Fixed4(Vec<u32>),
    Fixed8(Vec<u64>),
    /// Byte values: `offsets[i]..offsets[i + 1]` of `data`, which ends in
    /// [`SHORT_VALUE`] zero bytes so that a short value is copied with one
    /// fixed-size move rather than a `memcpy` call.
    Bytes { offsets: Vec<usize>, data: Vec<u8> },
}

/// Dictionary values up to this long are copied as this many bytes, then cut.
const SHORT_VALUE: usize = 16;

impl Dictionary {
    fn read(kind: &ColumnKind, buf: &[u8], entries: usize) -> Result<Self> {
        let fixed = |width: usize| buf.get(..entries * width).ok_or_else(|| corrupt("a dictionary page ends early"));
        match kind {
            ColumnKind::Fixed { width: 4, .. } => {
                Ok(Self::Fixed4(fixed(4)?.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()))
            }
            ColumnKind::Fixed { width: 8, .. } => Ok(Self::Fixed8(
                fixed(8)?.chunks_exact(8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).collect(),
            )),
            ColumnKind::Fixed { width, .. } => Err(corrupt(format!("{width}-byte values"))),
            ColumnKind::Bytes { .. } => {
                let mut plain = PlainBytes { data: buf, at: 0 };
                let mut offsets = Vec::with_capacity(entries + 1);
                let mut data = Vec::new();
                offsets.push(0);
                for _ in 0..entries {
                    data.extend_from_slice(plain.next_value()?);
                    offsets.push(data.len());
                }
                data.extend_from_slice(&[0; SHORT_VALUE]);
                Ok(Self::Bytes { offsets, data })
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Fixed4(values) => values.len(),
            Self::Fixed8(values) => values.len(),
            Self::Bytes { offsets, .. } => offsets.len() - 1,
        }
    }
}

/// PLAIN byte values read in order: a 4-byte little-endian length, then the bytes.
struct PlainBytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> PlainBytes<'a> {
    fn next_value(&mut self) -> Result<&'a [u8]> {
        let length = self
            .data
            .get(self.at..self.at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| corrupt("a value's length runs past its page"))?;
        let start = self.at + 4;
        let value = self.data.get(start..start + length).ok_or_else(|| corrupt("a value runs past its page"))?;
        self.at = start + length;
        Ok(value)
    }
}

/// The non-null values of one data page, read in order.
enum PageValues<'a> {
    /// `count` values of the column's width.
    PlainFixed { data: &'a [u8], count: usize, at: usize },
    PlainBytes(PlainBytes<'a>),
    /// Dictionary indices, decoded for the whole page.
    Indices { indices: &'a [u32], at: usize },
}

/// Output of one column, grown page by page.
struct ColumnDecoder {
    kind: ColumnKind,
    dictionary: Option<Dictionary>,
    /// Fixed-width values (empty for a byte column).
    fixed: FixedValues,
    /// Byte values: `offsets[i]..offsets[i + 1]` of `data`.
    offsets: Vec<i32>,
    data: Vec<u8>,
    /// Validity of the rows out so far, started at the first null.
    validity: Option<BooleanBufferBuilder>,
    rows_out: usize,
    /// Rows the column will hold when done.
    kept: usize,
    /// Reused from page to page.
    levels: Vec<u32>,
    indices: Vec<u32>,
}

impl ColumnDecoder {
    fn new(kind: &ColumnKind, kept: usize) -> Result<Self> {
        let (fixed, offsets) = match kind {
            ColumnKind::Fixed { width, .. } => (FixedValues::new(*width, kept)?, Vec::new()),
            ColumnKind::Bytes { .. } => {
                let mut offsets = Vec::with_capacity(kept + 1);
                offsets.push(0);
                (FixedValues::Eight(Vec::new()), offsets)
            }
        };
        Ok(Self {
            kind: kind.clone(),
            dictionary: None,
            fixed,
            offsets,
            data: Vec::new(),
            validity: None,
            rows_out: 0,
            kept,
            levels: Vec::new(),
            indices: Vec::new(),
        })
    }

    /// Appends the rows `pieces` (page-local, ascending, within the page) of `page`.
    fn page(&mut self, page: &DataPage, pieces: &[Range<usize>]) -> Result<()> {
        let mut levels = std::mem::take(&mut self.levels);
        levels.clear();
        let non_null = match &page.levels {
            Some(data) => {
                hybrid_rle::decode(data, 1, page.rows, &mut levels).map_err(|e| corrupt(format!("definition levels: {e}")))?;
                levels.iter().filter(|&&level| level == 1).count()
            }
            None => page.rows,
        };
        let all_valid = non_null == page.rows;
        if matches!(self.kind, ColumnKind::Bytes { .. }) && self.data.capacity() == 0 && non_null > 0 {
            self.reserve_bytes(page, non_null);
        }
        let mut indices = std::mem::take(&mut self.indices);
        indices.clear();
        let result = (|| {
            let mut values = match (page.encoding, &self.kind) {
                (Encoding::PLAIN, &ColumnKind::Fixed { width, .. }) => {
                    let data = page.values.get(..non_null * width).ok_or_else(|| corrupt("a page's values end early"))?;
                    PageValues::PlainFixed { data, count: non_null, at: 0 }
                }
                (Encoding::PLAIN, ColumnKind::Bytes { .. }) => PageValues::PlainBytes(PlainBytes { data: &page.values, at: 0 }),
                (Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY, _) => {
                    if self.dictionary.is_none() {
                        return Err(corrupt("a dictionary-encoded page before any dictionary page"));
                    }
                    let (&bit_width, packed) = page.values.split_first().ok_or_else(|| corrupt("a dictionary-encoded page without values"))?;
                    if non_null > 0 {
                        hybrid_rle::decode(packed, bit_width, non_null, &mut indices)
                            .map_err(|e| corrupt(format!("dictionary indices: {e}")))?;
                    }
                    PageValues::Indices { indices: &indices, at: 0 }
                }
                (encoding, _) => return Err(corrupt(format!("a data page encoded as {encoding}"))),
            };
            if all_valid {
                return self.all_valid_pieces(&mut values, pieces);
            }
            let mut row = 0;
            for piece in pieces {
                let skipped = levels[row..piece.start].iter().filter(|&&level| level == 1).count();
                self.skip(&mut values, skipped)?;
                let mut at = piece.start;
                while at < piece.end {
                    let valid = levels[at] == 1;
                    let span = levels[at..piece.end].iter().take_while(|&&level| (level == 1) == valid).count();
                    if valid {
                        self.take(&mut values, span)?;
                    } else {
                        self.push_nulls(span);
                    }
                    at += span;
                }
                row = piece.end;
            }
            Ok(())
        })();
        self.levels = levels;
        self.indices = indices;
        result
    }

    /// [`Self::page`]'s pieces of a page with a value in every row: row `r` is value
    /// `r`, so a piece is one slice of the values, and indices are checked once a page
    /// (a run of kept rows then costs one copy or gather, not a walk).
    fn all_valid_pieces(&mut self, values: &mut PageValues<'_>, pieces: &[Range<usize>]) -> Result<()> {
        match values {
            PageValues::PlainFixed { data, count, .. } => {
                if pieces.last().is_some_and(|piece| piece.end > *count) {
                    return Err(corrupt(format!("a page holds {count} values, fewer than its rows")));
                }
                self.fixed.extend_plain_runs(data, pieces);
            }
            PageValues::Indices { indices, .. } => {
                self.check_indices(indices)?;
                if pieces.last().is_some_and(|piece| piece.end > indices.len()) {
                    return Err(corrupt("a page holds fewer values than rows"));
                }
                self.gather(pieces.iter().map(|piece| &indices[piece.clone()]))?;
            }
            PageValues::PlainBytes(_) => {
                // Byte values are found by walking their lengths: take counts the rows.
                let mut row = 0;
                for piece in pieces {
                    self.skip(values, piece.start - row)?;
                    self.take(values, piece.len())?;
                    row = piece.end;
                }
                return Ok(());
            }
        }
        let kept = pieces.iter().map(Range::len).sum();
        if let Some(validity) = &mut self.validity {
            validity.append_n(kept, true);
        }
        self.rows_out += kept;
        Ok(())
    }

    /// Errors unless every index in `indices` names an entry of the dictionary.
    fn check_indices(&self, indices: &[u32]) -> Result<()> {
        let Some(dictionary) = &self.dictionary else {
            return Err(corrupt("a dictionary-encoded page before any dictionary page"));
        };
        // One reduction the compiler vectorizes, rather than a check per value.
        let largest = indices.iter().fold(0, |largest, &index| largest.max(index));
        if !indices.is_empty() && largest as usize >= dictionary.len() {
            return Err(corrupt(format!("dictionary index {largest} past the dictionary's {} entries", dictionary.len())));
        }
        Ok(())
    }

    /// Appends the dictionary entries named by each of `runs` of indices (checked by
    /// [`Self::check_indices`]). A page's runs come in one call so that the dictionary
    /// and the outputs are matched once a page, not once a run.
    fn gather<'i>(&mut self, runs: impl Iterator<Item = &'i [u32]>) -> Result<()> {
        match (&self.dictionary, &mut self.fixed) {
            (Some(Dictionary::Fixed4(values)), FixedValues::Four(out)) => runs.for_each(|indices| gather_fixed(out, values, indices)),
            (Some(Dictionary::Fixed8(values)), FixedValues::Eight(out)) => runs.for_each(|indices| gather_fixed(out, values, indices)),
            (Some(Dictionary::Bytes { offsets, data }), _) => {
                let (out, ends) = (&mut self.data, &mut self.offsets);
                // `ends` was sized for every kept row when the column started.
                for indices in runs {
                    for &index in indices {
                        let index = index as usize;
                        let (start, end) = (offsets[index], offsets[index + 1]);
                        match data.get(start..).and_then(<[u8]>::first_chunk::<SHORT_VALUE>) {
                            Some(short) if end - start <= SHORT_VALUE => {
                                let length = out.len() + end - start;
                                out.extend_from_slice(short);
                                out.truncate(length);
                            }
                            _ => out.extend_from_slice(&data[start..end]),
                        }
                        // Offsets only grow: the check after the loop covers them all.
                        ends.push(out.len() as i32);
                    }
                }
                check_byte_offsets(out.len())?;
            }
            (Some(_), _) => return Err(corrupt("a dictionary of another width than its column")),
            (None, _) => return Err(corrupt("a dictionary-encoded page before any dictionary page")),
        }
        Ok(())
    }

    /// Passes over the next `n` non-null values.
    fn skip(&mut self, values: &mut PageValues<'_>, n: usize) -> Result<()> {
        match values {
            PageValues::PlainFixed { count, at, .. } => advance(at, n, *count),
            PageValues::Indices { indices, at } => advance(at, n, indices.len()),
            PageValues::PlainBytes(plain) => (0..n).try_for_each(|_| plain.next_value().map(drop)),
        }
    }

    /// Appends the next `n` non-null values as valid rows.
    fn take(&mut self, values: &mut PageValues<'_>, n: usize) -> Result<()> {
        match values {
            PageValues::PlainFixed { data, count, at } => {
                let from = *at;
                advance(at, n, *count)?;
                self.fixed.extend_plain_runs(data, &[from..*at]);
            }
            PageValues::Indices { indices, at } => {
                let from = *at;
                advance(at, n, indices.len())?;
                let taken = &indices[from..*at];
                self.check_indices(taken)?;
                self.gather(std::iter::once(taken))?;
            }
            PageValues::PlainBytes(plain) => {
                for _ in 0..n {
                    self.data.extend_from_slice(plain.next_value()?);
                    self.offsets.push(self.data.len() as i32);
                }
                check_byte_offsets(self.data.len())?;
            }
        }
        if let Some(validity) = &mut self.validity {
            validity.append_n(n, true);
        }
        self.rows_out += n;
        Ok(())
    }

    /// Reserves the byte values of the rows still to come, estimated from `page`'s
    /// values, so the output grows once rather than by doubling.
    fn reserve_bytes(&mut self, page: &DataPage, non_null: usize) {
        let per_value = match (&self.dictionary, page.encoding) {
            (_, Encoding::PLAIN) => page.values.len().saturating_sub(4 * non_null) / non_null,
            (Some(Dictionary::Bytes { offsets, data }), _) => (data.len() - SHORT_VALUE) / offsets.len().max(2).saturating_sub(1),
            _ => 0,
        };
        self.data.reserve(per_value.saturating_mul(self.kept.saturating_sub(self.rows_out)) + SHORT_VALUE);
    }

    fn push_nulls(&mut self, n: usize) {
        let rows_out = self.rows_out;
        self.validity
            .get_or_insert_with(|| {
                let mut validity = BooleanBufferBuilder::new(rows_out + n);
                validity.append_n(rows_out, true);
                validity
            })
            .append_n(n, false);
        match self.kind {
            ColumnKind::Fixed { .. } => self.fixed.push_zeros(n),
            ColumnKind::Bytes { .. } => {
                let end = self.offsets.last().copied().unwrap_or(0);
                self.offsets.extend(std::iter::repeat_n(end, n));
            }
        }
        self.rows_out += n;
    }

    fn finish(self) -> Result<ArrayRef> {
        let rows = self.rows_out;
        let nulls = self.validity.map(|mut validity| NullBuffer::new(validity.finish()));
        match self.kind {
            ColumnKind::Fixed { data_type, .. } => {
                let values = self.fixed.into_buffer();
                Ok(match &data_type {
                    DataType::Int32 => primitive::<Int32Type>(values, rows, nulls)?,
                    DataType::Date32 => primitive::<Date32Type>(values, rows, nulls)?,
                    DataType::Int64 => primitive::<Int64Type>(values, rows, nulls)?,
                    DataType::Float32 => primitive::<Float32Type>(values, rows, nulls)?,
                    DataType::Float64 => primitive::<Float64Type>(values, rows, nulls)?,
                    DataType::Timestamp(TimeUnit::Millisecond, zone) => {
                        Arc::new(typed::<TimestampMillisecondType>(values, rows, nulls)?.with_timezone_opt(zone.clone()))
                    }
                    DataType::Timestamp(TimeUnit::Microsecond, zone) => {
                        Arc::new(typed::<TimestampMicrosecondType>(values, rows, nulls)?.with_timezone_opt(zone.clone()))
                    }
                    DataType::Timestamp(TimeUnit::Nanosecond, zone) => {
                        Arc::new(typed::<TimestampNanosecondType>(values, rows, nulls)?.with_timezone_opt(zone.clone()))
                    }
                    other => return Err(corrupt(format!("{other} is not decoded here"))),
                })
            }
            ColumnKind::Bytes { utf8 } => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
                let binary = BinaryArray::try_new(offsets, Buffer::from_vec(self.data), nulls)?;
                Ok(match utf8 {
                    true => Arc::new(StringArray::try_from_binary(binary)?),
                    false => Arc::new(binary),
                })
            }
        }
    }
}

fn advance(at: &mut usize, n: usize, count: usize) -> Result<()> {
    if *at + n > count {
        return Err(corrupt(format!("a page holds {count} values, fewer than its rows need")));
    }
    *at += n;
    Ok(())
}

/// Appends `values[index]` for each of `indices`, all within `values`. A `Vec`
/// extended from a slice's iterator reserves once and writes each value once; a byte
/// `MutableBuffer` had either to check its capacity per value (costlier than the
/// gather) or to be zero-filled first (a second write: 5% of a scan).
fn gather_fixed<T: Copy + Default>(out: &mut Vec<T>, values: &[T], indices: &[u32]) {
    out.extend(indices.iter().map(|&index| values.get(index as usize).copied().unwrap_or_default()));
}

/// A fixed-width column's output values, typed by width; Arrow reads their bytes as
/// the column's type.
enum FixedValues {
    Four(Vec<u32>),
    Eight(Vec<u64>),
}

impl FixedValues {
    fn new(width: usize, capacity: usize) -> Result<Self> {
        match width {
            4 => Ok(Self::Four(Vec::with_capacity(capacity))),
            8 => Ok(Self::Eight(Vec::with_capacity(capacity))),
            width => Err(corrupt(format!("{width}-byte values"))),
        }
    }

    /// Appends values `runs` (ascending, within `values`) of a page's PLAIN values of
    /// this width, matched on the width once for all of a page's runs.
    fn extend_plain_runs(&mut self, values: &[u8], runs: &[Range<usize>]) {
        match self {
            Self::Four(out) => {
                for run in runs {
                    let bytes = &values[run.start * 4..run.end * 4];
                    out.extend(bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])));
                }
            }
            Self::Eight(out) => {
                for run in runs {
                    let bytes = &values[run.start * 8..run.end * 8];
                    out.extend(bytes.chunks_exact(8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])));
                }
            }
        }
    }

    fn push_zeros(&mut self, n: usize) {
        match self {
            Self::Four(out) => out.resize(out.len() + n, 0),
            Self::Eight(out) => out.resize(out.len() + n, 0),
        }
    }

    fn into_buffer(self) -> Buffer {
        match self {
            Self::Four(out) => Buffer::from_vec(out),
            Self::Eight(out) => Buffer::from_vec(out),
        }
    }
}

/// A byte column's offsets are `i32`: its values must stay within 2 GiB.
fn check_byte_offsets(len: usize) -> Result<()> {
    match i32::try_from(len) {
        Ok(_) => Ok(()),
        Err(_) => Err(corrupt("a column chunk's values pass 2 GiB")),
    }
}

fn typed<T: ArrowPrimitiveType>(values: Buffer, rows: usize, nulls: Option<NullBuffer>) -> Result<PrimitiveArray<T>> {
    if values.len() != rows * std::mem::size_of::<T::Native>() {
        return Err(corrupt(format!("{} value bytes for {rows} rows", values.len())));
    }
    Ok(PrimitiveArray::try_new(ScalarBuffer::new(values, 0, rows), nulls)?)
}

fn primitive<T: ArrowPrimitiveType>(values: Buffer, rows: usize, nulls: Option<NullBuffer>) -> Result<ArrayRef> {
    Ok(Arc::new(typed::<T>(values, rows, nulls)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, BooleanArray, Date32Array, Float64Array, Int16Array, Int32Array, Int64Array, RecordBatch, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema};
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::SerializedPageReader;
    use proptest::prelude::*;

    /// A column of `rows` values drawn from `distinct` choices, some null.
    fn columns(rows: usize, distinct: u64, nulls: bool, seed: u64) -> Vec<(Field, ArrayRef)> {
        let pick = |row: usize, salt: u64| (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(seed ^ salt) % distinct;
        let null = |row: usize| nulls && pick(row, 7) % 5 == 0;
        let ints: Int32Array = (0..rows).map(|r| (!null(r)).then(|| (pick(r, 1) as i32).wrapping_sub(3))).collect();
        let longs: Int64Array = (0..rows).map(|r| (pick(r, 2) as i64).wrapping_mul(1_000_003)).collect();
        let floats: Float64Array = (0..rows).map(|r| (!null(r)).then(|| pick(r, 3) as f64 * 0.25)).collect();
        let texts: StringArray = (0..rows).map(|r| (!null(r)).then(|| format!("é-{}", "x".repeat(pick(r, 4) as usize % 30)) + &pick(r, 5).to_string())).collect();
        let bytes: BinaryArray = (0..rows).map(|r| Some(pick(r, 6).to_le_bytes()[..(r % 8)].to_vec())).collect();
        let dates: Date32Array = (0..rows).map(|r| (!null(r)).then(|| pick(r, 8) as i32)).collect();
        let stamps = TimestampMicrosecondArray::from_iter((0..rows).map(|r| (!null(r)).then(|| pick(r, 9) as i64))).with_timezone("UTC");
        let field = |name: &str, array: &ArrayRef| Field::new(name, array.data_type().clone(), array.null_count() > 0 || nulls);
        let arrays: Vec<(&str, ArrayRef)> = vec![
            ("ints", Arc::new(ints)),
            ("longs", Arc::new(longs)),
            ("floats", Arc::new(floats)),
            ("texts", Arc::new(texts)),
            ("bytes", Arc::new(bytes)),
            ("dates", Arc::new(dates)),
            ("stamps", Arc::new(stamps)),
        ];
        arrays.into_iter().map(|(name, array)| (field(name, &array), array)).collect()
    }

    fn write(batch: &RecordBatch, properties: WriterProperties) -> Bytes {
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(properties)).expect("writer");
        for start in (0..batch.num_rows()).step_by(300) {
            writer.write(&batch.slice(start, 300.min(batch.num_rows() - start))).expect("write");
        }
        writer.close().expect("close");
        Bytes::from(out)
    }

    /// What parquet-rs decodes, with the dropped rows filtered out afterwards.
    fn expected(file: &Bytes, keep: &BooleanArray) -> Vec<ArrayRef> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(file.clone()).expect("builder").with_batch_size(1 << 20).build().expect("reader");
        let batches: Vec<RecordBatch> = reader.collect::<std::result::Result<_, _>>().expect("read");
        let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).expect("concat");
        all.columns().iter().map(|column| arrow_select::filter::filter(column, keep).expect("filter")).collect()
    }

    /// Each column decoded here, `None` for one left to parquet-rs (v2 writers encode
    /// some columns with DELTA encodings).
    fn decoded(file: &Bytes, dropped: &[u64], rows: usize) -> Vec<Option<ArrayRef>> {
        let reader = SerializedFileReader::new(file.clone()).expect("file");
        let schema = ParquetRecordBatchReaderBuilder::try_new(file.clone()).expect("builder").schema().clone();
        let group = reader.metadata().row_group(0);
        let keep = KeptRuns::without(dropped, rows);
        (0..group.num_columns())
            .map(|column| {
                let chunk = group.column(column);
                let kind = ColumnKind::of(chunk, schema.field(column).data_type())?;
                let mut pages = SerializedPageReader::new(Arc::new(file.clone()), chunk, rows, None).expect("pages");
                Some(decode_column(&mut pages, &kind, chunk.column_descr().max_def_level() > 0, rows, &keep).expect("decodes"))
            })
            .collect()
    }

    proptest! {
        #[test]
        fn kept_rows_decode_as_parquet_rs_then_filter(
            rows in 1usize..2500,
            distinct in prop_oneof![Just(1u64), Just(7), Just(300), Just(u64::MAX)],
            nulls in any::<bool>(),
            drop_share in prop_oneof![Just(0.0), Just(0.01), Just(0.3), Just(1.0)],
            seed in any::<u64>(),
            v2 in any::<bool>(),
            snappy in any::<bool>(),
            dictionary_bytes in prop_oneof![Just(64usize), Just(1 << 20)],
            page_rows in prop_oneof![Just(50usize), Just(20_000)],
        ) {
            let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns(rows, distinct, nulls, seed).into_iter().unzip();
            let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("batch");
            let properties = WriterProperties::builder()
                .set_writer_version(if v2 { WriterVersion::PARQUET_2_0 } else { WriterVersion::PARQUET_1_0 })
                .set_compression(if snappy { Compression::SNAPPY } else { Compression::UNCOMPRESSED })
                .set_dictionary_page_size_limit(dictionary_bytes)
                .set_data_page_row_count_limit(page_rows)
                .set_write_batch_size(page_rows.min(1024))
                .build();
            let file = write(&batch, properties);
            let mut dropped = vec![0u64; rows.div_ceil(64)];
            let mut state = seed | 1;
            for row in 0..rows {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if (state % 1000) as f64 / 1000.0 < drop_share {
                    dropped[row / 64] |= 1 << (row % 64);
                }
            }
            let keep: BooleanArray = (0..rows).map(|row| Some(dropped[row / 64] >> (row % 64) & 1 == 0)).collect();
            let want = expected(&file, &keep);
            let got = decoded(&file, &dropped, rows);
            if !v2 {
                prop_assert!(got.iter().all(Option::is_some), "a v1 file's columns are all decoded here");
            }
            for (column, (got, want)) in got.iter().zip(&want).enumerate() {
                if let Some(got) = got {
                    prop_assert_eq!(got.as_ref(), want.as_ref(), "column {}", column);
                }
            }
        }
    }

    #[test]
    fn kept_runs_join_across_words_and_stop_at_the_row_count() {
        let mut dropped = vec![0u64; 3];
        dropped[0] |= 1 << 3;
        dropped[1] |= 1 << 63;
        dropped[2] = u64::MAX;
        let keep = KeptRuns::without(&dropped, 140);
        assert_eq!(keep.runs, vec![0..3, 4..127, 140..140].into_iter().filter(|r| !r.is_empty()).collect::<Vec<_>>());
        assert_eq!(keep.kept, 126);
        assert_eq!(KeptRuns::without(&[], 5).runs, vec![0..5]);
    }

    #[test]
    fn columns_of_other_types_are_left_to_parquet_rs() {
        let array: ArrayRef = Arc::new(Int16Array::from(vec![1, 2, 3]));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![Field::new("small", DataType::Int16, false)])), vec![array]).expect("batch");
        let file = write(&batch, WriterProperties::builder().build());
        let reader = SerializedFileReader::new(file).expect("file");
        assert_eq!(ColumnKind::of(reader.metadata().row_group(0).column(0), &DataType::Int16), None);
    }

    #[test]
    fn pages_short_of_the_row_count_are_an_error() {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("longs", DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from_iter_values(0..100)) as ArrayRef],
        )
        .expect("batch");
        let file = write(&batch, WriterProperties::builder().set_dictionary_enabled(false).build());
        let reader = SerializedFileReader::new(file.clone()).expect("file");
        let chunk = reader.metadata().row_group(0).column(0).clone();
        let kind = ColumnKind::of(&chunk, &DataType::Int64).expect("decoded here");
        let mut pages = SerializedPageReader::new(Arc::new(file), &chunk, 100, None).expect("pages");
        let error = decode_column(&mut pages, &kind, false, 101, &KeptRuns::without(&[], 101)).expect_err("too few rows");
        assert!(error.to_string().contains("100 of the row group's 101 rows"), "{error}");
    }
}
