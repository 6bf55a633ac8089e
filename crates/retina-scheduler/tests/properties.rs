//! Property tests on random workloads: near-linear discovery equals the
//! all-pairs definition; plans respect dependencies and never batch a
//! conflicting pair; event-driven admission and the dynamic scheduler never run
//! conflicting tasks at the same time; DSatur never uses more batches than greedy.

use std::collections::BTreeSet;

use proptest::prelude::*;
use retina_scheduler::analysis::{intern, RawAccess};
use retina_scheduler::dynamic::{DynamicScheduler, TaskState};
use retina_scheduler::simulate::{event_driven, validate_events};
use retina_scheduler::{discover, discover_all_pairs, plan, Colouring, Mode, RuleKind, Rules, Workload};

#[derive(Debug, Clone)]
struct GenTask {
    deps: Vec<usize>,
    accesses: Vec<RawAccess>,
    duration: f64,
    universal: bool,
}

fn raw_access() -> impl Strategy<Value = RawAccess> {
    let cols = proptest::collection::btree_map(
        prop::sample::select(vec!["c0", "c1"]),
        proptest::collection::btree_set(prop::sample::select(vec!["v0", "v1", "v2", "v3"]), 1..3),
        0..3,
    );
    (0usize..4, 0usize..8, cols).prop_map(|(t, m, cols)| RawAccess {
        table: format!("t{t}"),
        mode: Mode::ALL[m],
        constraint: cols.into_iter().map(|(c, v)| (c.to_string(), v.into_iter().map(str::to_string).collect::<BTreeSet<_>>())).collect(),
    })
}

fn workload_spec() -> impl Strategy<Value = Vec<GenTask>> {
    proptest::collection::vec(
        (
            proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
            proptest::collection::vec(raw_access(), 0..4),
            1u32..10,
            prop::bool::weighted(0.05),
        ),
        1..28,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(i, (deps, accesses, d, universal))| {
                let mut deps: Vec<usize> = if i == 0 { Vec::new() } else { deps.iter().map(|x| x.index(i)).collect() };
                deps.sort_unstable();
                deps.dedup();
                GenTask { deps, accesses, duration: d as f64, universal }
            })
            .collect()
    })
}

fn build(spec: &[GenTask]) -> Workload {
    let mut w = Workload::new();
    // Tables t0..t2 bucket by c0, t3 by c1 (exercises wide accesses on both).
    for t in 0..3 {
        w.set_primary_partition_column(&format!("t{t}"), "c0");
    }
    w.set_primary_partition_column("t3", "c1");
    for (i, t) in spec.iter().enumerate() {
        let acc = t.accesses.iter().map(|r| intern(r, &mut w.names)).collect();
        w.add_task("j", &format!("k{i}"), t.deps.iter().map(|&d| d as u32).collect(), acc, t.duration, t.universal);
    }
    w
}

fn all_rules() -> Vec<Rules> {
    let mut v = Vec::new();
    for k in [RuleKind::Paper, RuleKind::DeltaWriteSerializable, RuleKind::DeltaSerializable] {
        v.push(Rules::new(k, true));
        v.push(Rules::new(k, false));
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn indexed_discovery_equals_all_pairs(spec in workload_spec()) {
        let w = build(&spec);
        for rules in all_rules() {
            let fast: Vec<(u32, u32)> = discover(&w, &rules).edges().iter().map(|e| (e.a, e.b)).collect();
            let slow: Vec<(u32, u32)> = discover_all_pairs(&w, &rules).edges().iter().map(|e| (e.a, e.b)).collect();
            prop_assert_eq!(fast, slow, "rules {:?}", rules.kind());
        }
    }

    #[test]
    fn plans_respect_deps_and_never_batch_conflicts(spec in workload_spec()) {
        let w = build(&spec);
        for rules in all_rules() {
            let g = discover(&w, &rules);
            let mut counts = Vec::new();
            for algo in Colouring::ALL {
                let p = plan(&w, &g, algo);
                prop_assert!(p.validate(&w, &g).is_ok(), "{:?}: {:?}", algo, p.validate(&w, &g));
                counts.push(p.batch_count());
            }
            prop_assert!(counts[1] <= counts[0], "dsatur {} > greedy {}", counts[1], counts[0]);
            let ev = event_driven(&w, &g);
            prop_assert!(validate_events(&w, &g, &ev).is_ok(), "{:?}", validate_events(&w, &g, &ev));
        }
    }

    #[test]
    fn dynamic_scheduler_is_safe_and_completes(spec in workload_spec(), picks in proptest::collection::vec(any::<prop::sample::Index>(), 64)) {
        let w = build(&spec);
        let rules = Rules::default();
        let g = discover(&w, &rules);
        let primary = vec![
            ("t0".to_string(), "c0".to_string()), ("t1".to_string(), "c0".to_string()),
            ("t2".to_string(), "c0".to_string()), ("t3".to_string(), "c1".to_string()),
        ];
        let mut s = DynamicScheduler::new(rules, Colouring::Dsatur, &primary);
        let name = |i: usize| format!("k{i}");
        // Arrivals interleave with execution: submit half, run a bit, submit the rest.
        let half = spec.len() / 2;
        let mut submitted = 0;
        let mut done = vec![false; spec.len()];
        let mut pick = picks.iter().cycle();
        let mut steps = 0;
        loop {
            steps += 1;
            prop_assert!(steps < 10_000, "no progress");
            let target = if steps < 4 { half } else { spec.len() };
            while submitted < target {
                let t = &spec[submitted];
                let deps: Vec<String> = t.deps.iter().map(|&d| name(d)).collect();
                let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
                s.submit(&name(submitted), &deps, &t.accesses, t.universal).map_err(|e| TestCaseError::fail(e.to_string()))?;
                submitted += 1;
            }
            s.poll();
            let running: Vec<usize> = (0..submitted).filter(|&i| s.state(&name(i)) == Some(TaskState::Running)).collect();
            for (x, &a) in running.iter().enumerate() {
                for &d in &spec[a].deps {
                    prop_assert!(done[d], "k{} runs before dependency k{}", a, d);
                }
                for &b in &running[x + 1..] {
                    prop_assert!(!g.conflicts(a as u32, b as u32), "k{} and k{} run together", a, b);
                }
            }
            if running.is_empty() {
                if submitted == spec.len() {
                    break;
                }
                continue;
            }
            let victim = running[pick.next().map(|p| p.index(running.len())).unwrap_or(0)];
            s.complete(&name(victim)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            done[victim] = true;
        }
        prop_assert!(done.iter().all(|&d| d), "not all tasks completed: {:?}", done);
    }
}
