//! Retina's core: the pieces of the paper's replay path and its snapshot scan (see
//! ARCHITECTURE.md §3; paper sections in parentheses).
//!
//! - [`txn`]: mirror-transaction timestamps, HWM and LWM (§3.4);
//! - [`visibility`]: tile visibility and memory GC (§4.1, Figure 7);
//! - [`write_buffer`]: append-only Arrow blocks read as a virtual file (§4.1);
//! - [`index`]: the primary index (§3.5);
//! - [`replay`]: sharded replay of mirror transactions with group commit (§4.2);
//! - [`scan`]: vectorized filter-on-read (§5, Algorithm 1).
//!
//! Lake storage is behind small capability traits ([`storage::DataFiles`],
//! [`storage::CatalogStore`], [`storage::CheckpointStore`]; [`storage::LakeStore`]
//! is all three), so this crate builds without Parquet; `retina-storage` provides
//! the Parquet/object_store implementation.

pub mod catalog;
pub mod checkpoint;
pub mod column_ranges;
pub mod error;
pub mod index;
pub mod keep_rows;
mod prefetch;
pub mod replay;
pub mod rows;
pub mod scan;
pub mod schema;
pub mod schema_evolution;
pub mod source_apply;
pub mod redact;
pub mod source_status;
pub mod storage;
pub mod table;
pub mod txn;
pub mod types;
pub mod value;
pub mod value_text;
pub mod visibility;
pub mod write_buffer;

pub use error::{CoreError, CoreResult};
pub use replay::{Engine, EngineConfig, EngineStats, RowChange};
pub use schema::TableSchema;
pub use source_apply::{submit_source_transaction, SourceChange, Submitted};
pub use source_status::{PartitionLag, SourceRegistry, SourceStatus};
pub use txn::{EmbeddedTransactionService, Snapshot, TransactionService};
pub use types::{FileId, RowId, RowLocation, TableId, Ts};
pub use value::{CompactString, Row, Value};
