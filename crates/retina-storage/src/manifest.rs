//! The catalog manifest as one JSON document.
//!
//! Why a manifest and not SQLite: the catalog is small (tables and file lists), it
//! must live next to the data on any object store, and creating a new numbered
//! version of one document is atomic and exclusive on every object store
//! ([`crate::versioned`]), which gives atomic catalog changes with no extra C
//! dependency and no second storage system to back up.

use retina_core::catalog::{CatalogManifest, CATALOG_FORMAT_VERSION, OLDEST_CATALOG_FORMAT_VERSION};

use crate::error::StorageError;
use crate::versioned::Document;

/// The manifest's versions: `catalog/manifest-<version>.json` (before versioning,
/// one replaced `catalog/manifest.json`).
pub(crate) const DOCUMENT: Document =
    Document { what: "catalog manifest", folder: "catalog", stem: "manifest", legacy: "catalog/manifest.json" };

pub(crate) fn encode(manifest: &CatalogManifest) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(manifest).map_err(|e| StorageError::Manifest { reason: e.to_string() })
}

pub(crate) fn decode(bytes: &[u8]) -> Result<CatalogManifest, StorageError> {
    decode_versioned(bytes, OLDEST_CATALOG_FORMAT_VERSION..=CATALOG_FORMAT_VERSION, "catalog")
        .map_err(|reason| StorageError::Manifest { reason })
}

/// Decodes a JSON document after checking its `format_version` is one of `readable`,
/// so that an older or newer format gets a clear error instead of a confusing shape
/// mismatch.
pub(crate) fn decode_versioned<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    readable: std::ops::RangeInclusive<u32>,
    what: &str,
) -> Result<T, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("{what} is not JSON: {e}"))?;
    let version = value.get("format_version").and_then(serde_json::Value::as_u64);
    if !version.is_some_and(|v| readable.contains(&(v as u32)) && v <= u32::MAX as u64) {
        let reads = if readable.start() == readable.end() {
            format!("version {}", readable.start())
        } else {
            format!("versions {} to {}", readable.start(), readable.end())
        };
        return Err(format!(
            "{what} has format version {} which this build cannot read (it reads {reads})",
            version.map_or("missing".to_string(), |v| v.to_string())
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let manifest = CatalogManifest::default();
        assert_eq!(decode(&encode(&manifest).expect("encode")).expect("decode"), manifest);
        let future = br#"{"format_version": 99, "tables": [], "next_file_id": 1}"#;
        assert!(decode(future).expect_err("version").to_string().contains("99"));
        let older = br#"{"format_version": 1, "tables": [], "next_file_id": 1}"#;
        assert_eq!(decode(older).expect("version 1 is migrated").format_version, 1);
        assert!(decode(b"garbage").expect_err("json").to_string().contains("not JSON"));
    }
}
