//! Log sequence numbers: byte positions in PostgreSQL's write-ahead log, written
//! `X/Y` (high and low 32 bits in hex).

use std::fmt;
use std::str::FromStr;

/// A WAL position. Ordered as the log is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    pub const ZERO: Lsn = Lsn(0);
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// Why a text is not an LSN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a log sequence number (expected X/Y in hex)")]
pub struct LsnParseError(pub String);

impl FromStr for Lsn {
    type Err = LsnParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || LsnParseError(text.to_string());
        let (high, low) = text.split_once('/').ok_or_else(error)?;
        if high.is_empty() || low.is_empty() || high.len() > 8 || low.len() > 8 {
            return Err(error());
        }
        let high = u32::from_str_radix(high, 16).map_err(|_| error())?;
        let low = u32::from_str_radix(low, 16).map_err(|_| error())?;
        Ok(Lsn((u64::from(high) << 32) | u64::from(low)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders() {
        for text in ["0/0", "0/16B3748", "FFFFFFFF/FFFFFFFF", "1/0"] {
            let lsn: Lsn = text.parse().expect(text);
            assert_eq!(lsn.to_string(), text);
        }
        assert!("0/FFFFFFFF".parse::<Lsn>().unwrap() < "1/0".parse::<Lsn>().unwrap());
        for bad in ["", "0", "/1", "1/", "x/1", "123456789/0", "1/2/3"] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad}");
        }
    }
}
