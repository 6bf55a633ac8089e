//! Source transactions rebuilt from the stream: Begin .. Commit (protocol 1), and
//! Stream Start .. Stop blocks buffered per top-level transaction until Stream Commit
//! or dropped on Stream Abort (protocol 2, large transactions sent before they
//! commit). Each completed transaction becomes exactly one mirror transaction.

use std::collections::HashMap;

use crate::error::{PgSourceError, PgSourceResult};
use crate::lsn::Lsn;

/// One change of a source transaction (the apply layer's type, shared by all sources).
pub use retina_core::SourceChange;

/// A committed source transaction.
#[derive(Debug)]
pub struct SourceTransaction {
    /// Where the transaction's commit record ends: the position to confirm once it
    /// is durable, and the one a restart resumes after.
    pub end_lsn: Lsn,
    /// Source commit time, microseconds since the Unix epoch.
    pub commit_time_micros: i64,
    pub changes: Vec<SourceChange>,
}

/// Invariant: at most one plain transaction is open; streamed transactions are
/// buffered by top-level xid, each change tagged with the (sub)transaction it
/// belongs to so a subtransaction abort can drop just its changes.
#[derive(Default)]
pub struct TransactionAssembler {
    open: Option<Vec<SourceChange>>,
    streamed: HashMap<u32, Vec<(u32, SourceChange)>>,
    stream_block: Option<u32>,
}

