//! Errors of SQL processing, each with the PostgreSQL SQLSTATE a client should see.

use datafusion::error::DataFusionError;
use retina_core::CoreError;

pub type QueryResult<T> = Result<T, QueryError>;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Anything DataFusion reports: parse, plan and execution errors.
    #[error("{0}")]
    DataFusion(#[from] DataFusionError),

    /// Retina tables change only through replay; SQL is read-only.
    #[error("Retina is read-only over SQL: {statement} is not supported (tables change only by replaying their sources)")]
    ReadOnly { statement: String },

    /// Something SQL may never do here: read the server's files, run a plan node
    /// nobody has judged safe.
    #[error("permission denied: {statement} is not allowed over SQL (Retina's SQL reads its tables only)")]
    NotPermitted { statement: String },

    /// SQL text longer than the session allows.
    #[error("statement too long: {bytes} bytes, at most {limit} are accepted")]
    StatementTooLong { bytes: usize, limit: usize },

    /// A statement whose tree would be deeper than the server's stacks hold.
    #[error("statement too complex: {reason}; split it, or write long lists with IN (…) or a VALUES list")]
    TooComplex { reason: String },

    #[error("{0}")]
    Core(#[from] CoreError),

    /// More than one statement where exactly one is expected.
    #[error("expected exactly one SQL statement, got {count}")]
    StatementCount { count: usize },
}

impl QueryError {
    /// The SQLSTATE code for this error (PostgreSQL appendix A).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            QueryError::DataFusion(error) => datafusion_sqlstate(error),
            QueryError::ReadOnly { .. } => "25006",        // read_only_sql_transaction
            QueryError::NotPermitted { .. } => "42501",    // insufficient_privilege
            QueryError::TooComplex { .. } => "54001",      // statement_too_complex
            QueryError::StatementTooLong { .. } => "54000", // program_limit_exceeded
            QueryError::StatementCount { .. } => "42601",  // syntax_error
            QueryError::Core(error) => core_sqlstate(error),
        }
    }

    /// The message a client should see: PostgreSQL's own for the data exceptions it
    /// words the same way every time (`division by zero`, `bigint out of range`),
    /// else this error's text.
    pub fn message(&self) -> String {
        use datafusion::arrow::error::ArrowError;
        if let QueryError::DataFusion(error) = self {
            let root = error.find_root();
            if let DataFusionError::ArrowError(arrow, _) = root {
                match arrow.as_ref() {
                    ArrowError::DivideByZero => return "division by zero".into(),
                    ArrowError::ArithmeticOverflow(message) if message.ends_with(" out of range") => return message.clone(),
                    ArrowError::CastError(message) => {
                        if let Some(message) = integer_out_of_range(message) {
                            return message.into();
                        }
                    }
                    _ => {}
                }
            }
            if matches!(root, DataFusionError::Execution(message) if message.contains("Divide by zero")) {
                return "division by zero".into();
            }
        }
        self.to_string()
    }
}

/// PostgreSQL's message for Arrow's refusal to cast a value into a narrower integer
/// (`Can't cast value 5000000000 to type Int32`).
fn integer_out_of_range(cast_error: &str) -> Option<&'static str> {
    if !cast_error.starts_with("Can't cast value") {
        return None;
    }
    match cast_error.rsplit(' ').next()? {
        "Int16" => Some("smallint out of range"),
        "Int32" => Some("integer out of range"),
        "Int64" => Some("bigint out of range"),
        _ => None,
    }
}

fn core_sqlstate(error: &CoreError) -> &'static str {
    match error {
        CoreError::UnknownTable { .. } => "42P01",                   // undefined_table
        CoreError::TooManySnapshots { .. } => "53000",               // insufficient_resources
        CoreError::SnapshotTooOld { .. } => "72000",                 // snapshot_too_old
        CoreError::Storage(_) | CoreError::Store(_) => "58030",      // io_error
        CoreError::EngineStopped { .. } => "57P03",                  // cannot_connect_now
        _ => "XX000",                                                // internal_error
    }
}

fn datafusion_sqlstate(error: &DataFusionError) -> &'static str {
    use datafusion::arrow::error::ArrowError;
    use datafusion::common::SchemaError;
    use datafusion::sql::sqlparser::parser::ParserError;
    match error.find_root() {
        // The parser's nesting limit (parentheses, subqueries): the statement is
        // well formed, only too deep, as PostgreSQL's "stack depth limit exceeded".
        DataFusionError::SQL(error, _) if matches!(error.as_ref(), ParserError::RecursionLimitExceeded) => "54001",
        DataFusionError::SQL(..) => "42601",
        DataFusionError::SchemaError(schema_error, _) => match schema_error.as_ref() {
            SchemaError::FieldNotFound { .. } => "42703", // undefined_column
            SchemaError::AmbiguousReference { .. } => "42702",
            SchemaError::DuplicateQualifiedField { .. } | SchemaError::DuplicateUnqualifiedField { .. } => "42701",
        },
        DataFusionError::Plan(message) => plan_sqlstate(message),
        DataFusionError::NotImplemented(_) => "0A000", // feature_not_supported
        DataFusionError::ResourcesExhausted(_) => "53200", // out_of_memory
        DataFusionError::ArrowError(arrow, _) => match arrow.as_ref() {
            ArrowError::DivideByZero => "22012",
            ArrowError::CastError(message) if integer_out_of_range(message).is_some() => "22003",
            ArrowError::CastError(_) | ArrowError::ParseError(_) => "22P02", // invalid_text_representation
            ArrowError::ArithmeticOverflow(_) => "22003",                    // numeric_value_out_of_range
            _ => "XX000",
        },
        DataFusionError::External(external) => match external.downcast_ref::<CoreError>() {
            Some(core) => core_sqlstate(core),
            None => "XX000",
        },
        DataFusionError::Execution(message) if message.contains("Divide by zero") => "22012",
        DataFusionError::Execution(_) => "22000", // data_exception
        _ => "XX000",
    }
}

/// DataFusion reports most semantic errors as plan errors with a message only.
fn plan_sqlstate(message: &str) -> &'static str {
    let lower = message.to_ascii_lowercase();
    if lower.contains("table") && (lower.contains("not found") || lower.contains("doesn't exist") || lower.contains("does not exist")) {
        "42P01" // undefined_table
    } else if lower.contains("invalid function") || lower.contains("function") && lower.contains("not found") {
        "42883" // undefined_function
    } else if lower.contains("no field named") || lower.contains("column") && lower.contains("not found") {
        "42703" // undefined_column
    } else if lower.contains("not supported") {
        "0A000"
    } else if lower.contains("coercion") || lower.contains("cannot infer common") || lower.contains("type") && lower.contains("mismatch") {
        "42804" // datatype_mismatch
    } else {
        "42000" // syntax_error_or_access_rule_violation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_messages_map_to_specific_sqlstates() {
        assert_eq!(plan_sqlstate("table 'retina.public.nope' not found"), "42P01");
        assert_eq!(plan_sqlstate("Invalid function 'foo'."), "42883");
        assert_eq!(plan_sqlstate("No field named x."), "42703");
        assert_eq!(plan_sqlstate("something else"), "42000");
        let read_only = QueryError::ReadOnly { statement: "INSERT".into() };
        assert_eq!(read_only.sqlstate(), "25006");
        let wrapped = DataFusionError::External(Box::new(CoreError::TooManySnapshots { limit: 3 }));
        assert_eq!(QueryError::from(wrapped).sqlstate(), "53000");
    }
}
