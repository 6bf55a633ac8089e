//! `retina bench txn`: timestamp allocation + commit throughput of the embedded
//! transaction service.

use std::sync::Arc;
use std::time::Instant;

use retina_core::{CoreResult, EmbeddedTransactionService, TransactionService};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct TxnReport {
    pub timestamps: u64,
    pub threads: usize,
    pub seconds: f64,
    /// Single-threaded allocate + commit pairs per second (the headline figure).
    pub timestamps_per_s: f64,
    /// The same with `threads` threads allocating and committing concurrently.
    pub concurrent_timestamps_per_s: f64,
}

pub fn run(timestamps: u64, threads: usize) -> CoreResult<TxnReport> {
    let service = EmbeddedTransactionService::new();
    let start = Instant::now();
    for _ in 0..timestamps {
        let ts = service.allocate()?;
        service.commit(ts);
    }
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(service.high_watermark().0, timestamps + 1, "every timestamp committed");

    let threads = threads.max(1);
    let shared = Arc::new(EmbeddedTransactionService::new());
    let per_thread = timestamps / threads as u64;
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let service = Arc::clone(&shared);
            std::thread::spawn(move || -> CoreResult<()> {
                for _ in 0..per_thread {
                    let ts = service.allocate()?;
                    service.commit(ts);
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker thread panicked")?;
    }
    let concurrent_seconds = start.elapsed().as_secs_f64();
    Ok(TxnReport {
        timestamps,
        threads,
        seconds,
        timestamps_per_s: timestamps as f64 / seconds,
        concurrent_timestamps_per_s: (per_thread * threads as u64) as f64 / concurrent_seconds,
    })
}
