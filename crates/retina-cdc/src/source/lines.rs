//! `file:PATH` and `-`: Debezium JSON lines from a file or stdin. Positions are
//! 1-based line numbers; blank lines are skipped but counted.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::{MessageSource, SourceEvent};
use crate::error::{CdcError, CdcResult};
use crate::position::Position;

pub struct LineSource {
    name: String,
    reader: Box<dyn BufRead + Send>,
    line: u64,
}

impl LineSource {
    pub fn open_file(path: &Path) -> CdcResult<Self> {
        let file = File::open(path)
            .map_err(|e| CdcError::Source { source_name: format!("file:{}", path.display()), reason: e.to_string() })?;
        Ok(Self::from_reader(format!("file:{}", path.display()), BufReader::with_capacity(1 << 20, file)))
    }

    pub fn stdin() -> Self {
        Self::from_reader("-".into(), BufReader::with_capacity(1 << 20, std::io::stdin()))
    }

    pub fn from_reader(name: String, reader: impl Read + Send + 'static) -> Self {
        Self { name, reader: Box::new(BufReader::new(reader)), line: 0 }
    }
}

impl MessageSource for LineSource {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        loop {
            buffer.clear();
            let read = self.reader.read_line(buffer).map_err(|e| CdcError::Source {
                source_name: self.name.clone(),
                reason: format!("after line {}: {e}", self.line),
            })?;
            if read == 0 {
                return Ok(SourceEvent::End);
            }
            self.line += 1;
            let trimmed = buffer.trim_end_matches(['\n', '\r']).len();
            buffer.truncate(trimmed);
            if !buffer.trim().is_empty() {
                return Ok(SourceEvent::Message(Position::line(self.line)));
            }
        }
    }
}
