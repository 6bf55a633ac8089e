//! Where checkpoints live and how their manifest is encoded.
//!
//! `checkpoints/latest.json` is the checkpoint manifest, replaced atomically (an
//! object-store put); the rows a checkpoint at ts C took from write buffers live in
//! `checkpoints/rows-C/`. A crash before the manifest put leaves the previous
//! checkpoint in force, with at worst an unreferenced `rows-C` folder that the next
//! checkpoint removes.

use retina_core::checkpoint::{CheckpointManifest, CHECKPOINT_FORMAT_VERSION};
use retina_core::Ts;

use crate::store::StorageError;

pub(crate) const LATEST_PATH: &str = "checkpoints/latest.json";

/// Folder of the buffered rows of the checkpoint at `ts`.
pub(crate) fn rows_folder(ts: Ts) -> String {
    format!("checkpoints/rows-{:016}", ts.0)
}

pub(crate) fn encode(checkpoint: &CheckpointManifest) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(checkpoint).map_err(|e| StorageError::Checkpoint { reason: e.to_string() })
}

pub(crate) fn decode(bytes: &[u8]) -> Result<CheckpointManifest, StorageError> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| StorageError::Checkpoint { reason: format!("{LATEST_PATH} is not JSON: {e}") })?;
    let version = value.get("format_version").and_then(serde_json::Value::as_u64);
    if version != Some(CHECKPOINT_FORMAT_VERSION as u64) {
        return Err(StorageError::Checkpoint {
            reason: format!(
                "{LATEST_PATH} has format version {} which this build cannot read (expects {CHECKPOINT_FORMAT_VERSION})",
                version.map_or("missing".to_string(), |v| v.to_string())
            ),
        });
    }
    serde_json::from_value(value).map_err(|e| StorageError::Checkpoint { reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_versions() {
        let error = decode(br#"{"format_version": 7}"#).expect_err("version 7");
        assert!(error.to_string().contains("format version 7"), "{error}");
        assert!(rows_folder(Ts(12)).ends_with("0000000000000012"));
    }
}
