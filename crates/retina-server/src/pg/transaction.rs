//! A connection's transaction, as PostgreSQL keeps one for a read-only client.
//!
//! - REPEATABLE READ and SERIALIZABLE: every query of the transaction reads the
//!   snapshot its first query took, until COMMIT or ROLLBACK, so a dashboard's
//!   queries in one transaction agree with each other across tables. READ COMMITTED
//!   (the default): a snapshot per query, as outside a transaction.
//! - After an error inside a transaction block, every statement but COMMIT,
//!   ROLLBACK and ROLLBACK TO is refused with 25P02 until the block ends; COMMIT then
//!   ends it as a ROLLBACK (its tag says so), as PostgreSQL does.
//!
//! A held snapshot keeps the engine's low watermark where it was, so memory GC waits
//! for the transaction to end, as it waits for a long query (ARCHITECTURE.md, known
//! limits); idle clients should not hold such transactions open.

use std::sync::Arc;

use parking_lot::Mutex;
use pgwire::api::ClientInfo;
use pgwire::error::PgWireResult;
use retina_query::snapshot::QuerySnapshot;
use retina_query::RetinaSession;

use super::errors::{pg_error, user_error};
use super::statement::SessionCommand;

/// One connection's transaction state.
#[derive(Default)]
pub struct Transaction {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Inside BEGIN … COMMIT/ROLLBACK.
    open: bool,
    one_snapshot: bool,
    /// Taken by the transaction's first query when `one_snapshot`.
    snapshot: Option<QuerySnapshot>,
    /// A statement failed inside the block.
    failed: bool,
}

/// The transaction of `client`'s connection.
pub fn transaction_of<C: ClientInfo>(client: &C) -> Arc<Transaction> {
    client.session_extensions().get_or_insert_with(Transaction::default)
}

impl Transaction {
    /// Refuses a statement of a failed transaction block (25P02), except those that
    /// end it or roll back to a savepoint.
    /// `command` is asked for only then: recognizing one renders the statement as
    /// text, which every statement outside a failed block need not pay.
    pub fn admit(&self, command: impl FnOnce() -> Option<SessionCommand>) -> PgWireResult<()> {
        if !self.state.lock().failed {
            return Ok(());
        }
        let ends = matches!(command(), Some(SessionCommand::Commit | SessionCommand::Rollback | SessionCommand::RollbackTo));
        if !ends {
            return Err(user_error("25P02", "current transaction is aborted, commands ignored until end of transaction block"));
        }
        Ok(())
    }

    /// Takes a transaction command into account; returns the tag to answer with
    /// when it differs from the command's (COMMIT of a failed block: `ROLLBACK`).
    pub fn apply(&self, command: SessionCommand) -> Option<&'static str> {
        let mut state = self.state.lock();
        match command {
            SessionCommand::Begin { one_snapshot } => {
                // BEGIN inside a block is a warning in PostgreSQL, and changes nothing.
                if !state.open {
                    *state = State { open: true, one_snapshot, ..State::default() };
                }
                None
            }
            SessionCommand::SetTransaction { one_snapshot } => {
                if state.open && state.snapshot.is_none() {
                    state.one_snapshot = one_snapshot;
                }
                None
            }
            SessionCommand::Commit | SessionCommand::Rollback => {
                let failed = state.failed;
                *state = State::default();
                (failed && command == SessionCommand::Commit).then_some("ROLLBACK")
            }
            SessionCommand::RollbackTo => {
                state.failed = false;
                None
            }
            _ => None,
        }
    }

    /// Marks the block failed after an error (nothing when no block is open).
    pub fn fail(&self) {
        let mut state = self.state.lock();
        if state.open {
            state.failed = true;
        }
    }

    /// The snapshot a query of this transaction reads at, when it keeps one
    /// (taken now by its first query); `None`: a fresh snapshot per query.
    pub fn held_snapshot(&self, session: &RetinaSession) -> PgWireResult<Option<QuerySnapshot>> {
        let mut state = self.state.lock();
        if !(state.open && state.one_snapshot) {
            return Ok(None);
        }
        if state.snapshot.is_none() {
            let snapshot = session.engine().snapshot().map_err(|error| pg_error(retina_query::QueryError::from(error)))?;
            state.snapshot = Some(QuerySnapshot::new(snapshot));
        }
        Ok(state.snapshot.clone())
    }
}
