//! The paper's performance experiment (§4–5): for each task count and density,
//! generate a synthetic workload and time the complete meta-scheduling
//! algorithm — conflict discovery plus Algorithm 1 with first-fit colouring —
//! then report batches for each colouring and the number of conflict edges.

use std::time::Instant;

use serde::Serialize;

use retina_scheduler::colour::Colouring;
use retina_scheduler::graph::{discover, discover_all_pairs};
use retina_scheduler::plan::plan;
use retina_scheduler::rules::Rules;
use retina_scheduler::synth::{generate, Density};

/// Task counts of the sweep: the paper's 50, 100, 200, …, 1,000, then 10,000
/// and 100,000.
pub const SWEEP: [usize; 13] = [50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 10_000, 100_000];

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    /// Number of tasks.
    pub tasks: usize,
    /// Density level.
    pub density: Density,
    /// Number of accesses.
    pub accesses: usize,
    /// Conflict edges.
    pub edges: usize,
    /// Share of tasks with at least one conflict, in percent.
    pub conflicting_pct: f64,
    /// Median wall time of discovery + greedy Algorithm 1, in milliseconds.
    pub plan_ms: f64,
    /// Median wall time of discovery alone.
    pub discover_ms: f64,
    /// Batches per colouring (greedy, dsatur, smallest-last).
    pub batches_greedy: usize,
    /// Batches with DSatur.
    pub batches_dsatur: usize,
    /// Batches with smallest-last.
    pub batches_smallest_last: usize,
    /// Wall time of Algorithm 1 with DSatur (discovery excluded), ms.
    pub dsatur_ms: f64,
    /// Wall time of Algorithm 1 with smallest-last (discovery excluded), ms.
    pub smallest_last_ms: f64,
    /// Simulated makespan of the greedy batch plan (synthetic durations 1–10).
    pub makespan_batches: f64,
    /// Simulated makespan of event-driven admission on the same graph.
    pub makespan_event_driven: f64,
    /// All-pairs discovery time, measured only up to 2,000 tasks (`null` above).
    pub all_pairs_ms: Option<f64>,
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Measures one point. Runs several repetitions for small `n` and keeps the median.
pub fn run_point(n: usize, density: Density, rules: &Rules) -> BenchRow {
    let w = generate(n, density, 42);
    let reps = if n <= 1000 { 7 } else if n <= 10_000 { 3 } else { 1 };
    let run = || {
        let t0 = Instant::now();
        let g = discover(&w, rules);
        let d = ms(t0);
        let p = plan(&w, &g, Colouring::Greedy);
        (g, p, d, ms(t0))
    };
    let (g, p, d0, p0) = run();
    let (mut disc_t, mut plan_t) = (vec![d0], vec![p0]);
    for _ in 1..reps {
        let (_, _, d, pt) = run();
        disc_t.push(d);
        plan_t.push(pt);
    }
    let t = Instant::now();
    let pd = plan(&w, &g, Colouring::Dsatur);
    let dsatur_ms = ms(t);
    let t = Instant::now();
    let ps = plan(&w, &g, Colouring::SmallestLast);
    let smallest_last_ms = ms(t);
    let all_pairs_ms = (n <= 2000).then(|| {
        let t = Instant::now();
        let _ = discover_all_pairs(&w, rules);
        ms(t)
    });
    let makespan_batches = retina_scheduler::simulate::simulate_batches(&w, &p);
    let makespan_event_driven = retina_scheduler::simulate::event_driven(&w, &g).makespan;
    BenchRow {
        makespan_batches,
        makespan_event_driven,
        tasks: n,
        density,
        accesses: w.accesses().len(),
        edges: g.edges().len(),
        conflicting_pct: 100.0 * g.conflicting_tasks() as f64 / n.max(1) as f64,
        plan_ms: median(plan_t),
        discover_ms: median(disc_t),
        batches_greedy: p.batch_count(),
        batches_dsatur: pd.batch_count(),
        batches_smallest_last: ps.batch_count(),
        dsatur_ms,
        smallest_last_ms,
        all_pairs_ms,
    }
}

/// Formats a row for the console.
pub fn format_row(r: &BenchRow) -> String {
    format!(
        "n={:<7} density={:<6} plan_ms={:>9.3} discover_ms={:>9.3} edges={:<7} conflicting={:>5.1}% batches greedy={} dsatur={} smallest-last={} makespan batch/event={:.0}/{:.0}{}",
        r.tasks,
        r.density.as_str(),
        r.plan_ms,
        r.discover_ms,
        r.edges,
        r.conflicting_pct,
        r.batches_greedy,
        r.batches_dsatur,
        r.batches_smallest_last,
        r.makespan_batches,
        r.makespan_event_driven,
        r.all_pairs_ms.map(|a| format!(" all_pairs_ms={a:.3}")).unwrap_or_default()
    )
}
