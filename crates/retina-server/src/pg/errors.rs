//! Query errors as PostgreSQL `ErrorResponse`s: severity `ERROR`, the SQLSTATE that
//! [`retina_query::QueryError::sqlstate`] assigns, and the message.

use pgwire::error::{ErrorInfo, PgWireError};
use retina_query::datafusion::error::DataFusionError;
use retina_query::QueryError;

pub fn error_info(error: &QueryError) -> ErrorInfo {
    ErrorInfo::new("ERROR".to_owned(), error.sqlstate().to_owned(), error.message())
}

pub fn pg_error(error: QueryError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(&error)))
}

/// An error raised while a result stream is being read.
pub fn stream_error(error: DataFusionError) -> PgWireError {
    pg_error(QueryError::DataFusion(error))
}

/// An error with an explicit SQLSTATE.
pub fn user_error(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message.into())))
}
