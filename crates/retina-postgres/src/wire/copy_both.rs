//! The CopyBoth stream of a replication session: `START_REPLICATION` turns the
//! session into a two-way stream of CopyData messages (XLogData `w` and keepalives
//! `k` from the server, standby status updates `r` from us) until either side ends it.

use std::time::Duration;

use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::connection::{Drained, PgConnection, SessionState};
use super::error::{WireError, WireResult};
use super::transport::Incoming;
use super::CopyBothEvent;

const READ_CONTEXT: &str = "reading the replication stream";

impl PgConnection {
    /// Sends `sql` (e.g. `START_REPLICATION SLOT s LOGICAL 0/0 (...)`) and waits for
    /// CopyBothResponse. If the server refuses (an unknown slot, a slot in use), the
    /// error comes back as [`WireError::Server`] and the session stays usable.
    pub fn start_copy_both(&mut self, sql: &str) -> WireResult<()> {
        self.require_state(&SessionState::Ready, "start_copy_both")?;
        let result = self.run_start_copy_both(sql);
        self.settle(result)
    }

    /// The next CopyData payload of the stream, waiting at most `timeout`.
    ///
    /// [`CopyBothEvent::Timeout`] loses nothing: a partly received message stays
    /// buffered for the next call. [`CopyBothEvent::End`] means the server ended the
    /// stream; this side has answered the server's CopyDone and read up to
    /// ReadyForQuery, so the session accepts queries again. A server error in the
    /// stream (e.g. the backend was terminated) is returned as [`WireError::Server`]
    /// and leaves the session unusable: reconnect.
    pub fn read_copy_data(&mut self, timeout: Duration) -> WireResult<CopyBothEvent> {
        self.require_state(&SessionState::CopyBoth, "read_copy_data")?;
        loop {
            let message = match self.transport.read_message_within(timeout, READ_CONTEXT) {
                Ok(Some(message)) => message,
                Ok(None) => return Ok(CopyBothEvent::Timeout),
                Err(error) => return Err(self.break_with(error)),
            };
            let Some(message) = self.absorb_asynchronous(message) else { continue };
            return match message {
                Incoming::CopyData(payload) => Ok(CopyBothEvent::Data(payload)),
                Incoming::Message(Message::CopyDone) => {
                    let ended = self.answer_copy_done();
                    ended.map_err(|error| self.break_with(error))
                }
                Incoming::Message(Message::CommandComplete(_)) => {
                    let ended = self.drain_to_ready();
                    ended.map_err(|error| self.break_with(error))
                }
                Incoming::Message(Message::ReadyForQuery(_)) => {
                    self.state = SessionState::Ready;
                    Ok(CopyBothEvent::End)
                }
                Incoming::Message(Message::ErrorResponse(body)) => {
                    Err(self.break_with(WireError::from_error_fields(body.fields())))
                }
                other => {
                    let error = self.unexpected(&other, "in the replication stream");
                    Err(self.break_with(error))
                }
            };
        }
    }

    /// Sends one CopyData message (e.g. a standby status update `r`) and flushes.
    pub fn send_copy_data(&mut self, payload: &[u8]) -> WireResult<()> {
        self.require_state(&SessionState::CopyBoth, "send_copy_data")?;
        let sent = self.transport.send("sending CopyData to the replication stream", |buffer| {
            frontend::CopyData::new(payload)?.write(buffer);
            Ok(())
        });
        sent.map_err(|error| self.break_with(error))
    }

    fn run_start_copy_both(&mut self, sql: &str) -> WireResult<Drained<()>> {
        const CONTEXT: &str = "waiting for the replication stream to start";
        self.transport.send("sending a replication command", |buffer| frontend::query(sql, buffer))?;
        let mut failure: Option<WireError> = None;
        loop {
            let message = match self.next_message(CONTEXT)? {
                Incoming::CopyBothResponse => {
                    if let Some(error) = failure {
                        // Cannot happen with a real server (an error ends the command);
                        // if it does, the stream is open and we do not know why.
                        return Err(error);
                    }
                    self.state = SessionState::CopyBoth;
                    return Ok(Ok(()));
                }
                Incoming::CopyData(_) => continue,
                Incoming::Message(message) => message,
            };
            match message {
                Message::ErrorResponse(body) => {
                    let error = WireError::from_error_fields(body.fields());
                    if error.is_fatal() {
                        return Err(error);
                    }
                    failure.get_or_insert(error);
                }
                Message::ReadyForQuery(_) => {
                    return Ok(Err(failure.unwrap_or_else(|| {
                        WireError::Protocol(format!(
                            "start_copy_both: the command completed without starting a CopyBoth stream on {}",
                            self.address
                        ))
                    })));
                }
                Message::RowDescription(_)
                | Message::DataRow(_)
                | Message::CommandComplete(_)
                | Message::EmptyQueryResponse
                | Message::CopyOutResponse(_)
                | Message::CopyDone => {}
                Message::CopyInResponse(_) => {
                    self.transport.send("sending CopyFail", |buffer| {
                        frontend::copy_fail("start_copy_both does not send COPY FROM STDIN data", buffer)
                    })?;
                }
                other => return Err(self.unexpected(&Incoming::Message(other), "while starting a CopyBoth stream")),
            }
        }
    }

    /// The server sent CopyDone: answer with ours (the protocol requires both sides
    /// to end the copy) and read on to ReadyForQuery.
    fn answer_copy_done(&mut self) -> WireResult<CopyBothEvent> {
        self.transport.send("answering the server's CopyDone", |buffer| {
            frontend::copy_done(buffer);
            Ok(())
        })?;
        self.drain_to_ready()
    }

    /// Reads the rest of a finished stream (CopyData still in flight, a result set,
    /// CommandComplete) up to ReadyForQuery.
    fn drain_to_ready(&mut self) -> WireResult<CopyBothEvent> {
        const CONTEXT: &str = "reading the end of the replication stream";
        loop {
            match self.next_message(CONTEXT)? {
                Incoming::Message(Message::ReadyForQuery(_)) => {
                    self.state = SessionState::Ready;
                    return Ok(CopyBothEvent::End);
                }
                Incoming::Message(Message::ErrorResponse(body)) => return Err(WireError::from_error_fields(body.fields())),
                _ => {}
            }
        }
    }
}
