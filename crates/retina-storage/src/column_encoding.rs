//! Per-column encoding choices for a data file, made from a sample of its values.
//!
//! Mirrored tables often hold columns that neither compression nor a dictionary can
//! shrink: random text, unique keys, hashes. Snappy over such a column saved ~8% of
//! its bytes and took 41% of the flusher's CPU (perf, `retina ingest` of a
//! CH-benCHmark `stock` stream), and the dictionary of a column of unique values is
//! built and then abandoned for plain pages. A small sample per column predicts both
//! outcomes for a fraction of the cost, so such columns are written uncompressed and
//! without a dictionary; every other column keeps Snappy and its dictionary. Readers
//! need nothing new: compression and dictionary are per-column-chunk choices in
//! Parquet. Columns of distinct numbers need a larger saving to be compressed
//! ([`MIN_SAVING_DISTINCT_NUMBERS`]): what Snappy saves there costs scans more than
//! the bytes are worth.

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::types::ByteArrayType;
use arrow_array::{Array, ArrayRef, GenericByteArray};
use arrow_schema::DataType;

/// Value bytes sampled per column: small beside a file's column (megabytes), large
/// enough for Snappy's 64-KiB block to find whatever repetition the column has.
const SAMPLE_BYTES: usize = 64 * 1024;

/// Below this many sampled bytes a column is too small for the choice to matter.
const MIN_SAMPLE_BYTES: usize = 4 * 1024;

/// Compression is kept when it saves at least this share of the sample's bytes.
const MIN_SAVING: f64 = 0.10;

/// The same for a fixed-width column of distinct values (plain pages of numbers).
/// Snappy finds only short matches in them, the high bytes neighbouring values
/// share, and such pages decompress at ~0.55 GB/s (64K ascending `i64`: half the
/// bytes saved): about half of a scan's time in `retina bench scan` (stop 44). A
/// scan reads the file many times while it is hot, so only a saving of three
/// quarters or more is worth that.
const MIN_SAVING_DISTINCT_NUMBERS: f64 = 0.75;

/// Values sampled for the distinct count.
const DISTINCT_SAMPLE_VALUES: usize = 1024;

/// A dictionary is left out when at least this share of the sampled values differ.
const MAX_DISTINCT_SHARE: f64 = 0.9;

/// What a lake's data files favour when a column compresses only a little. No
/// default: the store picks by where the lake is (`ParquetLakeStore::compressing_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionGoal {
    /// Columns of distinct numbers stay uncompressed unless Snappy saves three
    /// quarters ([`MIN_SAVING_DISTINCT_NUMBERS`]): scans decode them about twice as
    /// fast, and all-numeric tables take ~40% more bytes. Suits a local disk.
    FastScans,
    /// Every column is compressed where Snappy saves a tenth: smaller files for an
    /// object store, where each byte fetched costs time and money.
    SmallFiles,
}

/// What the sample says about one column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColumnEncoding {
    pub compress: bool,
    pub dictionary: bool,
}

impl ColumnEncoding {
    const DEFAULT: Self = Self { compress: true, dictionary: true };
}

/// The encoding choice for a column from its arrays (the file's batches, in order),
/// towards `goal`. Types without a sample (booleans, nested, ...) keep the defaults.
pub(crate) fn choose(arrays: &[&ArrayRef], goal: CompressionGoal) -> ColumnEncoding {
    let mut sample = Sample::default();
    for array in arrays {
        if sample.bytes.len() >= SAMPLE_BYTES {
            break;
        }
        if sample.add(array).is_none() {
            return ColumnEncoding::DEFAULT;
        }
    }
    if sample.bytes.len() < MIN_SAMPLE_BYTES {
        return ColumnEncoding::DEFAULT;
    }
    let dictionary = !mostly_distinct(&sample);
    let distinct_numbers = sample.fixed_width && !dictionary;
    let min_saving = match goal {
        CompressionGoal::FastScans if distinct_numbers => MIN_SAVING_DISTINCT_NUMBERS,
        _ => MIN_SAVING,
    };
    ColumnEncoding { compress: compresses(&sample.bytes, min_saving), dictionary }
}

