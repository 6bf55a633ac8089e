//! The sources' published states: the one status type every source kind fills lives
//! in core ([`retina_core::source_status`]); the query crate shows it as the
//! `retina.sources` view and in `/metrics`.

pub use retina_core::source_status::{SourceRegistry, SourceStatus};
