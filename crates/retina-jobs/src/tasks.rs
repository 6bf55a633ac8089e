//! Job files → tasks ready to schedule and run: SQL parsed, every statement
//! translated (so an unsupported one fails the load, before anything runs), and
//! accesses analysed with partition columns taken from the Delta tables' own
//! metadata, to which the job file's and the command line's declarations add.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::Path;

use retina_scheduler::analysis::dialect::{prepare, Prepared};
use retina_scheduler::analysis::names::normalize;
use retina_scheduler::analysis::RawAccess;
use retina_scheduler::jobfile::load_job_file;
use retina_scheduler::load::LoadOptions;
use retina_scheduler::{Analyzer, SchedulerError, SqlDialect, TableCatalog};
use sqlparser::ast::{HiveDistributionStyle, ObjectName, Statement};
use sqlparser::parser::Parser;

use crate::error::{JobsError, Result};
use crate::lake::Lake;
use crate::statement::{plan_statements, PlannedStatement};

/// One task, ready to run. `key` (`job/task`) is unique in a run; `deps` are keys.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub key: String,
    pub job: String,
    pub deps: Vec<String>,
    pub statements: Vec<PlannedStatement>,
    pub accesses: Vec<RawAccess>,
    /// Set when the task's accesses are unknown (`--assume-conflict` on SQL we
    /// cannot analyse): it conflicts with every task.
    pub universal: bool,
    pub default_schema: Option<String>,
    /// The file's duration estimate (critical-path priority only).
    pub duration: f64,
}

/// Loads the tasks of job `file`. `taken` holds the keys already in the run (an
/// arriving job may not reuse them).
pub async fn load_tasks(lake: &Lake, file: &Path, options: &LoadOptions, taken: &HashSet<String>) -> Result<Vec<TaskSpec>> {
    let set = load_job_file(file)?;
    let dialect = match (options.dialect, &set.dialect) {
        (Some(d), _) => d,
        (None, Some(name)) => SqlDialect::parse(name).ok_or_else(|| JobsError::Invalid(format!("{}: unknown dialect {name}", file.display())))?,
        (None, None) => SqlDialect::default(),
    };
    let mut naming = TableCatalog::new();
    naming.set_default_schema(set.default_schema.as_deref());

    // Parse everything first: a job with a statement that does not parse never starts.
    let mut parsed = Vec::new();
    for job in &set.jobs {
        for task in &job.tasks {
            let key = format!("{}/{}", job.name, task.id);
            let sql = task.sql.as_deref().ok_or_else(|| JobsError::NoSql { task: key.clone() })?;
            let Prepared { text, formats, replaced } = prepare(dialect.dialect().as_ref(), sql);
            if let Some(other) = formats.iter().find(|f| !f.format.eq_ignore_ascii_case("delta")) {
                return Err(JobsError::Unsupported {
                    task: key,
                    statement: other.statement,
                    position: "CREATE TABLE".to_string(),
                    detail: format!("USING {}: the lake holds Delta tables only (USING DELTA, or no USING)", other.format),
                });
            }
            let statements = Parser::parse_sql(dialect.dialect().as_ref(), &text).map_err(|e| JobsError::Parse { task: key.clone(), detail: e.to_string() })?;
            parsed.push((job, task, key, sql, statements, replaced));
        }
    }

    // Partition columns: the lake's tables first, then the declarations, then what
    // the job's own CREATE TABLEs declare for tables not yet in the lake.
    let mut tables = Vec::new();
    let mut created = Vec::new();
    for (_, _, _, _, statements, _) in &parsed {
        for statement in statements {
            let _ = sqlparser::ast::visit_relations(statement, |name: &ObjectName| {
                if let Some(raw) = normalize(name) {
                    let table = naming.qualify(raw);
                    if !tables.contains(&table) {
                        tables.push(table);
                    }
                }
                ControlFlow::<()>::Continue(())
            });
            if let Statement::CreateTable(create) = statement {
                if let (Some(raw), HiveDistributionStyle::PARTITIONED { columns }) = (normalize(&create.name), &create.hive_distribution) {
                    created.push((naming.qualify(raw), columns.iter().map(|c| c.name.value.to_lowercase()).collect::<Vec<_>>()));
                }
            }
        }
    }
    let mut catalog = naming.clone();
    for table in &tables {
        let mut columns = lake.partition_columns(table).await.map_err(|source| JobsError::Delta { task: format!("loading {}", file.display()), statement: 0, table: table.clone(), source })?;
        let declared = set.partition_columns.iter().chain(options.partition_columns.iter()).filter(|(t, _)| naming.qualify(t.to_lowercase()) == *table);
        let from_create = created.iter().filter(|(t, _)| t == table).map(|(_, c)| c).take(usize::from(columns.is_empty()));
        for column in declared.flat_map(|(_, c)| c.iter()).chain(from_create.flatten()) {
            let column = column.to_lowercase();
            if !columns.contains(&column) {
                columns.push(column);
            }
        }
        if !columns.is_empty() {
            catalog.declare(table, &columns);
        }
    }
    let analyzer = Analyzer::new(dialect, catalog.clone());

    let keys: HashSet<&str> = parsed.iter().map(|(_, _, key, _, _, _)| key.as_str()).collect();
    let mut out = Vec::with_capacity(parsed.len());
    let mut seen = HashSet::new();
    for (job, task, key, sql, statements, replaced) in &parsed {
        if taken.contains(key) || !seen.insert(key.clone()) {
            return Err(SchedulerError::DuplicateTask { job: job.name.clone(), task: task.id.clone() }.into());
        }
        let mut deps = Vec::new();
        for dep in &task.depends_on {
            let dep_key = format!("{}/{dep}", job.name);
            if !keys.contains(dep_key.as_str()) {
                return Err(SchedulerError::UnknownDependency { job: job.name.clone(), task: task.id.clone(), dependency: dep.clone() }.into());
            }
            deps.push(dep_key);
        }
        let (accesses, universal) = match analyzer.analyze_raw(key, sql) {
            Ok(accesses) => (accesses, false),
            Err(_) if options.assume_conflict => (Vec::new(), true),
            Err(error) => return Err(error.into()),
        };
        let planned = plan_statements(key, statements, &catalog, replaced, dialect.dialect().as_ref())?;
        if let Some(mirror) = lake.mirror() {
            if let Some((i, planned)) = planned.iter().enumerate().find(|(_, p)| p.step.target().is_some_and(|t| mirror.contains(t))) {
                return Err(JobsError::Unsupported {
                    task: key.clone(),
                    statement: i + 1,
                    position: planned.position.clone(),
                    detail: format!("{} is a table of the published mirror, which only replay writes; write to a table of the lake", planned.step.target().unwrap_or_default()),
                });
            }
        }
        out.push(TaskSpec {
            key: key.clone(),
            job: job.name.clone(),
            deps,
            statements: planned,
            accesses,
            universal,
            default_schema: set.default_schema.clone(),
            duration: task.duration.unwrap_or(1.0),
        });
    }
    Ok(out)
}
