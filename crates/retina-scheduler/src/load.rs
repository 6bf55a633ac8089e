//! From a loaded job file to an analysed [`Workload`]: SQL analysis per task,
//! dependency resolution, and unification of table names written with
//! different qualification (`raw_events` vs `staging.raw_events`).

use std::collections::{BTreeSet, HashMap};

use crate::analysis::names::is_suffix;
use crate::analysis::{intern, Analyzer, RawAccess, SqlDialect, TableCatalog};
use crate::error::{Result, SchedulerError};
use crate::jobfile::JobSet;
use crate::model::{TaskIdx, Workload};

/// Options that come from the command line rather than the file.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Overrides the file's dialect.
    pub dialect: Option<SqlDialect>,
    /// Extra/overriding partition-column declarations (`TABLE`, columns).
    pub partition_columns: Vec<(String, Vec<String>)>,
    /// Unparseable or missing SQL makes the task conflict with everything
    /// instead of failing the load.
    pub assume_conflict: bool,
}

/// Analyses every task of `set` and builds the workload.
pub fn build_workload(set: &JobSet, opts: &LoadOptions) -> Result<Workload> {
    let mut catalog = TableCatalog::new();
    for (t, cols) in set.partition_columns.iter().chain(opts.partition_columns.iter()) {
        catalog.declare(t, cols);
    }
    catalog.set_default_schema(set.default_schema.as_deref());
    let dialect = match (opts.dialect, &set.dialect) {
        (Some(d), _) => d,
        (None, Some(name)) => SqlDialect::parse(name).ok_or_else(|| SchedulerError::InvalidOption {
            what: "dialect",
            value: name.clone(),
            detail: "expected generic, databricks, hive or spark".to_string(),
        })?,
        (None, None) => SqlDialect::default(),
    };
    let analyzer = Analyzer::new(dialect, catalog);

    // Pass 1: ids, then raw accesses per task.
    let mut ids: Vec<HashMap<&str, TaskIdx>> = Vec::new();
    let mut next = 0 as TaskIdx;
    for job in &set.jobs {
        let mut m = HashMap::new();
        for t in &job.tasks {
            if m.insert(t.id.as_str(), next).is_some() {
                return Err(SchedulerError::DuplicateTask { job: job.name.clone(), task: t.id.clone() });
            }
            next += 1;
        }
        ids.push(m);
    }
    let mut warnings = Vec::new();
    let mut analysed: Vec<(Vec<RawAccess>, bool)> = Vec::new();
    for job in &set.jobs {
        for t in &job.tasks {
            let res = match &t.sql {
                Some(sql) => analyzer.analyze_raw(&t.id, sql),
                None => Err(SchedulerError::NoSql { task: t.id.clone() }),
            };
            match res {
                Ok(accs) => analysed.push((accs, false)),
                Err(e) if opts.assume_conflict => {
                    warnings.push(format!("job `{}`: {e}; assuming it conflicts with every task", job.name));
                    analysed.push((Vec::new(), true));
                }
                Err(e) => return Err(e),
            }
        }
    }

    // Pass 2: unify table names, intern, resolve dependencies.
    let tables: BTreeSet<String> = analysed.iter().flat_map(|(a, _)| a.iter().map(|x| x.table.clone())).collect();
    let remap = unify_names(&tables, &mut warnings);
    let mut w = Workload::new();
    let mut it = analysed.into_iter();
    for (j, job) in set.jobs.iter().enumerate() {
        for t in &job.tasks {
            let (raw, universal) = it.next().unwrap_or_default();
            let mut deps = Vec::with_capacity(t.depends_on.len());
            for d in &t.depends_on {
                let idx = ids[j].get(d.as_str()).ok_or_else(|| SchedulerError::UnknownDependency {
                    job: job.name.clone(),
                    task: t.id.clone(),
                    dependency: d.clone(),
                })?;
                deps.push(*idx);
            }
            let accesses = raw
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    if let Some(to) = remap.get(&r.table) {
                        r.table = to.clone();
                    }
                    intern(&r, &mut w.names)
                })
                .collect();
            w.add_task(&job.name, &t.id, deps, accesses, t.duration.unwrap_or(1.0), universal);
        }
    }
    for name in tables.iter().map(|t| remap.get(t).unwrap_or(t)) {
        if let Some(col) = analyzer.catalog().partition_columns(name).first() {
            w.set_primary_partition_column(name, col);
        }
    }
    w.warnings = warnings;
    w.check()?;
    Ok(w)
}

