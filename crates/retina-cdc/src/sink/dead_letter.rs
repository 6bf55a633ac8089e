//! `--dead-letter PATH`: messages the sink cannot decode or place in a transaction are
//! appended there, one JSON object per line (`position`, `reason`, `message`), and
//! replay continues. Nothing of a dead-lettered transaction is applied.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::CdcError;
use crate::position::Position;

#[derive(Serialize)]
struct DeadLetter<'a> {
    position: String,
    reason: &'a str,
    message: &'a str,
}

pub struct DeadLetterWriter {
    path: PathBuf,
    out: BufWriter<File>,
    written: u64,
    /// Written since the last [`Self::sync`].
    unsynced: bool,
}

impl DeadLetterWriter {
    pub fn open(path: &Path) -> Result<Self, CdcError> {
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|e| CdcError::DeadLetter {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self { path: path.to_path_buf(), out: BufWriter::new(file), written: 0, unsynced: false })
    }

    /// Writes one message and flushes, so a crash loses no dead letter.
    pub fn write(&mut self, position: Position, reason: &str, message: &str) -> Result<(), CdcError> {
        let letter = DeadLetter { position: position.to_string(), reason, message };
        let result = serde_json::to_writer(&mut self.out, &letter)
            .map_err(|e| e.to_string())
            .and_then(|()| self.out.write_all(b"\n").map_err(|e| e.to_string()))
            .and_then(|()| self.out.flush().map_err(|e| e.to_string()));
        result.map_err(|reason| CdcError::DeadLetter { path: self.path.display().to_string(), reason })?;
        self.written += 1;
        self.unsynced = true;
        Ok(())
    }

    /// Makes what was written durable: before a position past a dead letter is
    /// recorded, so a crash cannot lose a message that replay will not read again.
    /// Nothing to do when nothing was written since the last call.
    pub fn sync(&mut self) -> Result<(), CdcError> {
        if self.unsynced {
            self.out.get_ref().sync_data().map_err(|e| CdcError::DeadLetter { path: self.path.display().to_string(), reason: e.to_string() })?;
            self.unsynced = false;
        }
        Ok(())
    }

    pub fn written(&self) -> u64 {
        self.written
    }
}
