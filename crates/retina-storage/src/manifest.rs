//! The catalog manifest as one JSON document.
//!
//! Why a manifest and not SQLite: the catalog is small (tables and file lists), it
//! must live next to the data on any object store, and `object_store` puts are atomic
//! (local files are written to a temporary name and renamed), so replacing one
//! document gives atomic catalog changes with no extra C dependency and no second
//! storage system to back up.

use retina_core::catalog::{CatalogManifest, CATALOG_FORMAT_VERSION};

use crate::store::StorageError;

/// Object path of the manifest, relative to the store's prefix.
pub(crate) const MANIFEST_PATH: &str = "catalog/manifest.json";

pub(crate) fn encode(manifest: &CatalogManifest) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec_pretty(manifest).map_err(|e| StorageError::Manifest { reason: e.to_string() })
}

pub(crate) fn decode(bytes: &[u8]) -> Result<CatalogManifest, StorageError> {
    // Check the version before the shape, so an old or new format gets a clear error.
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| StorageError::Manifest { reason: format!("not JSON: {e}") })?;
    let version = value.get("format_version").and_then(serde_json::Value::as_u64);
    if version != Some(CATALOG_FORMAT_VERSION as u64) {
        return Err(StorageError::Manifest {
            reason: format!(
                "format version {} is not supported by this build (expects {CATALOG_FORMAT_VERSION})",
                version.map_or("missing".to_string(), |v| v.to_string())
            ),
        });
    }
    serde_json::from_value(value).map_err(|e| StorageError::Manifest { reason: e.to_string() })
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
        assert!(decode(b"garbage").expect_err("json").to_string().contains("not JSON"));
    }
}
