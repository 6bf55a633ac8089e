//! The patched record decoding in `third_party/rskafka` (PATCHES.md) reads what its
//! encoder writes.
//!
//! The fetch path now decodes each record batch where it lies in the response and
//! fills buffers without zeroing them first. These tests write record batches with
//! rskafka's own encoder and read them back through both paths: the patched one
//! (`Records::read` of a response in memory, `RecordBatch::read_from_slice`) and the
//! copying one it replaced (`RecordBatch::read`, and `Records::read`, over another reader). A response cut off inside a batch yields the
//! whole batches before it, as before, and a damaged batch is an error. Batches carry
//! the standard CRC-32C (the checksum is crc-fast's since stop 49).

use std::io::Cursor;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use rskafka::protocol::primitives::Records;
use rskafka::protocol::record::{
    ControlBatchOrRecords, Record, RecordBatch, RecordBatchCompression, RecordBatchTimestampType, RecordHeader,
};
use rskafka::protocol::traits::{ReadError, ReadType, WriteType};

fn record() -> impl Strategy<Value = Record> {
    (
        any::<i32>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3000)),
        proptest::collection::vec(("[a-z]{0,8}", proptest::collection::vec(any::<u8>(), 0..16)), 0..3),
    )
        .prop_map(|(delta, key, value, headers)| Record {
            timestamp_delta: i64::from(delta),
            offset_delta: delta & 0xffff,
            key,
            value,
            headers: headers.into_iter().map(|(key, value)| RecordHeader { key, value }).collect(),
        })
}

fn batch() -> impl Strategy<Value = RecordBatch> {
    (any::<i32>(), proptest::collection::vec(record(), 1..12)).prop_map(|(base, records)| RecordBatch {
        base_offset: i64::from(base),
        partition_leader_epoch: 0,
        last_offset_delta: i32::try_from(records.len()).expect("few records") - 1,
        first_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records: ControlBatchOrRecords::Records(records),
        compression: RecordBatchCompression::NoCompression,
        is_transactional: false,
        timestamp_type: RecordBatchTimestampType::CreateTime,
    })
}

fn encode(batch: &RecordBatch) -> Vec<u8> {
    let mut bytes = Vec::new();
    batch.write(&mut bytes).expect("encoding a batch into memory");
    bytes
}

/// `Records` as a fetch response carries it: a length, then the batches back to back.
fn response(batches: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = batches.concat();
    let mut bytes = i32::try_from(body.len()).expect("small body").to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn batches_read_back_as_written(batches in proptest::collection::vec(batch(), 1..5)) {
        let encoded: Vec<Vec<u8>> = batches.iter().map(encode).collect();
        for (bytes, batch) in encoded.iter().zip(&batches) {
            let mut rest = bytes.as_slice();
            prop_assert_eq!(&RecordBatch::read_from_slice(&mut rest).expect("a whole batch"), batch);
            prop_assert!(rest.is_empty());
            prop_assert_eq!(&RecordBatch::read(&mut Cursor::new(bytes.clone())).expect("a whole batch"), batch);
        }
        // In place (a response in memory, as the client reads every response), then
        // through a reader that copies the field out; the cursor ends after the field.
        let mut bytes = response(&encoded);
        let field_end = bytes.len() as u64;
        bytes.extend_from_slice(b"next field");
        let mut cursor = Cursor::new(bytes.clone());
        let read = Records::read(&mut cursor).expect("whole batches");
        prop_assert_eq!(cursor.position(), field_end);
        prop_assert_eq!(&read.0, &batches);
        let mut copied = Cursor::new(bytes.into_boxed_slice());
        prop_assert_eq!(Records::read(&mut copied).expect("whole batches").0, batches);
        prop_assert_eq!(copied.position(), field_end);
    }

    #[test]
    fn a_response_cut_inside_a_batch_yields_the_batches_before_it(
        batches in proptest::collection::vec(batch(), 2..5),
        cut in any::<proptest::sample::Index>(),
    ) {
        let encoded: Vec<Vec<u8>> = batches.iter().map(encode).collect();
        let last = encoded.last().expect("two batches or more");
        let mut cut_off = encoded.clone();
        let kept = cut.index(last.len() - 1) + 1; // 1..len: never the whole batch, never nothing
        *cut_off.last_mut().expect("two batches or more") = last[..kept].to_vec();
        let read = Records::read(&mut Cursor::new(response(&cut_off))).expect("the whole batches");
        prop_assert_eq!(read.0.as_slice(), &batches[..batches.len() - 1]);
        let read = Records::read(&mut Cursor::new(response(&cut_off).into_boxed_slice())).expect("the whole batches");
        prop_assert_eq!(read.0.as_slice(), &batches[..batches.len() - 1]);
    }
}

#[test]
fn a_damaged_batch_is_an_error_not_a_shorter_answer() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let batch = batch().new_tree(&mut runner).expect("a batch").current();
    let mut bytes = encode(&batch);
    let last = bytes.len() - 1; // inside the CRC-checked part
    bytes[last] ^= 0x40;
    let error = RecordBatch::read_from_slice(&mut bytes.as_slice()).expect_err("a damaged batch");
    assert!(matches!(&error, ReadError::Malformed(e) if e.to_string().starts_with("CRC error")), "{error}");
    let error = Records::read(&mut Cursor::new(response(&[bytes]))).expect_err("a damaged batch");
    assert!(matches!(&error, ReadError::Malformed(e) if e.to_string().starts_with("CRC error")), "{error}");
}

/// A records field whose length runs past the response is an error, read in place or
/// copied, not the batches that fit.
#[test]
fn a_records_field_longer_than_the_response_is_an_error() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let bytes = encode(&batch().new_tree(&mut runner).expect("a batch").current());
    let mut short = response(&[bytes]);
    short.truncate(short.len() - 1);
    let error = Records::read(&mut Cursor::new(short.clone())).expect_err("a field past the end");
    assert!(matches!(&error, ReadError::IO(e) if e.kind() == std::io::ErrorKind::UnexpectedEof), "{error}");
    let error = Records::read(&mut Cursor::new(short.into_boxed_slice())).expect_err("a field past the end");
    assert!(matches!(&error, ReadError::IO(e) if e.kind() == std::io::ErrorKind::UnexpectedEof), "{error}");
}

/// CRC-32C bit by bit (reflected polynomial 0x82F63B78), independent of the
/// table-free kernels rskafka's patched checksum uses.
fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// The batch checksum is the CRC-32C Kafka specifies (a reader on the same wrong
/// checksum as the writer would pass the round trips above): the CRC field of every
/// written batch equals the checksum of what follows it, computed bit by bit.
#[test]
fn written_batches_carry_the_standard_crc32c() {
    assert_eq!(crc32c_bitwise(b"123456789"), 0xE306_9283, "the reference's own known answer");
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..16 {
        let bytes = encode(&batch().new_tree(&mut runner).expect("a batch").current());
        // base offset (8), batch length (4), leader epoch (4), magic (1), then the CRC.
        let written = u32::from_be_bytes(bytes[17..21].try_into().expect("four bytes"));
        assert_eq!(written, crc32c_bitwise(&bytes[21..]), "batch of {} bytes", bytes.len());
    }
}
