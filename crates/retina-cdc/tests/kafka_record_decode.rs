//! The patched record decoding in `third_party/rskafka` (PATCHES.md) reads what its
//! encoder writes.
//!
//! The fetch path now decodes each record batch where it lies in the response and
//! fills buffers without zeroing them first. These tests write record batches with
//! rskafka's own encoder and read them back through both paths: the patched one
//! (`Records::read`, `RecordBatch::read_from_slice`) and the copying one it replaced
//! (`RecordBatch::read` over a reader). A response cut off inside a batch yields the
//! whole batches before it, as before, and a damaged batch is an error.

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
        let read = Records::read(&mut Cursor::new(response(&encoded))).expect("whole batches");
        prop_assert_eq!(read.0, batches);
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
