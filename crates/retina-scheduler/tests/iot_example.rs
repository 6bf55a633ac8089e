//! The paper's IoT scenario (examples/jobs): the DELETE in Clean_up_raw_data and
//! the UPDATE in Update_Status hit the same partition of staging.raw_events and
//! must never run together — under every rule set, in every mode.

use std::path::PathBuf;

use retina_scheduler::databricks::{added_dependencies, emit};
use retina_scheduler::dynamic::DynamicScheduler;
use retina_scheduler::jobfile::load_job_file;
use retina_scheduler::load::{build_workload, LoadOptions};
use retina_scheduler::simulate::{event_driven, validate_events};
use retina_scheduler::{discover, plan, Colouring, RuleKind, Rules};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/jobs").join(name)
}

#[test]
fn delete_update_conflict_is_found_and_serialised() {
    let set = load_job_file(&example("iot_pipeline.yaml")).expect("example loads");
    let w = build_workload(&set, &LoadOptions::default()).expect("example analyses");
    let clean = w.find("Clean_up_raw_data").expect("task");
    let status = w.find("Update_Status").expect("task");
    for kind in [RuleKind::Paper, RuleKind::DeltaWriteSerializable, RuleKind::DeltaSerializable] {
        for rw in [true, false] {
            let rules = Rules::new(kind, rw);
            let g = discover(&w, &rules);
            let e = g.edge(clean, status).unwrap_or_else(|| panic!("{kind:?}: conflict not found"));
            let why = retina_scheduler::graph::describe_edge(&w, e);
            assert!(why.contains("staging.raw_events") && why.contains("event_date='2025-01-15'"), "{why}");
            assert!(why.contains("DELETE") && why.contains("UPDATE"), "{why}");
            for algo in Colouring::ALL {
                let p = plan(&w, &g, algo);
                p.validate(&w, &g).expect("valid plan");
                let b = p.batch_of(w.len());
                assert_ne!(b[clean as usize], b[status as usize], "{kind:?} {algo:?}: same batch");
            }
            let ev = event_driven(&w, &g);
            validate_events(&w, &g, &ev).expect("valid event schedule");
        }
    }
    // Under Delta rules, the two ingests (blind appends to different partitions)
    // and the two verifications (different device_type partitions) run together.
    let g = discover(&w, &Rules::default());
    let (a1, a2) = (w.find("Ingest_air_sensor_data").expect("t"), w.find("Ingest_meteo_sensor_data").expect("t"));
    let (v1, v2) = (w.find("Verify_air_sensor_data").expect("t"), w.find("Verify_meteo_sensor_data").expect("t"));
    assert!(!g.conflicts(a1, a2) && !g.conflicts(v1, v2));
    let p = plan(&w, &g, Colouring::Greedy);
    assert_eq!(p.batch_count(), 5, "ingest | verify | aggregate | clean-up | status: {p:?}");
}

#[test]
fn databricks_definition_round_trip_adds_the_conflict_edge() {
    let set = load_job_file(&example("iot_pipeline.databricks.json")).expect("loads");
    let opts = LoadOptions {
        partition_columns: vec![("staging.raw_events".to_string(), vec!["event_date".to_string(), "device_type".to_string()])],
        ..Default::default()
    };
    let w = build_workload(&set, &opts).expect("analyses");
    let g = discover(&w, &Rules::default());
    let p = plan(&w, &g, Colouring::Dsatur);
    let added = added_dependencies(&w, &g, &p);
    let (clean, status) = (w.find("Clean_up_raw_data").expect("t"), w.find("Update_Status").expect("t"));
    assert_eq!(added.len(), 1, "only the DELETE/UPDATE pair is unordered: {added:?}");
    assert!(added[0] == (clean, status) || added[0] == (status, clean));
    let out = emit(&set, &w, &added);
    let tasks = out["tasks"].as_array().expect("tasks kept");
    let later = w.task(added[0].1).name.clone();
    let earlier = w.task(added[0].0).name.clone();
    let t = tasks.iter().find(|t| t["task_key"] == later.as_str()).expect("task present");
    let deps: Vec<&str> = t["depends_on"].as_array().expect("deps").iter().filter_map(|d| d["task_key"].as_str()).collect();
    assert!(deps.contains(&earlier.as_str()) && deps.contains(&"Aggregate_to_Enrich"), "{deps:?}");
    assert_eq!(t["sql_task"]["warehouse_id"], "REPLACE_WITH_WAREHOUSE_ID", "other fields are kept");
}

#[test]
fn dynamic_scheduler_never_runs_the_pair_together() {
    let set = load_job_file(&example("iot_pipeline.yaml")).expect("loads");
    let mut catalog = retina_scheduler::TableCatalog::new();
    for (t, c) in &set.partition_columns {
        catalog.declare(t, c);
    }
    let analyzer = retina_scheduler::Analyzer::new(retina_scheduler::SqlDialect::Databricks, catalog);
    let mut s = DynamicScheduler::new(Rules::default(), Colouring::Dsatur, &[]);
    for t in &set.jobs[0].tasks {
        let deps: Vec<&str> = t.depends_on.iter().map(String::as_str).collect();
        s.submit_sql(&analyzer, &t.id, &deps, t.sql.as_deref().unwrap_or_default()).expect("submit");
    }
    let mut done = 0;
    let mut guard = 0;
    while done < 7 {
        guard += 1;
        assert!(guard < 100, "no progress");
        s.poll();
        let running = s.running();
        assert!(!(running.contains(&"Clean_up_raw_data".to_string()) && running.contains(&"Update_Status".to_string())));
        // Complete the first running task (deterministic).
        if let Some(r) = running.first() {
            s.complete(r).expect("complete");
            done += 1;
        }
    }
}

/// Under delta-rs's rules a blind append is compared on its whole table (delta-rs
/// counts it as reading every file), so the ingest of one device type conflicts with
/// the verification of the other; under Delta's own rules it does not. Discovery
/// through the index and the all-pairs definition agree.
#[test]
fn under_delta_rs_rules_an_append_conflicts_with_a_rewrite_of_another_partition() {
    let set = load_job_file(&example("iot_pipeline.yaml")).expect("loads");
    let w = build_workload(&set, &LoadOptions::default()).expect("analyses");
    let (ingest_meteo, verify_air) = (w.find("Ingest_meteo_sensor_data").expect("t"), w.find("Verify_air_sensor_data").expect("t"));
    let ingest_air = w.find("Ingest_air_sensor_data").expect("t");
    let delta_rs = Rules::new(RuleKind::DeltaRs, true);
    let g = discover(&w, &delta_rs);
    assert!(g.conflicts(ingest_meteo, verify_air), "the append reads the whole table under delta-rs");
    assert!(!g.conflicts(ingest_air, ingest_meteo), "appends still do not conflict with each other");
    let pairs = |g: &retina_scheduler::ConflictGraph| g.edges().iter().map(|e| (e.a, e.b)).collect::<Vec<_>>();
    assert_eq!(pairs(&g), pairs(&retina_scheduler::discover_all_pairs(&w, &delta_rs)), "index and all-pairs find the same conflicts");
    assert!(!discover(&w, &Rules::new(RuleKind::DeltaWriteSerializable, true)).conflicts(ingest_meteo, verify_air));
}
