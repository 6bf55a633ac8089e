//! What makes replay durable: the flusher writes complete write-buffer files, the
//! checkpointer saves the buffered rest and the visibility at HWM − 1 without
//! stopping replay, recovery rebuilds an engine from both, and source positions say
//! what a source may be told to discard.

pub(crate) mod checkpointer;
pub(crate) mod flusher;
pub(crate) mod index_rebuild;
pub(crate) mod recovery;
pub(crate) mod segment_merge;
pub(crate) mod source_progress;
