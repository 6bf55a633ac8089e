//! Random jobs from the scheduler's synthetic generator (random DAGs, tables,
//! partitions and modes), executed for real on small Delta tables: under
//! `admission` and `batches` no commit conflicts, and the tables equal those of a
//! serial run of the same tasks in the order the concurrent run started them.

use std::path::Path;

use retina_bench::jobs::{synthetic_jobs, SyntheticJobs};
use retina_jobs::run::RunOptions;
use retina_jobs::{Lake, RunReport, Schedule};
use retina_scheduler::synth::Density;

fn options(schedule: Schedule, concurrency: usize) -> RunOptions {
    RunOptions::new(schedule, concurrency)
}

fn run(runtime: &tokio::runtime::Runtime, lake: &Lake, file: &Path, options: &RunOptions) -> RunReport {
    runtime.block_on(retina_jobs::run(lake, &[file.to_path_buf()], options, &mut |_| {})).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn state(runtime: &tokio::runtime::Runtime, lake: &Lake, jobs: &SyntheticJobs) -> Vec<(String, Vec<String>)> {
    jobs.tables
        .iter()
        .map(|table| (table.clone(), runtime.block_on(lake.sorted_rows(table)).expect("read").unwrap_or_else(|| panic!("{table} exists"))))
        .collect()
}

fn start_order(report: &RunReport) -> Vec<String> {
    let mut started: Vec<(f64, String)> = report.tasks.iter().map(|t| (t.start_s.expect("started"), t.task.clone())).collect();
    started.sort_by(|a, b| a.partial_cmp(b).expect("times"));
    started.into_iter().map(|(_, t)| t).collect()
}

#[test]
fn random_jobs_run_conflict_free_under_admission_and_batches_and_equal_a_serial_run() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    for (seed, density) in [(7, Density::High), (11, Density::Medium)] {
        let work = tempfile::tempdir().expect("tempdir");
        let jobs = synthetic_jobs(work.path(), "random", 24, density, seed, 20).expect("jobs");
        assert!(jobs.tasks.iter().any(|(_, s)| s.iter().any(|s| s.starts_with("UPDATE") || s.starts_with("DELETE"))), "the workload writes");
        for schedule in [Schedule::Admission, Schedule::Batches] {
            let lake_dir = work.path().join(format!("lake-{seed}-{}", schedule.name()));
            let lake = Lake::open(lake_dir.to_str().expect("utf-8")).expect("lake");
            let setup = run(&runtime, &lake, &jobs.setup, &options(Schedule::Admission, 4));
            assert_eq!(setup.failed + setup.skipped, 0, "{}", setup.to_table());
            let report = run(&runtime, &lake, &jobs.pipeline, &options(schedule, 4));
            assert_eq!((report.failed, report.skipped, report.aborted_attempts), (0, 0, 0), "seed {seed} {schedule:?}:\n{}", report.to_table());
            let concurrent = state(&runtime, &lake, &jobs);

            let serial_dir = work.path().join(format!("serial-{seed}-{}", schedule.name()));
            let serial_lake = Lake::open(serial_dir.to_str().expect("utf-8")).expect("lake");
            run(&runtime, &serial_lake, &jobs.setup, &options(Schedule::Admission, 4));
            let chain = work.path().join("serial.yaml");
            jobs.serial_job(&start_order(&report), &chain).expect("serial job");
            let serial = run(&runtime, &serial_lake, &chain, &options(Schedule::None, 1));
            assert_eq!(serial.succeeded, jobs.tasks.len(), "{}", serial.to_table());
            assert_eq!(state(&runtime, &serial_lake, &jobs), concurrent, "seed {seed} {schedule:?}: the concurrent run equals the serial run in its start order");
        }
    }
}
