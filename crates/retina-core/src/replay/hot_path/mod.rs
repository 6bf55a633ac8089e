//! The replay hot path: shard threads applying their part of each mirror
//! transaction, the operations they apply, routing by primary key, and group commit.

pub(crate) mod commit_group;
pub(crate) mod file_swap;
pub(crate) mod operation;
pub(crate) mod routing;
pub(crate) mod shard;
