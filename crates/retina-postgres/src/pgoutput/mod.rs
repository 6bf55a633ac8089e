//! The logical replication stream: the CopyData framing of the walsender
//! ([`ReplicationMessage`]) and the `pgoutput` messages inside ([`LogicalMessage`]),
//! protocol versions 1 and 2 (streamed in-progress transactions). The format is
//! PostgreSQL's "Logical Replication Message Formats" chapter.
//!
//! Decoding borrows nothing and copies no values: tuple columns are slices of the
//! received [`Bytes`].

mod reader;

use bytes::Bytes;

use crate::lsn::Lsn;
use reader::Reader;

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
pub const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed replication message '{kind}': {reason}")]
pub struct DecodeError {
    /// The message type byte, as a character.
    pub kind: char,
    pub reason: String,
}

/// One CopyData payload of the replication stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicationMessage {
    /// WAL data: one pgoutput message starting at `wal_start`.
    XLogData { wal_start: Lsn, wal_end: Lsn, send_time_micros: i64, body: Bytes },
    /// The server's keepalive; `reply_requested` asks for a status update now.
    Keepalive { wal_end: Lsn, send_time_micros: i64, reply_requested: bool },
}

impl ReplicationMessage {
    pub fn decode(payload: Bytes) -> Result<Self, DecodeError> {
        let kind = payload.first().copied().map(char::from).unwrap_or('?');
        let mut reader = Reader::new(payload, kind);
        match reader.u8()? {
            b'w' => {
                let wal_start = Lsn(reader.u64()?);
                let wal_end = Lsn(reader.u64()?);
                let send_time_micros = reader.i64()?;
                Ok(Self::XLogData { wal_start, wal_end, send_time_micros, body: reader.rest() })
            }
            b'k' => {
                let wal_end = Lsn(reader.u64()?);
                let send_time_micros = reader.i64()?;
                let reply_requested = reader.u8()? == 1;
                Ok(Self::Keepalive { wal_end, send_time_micros, reply_requested })
            }
            _ => Err(reader.error("expected XLogData 'w' or keepalive 'k'")),
        }
    }
}

/// The standby status update ('r') that tells the server what we have written,
/// flushed (durably applied: the slot may release WAL before it) and applied.
pub fn standby_status_update(written: Lsn, flushed: Lsn, applied: Lsn, now_micros_since_2000: i64, reply: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(34);
    out.push(b'r');
    out.extend_from_slice(&written.0.to_be_bytes());
    out.extend_from_slice(&flushed.0.to_be_bytes());
    out.extend_from_slice(&applied.0.to_be_bytes());
    out.extend_from_slice(&now_micros_since_2000.to_be_bytes());
    out.push(u8::from(reply));
    out
}

/// One column of a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TupleValue {
    Null,
    /// An unchanged TOASTed value ('u'): the server did not send it; the previous
    /// value stands.
    UnchangedToast,
    /// The type's text output.
    Text(Bytes),
    /// The type's binary send format (only with the `binary` option).
    Binary(Bytes),
}

/// The columns of one row image, in the relation's column order.
pub type TupleData = Vec<TupleValue>;

/// The old image of an update or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple {
    /// Only the replica-identity columns ('K'); the others are null.
    Key(TupleData),
    /// The whole old row ('O', REPLICA IDENTITY FULL).
    Full(TupleData),
}

impl OldTuple {
    pub fn values(&self) -> &TupleData {
        match self {
            OldTuple::Key(values) | OldTuple::Full(values) => values,
        }
    }
}

/// One column of a Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Part of the replica identity.
    pub is_key: bool,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

/// A Relation message: the shape of a table as of this point of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationBody {
    pub oid: u32,
    /// Empty for `pg_catalog`.
    pub namespace: String,
    pub name: String,
    /// `d` default (primary key), `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

/// One pgoutput message. `xid` is present only inside a streamed transaction block
/// (protocol version 2).
#[derive(Debug, Clone, PartialEq)]
pub enum LogicalMessage {
    Begin { final_lsn: Lsn, commit_time_micros: i64, xid: u32 },
    Commit { commit_lsn: Lsn, end_lsn: Lsn, commit_time_micros: i64 },
    Origin { commit_lsn: Lsn, name: String },
    Relation { xid: Option<u32>, body: RelationBody },
    Type { xid: Option<u32>, oid: u32, namespace: String, name: String },
    Insert { xid: Option<u32>, relation: u32, new: TupleData },
    Update { xid: Option<u32>, relation: u32, old: Option<OldTuple>, new: TupleData },
    Delete { xid: Option<u32>, relation: u32, old: OldTuple },
    /// `options`: bit 1 CASCADE, bit 2 RESTART IDENTITY.
    Truncate { xid: Option<u32>, options: u8, relations: Vec<u32> },
    Message { xid: Option<u32>, transactional: bool, lsn: Lsn, prefix: String, content: Bytes },
    StreamStart { xid: u32, first_segment: bool },
    StreamStop,
    StreamCommit { xid: u32, commit_lsn: Lsn, end_lsn: Lsn, commit_time_micros: i64 },
    /// `subxid == xid` aborts the whole streamed transaction.
    StreamAbort { xid: u32, subxid: u32 },
}

impl LogicalMessage {
    /// The relation a Relation message describes, or a row change is of.
    pub fn relation_oid(&self) -> Option<u32> {
        match self {
            LogicalMessage::Relation { body, .. } => Some(body.oid),
            LogicalMessage::Insert { relation, .. } | LogicalMessage::Update { relation, .. } | LogicalMessage::Delete { relation, .. } => {
                Some(*relation)
            }
            _ => None,
        }
    }
}

