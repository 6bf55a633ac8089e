//! Decoder tests on hand-built messages in the documented layout.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use super::*;

fn string(out: &mut BytesMut, text: &str) {
    out.put_slice(text.as_bytes());
    out.put_u8(0);
}

fn tuple(out: &mut BytesMut, values: &[Option<&str>]) {
    out.put_i16(values.len() as i16);
    for value in values {
        match value {
            None => out.put_u8(b'n'),
            Some("<toast>") => out.put_u8(b'u'),
            Some(text) => {
                out.put_u8(b't');
                out.put_u32(text.len() as u32);
                out.put_slice(text.as_bytes());
            }
        }
    }
}

fn text(value: &str) -> TupleValue {
    TupleValue::Text(Bytes::copy_from_slice(value.as_bytes()))
}

#[test]
fn begin_commit_and_xlogdata_framing() {
    let mut begin = BytesMut::new();
    begin.put_u8(b'B');
    begin.put_u64(0x1_0000_0010);
    begin.put_i64(123);
    begin.put_u32(42);
    let mut frame = BytesMut::new();
    frame.put_u8(b'w');
    frame.put_u64(7);
    frame.put_u64(9);
    frame.put_i64(11);
    frame.put_slice(&begin);
    let ReplicationMessage::XLogData { wal_start, wal_end, send_time_micros, body } =
        ReplicationMessage::decode(frame.freeze()).expect("xlogdata")
    else {
        panic!("expected XLogData")
    };
    assert_eq!((wal_start, wal_end, send_time_micros), (Lsn(7), Lsn(9), 11));
    let mut decoder = PgOutputDecoder::new();
    assert_eq!(
        decoder.decode(body).expect("begin"),
        LogicalMessage::Begin { final_lsn: Lsn(0x1_0000_0010), commit_time_micros: 123, xid: 42 }
    );

    let mut commit = BytesMut::new();
    commit.put_u8(b'C');
    commit.put_u8(0);
    commit.put_u64(100);
    commit.put_u64(120);
    commit.put_i64(5);
    assert_eq!(
        decoder.decode(commit.freeze()).expect("commit"),
        LogicalMessage::Commit { commit_lsn: Lsn(100), end_lsn: Lsn(120), commit_time_micros: 5 }
    );

    let mut keepalive = BytesMut::new();
    keepalive.put_u8(b'k');
    keepalive.put_u64(99);
    keepalive.put_i64(3);
    keepalive.put_u8(1);
    assert_eq!(
        ReplicationMessage::decode(keepalive.freeze()).expect("keepalive"),
        ReplicationMessage::Keepalive { wal_end: Lsn(99), send_time_micros: 3, reply_requested: true }
    );
}

#[test]
fn relation_and_row_changes() {
    let mut decoder = PgOutputDecoder::new();
    let mut relation = BytesMut::new();
    relation.put_u8(b'R');
    relation.put_u32(16384);
    string(&mut relation, "public");
    string(&mut relation, "accounts");
    relation.put_u8(b'd');
    relation.put_i16(2);
    relation.put_u8(1);
    string(&mut relation, "id");
    relation.put_u32(20);
    relation.put_i32(-1);
    relation.put_u8(0);
    string(&mut relation, "balance");
    relation.put_u32(1700);
    relation.put_i32(((12 << 16) | 2) + 4);
    let LogicalMessage::Relation { xid: None, body } = decoder.decode(relation.freeze()).expect("relation") else {
        panic!("expected a relation")
    };
    assert_eq!((body.oid, body.namespace.as_str(), body.name.as_str(), body.replica_identity), (16384, "public", "accounts", b'd'));
    assert_eq!(body.columns[0], RelationColumn { is_key: true, name: "id".into(), type_oid: 20, type_modifier: -1 });
    assert!(!body.columns[1].is_key);

    let mut insert = BytesMut::new();
    insert.put_u8(b'I');
    insert.put_u32(16384);
    insert.put_u8(b'N');
    tuple(&mut insert, &[Some("1"), None]);
    assert_eq!(
        decoder.decode(insert.freeze()).expect("insert"),
        LogicalMessage::Insert { xid: None, relation: 16384, new: vec![text("1"), TupleValue::Null] }
    );

    let mut update = BytesMut::new();
    update.put_u8(b'U');
    update.put_u32(16384);
    update.put_u8(b'K');
    tuple(&mut update, &[Some("1"), None]);
    update.put_u8(b'N');
    tuple(&mut update, &[Some("2"), Some("<toast>")]);
    assert_eq!(
        decoder.decode(update.freeze()).expect("update"),
        LogicalMessage::Update {
            xid: None,
            relation: 16384,
            old: Some(OldTuple::Key(vec![text("1"), TupleValue::Null])),
            new: vec![text("2"), TupleValue::UnchangedToast],
        }
    );

    let mut delete = BytesMut::new();
    delete.put_u8(b'D');
    delete.put_u32(16384);
    delete.put_u8(b'O');
    tuple(&mut delete, &[Some("2"), Some("3.50")]);
    assert_eq!(
        decoder.decode(delete.freeze()).expect("delete"),
        LogicalMessage::Delete { xid: None, relation: 16384, old: OldTuple::Full(vec![text("2"), text("3.50")]) }
    );

    let mut truncate = BytesMut::new();
    truncate.put_u8(b'T');
    truncate.put_u32(2);
    truncate.put_u8(1);
    truncate.put_u32(16384);
    truncate.put_u32(16390);
    assert_eq!(
        decoder.decode(truncate.freeze()).expect("truncate"),
        LogicalMessage::Truncate { xid: None, options: 1, relations: vec![16384, 16390] }
    );
}

