//! Job definition files: our YAML/JSON format, and Databricks Jobs API 2.1
//! definitions (detected by `tasks[].task_key`, parsed in `databricks.rs`).
//!
//! Our format (YAML or JSON):
//!
//! ```yaml
//! name: iot_pipeline            # one job: `name` + `tasks`; several: `jobs: [{name, tasks}]`
//! dialect: databricks           # generic | databricks | hive | spark (optional)
//! default_schema: staging       # prefixed to unqualified table names (optional)
//! partition_columns:            # table -> column list (or "a,b")
//!   staging.raw_events: [event_date]
//! tasks:
//!   - id: Clean_up_raw_data
//!     depends_on: [Aggregate_to_Enrich]
//!     sql_file: sql/clean_up_raw_data.sql   # relative to this file; or `sql:` / `statements:`
//!     duration: 4                           # optional estimate (any unit)
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Result, SchedulerError};
pub use crate::jobset::{read_sql, stem, JobDef, JobSet, TaskDef};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    name: Option<String>,
    dialect: Option<String>,
    default_schema: Option<String>,
    #[serde(default)]
    partition_columns: BTreeMap<String, Columns>,
    tasks: Option<Vec<TaskDoc>>,
    jobs: Option<Vec<JobDoc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobDoc {
    name: String,
    #[serde(default)]
    partition_columns: BTreeMap<String, Columns>,
    tasks: Vec<TaskDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskDoc {
    id: String,
    #[serde(default)]
    depends_on: Vec<String>,
    sql: Option<String>,
    sql_file: Option<String>,
    statements: Option<Vec<String>>,
    duration: Option<f64>,
}

/// A column list written as a YAML list or a comma-separated string.
#[derive(Deserialize)]
#[serde(untagged)]
enum Columns {
    List(Vec<String>),
    Csv(String),
}

impl Columns {
    fn into_vec(self) -> Vec<String> {
        match self {
            Columns::List(v) => v,
            Columns::Csv(s) => s.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect(),
        }
    }
}

/// Reads a job file (ours or Databricks), resolving SQL files relative to it.
pub fn load_job_file(path: &Path) -> Result<JobSet> {
    let text = std::fs::read_to_string(path).map_err(|source| SchedulerError::Io { path: path.to_path_buf(), source })?;
    let value = parse_document(path, &text)?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    if crate::databricks::is_databricks(&value) {
        return crate::databricks::parse(path, base, value);
    }
    parse_ours(path, base, value)
}

/// Parses JSON (by extension or a leading `{`) or YAML into a JSON value.
fn parse_document(path: &Path, text: &str) -> Result<serde_json::Value> {
    let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) || text.trim_start().starts_with('{');
    let parsed = if json {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_yaml::from_str(text).map_err(|e| e.to_string())
    };
    parsed.map_err(|detail| SchedulerError::JobFormat { path: path.to_path_buf(), detail })
}

fn parse_ours(path: &Path, base: &Path, value: serde_json::Value) -> Result<JobSet> {
    let doc: FileDoc = serde_json::from_value(value).map_err(|e| SchedulerError::JobFormat { path: path.to_path_buf(), detail: e.to_string() })?;
    let mut set = JobSet { dialect: doc.dialect, default_schema: doc.default_schema, path: path.to_path_buf(), ..Default::default() };
    set.partition_columns.extend(doc.partition_columns.into_iter().map(|(t, c)| (t, c.into_vec())));
    let mut jobs_docs: Vec<JobDoc> = doc.jobs.unwrap_or_default();
    if let Some(tasks) = doc.tasks {
        let name = doc.name.clone().unwrap_or_else(|| stem(path));
        jobs_docs.insert(0, JobDoc { name, partition_columns: BTreeMap::new(), tasks });
    }
    if jobs_docs.is_empty() {
        return Err(SchedulerError::JobFormat { path: path.to_path_buf(), detail: "no `tasks` and no `jobs`".to_string() });
    }
    for jd in jobs_docs {
        set.partition_columns.extend(jd.partition_columns.into_iter().map(|(t, c)| (t, c.into_vec())));
        let mut job = JobDef { name: jd.name, tasks: Vec::new() };
        for td in jd.tasks {
            let sql = match (td.sql, &td.sql_file, td.statements) {
                (Some(s), _, _) => Some(s),
                (None, Some(f), _) => Some(read_sql(base, f)?),
                (None, None, Some(st)) => Some(st.join(";\n")),
                (None, None, None) => None,
            };
            job.tasks.push(TaskDef { id: td.id, depends_on: td.depends_on, sql, sql_file: td.sql_file, duration: td.duration });
        }
        set.jobs.push(job);
    }
    Ok(set)
}

/// Parses `TABLE=COL[,COL...]` (the `--partition-columns` option).
pub fn parse_partition_option(s: &str) -> Result<(String, Vec<String>)> {
    let bad = |detail: &str| SchedulerError::InvalidOption { what: "--partition-columns", value: s.to_string(), detail: detail.to_string() };
    let (table, cols) = s.split_once('=').ok_or_else(|| bad("expected TABLE=COL[,COL...]"))?;
    let cols: Vec<String> = cols.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    if table.trim().is_empty() || cols.is_empty() {
        return Err(bad("expected TABLE=COL[,COL...]"));
    }
    Ok((table.trim().to_string(), cols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_option() {
        let (t, c) = parse_partition_option("staging.raw_events=event_date, region").expect("valid");
        assert_eq!(t, "staging.raw_events");
        assert_eq!(c, vec!["event_date", "region"]);
        assert!(parse_partition_option("nocols=").is_err());
        assert!(parse_partition_option("x").is_err());
    }

    #[test]
    fn yaml_and_multi_job() {
        let dir = std::env::temp_dir().join(format!("retina-jobfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let p = dir.join("two.yaml");
        std::fs::write(
            &p,
            "partition_columns: {a.t: 'd,r'}\njobs:\n  - name: j1\n    tasks:\n      - id: x\n        sql: SELECT 1\n  - name: j2\n    tasks:\n      - id: x\n        statements: ['DELETE FROM a.t', 'SELECT 2']\n        depends_on: []\n",
        )
        .expect("write");
        let set = load_job_file(&p).expect("loads");
        assert_eq!(set.jobs.len(), 2);
        assert_eq!(set.partition_columns, vec![("a.t".to_string(), vec!["d".to_string(), "r".to_string()])]);
        assert!(set.jobs[1].tasks[0].sql.as_deref().is_some_and(|s| s.contains("DELETE")));
        std::fs::write(&p, "tasks:\n  - id: x\n    bogus: 1\n").expect("write");
        let err = load_job_file(&p).expect_err("unknown field");
        assert!(err.to_string().contains("bogus"), "{err}");
    }
}
