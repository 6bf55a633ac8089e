//! Progress callbacks, so benchmarks stay free of terminal code.

/// Called with (phase, done, total) as a benchmark advances.
pub type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// A progress sink that discards everything (tests).
pub fn silent(_phase: &str, _done: u64, _total: u64) {}
