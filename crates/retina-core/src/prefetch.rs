//! Cache prefetch hints for the replay hot path: a shard names the memory the
//! operations a few places ahead will touch (index buckets, row values), so their
//! cache misses overlap instead of each stalling the thread in turn.
//!
//! No crate fits: the hint is one instruction, and std's prefetch intrinsics are
//! unstable.

/// Asks the CPU to bring the cache line holding address `at` into its caches.
#[inline]
pub(crate) fn prefetch_line(at: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint, not a memory access: it never faults and has
    // no effect on what the program computes, for any address whatever (Intel SDM,
    // PREFETCHh; the pointer is never dereferenced), so no argument a caller passes
    // can make it unsound.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::without_provenance(at));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Prefetches the first `max_bytes` (at most) of `items`.
#[inline]
pub(crate) fn prefetch_slice<T>(items: &[T], max_bytes: usize) {
    let start = items.as_ptr().addr();
    let bytes = std::mem::size_of_val(items).min(max_bytes);
    for offset in (0..bytes).step_by(64) {
        prefetch_line(start + offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any address, even unmapped or null, and any slice, even empty, is a valid hint.
    #[test]
    fn any_address_is_a_valid_hint() {
        for address in [0, 1, usize::MAX, 0xdead_beef] {
            prefetch_line(address);
        }
        let values = vec![7u64; 100];
        prefetch_slice(&values, 256);
        prefetch_slice::<u64>(&[], 256);
        assert_eq!(values.iter().sum::<u64>(), 700);
    }
}
