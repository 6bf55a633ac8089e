//! What the engine's threads hand each other (shards, flusher, storage GC, memory GC,
//! recovery). Defined apart from the workers that consume them, so a sender depends
//! on the message, never on its receiver: the worker modules form no import cycle.

use std::sync::{Arc, Weak};

use crossbeam_channel::Sender;

use crate::catalog::DataFileMeta;
use crate::error::CoreResult;
use crate::index::{HashedKey, MainIndex, SinglePointIndex};
use crate::table::{FlushedFile, TableRuntime};
use crate::types::{TableId, Ts};
use crate::value::Value;
use crate::visibility::{RgVisibility, RgWriter};
use crate::write_buffer::VirtualFile;

use crate::replay::hot_path::commit_group::CommitGroup;
use crate::replay::hot_path::operation::ShardTxn;

/// To a shard thread.
pub(crate) enum ShardMessage {
    Apply { group: Arc<CommitGroup>, txns: Vec<ShardTxn> },
    /// Index GC of one part of every table's index (see `SinglePointIndex`).
    CollectIndexGarbage { lwm: Ts, part: usize },
    SwapFile(Box<FileSwap>),
    /// The latest values of `columns` of `key`'s row, read after everything sent to
    /// the shard before (see `Engine::read_latest`); the reason when there is none.
    ReadLatest { table: TableId, key: HashedKey, columns: Vec<usize>, reply: Sender<CoreResult<Result<Vec<Value>, &'static str>>> },
}

/// To the flusher: a complete virtual file to write.
pub(crate) struct FlushJob {
    pub(crate) table: Arc<TableRuntime>,
    pub(crate) file: Arc<VirtualFile>,
}

pub(crate) enum FlushMessage {
    Job(FlushJob),
    Barrier(Sender<()>),
}

/// A rewritten file on its way to the shard that owns its keys.
pub(crate) struct FileSwap {
    pub(crate) table: TableId,
    pub(crate) old: FlushedFile,
    /// The new file and the writer of its visibility: made here, written only by the
    /// shard the swap goes to (dual delete, then its own deletes).
    pub(crate) new: Option<(FlushedFile, RgWriter)>,
    /// (key, offset in the old file, offset in the new file) of every live row.
    pub(crate) moves: Vec<(Vec<u8>, u32, u32)>,
    pub(crate) rewritten_at: Ts,
    /// `true` once swapped; `false` when the old file was no longer in the table.
    pub(crate) done: Sender<bool>,
}

/// An old file waiting to be deleted.
pub(crate) struct RetiredFile {
    pub(crate) meta: DataFileMeta,
    /// Every reader of the old file holds its visibility (through a table-files view
    /// it loaded before the swap); when none is left, nobody can read it.
    pub(crate) readers: Weak<RgVisibility>,
    /// The first checkpoint that started after the swap.
    pub(crate) checkpoint_seq: u64,
}

/// What one shard owns of one table after recovery.
pub(crate) struct RestoredShardTable {
    pub(crate) table: Arc<TableRuntime>,
    pub(crate) index: SinglePointIndex,
    pub(crate) main: MainIndex,
}
