//! Garbage collection: memory GC folds visibility below LWM and prunes the indexes;
//! storage GC rewrites files whose stale share passed a threshold.

pub(crate) mod memory;
pub(crate) mod storage;