/// The leading values of a column: their bytes (copied, about [`SAMPLE_BYTES`]) and
/// where each of the first [`DISTINCT_SAMPLE_VALUES`] ends in them.
#[derive(Default)]
struct Sample {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Values of a fixed-width type (numbers, dates, timestamps).
    fixed_width: bool,
}

impl Sample {
    /// Appends the leading values of `array` up to [`SAMPLE_BYTES`] in all; `None` for
    /// a type that is not sampled.
    fn add(&mut self, array: &ArrayRef) -> Option<()> {
        match array.data_type() {
            DataType::Utf8 => self.add_bytes(array.as_string::<i32>()),
            DataType::LargeUtf8 => self.add_bytes(array.as_string::<i64>()),
            DataType::Binary => self.add_bytes(array.as_binary::<i32>()),
            DataType::LargeBinary => self.add_bytes(array.as_binary::<i64>()),
            data_type => {
                let width = data_type.primitive_width()?;
                self.fixed_width = true;
                let data = array.to_data();
                let buffer = data.buffers().first()?;
                let count = data.len().min(SAMPLE_BYTES.saturating_sub(self.bytes.len()) / width);
                let start = data.offset() * width;
                let values = buffer.as_slice().get(start..start + count * width)?;
                for value in values.chunks_exact(width) {
                    self.push(value);
                }
            }
        }
        Some(())
    }

    /// The leading values of a string or binary array.
    /// (A null's slot is sampled as the empty value it holds.)
    fn add_bytes<T: ByteArrayType>(&mut self, array: &GenericByteArray<T>) {
        for index in 0..array.len() {
            let value: &[u8] = array.value(index).as_ref();
            if self.bytes.len() + value.len() > SAMPLE_BYTES {
                return;
            }
            self.push(value);
        }
    }

    /// Only the first [`DISTINCT_SAMPLE_VALUES`] ends are kept: the distinct count
    /// reads no more.
    fn push(&mut self, value: &[u8]) {
        self.bytes.extend_from_slice(value);
        if self.ends.len() < DISTINCT_SAMPLE_VALUES {
            self.ends.push(self.bytes.len());
        }
    }
}

/// Whether Snappy saves at least `min_saving` of the sample.
fn compresses(bytes: &[u8], min_saving: f64) -> bool {
    let mut encoder = snap::raw::Encoder::new();
    match encoder.compress_vec(bytes) {
        Ok(compressed) => (compressed.len() as f64) <= bytes.len() as f64 * (1.0 - min_saving),
        Err(_) => true,
    }
}

