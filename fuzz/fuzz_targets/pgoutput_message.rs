//! Arbitrary bytes as a replication stream through the pgoutput decoder and on as
//! deep as the PostgreSQL source goes without a server or an engine.
//!
//! Input: frames, each a big-endian u16 length and that many bytes (the last one may
//! be short). A frame starting with `w` or `k` is a CopyData payload of the walsender
//! (`ReplicationMessage::decode`; XLogData's body goes on to the pgoutput decoder);
//! any other frame is a pgoutput message itself. One stateful `PgOutputDecoder` reads
//! them all (protocol 1 and 2: Stream Start .. Stop blocks carry xids).
//!
//! Decoded messages are then handled the way `PgSource::handle` does: Relation
//! messages bound (type mapping through a `TypeCatalog` with domains, enums and
//! arrays; keys from the replica identity; the Retina table schema validated), row
//! changes converted with `BoundRelation::row` / `key` (text values parsed by type),
//! and everything fed to the `TransactionAssembler`. Every text value is also parsed
//! as every column kind.
//!
//! It must never panic; errors are fine.
#![no_main]

use std::collections::HashMap;

use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use retina_core::{RowChange, TableId, TableSchema};
use retina_postgres::lsn::Lsn;
use retina_postgres::pgoutput::{LogicalMessage, OldTuple, PgOutputDecoder, RelationBody, ReplicationMessage, TupleValue};
use retina_postgres::relation::{qualified_name, BoundColumn, BoundRelation, ROW_ID_COLUMN};
use retina_postgres::transaction::{SourceChange, TransactionAssembler};
use retina_postgres::types::{parse_value, PgType, TypeCatalog};

fn all_kinds() -> Vec<PgType> {
    vec![
        PgType::Boolean,
        PgType::Int16,
        PgType::Int32,
        PgType::Int64,
        PgType::Float32,
        PgType::Float64,
        PgType::Decimal { precision: 38, scale: 2 },
        PgType::Decimal { precision: 10, scale: 0 },
        PgType::Decimal { precision: 3, scale: -2 },
        PgType::Decimal { precision: 38, scale: 127 },
        PgType::Decimal { precision: 38, scale: -128 },
        PgType::Binary,
        PgType::Date,
        PgType::Time,
        PgType::Timestamp,
        PgType::TimestampTz,
        PgType::Text,
    ]
}

/// A catalog like `pg_type`'s rows for user types: an enum, domains (one over a
/// domain, one over numeric, one that names itself), an array and a composite.
fn catalog() -> TypeCatalog {
    let row = |r: &[&str]| r.iter().map(|v| Some(v.to_string())).collect::<Vec<_>>();
    TypeCatalog::from_rows(&[
        row(&["90000", "mood", "e", "E", "0", "0"]),
        row(&["90001", "positive_int", "d", "N", "23", "0"]),
        row(&["90002", "complex", "c", "C", "0", "0"]),
        row(&["90003", "small_positive", "d", "N", "90001", "0"]),
        row(&["90004", "money_amount", "d", "N", "1700", "0"]),
        row(&["90005", "loop", "d", "N", "90005", "0"]),
        row(&["1007", "_int4", "b", "A", "0", "23"]),
        row(&["1009", "_text", "b", "A", "0", "25"]),
    ])
}

struct Stream {
    decoder: PgOutputDecoder,
    assembler: TransactionAssembler,
    relations: HashMap<u32, BoundRelation>,
    catalog: TypeCatalog,
    kinds: Vec<PgType>,
    /// The position of messages that come without XLogData framing.
    next_lsn: u64,
}

fuzz_target!(|data: &[u8]| {
    let mut stream = Stream {
        decoder: PgOutputDecoder::new(),
        assembler: TransactionAssembler::new(),
        relations: HashMap::new(),
        catalog: catalog(),
        kinds: all_kinds(),
        next_lsn: 1,
    };
    let data = Bytes::copy_from_slice(data);
    let mut at = 0;
    while at + 2 <= data.len() {
        let length = usize::from(u16::from_be_bytes([data[at], data[at + 1]]));
        let end = (at + 2 + length).min(data.len());
        stream.frame(data.slice(at + 2..end));
        at = end;
    }
    let _ = stream.assembler.in_progress();
});

impl Stream {
    fn frame(&mut self, frame: Bytes) {
        let (body, lsn) = match frame.first() {
            Some(b'w' | b'k') => match ReplicationMessage::decode(frame) {
                Ok(ReplicationMessage::XLogData { wal_start, body, .. }) => (body, wal_start),
                Ok(ReplicationMessage::Keepalive { .. }) => return,
                Err(error) => {
                    let _ = error.to_string();
                    return;
                }
            },
            _ => {
                self.next_lsn += 1;
                (frame, Lsn(self.next_lsn))
            }
        };
        match self.decoder.decode(body) {
            Ok(message) => {
                self.texts(&message);
                if let Err(error) = self.handle(message, lsn) {
                    let _ = error.to_string();
                }
            }
            Err(error) => {
                let _ = error.to_string();
            }
        }
    }

    /// Every text value of the message parsed as every kind.
    fn texts(&self, message: &LogicalMessage) {
        let tuples: Vec<&Vec<TupleValue>> = match message {
            LogicalMessage::Insert { new, .. } => vec![new],
            LogicalMessage::Update { old, new, .. } => old.iter().map(|o| o.values()).chain([new]).collect(),
            LogicalMessage::Delete { old, .. } => vec![old.values()],
            _ => Vec::new(),
        };
        for value in tuples.into_iter().flatten() {
            if let TupleValue::Text(text) = value {
                for kind in &self.kinds {
                    let _ = parse_value(kind, text);
                }
            }
        }
    }

