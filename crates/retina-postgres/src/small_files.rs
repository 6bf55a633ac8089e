//! The small files a connection names (certificates, keys, password files), read
//! with a bound: `sslrootcert=/dev/zero` must be an error naming the option, not a
//! process that reads until memory runs out.

use std::io::Read;
use std::path::Path;

/// Certificates and keys: a full CA bundle is a few hundred KB.
pub(crate) const CERTIFICATE_FILE_LIMIT: u64 = 4 << 20;
/// Password files.
pub(crate) const SECRET_FILE_LIMIT: u64 = 64 << 10;

/// The bytes of `path`, a regular file of at most `limit` bytes; the error says what
/// is wrong with it (the caller names the option).
pub(crate) fn read_small_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let metadata = std::fs::metadata(path).map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".into());
    }
    if metadata.len() > limit {
        return Err(format!("{} bytes, more than such a file holds ({limit} at most)", metadata.len()));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    std::fs::File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("it grew past {limit} bytes while read"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused_without_reading_them() {
        let folder = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_small_file(folder.path(), 10), Err("not a regular file".into()));
        assert_eq!(read_small_file(Path::new("/dev/zero"), 10), Err("not a regular file".into()));
        let large = folder.path().join("large");
        std::fs::write(&large, vec![b'x'; 11]).expect("write");
        assert!(read_small_file(&large, 10).expect_err("too large").contains("11 bytes"));
        assert_eq!(read_small_file(&large, 11).expect("fits").len(), 11);
        assert!(read_small_file(&folder.path().join("missing"), 10).is_err());
    }
}