/// Maps each table name to the unique longer name it is a dot-suffix of, so
/// `raw_events` and `staging.raw_events` are one table. When the suffix matches
/// several names it stays as written and a warning says conflicts through it may
/// be missed (give `default_schema` or qualify the name).
fn unify_names(tables: &BTreeSet<String>, warnings: &mut Vec<String>) -> HashMap<String, String> {
    let mut remap = HashMap::new();
    for short in tables {
        let longer: Vec<&str> = tables.iter().map(String::as_str).filter(|&l| l != short && is_suffix(short, l)).collect();
        // Prefer the longest names; several distinct longest ones are ambiguous.
        let maxlen = longer.iter().map(|l| l.matches('.').count()).max();
        let best: Vec<&str> = longer.iter().copied().filter(|l| Some(l.matches('.').count()) == maxlen).collect();
        match best.as_slice() {
            [] => {}
            [one] => {
                remap.insert(short.to_string(), one.to_string());
            }
            many => warnings.push(format!("table `{short}` could be any of {many:?}; qualify it or set default_schema")),
        }
    }
    remap
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobfile::{JobDef, TaskDef};

    fn set(tasks: Vec<(&str, Vec<&str>, Option<&str>)>) -> JobSet {
        let tasks = tasks
            .into_iter()
            .map(|(id, deps, sql)| TaskDef {
                id: id.to_string(),
                depends_on: deps.into_iter().map(str::to_string).collect(),
                sql: sql.map(str::to_string),
                ..Default::default()
            })
            .collect();
        JobSet { jobs: vec![JobDef { name: "j".to_string(), tasks }], ..Default::default() }
    }

    #[test]
    fn errors_name_task_and_dependency() {
        let e = build_workload(&set(vec![("a", vec!["zz"], Some("SELECT 1"))]), &LoadOptions::default()).expect_err("unknown dep");
        assert!(e.to_string().contains("`a`") && e.to_string().contains("zz"), "{e}");
        let e = build_workload(&set(vec![("a", vec!["b"], Some("SELECT 1")), ("b", vec!["a"], Some("SELECT 1"))]), &LoadOptions::default())
            .expect_err("cycle");
        assert!(e.to_string().contains("cycle"), "{e}");
        let e = build_workload(&set(vec![("a", vec![], Some("SELECT 1")), ("a", vec![], Some("SELECT 1"))]), &LoadOptions::default())
            .expect_err("dup");
        assert!(e.to_string().contains("duplicate"), "{e}");
        let e = build_workload(&set(vec![("broken", vec![], Some("UPDATE SET x"))]), &LoadOptions::default()).expect_err("parse");
        assert!(e.to_string().contains("broken") && e.to_string().contains("end of the SQL text"), "{e}");
    }

    #[test]
    fn assume_conflict_makes_unknown_tasks_universal() {
        let s = set(vec![("broken", vec![], Some("UPDATE SET x")), ("ok", vec![], Some("SELECT * FROM t")), ("nosql", vec![], None)]);
        let w = build_workload(&s, &LoadOptions { assume_conflict: true, ..Default::default() }).expect("loads");
        assert!(w.task(0).universal && w.task(2).universal && !w.task(1).universal);
        assert_eq!(w.warnings.len(), 2);
        let g = crate::graph::discover(&w, &crate::rules::Rules::default());
        assert!(g.conflicts(0, 1) && g.conflicts(1, 2) && g.conflicts(0, 2));
    }

    #[test]
    fn differently_qualified_names_are_one_table() {
        let s = set(vec![
            ("a", vec![], Some("DELETE FROM raw_events WHERE d = 1")),
            ("b", vec![], Some("UPDATE staging.raw_events SET x = 1 WHERE d = 2")),
            ("c", vec![], Some("UPDATE staging.raw_events SET x = 1 WHERE d = 1")),
        ]);
        let opts = LoadOptions { partition_columns: vec![("staging.raw_events".to_string(), vec!["d".to_string()])], ..Default::default() };
        let w = build_workload(&s, &opts).expect("loads");
        let g = crate::graph::discover(&w, &crate::rules::Rules::default());
        assert!(g.conflicts(0, 2), "same table, same partition");
        assert!(!g.conflicts(0, 1) && !g.conflicts(1, 2), "different partitions");
    }
}
