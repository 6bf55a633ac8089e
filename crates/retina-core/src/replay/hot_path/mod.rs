//! The replay hot path: shard threads applying their part of each mirror
//! transaction, the operations they apply and group commit (keys are routed by
//! [`crate::index::HashedKey`]).

pub(crate) mod commit_group;
pub(crate) mod file_swap;
pub(crate) mod kept_reads;
pub(crate) mod operation;
pub(crate) mod shard;
