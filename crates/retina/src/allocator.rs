//! The process allocator: mimalloc, with freed memory returned to the OS lazily.
//!
//! Replay allocates rows on the submitting thread and frees them on shard threads;
//! glibc's arenas serialize such cross-thread frees on a lock (measured: a third of
//! replay time in futex calls), mimalloc does not.
//!
//! A streaming source allocates every message on one thread and frees it on another
//! moments later, gigabytes a minute. With mimalloc's default, memory it purges is
//! decommitted (`MADV_DONTNEED`), so the next allocation there faults the page in
//! again and the kernel zeroes it: a Kafka replay spent 79% of its source thread in
//! page faults and `clear_page` (perf). Purging by reset instead (`MADV_FREE`)
//! still lets the kernel take the pages back under memory pressure, but a page the
//! kernel has not taken is reused without a fault (measured: Kafka replay
//! 160K–166K → 209K–220K row changes/s; BENCHMARKS.md, "Kafka source").

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_decommits` in mimalloc's `mi_option_e` (v2 and v3 headers, where
/// it is the sixth entry); `libmimalloc-sys` exports no constant for it.
const PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;

/// Sets the allocator's options; call first thing in `main`.
pub fn configure() {
    // SAFETY: `mi_option_set` takes two plain integers, is safe to call from any
    // thread at any time (options are atomics in mimalloc), and `PURGE_DECOMMITS` is a
    // valid option of the linked mimalloc (see above), so no caller can misuse it.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purge_decommits() -> std::ffi::c_long {
        // SAFETY: as in `configure`: a plain integer option read.
        unsafe { libmimalloc_sys::mi_option_get(PURGE_DECOMMITS) }
    }

    /// The index names the option meant: it starts at `purge_decommits`' documented
    /// default (1) and reads 0 once configured. No other test touches it.
    #[test]
    fn purged_memory_is_reset_not_decommitted() {
        assert_eq!(purge_decommits(), 1, "mimalloc's default for purge_decommits");
        configure();
        assert_eq!(purge_decommits(), 0);
    }
}
