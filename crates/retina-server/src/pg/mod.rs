//! The PostgreSQL wire protocol front end.
//!
//! - [`startup`]: who may connect (trust, or a password over SCRAM-SHA-256 with
//!   [`scram`]);
//! - [`password_file`]: `retina serve --password-file`;
//! - [`statement`]: what a client's SQL becomes: a planned query or a session
//!   command Retina acknowledges without effect (`SET`, `BEGIN`, ...);
//! - [`handler`]: the simple and extended query handlers;
//! - [`copy_out`]: `COPY … TO STDOUT` in text, CSV or binary;
//! - [`cursors`]: `DECLARE … CURSOR`, `FETCH` and `CLOSE`;
//! - [`encode`]: Arrow batches to `DataRow`s with PostgreSQL type OIDs, under
//!   the column names PostgreSQL would give ([`column_names`]), floats, timestamps
//!   and times in text as PostgreSQL writes them ([`text_values`]);
//! - [`param_types`]: the parameter types a client declares, given to the plan;
//! - [`params`]: bound parameters to DataFusion scalars, text or binary
//!   ([`param_binary`]);
//! - [`errors`]: query errors to `ErrorResponse` with their SQLSTATE;
//! - [`settings`]: what a connection sets (`search_path`, `statement_timeout`);
//! - [`server`]: the accept loop, under [`connection_limit`].

/// Result column names as PostgreSQL gives them (figured in the query crate, which
/// also names nested select lists so).
pub use retina_query::pg_column_names as column_names;
pub mod connection_limit;
pub mod copy_out;
pub mod cursors;
pub mod encode;
pub mod errors;
pub mod float_text;
pub mod handler;
pub mod param_binary;
pub mod param_types;
pub mod params;
pub mod password_file;
pub mod scram;
pub mod server;
pub mod settings;
pub mod startup;
pub mod statement;
pub mod text_values;
pub mod transaction;
pub mod time_text;
