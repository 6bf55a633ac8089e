//! How events become row changes beyond their own content (the default table, what
//! to do with absent rows): options set once per sink and shared by the table
//! bindings and the decode stage.

use crate::error::CdcError;

/// What to do with an update or delete of a row the mirror does not have
/// (`--on-absent-row`, source URI option `on_absent_row=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnAbsentRow {
    /// Stop with an error naming table, key and position (the mirror and the source
    /// disagree, unless the stream did not start with a snapshot).
    #[default]
    Error,
    /// For a stream that starts without a snapshot, or an excerpt: the after-image of
    /// such an update is inserted, such a delete is ignored; both are counted
    /// ([`crate::SinkStats::absent_row_upserts`], `absent_row_deletes_ignored`).
    Upsert,
}

impl std::str::FromStr for OnAbsentRow {
    type Err = CdcError;
    fn from_str(text: &str) -> Result<Self, CdcError> {
        match text {
            "error" => Ok(Self::Error),
            "upsert" => Ok(Self::Upsert),
            other => Err(CdcError::InvalidOption(format!("--on-absent-row {other:?}: expected error or upsert"))),
        }
    }
}

/// How events become row changes, beyond their own content: set once per sink and
/// shared with the decode stage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoding {
    /// `--table NAME`: the table of events without a `source` block.
    pub default_table: Option<String>,
    pub on_absent_row: OnAbsentRow,
}
