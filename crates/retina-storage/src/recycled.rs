//! Output buffers of Parquet encodes, handed back for the next encode once the
//! object store has written them.
//!
//! Why: a flushed file is encoded into one buffer of tens of MB. A fresh buffer per
//! file came from the operating system each time (the allocator returns blocks this
//! large to it), and faulting those pages in (zeroing them, and on a VM having the
//! host back them) took a quarter of the flusher's CPU in `retina ingest` of
//! Debezium envelope JSON, about as much as compressing the file. A buffer that
//! comes back is already mapped. No crate offers this: `bytes::Bytes` can own
//! any buffer (`Bytes::from_owner`), and dropping that owner is where it returns.

use std::sync::Mutex;

use bytes::Bytes;
use object_store::PutPayload;

/// Buffers kept for reuse: enough for the flusher and a checkpoint encoding at once.
const SPARE_BUFFERS: usize = 2;
/// A buffer larger than this goes back to the allocator (memory held stays bounded
/// by `SPARE_BUFFERS` times this).
const LARGEST_KEPT: usize = 128 << 20;
/// A fresh buffer reserves at most this much up front (it grows past it if needed).
const LARGEST_RESERVED: usize = 256 << 20;

/// The spare buffers of the process's encodes.
pub(crate) static ENCODE_BUFFERS: BufferPool = BufferPool::new();

/// Spare buffers, the largest kept.
pub(crate) struct BufferPool {
    spare: Mutex<Vec<Vec<u8>>>,
}

impl BufferPool {
    pub const fn new() -> Self {
        Self { spare: Mutex::new(Vec::new()) }
    }

    /// An empty buffer: the largest spare, or a new one reserving `expected` bytes.
    pub fn take(&'static self, expected: usize) -> RecycledBuffer {
        let spare = self.spare.lock().ok().and_then(|mut spare| {
            let largest = (0..spare.len()).max_by_key(|&at| spare[at].capacity())?;
            Some(spare.swap_remove(largest))
        });
        let bytes = spare.unwrap_or_else(|| Vec::with_capacity(expected.min(LARGEST_RESERVED)));
        RecycledBuffer { bytes, pool: self }
    }

    fn give_back(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() == 0 || bytes.capacity() > LARGEST_KEPT {
            return;
        }
        bytes.clear();
        if let Ok(mut spare) = self.spare.lock() {
            if spare.len() < SPARE_BUFFERS {
                spare.push(bytes);
            } else if let Some(smallest) = spare.iter_mut().min_by_key(|kept| kept.capacity()) {
                // Keep the larger buffers: a smaller one would grow again.
                if smallest.capacity() < bytes.capacity() {
                    *smallest = bytes;
                }
            }
        }
    }
}

/// An encode's output. Its memory returns to its pool when the last owner (the
/// caller, or the object store's put payload) drops it.
pub(crate) struct RecycledBuffer {
    bytes: Vec<u8>,
    pool: &'static BufferPool,
}

impl RecycledBuffer {
    pub fn as_mut_vec(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

impl AsRef<[u8]> for RecycledBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for RecycledBuffer {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.bytes));
    }
}

impl From<RecycledBuffer> for PutPayload {
    fn from(buffer: RecycledBuffer) -> Self {
        PutPayload::from(Bytes::from_owner(buffer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_buffer_comes_back_empty_and_oversized_ones_do_not() {
        let pool: &'static BufferPool = Box::leak(Box::new(BufferPool::new()));
        let mut first = pool.take(1 << 20);
        first.as_mut_vec().extend_from_slice(&[7u8; 1000]);
        let address = first.bytes.as_ptr();
        let payload = PutPayload::from(first);
        assert_eq!(
            payload.content_length(),
            1000,
            "the payload holds what was encoded"
        );
        let copy: Vec<u8> = payload.iter().flat_map(|chunk| chunk.to_vec()).collect();
        assert_eq!(copy, vec![7u8; 1000]);
        drop(payload);
        let again = pool.take(16);
        assert_eq!(
            again.bytes.as_ptr(),
            address,
            "the same memory is handed out again"
        );
        assert!(again.bytes.is_empty() && again.bytes.capacity() >= 1 << 20);

        let mut huge = pool.take(0);
        huge.as_mut_vec().reserve_exact(LARGEST_KEPT + 1);
        drop(huge);
        drop(again);
        let small: Vec<RecycledBuffer> = (0..3).map(|_| pool.take(64)).collect();
        drop(small);
        let spares = pool.spare.lock().expect("spares");
        assert_eq!(spares.len(), SPARE_BUFFERS, "at most this many are kept");
        assert!(
            spares.iter().all(|kept| kept.capacity() <= LARGEST_KEPT),
            "an oversized buffer is not kept"
        );
        assert!(
            spares.iter().any(|kept| kept.capacity() >= 1 << 20),
            "the larger buffers are kept"
        );
    }
}
