//! Retina's CDC sink (ARCHITECTURE.md §3.5, paper §2.2, §3.3, §5.3): decode Debezium JSON,
//! rebuild source transactions, and replay each as one mirror transaction.
//!
//! - [`debezium`]: the decoder (and an encoder for generated streams);
//! - [`sink`]: table resolution, transaction reconstruction, exactly-once positions,
//!   dead letters, submission to the engine;
//! - [`source`]: `file:PATH`, `-`, `nats://HOST:PORT/STREAM`, `generator:chbench`
//!   ([`parse_source_uri`] is what `retina serve --source` parses too);
//! - [`pipeline`]: the decode stage, a thread that decodes while the sink applies;
//! - [`ingest`]: the one ingest driver (source -> decode stage -> sink -> durable
//!   acknowledgements), behind `retina ingest`, `serve`, `demo` and the benchmarks
//!   (in `retina-bench`).

pub mod debezium;
pub mod error;
pub mod ingest;
pub mod pipeline;
pub mod position;
pub mod sink;
pub mod source;

pub use error::{CdcError, CdcResult, DecodeError};
pub use position::{Position, PositionKind, SinkPosition, SourceOrder};
pub use source::uri::{parse_source_uri, GeneratorSpec, SourceSpec};
pub use sink::{Grouping, Sink, SinkOptions, SinkStats};