#[test]
fn streamed_blocks_carry_transaction_ids() {
    let mut decoder = PgOutputDecoder::new();
    let mut start = BytesMut::new();
    start.put_u8(b'S');
    start.put_u32(77);
    start.put_u8(1);
    assert_eq!(decoder.decode(start.freeze()).expect("start"), LogicalMessage::StreamStart { xid: 77, first_segment: true });
    let mut insert = BytesMut::new();
    insert.put_u8(b'I');
    insert.put_u32(78);
    insert.put_u32(16384);
    insert.put_u8(b'N');
    tuple(&mut insert, &[Some("5")]);
    assert_eq!(
        decoder.decode(insert.freeze()).expect("insert"),
        LogicalMessage::Insert { xid: Some(78), relation: 16384, new: vec![text("5")] }
    );
    assert_eq!(decoder.decode(Bytes::from_static(b"E")).expect("stop"), LogicalMessage::StreamStop);
    // Outside the block, the same insert has no xid.
    let mut plain = BytesMut::new();
    plain.put_u8(b'I');
    plain.put_u32(16384);
    plain.put_u8(b'N');
    tuple(&mut plain, &[Some("5")]);
    assert!(matches!(decoder.decode(plain.freeze()).expect("insert"), LogicalMessage::Insert { xid: None, .. }));
    let mut abort = BytesMut::new();
    abort.put_u8(b'A');
    abort.put_u32(77);
    abort.put_u32(78);
    assert_eq!(decoder.decode(abort.freeze()).expect("abort"), LogicalMessage::StreamAbort { xid: 77, subxid: 78 });
    let mut commit = BytesMut::new();
    commit.put_u8(b'c');
    commit.put_u32(77);
    commit.put_u8(0);
    commit.put_u64(10);
    commit.put_u64(20);
    commit.put_i64(30);
    assert_eq!(
        decoder.decode(commit.freeze()).expect("stream commit"),
        LogicalMessage::StreamCommit { xid: 77, commit_lsn: Lsn(10), end_lsn: Lsn(20), commit_time_micros: 30 }
    );
}

#[test]
fn malformed_messages_say_what_is_wrong() {
    let mut decoder = PgOutputDecoder::new();
    let error = decoder.decode(Bytes::from_static(b"B\x00\x01")).expect_err("truncated begin");
    assert_eq!(error.kind, 'B');
    assert!(error.to_string().contains("truncated"), "{error}");
    let error = decoder.decode(Bytes::from_static(b"Z")).expect_err("unknown");
    assert!(error.to_string().contains("unknown message type"), "{error}");
    let error = ReplicationMessage::decode(Bytes::from_static(b"x")).expect_err("unknown frame");
    assert!(error.to_string().contains("XLogData"), "{error}");
    let mut bad_tuple = BytesMut::new();
    bad_tuple.put_u8(b'I');
    bad_tuple.put_u32(1);
    bad_tuple.put_u8(b'N');
    bad_tuple.put_i16(1);
    bad_tuple.put_u8(b'q');
    let error = decoder.decode(bad_tuple.freeze()).expect_err("bad tuple kind");
    assert!(error.to_string().contains("column 0"), "{error}");
}

#[test]
fn standby_status_update_layout() {
    let update = standby_status_update(Lsn(1), Lsn(2), Lsn(3), 4, true);
    assert_eq!(update.len(), 34);
    assert_eq!(update[0], b'r');
    assert_eq!(&update[9..17], &2u64.to_be_bytes());
    assert_eq!(update[33], 1);
}

proptest! {
    /// Arbitrary bytes never panic the decoder: they decode or give an error.
    #[test]
    fn arbitrary_input_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64), streaming in any::<bool>()) {
        let mut decoder = PgOutputDecoder { in_stream_block: streaming };
        let _ = decoder.decode(Bytes::from(data.clone()));
        let _ = ReplicationMessage::decode(Bytes::from(data));
    }
}
