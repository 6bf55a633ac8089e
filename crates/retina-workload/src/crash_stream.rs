//! A deterministic, restartable source for crash tests: the CH-benCHmark-like
//! stream as a numbered sequence of transactions (the initial load in chunks, then
//! the mix). Transaction `k` is the same in every process, so a restarted replayer
//! resumes after the recovered position by regenerating and skipping.

use retina_core::RowChange;

use crate::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};

/// Rows per initial-load transaction.
const LOAD_CHUNK: usize = 500;

/// The first `count` transactions of the stream for `seed` and `base_rows`.
pub fn crash_stream(tables: ChBenchTables, seed: u64, base_rows: u64, count: usize) -> Vec<Vec<RowChange>> {
    let mut generator = ChBenchGenerator::new(seed, ChBenchScale::for_base_rows(base_rows), tables);
    let mut stream = Vec::with_capacity(count);
    generator
        .initial_load(1, LOAD_CHUNK, |chunk| {
            stream.push(chunk);
            Ok::<_, ()>(())
        })
        .expect("collecting into a vector cannot fail");
    let mut n = 0;
    while stream.len() < count {
        n += 1;
        stream.push(generator.next_transaction(n).1);
    }
    stream.truncate(count);
    stream
}
