//! SQL access analysis: SQL text → `(table, mode, partitions)` accesses.
//!
//! Parsing is sqlparser's; this module decides what each statement does to which
//! table. The rule throughout: when something cannot be proven, assume more
//! access (whole table, stronger mode), never less — a missed conflict is a failed
//! pipeline run, an extra one only costs some parallelism.

pub mod dialect;
pub mod names;
pub mod predicate;
pub mod reads;
pub mod statement;

use sqlparser::parser::Parser;

use crate::access::{Access, Interner, PartitionSpec};
use crate::error::{Result, SchedulerError};
pub use dialect::SqlDialect;
pub use names::TableCatalog;
pub use statement::RawAccess;

/// Parses and analyses SQL for one dialect and one catalog of partition columns.
#[derive(Debug, Clone, Default)]
pub struct Analyzer {
    dialect: SqlDialect,
    catalog: TableCatalog,
}

impl Analyzer {
    /// An analyzer for `dialect` with the given partition-column declarations.
    pub fn new(dialect: SqlDialect, catalog: TableCatalog) -> Self {
        Self { dialect, catalog }
    }

    /// The catalog in use.
    pub fn catalog(&self) -> &TableCatalog {
        &self.catalog
    }

    /// Accesses of all statements in `sql` (`;`-separated), before interning,
    /// deduplicated. Errors name `task`, the statement number and its position.
    pub fn analyze_raw(&self, task: &str, sql: &str) -> Result<Vec<RawAccess>> {
        let dialect = self.dialect.dialect();
        // Spark's `CREATE TABLE … USING DELTA` clause says nothing about accesses.
        // Delta's `INSERT INTO t REPLACE WHERE p <query>` is an overwrite of what
        // `DELETE FROM t WHERE p` would touch (Delta checks the new rows match `p`),
        // plus what the query reads.
        let dialect::Prepared { text, replaced, .. } = dialect::prepare(dialect.as_ref(), sql);
        let statements = Parser::parse_sql(dialect.as_ref(), &text)
            .map_err(|e| {
                // sqlparser reports "Line: L, Column: C" except at end of input.
                let mut detail = e.to_string();
                if !detail.contains("Line:") {
                    detail.push_str(" (at end of the SQL text)");
                }
                SchedulerError::SqlParse { task: task.to_string(), detail }
            })?;
        let mut out: Vec<RawAccess> = Vec::new();
        for (i, stmt) in statements.iter().enumerate() {
            let unsupported = |detail: String| SchedulerError::UnsupportedSql {
                task: task.to_string(),
                statement: i + 1,
                position: statement::position(stmt),
                detail,
            };
            let mut accs = statement::accesses_of(stmt, &self.catalog).map_err(|e| unsupported(e.0))?;
            if let Some(replace) = replaced.iter().find(|r| r.statement == i + 1) {
                let sqlparser::ast::Statement::Insert(insert) = stmt else {
                    return Err(unsupported("REPLACE WHERE outside an INSERT INTO".to_string()));
                };
                let delete = format!("DELETE FROM {} WHERE {}", insert.table, replace.predicate);
                let parsed = Parser::parse_sql(dialect.as_ref(), &delete).map_err(|e| unsupported(format!("REPLACE WHERE {}: {e}", replace.predicate)))?;
                let mut overwritten = Vec::new();
                for statement in &parsed {
                    overwritten.extend(statement::accesses_of(statement, &self.catalog).map_err(|e| unsupported(e.0))?);
                }
                let targets: Vec<String> = overwritten.iter().filter(|a| a.mode == crate::access::Mode::Delete).map(|a| a.table.clone()).collect();
                accs.retain(|a| a.mode == crate::access::Mode::Read || !targets.contains(&a.table));
                for mut access in overwritten {
                    if access.mode == crate::access::Mode::Delete {
                        access.mode = crate::access::Mode::Overwrite;
                    }
                    accs.push(access);
                }
            }
            for a in accs {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        Ok(out)
    }

    /// Accesses of `sql`, interned into `names`.
    pub fn analyze(&self, task: &str, sql: &str, names: &mut Interner) -> Result<Vec<Access>> {
        Ok(self.analyze_raw(task, sql)?.into_iter().map(|r| intern(&r, names)).collect())
    }
}

/// Interns a raw access.
pub fn intern(r: &RawAccess, names: &mut Interner) -> Access {
    let table = names.intern(&r.table);
    let pairs: Vec<(u32, Vec<u32>)> = r
        .constraint
        .iter()
        .map(|(c, vals)| (names.intern(c), vals.iter().map(|v| names.intern(v)).collect()))
        .collect();
    Access { table, mode: r.mode, partitions: PartitionSpec::from_pairs(pairs) }
}

#[cfg(test)]
mod corpus_tests;
