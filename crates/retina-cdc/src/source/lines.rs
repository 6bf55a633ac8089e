//! `file:PATH` and `-`: Debezium JSON lines from a file or stdin. Positions are
//! 1-based line numbers; blank lines are skipped but counted.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::{MessageSource, SourceEvent};
use crate::debezium::elision::NotUtf8;
use crate::debezium::{Line, SchemaElider};
use crate::error::{CdcError, CdcResult};
use crate::position::Position;

pub struct LineSource {
    name: String,
    reader: Box<dyn BufRead + Send>,
    line: u64,
    /// A line that spans refills of the read buffer, gathered.
    spill: Vec<u8>,
}

/// Bytes read from the file or stdin at a time. One buffer only: a second, 8-KB one
/// around it (as `from_reader` once added) copied every byte once more and split
/// most 4-KB Debezium lines across two refills.
const READ_BUFFER_BYTES: usize = 1 << 20;

impl LineSource {
    pub fn open_file(path: &Path) -> CdcResult<Self> {
        let file = File::open(path)
            .map_err(|e| CdcError::Source { source_name: format!("file:{}", path.display()), reason: e.to_string() })?;
        Ok(Self::from_reader(format!("file:{}", path.display()), file))
    }

    pub fn stdin() -> Self {
        Self::from_reader("-".into(), std::io::stdin())
    }

    /// Lines of `reader`, which is read through this source's own buffer (pass an
    /// unbuffered reader).
    pub fn from_reader(name: String, reader: impl Read + Send + 'static) -> Self {
        Self { name, reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader)), line: 0, spill: Vec::new() }
    }
}

impl MessageSource for LineSource {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        super::next_whole(buffer, |line, elider| self.next_line(line, elider))
    }

    fn next_line(&mut self, line: &mut Line, elider: &mut SchemaElider) -> CdcResult<SourceEvent> {
        loop {
            let read = match read_line(&mut *self.reader, &mut self.spill, line, elider) {
                Ok(read) => read,
                Err(LineError::Read(e)) => {
                    return Err(CdcError::Source { source_name: self.name.clone(), reason: format!("after line {}: {e}", self.line) })
                }
                Err(LineError::NotUtf8 { valid_up_to }) => {
                    return Err(CdcError::Source {
                        source_name: self.name.clone(),
                        reason: format!("line {} is not valid UTF-8 (byte {} of the line)", self.line + 1, valid_up_to + 1),
                    })
                }
            };
            if read == 0 {
                return Ok(SourceEvent::End);
            }
            self.line += 1;
            if !line.elided().is_empty() || !line.text().trim().is_empty() {
                return Ok(SourceEvent::Message(Position::line(self.line)));
            }
        }
    }
}

enum LineError {
    Read(std::io::Error),
    NotUtf8 { valid_up_to: usize },
}

/// Reads one line into `line` without its line ending (every `\n` and `\r` it ends
/// with), through `elider`. Finds the line's end with the `memchr` crate's
/// vectorized search: std's (a word-at-a-time loop) was 16% of the reading thread on
/// envelope lines of ~1.9 KB. A line inside the read buffer is taken from there; one
/// across refills is gathered in `spill` first. Returns the bytes read, newline
/// included; 0 at the end.
fn read_line(
    reader: &mut dyn BufRead,
    spill: &mut Vec<u8>,
    line: &mut Line,
    elider: &mut SchemaElider,
) -> Result<usize, LineError> {
    spill.clear();
    let mut read = 0;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineError::Read(e)),
        };
        if available.is_empty() {
            break;
        }
        match memchr::memchr(b'\n', available) {
            Some(end) if spill.is_empty() => {
                let filled = fill(line, elider, &available[..end]);
                reader.consume(end + 1);
                filled?;
                return Ok(end + 1);
            }
            Some(end) => {
                spill.extend_from_slice(&available[..=end]);
                reader.consume(end + 1);
                read += end + 1;
                break;
            }
            None => {
                let taken = available.len();
                spill.extend_from_slice(available);
                reader.consume(taken);
                read += taken;
            }
        }
    }
    fill(line, elider, spill)?;
    Ok(read)
}

fn fill(line: &mut Line, elider: &mut SchemaElider, bytes: &[u8]) -> Result<(), LineError> {
    let end = bytes.iter().rposition(|&b| b != b'\n' && b != b'\r').map_or(0, |last| last + 1);
    elider.fill(line, &bytes[..end]).map_err(|NotUtf8 { valid_up_to }| LineError::NotUtf8 { valid_up_to })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], capacity: usize) -> Vec<Result<(u64, String), String>> {
        let mut source = LineSource {
            name: "test".into(),
            reader: Box::new(BufReader::with_capacity(capacity, std::io::Cursor::new(input.to_vec()))),
            line: 0,
            spill: Vec::new(),
        };
        let mut buffer = String::new();
        let mut out = Vec::new();
        loop {
            match source.next(&mut buffer) {
                Ok(SourceEvent::Message(position)) => out.push(Ok((position.value, buffer.clone()))),
                Ok(_) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    /// Lines longer than the read buffer, CRLF endings, blank lines (counted, not
    /// returned) and a last line without a newline all read as std's `read_line` did.
    #[test]
    fn lines_cross_buffer_boundaries_and_keep_their_numbers() {
        let long = "x".repeat(100);
        let input = format!("{{\"a\":1}}\r\n\n{long}\n  \n{{\"é\":2}}");
        for capacity in [1, 7, 64, 1 << 20] {
            let got = lines(input.as_bytes(), capacity);
            let want = vec![Ok((1, "{\"a\":1}".to_string())), Ok((3, long.clone())), Ok((5, "{\"é\":2}".to_string()))];
            assert_eq!(got, want, "read buffer of {capacity} bytes");
        }
        assert!(lines(b"", 16).is_empty());
    }

    /// Read with known schemas left out, a line reads back the same whether it lies
    /// inside the read buffer or across refills of it.
    #[test]
    fn known_schemas_are_left_out_whatever_the_buffer() {
        let schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Envelope"}"#;
        let line = format!(r#"{{"schema":{schema},"payload":{{"op":"c"}}}}"#);
        let input = format!("{line}\r\n\n{line}\n{line}");
        let known = crate::debezium::KnownSchemas::default();
        known.intern(schema);
        for capacity in [1, 7, 64, 1 << 20] {
            let mut source = LineSource {
                name: "test".into(),
                reader: Box::new(BufReader::with_capacity(capacity, std::io::Cursor::new(input.clone().into_bytes()))),
                line: 0,
                spill: Vec::new(),
            };
            let mut elider = SchemaElider::new(known.clone());
            let mut read = Line::default();
            let mut numbers = Vec::new();
            while let Ok(SourceEvent::Message(position)) = source.next_line(&mut read, &mut elider) {
                assert_eq!((read.elided().len(), read.full()), (1, line.as_str().into()), "read buffer of {capacity} bytes");
                numbers.push(position.value);
            }
            assert_eq!(numbers, [1, 3, 4], "read buffer of {capacity} bytes");
        }
    }

    /// Bytes that are not UTF-8 stop the source with the line and byte they are at.
    #[test]
    fn invalid_utf8_names_its_line() {
        let got = lines(b"{}\n{\"a\":\"\xff\"}\n{}\n", 4);
        assert_eq!(got[0], Ok((1, "{}".to_string())));
        let error = got[1].as_ref().expect_err("line 2 is not UTF-8");
        assert!(error.contains("line 2 is not valid UTF-8 (byte 7 of the line)"), "{error}");
    }
}
