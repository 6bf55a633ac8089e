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
//!
//! Transparent huge pages are turned off for the process. mimalloc asks for them on
//! its arenas, and the kernel then zeroes 2 MiB at every first touch; on a VM the
//! host must also back a 2 MiB run of guest memory that is often untouched, which is
//! what made system CPU of identical `retina ingest` runs vary from 0.7 to 6 s.
//! Without them (`retina ingest`, 1M Debezium envelope changes, 5 interleaved pairs):
//! system CPU 0.62–1.12 s against 2.46–8.31 s, 273K–288K against 110K–232K row
//! changes/s, peak RSS 305–350 MB against 345–439 MB. The price is paid where a heap
//! touched up front is probed at random: `bench replay`'s timed phase is 10–25%
//! slower (BENCHMARKS.md, issue 16). A user whose workload gains from huge pages sets
//! `MIMALLOC_ALLOW_THP=1`, and the process keeps them.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_decommits` in mimalloc's `mi_option_e` (v2 and v3 headers, where
/// it is the sixth entry); `libmimalloc-sys` exports no constant for it.
const PURGE_DECOMMITS: libmimalloc_sys::mi_option_t = 5;

/// The environment variable with which a user keeps transparent huge pages on.
const ALLOW_HUGE_PAGES: &str = "MIMALLOC_ALLOW_THP";

/// Sets the allocator's options; call first thing in `main`.
pub fn configure() {
    // SAFETY: `mi_option_set` takes two plain integers, is safe to call from any
    // thread at any time (options are atomics in mimalloc), and `PURGE_DECOMMITS` is a
    // valid option of the linked mimalloc (see above), so no caller can misuse it.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DECOMMITS, 0) };
    if !keeps_huge_pages(std::env::var_os(ALLOW_HUGE_PAGES).as_deref()) {
        // The flag is the process's (inherited by children) and also applies to memory
        // already mapped. A kernel without it (before 3.15) only costs the speed-up.
        let _ = rustix::thread::disable_transparent_huge_pages(true);
    }
}

/// Whether the user asked to keep transparent huge pages: any value of
/// `MIMALLOC_ALLOW_THP` but `0` (mimalloc's own reading of it).
fn keeps_huge_pages(setting: Option<&std::ffi::OsStr>) -> bool {
    setting.is_some_and(|value| value != "0")
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
    fn purged_memory_is_reset_not_decommitted_and_huge_pages_are_off() {
        assert_eq!(purge_decommits(), 1, "mimalloc's default for purge_decommits");
        assert_eq!(std::env::var_os(ALLOW_HUGE_PAGES), None, "run the tests without {ALLOW_HUGE_PAGES}");
        // Start from huge pages on, whatever the test runner inherited.
        rustix::thread::disable_transparent_huge_pages(false).expect("prctl");
        configure();
        assert_eq!(purge_decommits(), 0);
        assert!(rustix::thread::transparent_huge_pages_are_disabled().expect("prctl"), "the process has huge pages off");
    }

    #[test]
    fn only_an_explicit_setting_keeps_huge_pages() {
        use std::ffi::OsStr;
        assert!(!keeps_huge_pages(None));
        assert!(!keeps_huge_pages(Some(OsStr::new("0"))));
        assert!(keeps_huge_pages(Some(OsStr::new("1"))));
        assert!(keeps_huge_pages(Some(OsStr::new("2"))));
    }
}
