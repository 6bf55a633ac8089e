//! Retina's lake storage: data files as Parquet (with the hidden `_create_ts`
//! column and row-group statistics) and the catalog manifest, both through
//! `object_store`, so a local directory and any object-store URL work alike; and
//! every checkpoint published as Delta Lake tables over the same files ([`publish`]).

mod checkpoint_files;
mod column_encoding;
mod direct_write;
mod error;
mod hybrid_rle;
mod io;
mod lease;
mod kept_decode;
mod layout;
mod location;
mod manifest;
mod parquet_files;
mod publish;
mod ranged_reads;
mod recycled;
mod store;
mod versioned;

pub use lease::LEASE_PATH;
pub use location::{is_url, open_object_store, redacted};
pub use column_encoding::CompressionGoal;
pub use error::StorageError;
pub use publish::{PublicationReport, PublishOptions, PublishedCut, PublishedTableVersion, LATEST_PATH as PUBLISHED_LATEST_PATH};
pub use store::ParquetLakeStore;