    /// `PgSource::handle` without the engine and the catalog connection.
    fn handle(&mut self, message: LogicalMessage, lsn: Lsn) -> retina_postgres::PgSourceResult<()> {
        match message {
            LogicalMessage::Begin { .. } => self.assembler.begin(lsn)?,
            LogicalMessage::Commit { end_lsn, commit_time_micros, .. } => {
                let transaction = self.assembler.commit(end_lsn, commit_time_micros.wrapping_add(retina_postgres::pgoutput::POSTGRES_EPOCH_MICROS))?;
                let _ = transaction.changes.len();
            }
            LogicalMessage::StreamStart { xid, .. } => self.assembler.stream_start(xid, lsn)?,
            LogicalMessage::StreamStop => self.assembler.stream_stop(),
            LogicalMessage::StreamCommit { xid, end_lsn, commit_time_micros, .. } => {
                let transaction = self.assembler.stream_commit(xid, end_lsn, commit_time_micros.wrapping_add(retina_postgres::pgoutput::POSTGRES_EPOCH_MICROS))?;
                let _ = transaction.changes.len();
            }
            LogicalMessage::StreamAbort { xid, subxid } => self.assembler.stream_abort(xid, subxid),
            LogicalMessage::Relation { body, .. } => self.bind(&body),
            LogicalMessage::Type { .. } | LogicalMessage::Origin { .. } | LogicalMessage::Message { .. } => {}
            LogicalMessage::Insert { xid, relation, new } => {
                let relation = self.relation(relation, lsn)?;
                let row = relation.row(&new, None, lsn.0 as i64, lsn)?;
                // The initial copy parses the same text fields.
                let fields: Vec<Option<&[u8]>> = new
                    .iter()
                    .map(|v| match v {
                        TupleValue::Text(text) => Some(&text[..]),
                        _ => None,
                    })
                    .collect();
                let _ = relation.copied_row(&fields, -1);
                let table = relation.table;
                self.assembler.push(xid, SourceChange::Row(RowChange::Insert { table, row }), lsn)?;
            }
            LogicalMessage::Update { xid, relation, old, new } => {
                let relation = self.relation(relation, lsn)?;
                relation.require_identity("update", lsn)?;
                let key = match &old {
                    Some(old) => relation.key(old.values(), lsn)?,
                    None => relation.key(&new, lsn)?,
                };
                let full_old = match &old {
                    Some(OldTuple::Full(values)) => Some(values.as_slice()),
                    _ => None,
                };
                let row = relation.row(&new, full_old, 0, lsn)?;
                let table = relation.table;
                self.assembler.push(xid, SourceChange::Row(RowChange::Update { table, key, row }), lsn)?;
            }
            LogicalMessage::Delete { xid, relation, old } => {
                let relation = self.relation(relation, lsn)?;
                relation.require_identity("delete", lsn)?;
                let key = relation.key(old.values(), lsn)?;
                let table = relation.table;
                self.assembler.push(xid, SourceChange::Row(RowChange::Delete { table, key }), lsn)?;
            }
            LogicalMessage::Truncate { xid, relations, .. } => {
                for oid in relations {
                    let table = self.relation(oid, lsn)?.table;
                    self.assembler.push(xid, SourceChange::Truncate(table), lsn)?;
                }
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
        Ok(())
    }

    fn relation(&self, oid: u32, lsn: Lsn) -> retina_postgres::PgSourceResult<&BoundRelation> {
        self.relations.get(&oid).ok_or(retina_postgres::PgSourceError::UnknownRelation { oid, lsn })
    }

    /// `RelationMap::bind` with `unsupported_types=text` and
    /// `no_identity=insert_only`; REPLICA IDENTITY FULL takes the first column as the
    /// catalog's primary key. A known relation keeps its shape unless columns were
    /// appended.
    fn bind(&mut self, body: &RelationBody) {
        let name = qualified_name(body);
        let columns: Vec<BoundColumn> = body
            .columns
            .iter()
            .map(|c| BoundColumn {
                name: c.name.clone(),
                type_oid: c.type_oid,
                type_modifier: c.type_modifier,
                kind: self.catalog.column_kind(c.type_oid, c.type_modifier).unwrap_or(PgType::Text),
            })
            .collect();
        if let Some(known) = self.relations.get_mut(&body.oid) {
            if columns.len() > known.columns.len() && columns[..known.columns.len()] == known.columns[..] {
                known.columns = columns;
            }
            return;
        }
        let key: Vec<usize> = match body.replica_identity {
            b'd' | b'i' => body.columns.iter().enumerate().filter(|(_, c)| c.is_key).map(|(i, _)| i).collect(),
            b'f' if !columns.is_empty() => vec![0],
            _ => Vec::new(),
        };
        let mut fields: Vec<Field> =
            columns.iter().enumerate().map(|(i, c)| Field::new(c.name.clone(), c.kind.data_type(), !key.contains(&i))).collect();
        let table_key = if key.is_empty() {
            fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, false));
            vec![fields.len() - 1]
        } else {
            key.clone()
        };
        if let Err(error) = TableSchema::new(name.clone(), Schema::new(fields), table_key) {
            let _ = error.to_string();
            return;
        }
        let insert_only = key.is_empty();
        self.relations.insert(body.oid, BoundRelation { oid: body.oid, name, table: TableId(body.oid), columns, key, insert_only });
    }
}
