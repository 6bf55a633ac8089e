//! Documents that advance by numbered versions, each created exactly once: the
//! catalog manifest and the checkpoint pointer.
//!
//! Version `n` of a document is the object `<folder>/<stem>-<n, 20 digits>.json`,
//! written with `PutMode::Create`: on S3 a conditional PUT with `If-None-Match: *`
//! (object_store's default `S3ConditionalPut::ETagMatch`), on GCS and Azure their
//! create-only preconditions, on a local directory a hard link that fails when the
//! name exists. So of two writers that both try to commit version `n`, exactly one
//! succeeds; the other gets [`StorageError::CommitRace`] and stops, instead of
//! overwriting what the first committed. A version already holding exactly the
//! bytes being committed is this writer's own retried commit, not a race
//! ([`ObjectIo::create`]). Creating a new name (rather than a
//! compare-and-swap on one name with `If-Match`) works on every backend
//! object_store has, including local directories, which do not implement
//! `PutMode::Update`.
//!
//! The latest version is the highest number a listing of the folder shows (one
//! level, so checkpoint segments in subfolders are not listed). A writer keeps the
//! last [`KEPT_VERSIONS`] and deletes older ones, so a reader that listed just
//! before a commit still finds the version it picked, or lists again.

use crate::error::StorageError;
use crate::io::ObjectIo;

/// Versions a writer keeps: the latest and the ones just before it.
const KEPT_VERSIONS: u64 = 3;

/// How often a reader lists again when the version it picked was deleted (several
/// commits happened between its listing and its read).
const READ_ATTEMPTS: usize = 8;

/// What loading a document found: the latest version and its bytes (version 0 is
/// the legacy object; `None` when the document was never written), and every
/// version the listing showed.
pub(crate) struct Latest {
    pub found: Option<(u64, bytes::Bytes)>,
    pub versions: Vec<u64>,
}

/// One versioned document of the lake.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Document {
    /// For messages: "catalog manifest".
    pub what: &'static str,
    pub folder: &'static str,
    pub stem: &'static str,
    /// Where the document lived as one replaced object before it was versioned;
    /// read when no version exists, deleted after the first versioned commit.
    pub legacy: &'static str,
}

impl Document {
    pub fn path(&self, version: u64) -> String {
        format!("{}/{}-{version:020}.json", self.folder, self.stem)
    }

    fn version_of(&self, relative: &str) -> Option<u64> {
        let name = relative.strip_prefix(self.folder)?.strip_prefix('/')?;
        let digits = name.strip_prefix(self.stem)?.strip_prefix('-')?.strip_suffix(".json")?;
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
    }

    /// The versions present, ascending.
    pub fn versions(&self, io: &ObjectIo) -> Result<Vec<u64>, StorageError> {
        let mut versions: Vec<u64> = io.list_folder(self.folder)?.iter().filter_map(|path| self.version_of(path)).collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// The latest version, read.
    pub fn load_latest(&self, io: &ObjectIo) -> Result<Latest, StorageError> {
        for _ in 0..READ_ATTEMPTS {
            let versions = self.versions(io)?;
            let Some(&latest) = versions.last() else {
                return Ok(Latest { found: io.get(self.legacy)?.map(|found| (0, found.bytes)), versions });
            };
            if let Some(found) = io.get(&self.path(latest))? {
                return Ok(Latest { found: Some((latest, found.bytes)), versions });
            }
        }
        Err(StorageError::Unsettled { location: io.location().to_string(), what: self.what, attempts: READ_ATTEMPTS })
    }

    /// Creates version `version` (the one after the latest this writer knows).
    /// Then removes versions older than the kept ones, and the legacy object.
    pub fn commit(&self, io: &ObjectIo, version: u64, bytes: Vec<u8>) -> Result<(), StorageError> {
        if !io.create(&self.path(version), bytes)? {
            return Err(StorageError::CommitRace { location: io.location().to_string(), what: self.what, version });
        }
        if version == 1 {
            io.delete(self.legacy)?;
        }
        if version > KEPT_VERSIONS {
            io.delete(&self.path(version - KEPT_VERSIONS))?;
        }
        Ok(())
    }

    /// Deletes those of `versions` older than the kept ones below `latest` (left by
    /// a writer that crashed between a commit and its clean-up).
    pub fn sweep(&self, io: &ObjectIo, versions: &[u64], latest: u64) -> Result<(), StorageError> {
        for &version in versions {
            if version + KEPT_VERSIONS <= latest {
                io.delete(&self.path(version))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: Document = Document { what: "catalog manifest", folder: "catalog", stem: "manifest", legacy: "catalog/manifest.json" };

    fn local_io(dir: &std::path::Path) -> ObjectIo {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).expect("local store");
        ObjectIo::new(std::sync::Arc::new(store), object_store::path::Path::from(""), "test lake".into(), "file:///".into()).expect("io")
    }

    /// A commit whose first attempt landed (its reply lost) succeeds when retried;
    /// a version holding other bytes is another writer's, and a race.
    #[test]
    fn a_retried_commit_of_the_same_bytes_succeeds_and_other_bytes_race() {
        let dir = tempfile::tempdir().expect("tempdir");
        let io = local_io(dir.path());
        DOC.commit(&io, 1, b"first".to_vec()).expect("commit 1");
        DOC.commit(&io, 1, b"first".to_vec()).expect("the same commit again: its own");
        let error = DOC.commit(&io, 1, b"other".to_vec()).expect_err("another writer's version 1");
        assert!(matches!(error, StorageError::CommitRace { version: 1, .. }), "{error}");
        assert_eq!(DOC.load_latest(&io).expect("load").found.map(|(v, bytes)| (v, bytes.to_vec())), Some((1, b"first".to_vec())));
    }

    #[test]
    fn version_names_round_trip_and_others_are_ignored() {
        assert_eq!(DOC.path(42), "catalog/manifest-00000000000000000042.json");
        assert_eq!(DOC.version_of(&DOC.path(42)), Some(42));
        assert_eq!(DOC.version_of("catalog/manifest.json"), None);
        assert_eq!(DOC.version_of("catalog/manifest-42.json"), None);
        assert_eq!(DOC.version_of("catalog/other-00000000000000000042.json"), None);
    }
}