/// Whether at least [`MAX_DISTINCT_SHARE`] of the first sampled values differ (nulls
/// are sampled as empty values; they are not in the dictionary either way).
fn mostly_distinct(sample: &Sample) -> bool {
    let mut seen = HashSet::with_capacity(DISTINCT_SAMPLE_VALUES);
    let mut start = 0;
    let mut count = 0usize;
    for &end in &sample.ends {
        seen.insert(&sample.bytes[start..end]);
        start = end;
        count += 1;
    }
    count > 0 && seen.len() as f64 >= count as f64 * MAX_DISTINCT_SHARE
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{BooleanArray, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{Compression, Encoding};
    use rand::{Rng, SeedableRng};

    use super::*;

    fn random_text(rows: usize, seed: u64) -> ArrayRef {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let values: Vec<String> = (0..rows)
            .map(|_| (0..24).map(|_| char::from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..62)])).collect())
            .collect();
        Arc::new(StringArray::from(values))
    }

    fn repeated_text(rows: usize) -> ArrayRef {
        Arc::new(StringArray::from((0..rows).map(|i| format!("status-{}", i % 7)).collect::<Vec<_>>()))
    }

    #[test]
    fn random_text_is_stored_plain_and_repetitive_text_compressed() {
        let random = random_text(8192, 1);
        assert_eq!(choose(&[&random], CompressionGoal::FastScans), ColumnEncoding { compress: false, dictionary: false });
        let repeated = repeated_text(8192);
        assert_eq!(choose(&[&repeated], CompressionGoal::FastScans), ColumnEncoding { compress: true, dictionary: true });
    }

    #[test]
    fn integers_by_their_bytes_and_their_distinct_values() {
        // Ascending timestamps share their high bytes, so Snappy saves about half, but
        // that is not worth decoding such short matches: plain; all distinct.
        let ascending: ArrayRef = Arc::new(Int64Array::from_iter_values((0..8192).map(|i| 1_700_000_000_000_000 + i * 1000)));
        assert_eq!(choose(&[&ascending], CompressionGoal::FastScans), ColumnEncoding { compress: false, dictionary: false });
        // Unless the lake asks for small files.
        assert_eq!(choose(&[&ascending], CompressionGoal::SmallFiles), ColumnEncoding { compress: true, dictionary: false });
        // Distinct at first, then long repeats that Snappy shrinks by far more: compressed.
        let repeating: ArrayRef = Arc::new(Int64Array::from_iter_values((0..8192).map(|i| (i % 1024) * 7919)));
        assert_eq!(choose(&[&repeating], CompressionGoal::FastScans), ColumnEncoding { compress: true, dictionary: false });
        // Random 64-bit values: neither.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let random: ArrayRef = Arc::new(Int64Array::from_iter_values((0..8192).map(|_| rng.random::<i64>())));
        assert_eq!(choose(&[&random], CompressionGoal::FastScans), ColumnEncoding { compress: false, dictionary: false });
        assert_eq!(choose(&[&random], CompressionGoal::SmallFiles), ColumnEncoding { compress: false, dictionary: false });
        // Few distinct values: both.
        let few: ArrayRef = Arc::new(Int64Array::from_iter_values((0..8192).map(|i| i % 5)));
        assert_eq!(choose(&[&few], CompressionGoal::FastScans), ColumnEncoding { compress: true, dictionary: true });
    }

    /// The sample spans batches: many small batches are judged like one large one, and
    /// a column too small in all to be worth a choice keeps the defaults.
    #[test]
    fn the_sample_spans_batches_and_small_columns_keep_the_defaults() {
        let pieces: Vec<ArrayRef> = (0..64).map(|seed| random_text(64, seed)).collect();
        let arrays: Vec<&ArrayRef> = pieces.iter().collect();
        assert_eq!(choose(&arrays, CompressionGoal::FastScans), ColumnEncoding { compress: false, dictionary: false });
        let small = random_text(16, 3);
        assert_eq!(choose(&[&small], CompressionGoal::FastScans), ColumnEncoding::DEFAULT);
        let booleans: ArrayRef = Arc::new(BooleanArray::from((0..100_000).map(|i| i % 3 == 0).collect::<Vec<_>>()));
        assert_eq!(choose(&[&booleans], CompressionGoal::FastScans), ColumnEncoding::DEFAULT);
        let nulls: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>; 10_000]));
        assert_eq!(choose(&[&nulls], CompressionGoal::FastScans), ColumnEncoding::DEFAULT);
    }

    /// A file written by `encode` carries the choices per column chunk, and reads back
    /// the same values.
    #[test]
    fn encoded_files_carry_the_choices_and_read_back() {
        let schema = Arc::new(Schema::new(vec![Field::new("random", DataType::Utf8, false), Field::new("status", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![random_text(20_000, 4), repeated_text(20_000)]).expect("batch");
        let encoded = crate::parquet_files::encode(&schema, std::slice::from_ref(&batch), CompressionGoal::FastScans).expect("encode");
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::copy_from_slice(encoded.as_ref())).expect("reader");
        let chunk = |index: usize| reader.metadata().row_group(0).column(index).clone();
        assert_eq!(chunk(0).compression(), Compression::UNCOMPRESSED);
        assert!(!chunk(0).encodings().any(|encoding| encoding == Encoding::RLE_DICTIONARY));
        assert!(matches!(chunk(1).compression(), Compression::SNAPPY));
        assert!(chunk(1).encodings().any(|encoding| encoding == Encoding::RLE_DICTIONARY));
        let read: Vec<RecordBatch> = reader.build().expect("build").collect::<Result<_, _>>().expect("read");
        for column in 0..2 {
            let written: Vec<Option<&str>> = batch.column(column).as_string::<i32>().iter().collect();
            let back: Vec<Option<&str>> = read.iter().flat_map(|b| b.column(column).as_string::<i32>().iter()).collect();
            assert_eq!(back, written, "column {column}");
        }
    }
}
