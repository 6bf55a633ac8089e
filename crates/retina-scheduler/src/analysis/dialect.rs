//! The SQL dialects a job's SQL can be parsed with.

use sqlparser::dialect::{DatabricksDialect, Dialect, GenericDialect, HiveDialect};

/// Dialect of a job's SQL. Spark SQL has no dialect of its own in sqlparser; the
/// Databricks dialect is Spark SQL plus Delta extensions, so `spark` maps to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqlDialect {
    /// sqlparser's permissive generic dialect.
    Generic,
    /// Databricks SQL (the default: the paper's platform).
    #[default]
    Databricks,
    /// HiveQL (`INSERT OVERWRITE TABLE t PARTITION (...)`).
    Hive,
    /// Spark SQL, parsed with the Databricks dialect.
    Spark,
}

impl SqlDialect {
    /// Parses `generic`, `databricks`, `hive` or `spark` (any case).
    pub fn parse(s: &str) -> Option<SqlDialect> {
        match s.to_ascii_lowercase().as_str() {
            "generic" => Some(SqlDialect::Generic),
            "databricks" => Some(SqlDialect::Databricks),
            "hive" => Some(SqlDialect::Hive),
            "spark" | "sparksql" | "spark-sql" => Some(SqlDialect::Spark),
            _ => None,
        }
    }

    /// The sqlparser dialect object.
    pub fn dialect(self) -> Box<dyn Dialect> {
        match self {
            SqlDialect::Generic => Box::new(GenericDialect {}),
            SqlDialect::Databricks | SqlDialect::Spark => Box::new(DatabricksDialect {}),
            SqlDialect::Hive => Box::new(HiveDialect {}),
        }
    }
}