impl TransactionAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether any transaction is open or buffered (then positions received so far
    /// may not be confirmed as a whole).
    pub fn in_progress(&self) -> bool {
        self.open.is_some() || !self.streamed.is_empty()
    }

    pub fn begin(&mut self, lsn: Lsn) -> PgSourceResult<()> {
        if self.open.is_some() {
            return Err(PgSourceError::Protocol { lsn, reason: "Begin inside an open transaction".into() });
        }
        self.open = Some(Vec::new());
        Ok(())
    }

    pub fn commit(&mut self, end_lsn: Lsn, commit_time_micros: i64) -> PgSourceResult<SourceTransaction> {
        let changes = self
            .open
            .take()
            .ok_or_else(|| PgSourceError::Protocol { lsn: end_lsn, reason: "Commit without Begin".into() })?;
        Ok(SourceTransaction { end_lsn, commit_time_micros, changes })
    }

    /// Adds a change; `xid` is the (sub)transaction id of a streamed change.
    pub fn push(&mut self, xid: Option<u32>, change: SourceChange, lsn: Lsn) -> PgSourceResult<()> {
        match (xid, self.stream_block) {
            (Some(xid), Some(top)) => {
                self.streamed.entry(top).or_default().push((xid, change));
                Ok(())
            }
            (None, _) => match &mut self.open {
                Some(changes) => {
                    changes.push(change);
                    Ok(())
                }
                None => Err(PgSourceError::Protocol { lsn, reason: "a row change outside any transaction".into() }),
            },
            (Some(_), None) => Err(PgSourceError::Protocol { lsn, reason: "a streamed change outside a stream block".into() }),
        }
    }

    /// Puts changes before everything the transaction holds so far: what a schema
    /// change did to rows that existed before the transaction (see
    /// [`crate::added_column`]), which the transaction's own earlier changes must
    /// override.
    pub fn prepend(&mut self, xid: Option<u32>, changes: Vec<SourceChange>, lsn: Lsn) -> PgSourceResult<()> {
        match (xid, self.stream_block) {
            (Some(xid), Some(top)) => {
                let buffered = self.streamed.entry(top).or_default();
                buffered.splice(0..0, changes.into_iter().map(|change| (xid, change)));
                Ok(())
            }
            (None, _) => match &mut self.open {
                Some(open) => {
                    open.splice(0..0, changes);
                    Ok(())
                }
                None => Err(PgSourceError::Protocol { lsn, reason: "a schema change outside any transaction".into() }),
            },
            (Some(_), None) => Err(PgSourceError::Protocol { lsn, reason: "a streamed change outside a stream block".into() }),
        }
    }

    /// Applies `patch` to every buffered row change of `table` in the transaction
    /// `xid` belongs to (the open one when `None`).
    pub fn patch_rows(&mut self, xid: Option<u32>, table: retina_core::TableId, mut patch: impl FnMut(&mut Vec<retina_core::Value>)) {
        let changes: Box<dyn Iterator<Item = &mut SourceChange>> = match (xid, self.stream_block) {
            (Some(_), Some(top)) => match self.streamed.get_mut(&top) {
                Some(buffered) => Box::new(buffered.iter_mut().map(|(_, change)| change)),
                None => return,
            },
            (None, _) => match &mut self.open {
                Some(open) => Box::new(open.iter_mut()),
                None => return,
            },
            (Some(_), None) => return,
        };
        for change in changes {
            if let SourceChange::Row(
                retina_core::RowChange::Insert { table: changed, row }
                | retina_core::RowChange::Update { table: changed, row, .. }
                | retina_core::RowChange::Upsert { table: changed, row }
                | retina_core::RowChange::UpdateKeeping { table: changed, row, .. },
            ) = change
            {
                if *changed == table {
                    patch(row);
                }
            }
        }
    }

    pub fn stream_start(&mut self, xid: u32, lsn: Lsn) -> PgSourceResult<()> {
        if self.stream_block.is_some() {
            return Err(PgSourceError::Protocol { lsn, reason: "Stream Start inside a stream block".into() });
        }
        self.stream_block = Some(xid);
        self.streamed.entry(xid).or_default();
        Ok(())
    }

    pub fn stream_stop(&mut self) {
        self.stream_block = None;
    }

    pub fn stream_commit(&mut self, xid: u32, end_lsn: Lsn, commit_time_micros: i64) -> PgSourceResult<SourceTransaction> {
        let changes = self.streamed.remove(&xid).ok_or_else(|| PgSourceError::Protocol {
            lsn: end_lsn,
            reason: format!("Stream Commit of transaction {xid}, which was never streamed"),
        })?;
        Ok(SourceTransaction { end_lsn, commit_time_micros, changes: changes.into_iter().map(|(_, c)| c).collect() })
    }

    pub fn stream_abort(&mut self, xid: u32, subxid: u32) {
        if xid == subxid {
            self.streamed.remove(&xid);
        } else if let Some(changes) = self.streamed.get_mut(&xid) {
            changes.retain(|(owner, _)| *owner != subxid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use retina_core::{RowChange, TableId, Value};

    fn insert(id: i64) -> SourceChange {
        SourceChange::Row(RowChange::Insert { table: TableId(1), row: vec![Value::Int64(id)] })
    }

    fn ids(transaction: &SourceTransaction) -> Vec<i64> {
        transaction
            .changes
            .iter()
            .map(|c| match c {
                SourceChange::Row(RowChange::Insert { row, .. }) => match row[0] {
                    Value::Int64(v) => v,
                    _ => panic!("int"),
                },
                _ => panic!("insert"),
            })
            .collect()
    }

    #[test]
    fn plain_transactions() {
        let mut assembler = TransactionAssembler::new();
        assert!(assembler.push(None, insert(1), Lsn(1)).is_err(), "outside a transaction");
        assembler.begin(Lsn(1)).expect("begin");
        assert!(assembler.in_progress());
        assembler.push(None, insert(1), Lsn(2)).expect("push");
        assembler.push(None, insert(2), Lsn(3)).expect("push");
        let done = assembler.commit(Lsn(10), 5).expect("commit");
        assert_eq!((done.end_lsn, ids(&done)), (Lsn(10), vec![1, 2]));
        assert!(!assembler.in_progress());
        assert!(assembler.commit(Lsn(11), 5).is_err(), "commit without begin");
    }

    #[test]
    fn streamed_transactions_interleave_and_subtransactions_abort() {
        let mut assembler = TransactionAssembler::new();
        assembler.stream_start(100, Lsn(1)).expect("start");
        assembler.push(Some(100), insert(1), Lsn(1)).expect("push");
        assembler.push(Some(101), insert(2), Lsn(2)).expect("push");
        assembler.stream_stop();
        // A small transaction commits in between, in the normal way.
        assembler.begin(Lsn(3)).expect("begin");
        assembler.push(None, insert(9), Lsn(3)).expect("push");
        assert_eq!(ids(&assembler.commit(Lsn(4), 0).expect("commit")), vec![9]);
        assembler.stream_start(200, Lsn(5)).expect("start");
        assembler.push(Some(200), insert(5), Lsn(5)).expect("push");
        assembler.stream_stop();
        assembler.stream_start(100, Lsn(6)).expect("start");
        assembler.push(Some(100), insert(3), Lsn(6)).expect("push");
        assembler.stream_stop();
        assembler.stream_abort(100, 101);
        assert_eq!(ids(&assembler.stream_commit(100, Lsn(7), 0).expect("commit")), vec![1, 3]);
        assembler.stream_abort(200, 200);
        assert!(!assembler.in_progress());
        assert!(assembler.stream_commit(200, Lsn(8), 0).is_err(), "aborted");
    }
}
