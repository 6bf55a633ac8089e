//! Table-name normalisation and partition-column lookup.
//!
//! Spark and Delta resolve table names case-insensitively even when quoted, so
//! every part is lower-cased and the parts are joined with `.`. A reference may
//! be less qualified than the declaration (`raw_events` vs `staging.raw_events`);
//! [`TableCatalog::partition_columns`] matches on whole trailing name parts.

use std::collections::HashMap;

use sqlparser::ast::{ObjectName, ObjectNamePart};

/// Lower-cased, dot-joined name of `name`; `None` if a part is not a plain
/// identifier (e.g. `IDENTIFIER(:param)`), which callers treat as unknown.
pub fn normalize(name: &ObjectName) -> Option<String> {
    let mut parts = Vec::with_capacity(name.0.len());
    for p in &name.0 {
        match p {
            ObjectNamePart::Identifier(id) => parts.push(id.value.to_lowercase()),
            ObjectNamePart::Function(_) => return None,
        }
    }
    Some(parts.join("."))
}

/// Lower-cases and trims a user-supplied table or column name (`Staging.Raw_Events`).
pub fn normalize_str(name: &str) -> String {
    name.trim().trim_matches('`').to_lowercase().replace("`.`", ".")
}

/// True if `short` equals `long` or is a trailing run of its dot-separated parts.
pub fn is_suffix(short: &str, long: &str) -> bool {
    short == long || (long.len() > short.len() && long.ends_with(short) && long.as_bytes()[long.len() - short.len() - 1] == b'.')
}

/// Declared partition columns per table (normalised names), with an optional
/// default schema for unqualified references.
#[derive(Debug, Clone, Default)]
pub struct TableCatalog {
    partition_columns: HashMap<String, Vec<String>>,
    default_schema: Option<String>,
}

impl TableCatalog {
    /// An empty catalog: no partition columns, so every access is whole-table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares `table`'s partition columns in order; the first is the one the
    /// conflict index buckets by. Re-declaring replaces the previous list.
    pub fn declare(&mut self, table: &str, columns: &[String]) {
        let cols: Vec<String> = columns.iter().map(|c| normalize_str(c)).filter(|c| !c.is_empty()).collect();
        self.partition_columns.insert(normalize_str(table), cols);
    }

    /// Sets the schema prefixed to unqualified table names.
    pub fn set_default_schema(&mut self, schema: Option<&str>) {
        self.default_schema = schema.map(normalize_str).filter(|s| !s.is_empty());
    }

    /// Applies the default schema to an unqualified name.
    pub fn qualify(&self, table: String) -> String {
        match &self.default_schema {
            Some(schema) if !table.contains('.') => format!("{schema}.{table}"),
            _ => table,
        }
    }

    /// All declared tables and their columns.
    pub fn declared(&self) -> impl Iterator<Item = (&String, &Vec<String>)> {
        self.partition_columns.iter()
    }

    /// Partition columns of `table`: an exact declaration, else the unique
    /// declaration that `table` is a suffix of (or that is a suffix of `table`).
    /// Ambiguity yields no columns, i.e. whole-table accesses (safe).
    pub fn partition_columns(&self, table: &str) -> &[String] {
        if let Some(cols) = self.partition_columns.get(table) {
            return cols;
        }
        let mut found: Option<&Vec<String>> = None;
        for (name, cols) in &self.partition_columns {
            if is_suffix(table, name) || is_suffix(name, table) {
                if found.is_some() {
                    return &[];
                }
                found = Some(cols);
            }
        }
        found.map(Vec::as_slice).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_matching_is_by_whole_parts() {
        assert!(is_suffix("raw_events", "staging.raw_events"));
        assert!(!is_suffix("events", "staging.raw_events"));
        assert!(is_suffix("a.b", "a.b"));
    }

    #[test]
    fn lookup_by_suffix() {
        let mut c = TableCatalog::new();
        c.declare("Staging.Raw_Events", &["Event_Date".to_string()]);
        assert_eq!(c.partition_columns("raw_events"), &["event_date".to_string()]);
        assert_eq!(c.partition_columns("main.staging.raw_events"), &["event_date".to_string()]);
        assert!(c.partition_columns("other").is_empty());
    }
}
