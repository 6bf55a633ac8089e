//! The data-file compression flag `serve` and `ingest` share.

use retina_storage::CompressionGoal;

/// What new data files favour (`--help` lists each choice with its doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    /// `fast-scans` on a local directory, `small-files` on an object store, where
    /// each byte fetched costs time and money.
    Auto,
    /// Columns of distinct numbers (keys, amounts) uncompressed: scans decode them
    /// about twice as fast; all-numeric tables take ~40% more bytes.
    FastScans,
    /// Snappy on every column it shrinks by a tenth.
    SmallFiles,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CompressionArgs {
    /// What new data files favour.
    #[arg(long, value_enum, default_value = "auto")]
    pub compression: Compression,
}

impl CompressionArgs {
    /// The goal to set on the store (`None`: the store's own choice by location).
    pub fn goal(&self) -> Option<CompressionGoal> {
        match self.compression {
            Compression::Auto => None,
            Compression::FastScans => Some(CompressionGoal::FastScans),
            Compression::SmallFiles => Some(CompressionGoal::SmallFiles),
        }
    }
}
