//! Accesses of one parsed statement.
//!
//! Each data-changing statement has one *target* access (its mode and the
//! partitions its WHERE / ON / PARTITION clause proves) plus the reads of every
//! other part of it. The target is deliberately not visited as a read: UPDATE,
//! DELETE and MERGE modes already imply reading the target.

use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_relations, Delete, FromTable, Insert, Merge, ObjectName, Spanned, Statement, TableFactor, TableObject, Update,
};

use super::names::{normalize, TableCatalog};
use super::predicate::{constraint_of, constraint_of_partition_clause, Constraint, Target};
use super::reads::{qualifiers, reads_of};
use crate::access::Mode;

/// An access before interning: table name, mode, constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAccess {
    /// Normalised table name.
    pub table: String,
    /// Access mode.
    pub mode: Mode,
    /// Proven partition constraint (empty = whole table).
    pub constraint: Constraint,
}

/// Why a statement could not be analysed safely (position added by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// The accesses of `stmt`.
pub fn accesses_of(stmt: &Statement, catalog: &TableCatalog) -> Result<Vec<RawAccess>, Unsupported> {
    let mut out = Vec::new();
    match stmt {
        Statement::Query(q) => push_reads(&mut out, &**q, catalog),
        Statement::Insert(ins) => insert(&mut out, ins, catalog)?,
        Statement::Update(up) => update(&mut out, up, catalog)?,
        Statement::Delete(del) => delete(&mut out, del, catalog)?,
        Statement::Merge(m) => merge(&mut out, m, catalog)?,
        Statement::CreateTable(ct) => {
            push_target(&mut out, &ct.name, Mode::Ddl, Constraint::new(), catalog)?;
            if let Some(q) = &ct.query {
                push_reads(&mut out, &**q, catalog);
            }
        }
        Statement::CreateView(cv) => push_target(&mut out, &cv.name, Mode::Ddl, Constraint::new(), catalog)?,
        Statement::AlterTable(at) => push_target(&mut out, &at.name, Mode::Ddl, Constraint::new(), catalog)?,
        Statement::Drop { names, .. } => {
            for n in names {
                push_target(&mut out, n, Mode::Ddl, Constraint::new(), catalog)?;
            }
        }
        Statement::Truncate(tr) => {
            for t in &tr.table_names {
                let c = match &tr.partitions {
                    Some(p) => partition_clause(&t.name, p, catalog),
                    None => Constraint::new(),
                };
                push_target(&mut out, &t.name, Mode::Delete, c, catalog)?;
            }
        }
        Statement::OptimizeTable { name, predicate, .. } => {
            let c = match predicate {
                Some(p) => where_constraint(name, None, p, true, catalog),
                None => Constraint::new(),
            };
            push_target(&mut out, name, Mode::Optimize, c, catalog)?;
        }
        Statement::Explain { analyze, statement, .. } => {
            // EXPLAIN ANALYZE executes the statement; plain EXPLAIN touches nothing.
            if *analyze {
                out.extend(accesses_of(statement, catalog)?);
            }
        }
        Statement::Set(_)
        | Statement::Use(_)
        | Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowFunctions { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowCreate { .. }
        | Statement::ExplainTable { .. }
        | Statement::Grant(_)
        | Statement::Revoke(_) => {}
        other => {
            // Unknown to us: every relation it names gets a DDL access, which
            // conflicts with everything on that table (safe).
            let mut names = Vec::new();
            let _ = visit_relations(other, |rel: &ObjectName| {
                names.push(rel.clone());
                ControlFlow::<()>::Continue(())
            });
            for n in &names {
                push_target(&mut out, n, Mode::Ddl, Constraint::new(), catalog)?;
            }
        }
    }
    Ok(out)
}

fn push_reads<V: sqlparser::ast::Visit>(out: &mut Vec<RawAccess>, node: &V, catalog: &TableCatalog) {
    out.extend(reads_of(node, catalog).into_iter().map(|r| RawAccess { table: r.table, mode: Mode::Read, constraint: r.constraint }));
}

fn table_name(name: &ObjectName, catalog: &TableCatalog) -> Result<(String, String), Unsupported> {
    let raw = normalize(name).ok_or_else(|| Unsupported(format!("table name `{name}` is computed, not a plain identifier")))?;
    Ok((raw.clone(), catalog.qualify(raw)))
}

fn push_target(out: &mut Vec<RawAccess>, name: &ObjectName, mode: Mode, constraint: Constraint, catalog: &TableCatalog) -> Result<(), Unsupported> {
    let (_, table) = table_name(name, catalog)?;
    out.push(RawAccess { table, mode, constraint });
    Ok(())
}

fn where_constraint(
    name: &ObjectName,
    alias: Option<&sqlparser::ast::TableAlias>,
    expr: &sqlparser::ast::Expr,
    allow_unqualified: bool,
    catalog: &TableCatalog,
) -> Constraint {
    let Some(raw) = normalize(name) else { return Constraint::new() };
    let table = catalog.qualify(raw.clone());
    let target = Target { qualifiers: qualifiers(&raw, alias), allow_unqualified, partition_columns: catalog.partition_columns(&table) };
    constraint_of(expr, &target)
}

fn partition_clause(name: &ObjectName, exprs: &[sqlparser::ast::Expr], catalog: &TableCatalog) -> Constraint {
    let Some(raw) = normalize(name) else { return Constraint::new() };
    let table = catalog.qualify(raw.clone());
    let target = Target { qualifiers: qualifiers(&raw, None), allow_unqualified: true, partition_columns: catalog.partition_columns(&table) };
    constraint_of_partition_clause(exprs, &target)
}

/// INSERT [OVERWRITE] [TABLE] t [PARTITION (...)] query. A blind append unless
/// its query reads the target, in which case Delta treats it like MERGE.
fn insert(out: &mut Vec<RawAccess>, ins: &Insert, catalog: &TableCatalog) -> Result<(), Unsupported> {
    let name = match &ins.table {
        TableObject::TableName(n) => n,
        other => return Err(Unsupported(format!("INSERT into `{other}` (not a table name)"))),
    };
    let (_, table) = table_name(name, catalog)?;
    let constraint = match &ins.partitioned {
        Some(p) => partition_clause(name, p, catalog),
        None => Constraint::new(),
    };
    let reads = match &ins.source {
        Some(q) => reads_of(&**q, catalog),
        None => Vec::new(),
    };
    let mut mode = if ins.overwrite { Mode::Overwrite } else { Mode::Insert };
    let mut target_constraint = constraint;
    if mode == Mode::Insert {
        if let Some(self_read) = reads.iter().find(|r| r.table == table) {
            mode = Mode::Merge;
            // MERGE-like: it touches what it writes and what it read of itself.
            target_constraint = union_constraint(&target_constraint, &self_read.constraint);
        }
    }
    out.push(RawAccess { table, mode, constraint: target_constraint });
    out.extend(reads.into_iter().map(|r| RawAccess { table: r.table, mode: Mode::Read, constraint: r.constraint }));
    Ok(())
}

/// Union of two constraints at the granularity `PartitionSpec::union` keeps:
/// equal, or one shared column; anything else is the whole table.
fn union_constraint(a: &Constraint, b: &Constraint) -> Constraint {
    if a == b {
        return a.clone();
    }
    if a.len() == 1 && b.len() == 1 && a.keys().eq(b.keys()) {
        let mut out = a.clone();
        for (c, v) in b {
            out.entry(c.clone()).or_default().extend(v.iter().cloned());
        }
        return out;
    }
    Constraint::new()
}

fn update(out: &mut Vec<RawAccess>, up: &Update, catalog: &TableCatalog) -> Result<(), Unsupported> {
    let (name, alias) = match &up.table.relation {
        TableFactor::Table { name, alias, .. } => (name, alias.as_ref()),
        other => return Err(Unsupported(format!("UPDATE of `{other}` (not a table)"))),
    };
    let sole = up.table.joins.is_empty() && up.from.is_none();
    let constraint = match &up.selection {
        Some(sel) => where_constraint(name, alias, sel, sole, catalog),
        None => Constraint::new(),
    };
    push_target(out, name, Mode::Update, constraint, catalog)?;
    push_reads(out, &up.table.joins, catalog);
    push_reads(out, &up.from, catalog);
    push_reads(out, &up.assignments, catalog);
    push_reads(out, &up.selection, catalog);
    Ok(())
}

fn delete(out: &mut Vec<RawAccess>, del: &Delete, catalog: &TableCatalog) -> Result<(), Unsupported> {
    let from = match &del.from {
        FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
    };
    if !del.tables.is_empty() {
        // Multi-table DELETE t1, t2 FROM ...: every named table loses rows.
        for n in &del.tables {
            push_target(out, n, Mode::Delete, Constraint::new(), catalog)?;
        }
        push_reads(out, from, catalog);
    } else {
        let first = from.first().ok_or_else(|| Unsupported("DELETE without a table".to_string()))?;
        let (name, alias) = match &first.relation {
            TableFactor::Table { name, alias, .. } => (name, alias.as_ref()),
            other => return Err(Unsupported(format!("DELETE from `{other}` (not a table)"))),
        };
        let sole = from.len() == 1 && first.joins.is_empty() && del.using.is_none();
        let constraint = match &del.selection {
            Some(sel) => where_constraint(name, alias, sel, sole, catalog),
            None => Constraint::new(),
        };
        push_target(out, name, Mode::Delete, constraint, catalog)?;
        push_reads(out, &first.joins, catalog);
        for twj in from.iter().skip(1) {
            push_reads(out, twj, catalog);
        }
    }
    push_reads(out, &del.using, catalog);
    push_reads(out, &del.selection, catalog);
    Ok(())
}

fn merge(out: &mut Vec<RawAccess>, m: &Merge, catalog: &TableCatalog) -> Result<(), Unsupported> {
    let (name, alias) = match &m.table {
        TableFactor::Table { name, alias, .. } => (name, alias.as_ref()),
        other => return Err(Unsupported(format!("MERGE into `{other}` (not a table)"))),
    };
    // Bare columns in ON may belong to the source, so only qualified ones count.
    let constraint = where_constraint(name, alias, &m.on, false, catalog);
    push_target(out, name, Mode::Merge, constraint, catalog)?;
    push_reads(out, &m.source, catalog);
    push_reads(out, &m.on, catalog);
    push_reads(out, &m.clauses, catalog);
    Ok(())
}

/// "line L, column C" of a statement, for error messages.
pub fn position(stmt: &Statement) -> String {
    let s = stmt.span().start;
    format!("line {}, column {}", s.line, s.column)
}