/// Decodes pgoutput messages. Stateful because data messages inside a Stream Start ..
/// Stream Stop block carry a transaction id that they do not carry elsewhere.
#[derive(Debug, Default)]
pub struct PgOutputDecoder {
    in_stream_block: bool,
}

impl PgOutputDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn decode(&mut self, body: Bytes) -> Result<LogicalMessage, DecodeError> {
        let kind = body.first().copied().map(char::from).unwrap_or('?');
        let mut reader = Reader::new(body, kind);
        let tag = reader.u8()?;
        let message = match tag {
            b'B' => LogicalMessage::Begin {
                final_lsn: Lsn(reader.u64()?),
                commit_time_micros: reader.i64()?,
                xid: reader.u32()?,
            },
            b'C' => {
                let _flags = reader.u8()?;
                LogicalMessage::Commit {
                    commit_lsn: Lsn(reader.u64()?),
                    end_lsn: Lsn(reader.u64()?),
                    commit_time_micros: reader.i64()?,
                }
            }
            b'O' => LogicalMessage::Origin { commit_lsn: Lsn(reader.u64()?), name: reader.string()? },
            b'R' => {
                let xid = self.stream_xid(&mut reader)?;
                let oid = reader.u32()?;
                let namespace = reader.string()?;
                let name = reader.string()?;
                let replica_identity = reader.u8()?;
                let count = reader.i16()?;
                let mut columns = Vec::with_capacity(count.max(0) as usize);
                for _ in 0..count {
                    let flags = reader.u8()?;
                    columns.push(RelationColumn {
                        is_key: flags & 1 == 1,
                        name: reader.string()?,
                        type_oid: reader.u32()?,
                        type_modifier: reader.i32()?,
                    });
                }
                LogicalMessage::Relation { xid, body: RelationBody { oid, namespace, name, replica_identity, columns } }
            }
            b'Y' => LogicalMessage::Type {
                xid: self.stream_xid(&mut reader)?,
                oid: reader.u32()?,
                namespace: reader.string()?,
                name: reader.string()?,
            },
            b'I' => {
                let xid = self.stream_xid(&mut reader)?;
                let relation = reader.u32()?;
                reader.expect(b'N', "a new tuple 'N'")?;
                LogicalMessage::Insert { xid, relation, new: reader.tuple()? }
            }
            b'U' => {
                let xid = self.stream_xid(&mut reader)?;
                let relation = reader.u32()?;
                let old = match reader.u8()? {
                    b'K' => {
                        let old = OldTuple::Key(reader.tuple()?);
                        reader.expect(b'N', "a new tuple 'N'")?;
                        Some(old)
                    }
                    b'O' => {
                        let old = OldTuple::Full(reader.tuple()?);
                        reader.expect(b'N', "a new tuple 'N'")?;
                        Some(old)
                    }
                    b'N' => None,
                    _ => return Err(reader.error("expected 'K', 'O' or 'N' after the relation id")),
                };
                LogicalMessage::Update { xid, relation, old, new: reader.tuple()? }
            }
            b'D' => {
                let xid = self.stream_xid(&mut reader)?;
                let relation = reader.u32()?;
                let old = match reader.u8()? {
                    b'K' => OldTuple::Key(reader.tuple()?),
                    b'O' => OldTuple::Full(reader.tuple()?),
                    _ => return Err(reader.error("expected an old tuple 'K' or 'O'")),
                };
                LogicalMessage::Delete { xid, relation, old }
            }
            b'T' => {
                let xid = self.stream_xid(&mut reader)?;
                let count = reader.u32()?;
                let options = reader.u8()?;
                let relations = (0..count).map(|_| reader.u32()).collect::<Result<_, _>>()?;
                LogicalMessage::Truncate { xid, options, relations }
            }
            b'M' => {
                let xid = self.stream_xid(&mut reader)?;
                let transactional = reader.u8()? & 1 == 1;
                let lsn = Lsn(reader.u64()?);
                let prefix = reader.string()?;
                let length = reader.u32()? as usize;
                LogicalMessage::Message { xid, transactional, lsn, prefix, content: reader.bytes(length)? }
            }
            b'S' => {
                let xid = reader.u32()?;
                let first_segment = reader.u8()? == 1;
                self.in_stream_block = true;
                LogicalMessage::StreamStart { xid, first_segment }
            }
            b'E' => {
                self.in_stream_block = false;
                LogicalMessage::StreamStop
            }
            b'c' => {
                let xid = reader.u32()?;
                let _flags = reader.u8()?;
                LogicalMessage::StreamCommit {
                    xid,
                    commit_lsn: Lsn(reader.u64()?),
                    end_lsn: Lsn(reader.u64()?),
                    commit_time_micros: reader.i64()?,
                }
            }
            // Protocol 4 appends an abort LSN and time; we ask for 2 and ignore extras.
            b'A' => LogicalMessage::StreamAbort { xid: reader.u32()?, subxid: reader.u32()? },
            _ => return Err(reader.error("unknown message type")),
        };
        Ok(message)
    }

    fn stream_xid(&self, reader: &mut Reader) -> Result<Option<u32>, DecodeError> {
        if self.in_stream_block {
            Ok(Some(reader.u32()?))
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests;
