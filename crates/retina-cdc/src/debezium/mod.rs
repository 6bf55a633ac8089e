//! Debezium JSON: the message decoder (envelope, schemas, typed row images) and an
//! encoder for generated transactions.

mod array_text;
pub mod elision;
pub mod encoder;
mod envelope;
mod fields;
mod scan;
pub mod image;
pub mod message;
mod not_a_change;
pub mod row;
pub mod schema;
pub mod time;
pub mod types;
pub mod value;

pub use encoder::{DebeziumEncoder, EncoderOptions};
#[doc(hidden)]
pub use scan::assert_agrees_with_serde;
pub use image::{Image, Scalar};
pub use elision::{KnownSchemas, Line, SchemaElider};
pub use message::{decode_elided, decode_line, decode_line_with, ChangeEvent, Message, Op, TransactionBlock};
pub use row::{ColumnPlan, TablePlan};
pub use types::DebeziumType;
