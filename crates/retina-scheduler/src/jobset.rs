//! The jobs every definition format loads into (ours in [`crate::jobfile`],
//! Databricks Jobs API 2.1 in [`crate::databricks`]), and the helpers both readers
//! share.

use std::path::{Path, PathBuf};

use crate::error::{Result, SchedulerError};

/// A loaded job file, SQL files already read.
#[derive(Debug, Clone, Default)]
pub struct JobSet {
    /// The jobs, in file order.
    pub jobs: Vec<JobDef>,
    /// Declared partition columns, table → columns (file order kept).
    pub partition_columns: Vec<(String, Vec<String>)>,
    /// Dialect named in the file, if any.
    pub dialect: Option<String>,
    /// Schema for unqualified table names, if any.
    pub default_schema: Option<String>,
    /// The original document when the file is a Databricks job definition, so
    /// that it can be written back with the added dependencies.
    pub databricks: Option<serde_json::Value>,
    /// Where the file was read from.
    pub path: PathBuf,
}

/// One job: a DAG of tasks.
#[derive(Debug, Clone, Default)]
pub struct JobDef {
    /// Job name.
    pub name: String,
    /// Its tasks, in file order.
    pub tasks: Vec<TaskDef>,
}

/// One task as defined in the file.
#[derive(Debug, Clone, Default)]
pub struct TaskDef {
    /// Task id (unique within the job).
    pub id: String,
    /// Ids of tasks of the same job that must finish first.
    pub depends_on: Vec<String>,
    /// SQL text (statements separated by `;`), `None` when the task has none.
    pub sql: Option<String>,
    /// The SQL file it came from, as written in the definition.
    pub sql_file: Option<String>,
    /// Duration estimate.
    pub duration: Option<f64>,
}

/// Reads an SQL file relative to the definition's folder.
pub fn read_sql(base: &Path, file: &str) -> Result<String> {
    let p = base.join(file.trim_start_matches("file:"));
    std::fs::read_to_string(&p).map_err(|source| SchedulerError::Io { path: p, source })
}

/// The file name without extension, as a default job name.
pub fn stem(path: &Path) -> String {
    path.file_stem().and_then(|s| s.to_str()).unwrap_or("job").to_string()
}
