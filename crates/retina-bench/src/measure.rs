//! What every benchmark measures the same way: latency percentiles and CPU time
//! (Linux `/proc`; `None` where it is missing).

use std::collections::HashMap;

use serde::Serialize;

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// Percentiles of `samples` (milliseconds; zeros when empty).
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self { count: samples.len(), p50_ms: at(0.5), p99_ms: at(0.99), max_ms: at(1.0) }
    }
}

/// User + system CPU seconds of process (or task) `pid` as `/proc/{pid}/stat`
/// names it: `"self"`, a pid, or `"self/task/{tid}"`.
pub fn cpu_seconds_of(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesized command name (which may hold spaces); utime and
    // stime are the 12th and 13th, in USER_HZ (100 on Linux) ticks.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// User + system CPU seconds of this process so far.
pub fn process_cpu_seconds() -> Option<f64> {
    cpu_seconds_of("self")
}

/// CPU seconds of the calling thread, at nanosecond resolution (`schedstat`).
pub fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(nanos as f64 / 1e9)
}

/// CPU seconds of every thread of this process, by thread id, with the thread's name.
pub fn threads_cpu_seconds() -> HashMap<String, (String, f64)> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().to_string();
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        if let Some(cpu) = cpu_seconds_of(&format!("self/task/{tid}")) {
            out.insert(tid, (name, cpu));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let latency = Latency::of((1..=100).rev().map(f64::from).collect());
        assert_eq!((latency.count, latency.p50_ms, latency.p99_ms, latency.max_ms), (100, 51.0, 99.0, 100.0));
        assert_eq!(Latency::of(Vec::new()).count, 0);
    }

    #[test]
    fn this_process_has_used_cpu() {
        let spin: u64 = (0..5_000_000u64).map(std::hint::black_box).sum();
        assert!(spin > 0);
        assert!(process_cpu_seconds().is_some_and(|s| s > 0.0));
        assert!(thread_cpu_seconds().is_some_and(|s| s > 0.0));
        assert!(!threads_cpu_seconds().is_empty());
    }
}
