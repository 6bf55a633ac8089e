//! Tables read by a piece of SQL: FROM lists, joins, subqueries at any depth,
//! CTE bodies, MERGE sources.
//!
//! We let sqlparser's visitor walk the AST (so no nested subquery can be missed)
//! and only hook three events: a query (to learn its CTE names, which are not
//! tables), a SELECT (to derive per-table partition constraints from its WHERE),
//! and a table factor (the read itself).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use sqlparser::ast::{Query, Select, TableFactor, Visit, Visitor};

use super::names::{normalize, TableCatalog};
use super::predicate::{constraint_of, Constraint, Target};

/// One table read, with the partitions the enclosing WHERE restricts it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// Normalised table name (default schema applied).
    pub table: String,
    /// Proven partition constraint; empty = whole table.
    pub constraint: Constraint,
}

/// Collects reads below `node`. CTE names are excluded when referenced
/// unqualified (a qualified name is always a real table).
pub fn reads_of<V: Visit>(node: &V, catalog: &TableCatalog) -> Vec<Read> {
    let mut c = Collector { catalog, reads: Vec::new(), ctes: HashSet::new(), refined: HashMap::new() };
    let _ = node.visit(&mut c);
    let ctes = c.ctes;
    c.reads
        .into_iter()
        .filter(|(raw, _)| raw.contains('.') || !ctes.contains(raw))
        .map(|(_, r)| r)
        .collect()
}

/// Visitor state. `refined` maps a table factor (by address; the AST is borrowed
/// immutably for the whole walk, so addresses are stable) to the constraint its
/// SELECT's WHERE proves, computed when the SELECT is entered, before its children.
struct Collector<'a> {
    catalog: &'a TableCatalog,
    /// (name as written, normalised, read)
    reads: Vec<(String, Read)>,
    ctes: HashSet<String>,
    refined: HashMap<*const TableFactor, Constraint>,
}

impl Visitor for Collector<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
        let Some(selection) = &select.selection else { return ControlFlow::Continue(()) };
        let factors: Vec<&TableFactor> = select
            .from
            .iter()
            .flat_map(|twj| std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)))
            .collect();
        let sole = factors.len() == 1;
        for f in factors {
            if let TableFactor::Table { name, alias, args: None, .. } = f {
                let Some(raw) = normalize(name) else { continue };
                let table = self.catalog.qualify(raw.clone());
                let cols = self.catalog.partition_columns(&table);
                if cols.is_empty() {
                    continue;
                }
                let target = Target { qualifiers: qualifiers(&raw, alias.as_ref()), allow_unqualified: sole, partition_columns: cols };
                let c = constraint_of(selection, &target);
                if !c.is_empty() {
                    self.refined.insert(f as *const TableFactor, c);
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, args: None, .. } = factor {
            if let Some(raw) = normalize(name) {
                let constraint = self.refined.remove(&(factor as *const TableFactor)).unwrap_or_default();
                let table = self.catalog.qualify(raw.clone());
                self.reads.push((raw, Read { table, constraint }));
            }
        }
        ControlFlow::Continue(())
    }
}

/// The names a column qualifier may use for a table: its alias if it has one,
/// otherwise its written name and that name's last part.
pub fn qualifiers(raw: &str, alias: Option<&sqlparser::ast::TableAlias>) -> Vec<String> {
    match alias {
        Some(a) => vec![a.name.value.to_lowercase()],
        None => {
            let mut q = vec![raw.to_string()];
            if let Some(last) = raw.rsplit('.').next() {
                if last != raw {
                    q.push(last.to_string());
                }
            }
            q
        }
    }
}
