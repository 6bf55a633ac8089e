//! A bounds-checked big-endian reader over one message.

use bytes::{Buf, Bytes};

use super::{DecodeError, TupleData, TupleValue};

pub(super) struct Reader {
    data: Bytes,
    kind: char,
}

impl Reader {
    pub(super) fn new(data: Bytes, kind: char) -> Self {
        Self { data, kind }
    }

    pub(super) fn error(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError { kind: self.kind, reason: reason.into() }
    }

    fn need(&self, bytes: usize, what: &str) -> Result<(), DecodeError> {
        if self.data.remaining() < bytes {
            return Err(self.error(format!("truncated: {what} needs {bytes} bytes, {} left", self.data.remaining())));
        }
        Ok(())
    }

    pub(super) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1, "a byte")?;
        Ok(self.data.get_u8())
    }

    pub(super) fn expect(&mut self, byte: u8, what: &str) -> Result<(), DecodeError> {
        let got = self.u8()?;
        if got != byte {
            return Err(self.error(format!("expected {what}, got {:?}", char::from(got))));
        }
        Ok(())
    }

    pub(super) fn i16(&mut self) -> Result<i16, DecodeError> {
        self.need(2, "an int16")?;
        Ok(self.data.get_i16())
    }

    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4, "an int32")?;
        Ok(self.data.get_u32())
    }

    pub(super) fn i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4, "an int32")?;
        Ok(self.data.get_i32())
    }

    pub(super) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8, "an int64")?;
        Ok(self.data.get_u64())
    }

    pub(super) fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8, "an int64")?;
        Ok(self.data.get_i64())
    }

    pub(super) fn bytes(&mut self, length: usize) -> Result<Bytes, DecodeError> {
        self.need(length, "a value")?;
        Ok(self.data.split_to(length))
    }

    /// A NUL-terminated UTF-8 string.
    pub(super) fn string(&mut self) -> Result<String, DecodeError> {
        let end = self.data.iter().position(|&b| b == 0).ok_or_else(|| self.error("unterminated string"))?;
        let raw = self.data.split_to(end);
        self.data.advance(1);
        String::from_utf8(raw.to_vec()).map_err(|_| self.error("string is not UTF-8"))
    }

    /// Everything not read yet.
    pub(super) fn rest(&mut self) -> Bytes {
        std::mem::take(&mut self.data)
    }

    pub(super) fn tuple(&mut self) -> Result<TupleData, DecodeError> {
        let count = self.i16()?;
        if count < 0 {
            return Err(self.error(format!("negative column count {count}")));
        }
        let mut values = Vec::with_capacity(count as usize);
        for column in 0..count {
            let value = match self.u8()? {
                b'n' => TupleValue::Null,
                b'u' => TupleValue::UnchangedToast,
                b't' => {
                    let length = self.u32()? as usize;
                    TupleValue::Text(self.bytes(length)?)
                }
                b'b' => {
                    let length = self.u32()? as usize;
                    TupleValue::Binary(self.bytes(length)?)
                }
                other => return Err(self.error(format!("column {column}: unknown tuple value kind {:?}", char::from(other)))),
            };
            values.push(value);
        }
        Ok(values)
    }
}
