//! Data files of a local lake written around the page cache (`O_DIRECT`).
//!
//! Why: a buffered write copies every byte into page-cache pages the kernel has to
//! find first. On a VM whose host takes free guest memory back (balloon, free page
//! reporting), each of those pages is faulted in from the host: measured on this
//! project's 2-core VM, `dd` of 300 MB took 0.82 s of system CPU buffered and 0.02 s
//! with `O_DIRECT`, and the storage thread's `copy_folio_from_iter_atomic` was 13% of
//! all CPU samples of a `retina ingest` of Debezium JSON. A direct write hands the
//! device our own buffer (already mapped, reused for every file) instead.
//!
//! What it costs: the written file is not in the page cache, so the first read of it
//! goes to the device. Flushed files are read again only by queries and storage GC,
//! and a file read once is cached from then on.
//!
//! The file appears atomically, as with the object store's own put: it is written
//! under a staging name (`NAME#N`, the name object_store's local store gives its
//! staged uploads and leaves out of listings) and renamed into place. Where the file
//! system refuses `O_DIRECT` (tmpfs), or a write is refused for its alignment, the
//! writer says so and the caller writes through the object store as before.
//!
//! No crate does this: the `O_DIRECT` flag is one `libc` constant, and its alignment
//! needs only a buffer whose start is a multiple of [`ALIGNMENT`], found inside an
//! ordinary `Vec` (no `unsafe`).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;

/// Alignment of buffer addresses, file offsets and lengths: the largest logical
/// block size in use (4 KiB), so it also satisfies 512-byte devices.
const ALIGNMENT: usize = 4096;

/// Bytes written per call: a multiple of [`ALIGNMENT`], small enough that the copy
/// into the aligned buffer stays in cache.
const CHUNK: usize = 1 << 20;

/// Writes files under one local directory with `O_DIRECT`, as long as its file
/// system takes them.
pub(crate) struct DirectWriter {
    /// `false` once the file system refused a direct write: every later file goes
    /// the buffered way without trying again.
    supported: AtomicBool,
    /// The aligned staging buffer, allocated once and reused for every file.
    staging: Mutex<Vec<u8>>,
}

/// What became of one [`DirectWriter::write`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// The file is in place.
    Direct,
    /// The file system does not take direct writes; nothing was left behind.
    Unsupported,
}

impl DirectWriter {
    pub fn new() -> Self {
        Self { supported: AtomicBool::new(true), staging: Mutex::new(Vec::new()) }
    }

    /// Writes `bytes` as the file `path` (replacing it atomically), creating its
    /// folder when missing.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<Written> {
        if !self.supported.load(Relaxed) {
            return Ok(Written::Unsupported);
        }
        let (file, staging_path) = match create_staging(path) {
            Ok(created) => created,
            Err(error) if refused(&error) => return Ok(self.unsupported()),
            Err(error) => return Err(error),
        };
        let written = self.write_all(file, bytes);
        match written {
            Ok(()) => match std::fs::rename(&staging_path, path) {
                Ok(()) => Ok(Written::Direct),
                Err(error) => {
                    let _ = std::fs::remove_file(&staging_path);
                    Err(error)
                }
            },
            Err(error) => {
                let _ = std::fs::remove_file(&staging_path);
                if refused(&error) {
                    Ok(self.unsupported())
                } else {
                    Err(error)
                }
            }
        }
    }

    fn unsupported(&self) -> Written {
        self.supported.store(false, Relaxed);
        Written::Unsupported
    }

    /// Writes `bytes` in aligned chunks (the last one padded with zeros), then cuts
    /// the file to its length.
    fn write_all(&self, mut file: File, bytes: &[u8]) -> std::io::Result<()> {
        let mut staging = self.staging.lock();
        if staging.len() < CHUNK + ALIGNMENT {
            staging.resize(CHUNK + ALIGNMENT, 0);
        }
        let start = staging.as_ptr().align_offset(ALIGNMENT);
        let aligned = &mut staging[start..start + CHUNK];
        for chunk in bytes.chunks(CHUNK) {
            aligned[..chunk.len()].copy_from_slice(chunk);
            let padded = chunk.len().next_multiple_of(ALIGNMENT);
            aligned[chunk.len()..padded].fill(0);
            file.write_all(&aligned[..padded])?;
        }
        file.set_len(bytes.len() as u64)
    }
}

/// Whether `error` is a file system turning `O_DIRECT` down (not a real failure).
fn refused(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(libc::EINVAL)
}

/// A new staging file beside `path` (`path#1`, `path#2`, … whichever is free), open
/// for direct writes; the folder is created when missing.
fn create_staging(path: &Path) -> std::io::Result<(File, PathBuf)> {
    let mut attempt = 1u64;
    loop {
        let mut staging = path.as_os_str().to_owned();
        staging.push(format!("#{attempt}"));
        let staging = PathBuf::from(staging);
        match OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_DIRECT).open(&staging) {
            Ok(file) => return Ok((file, staging)),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => attempt += 1,
            Err(error) if error.kind() == ErrorKind::NotFound => match path.parent() {
                Some(folder) if !folder.as_os_str().is_empty() && !folder.exists() => std::fs::create_dir_all(folder)?,
                _ => return Err(error),
            },
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the file system of `dir` turns `O_DIRECT` down, asked directly.
    fn refuses_direct(dir: &Path) -> bool {
        let probe = dir.join("probe");
        let opened = OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_DIRECT).open(&probe);
        let _ = std::fs::remove_file(&probe);
        matches!(opened, Err(ref error) if refused(error))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Sizes around the alignment and chunk boundaries come back byte for byte, in
    /// a folder that did not exist, replacing the older file, with no staging file
    /// left behind. Where the file system refuses direct writes, the writer must
    /// say so and leave nothing behind.
    #[test]
    fn files_read_back_exactly_and_replace_what_was_there() {
        let dir = tempfile::tempdir().expect("temp dir");
        let refuses = refuses_direct(dir.path());
        let writer = DirectWriter::new();
        let path = dir.path().join("tables/t/1.parquet");
        for size in [0, 1, 4095, 4096, 4097, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12_345] {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            let outcome = writer.write(&path, &bytes).expect("write");
            if refuses {
                assert_eq!(outcome, Written::Unsupported);
                continue;
            }
            assert_eq!(outcome, Written::Direct);
            assert_eq!(std::fs::read(&path).expect("read"), bytes, "size {size}");
        }
        let expected: Vec<String> = if refuses { Vec::new() } else { vec!["1.parquet".into()] };
        let folder = dir.path().join("tables/t");
        assert_eq!(if folder.exists() { names(&folder) } else { Vec::new() }, expected);
    }

    /// The same against memory-backed /dev/shm: older kernels' tmpfs refuses
    /// `O_DIRECT` (then the writer reports it, stops asking, and leaves nothing
    /// behind), newer ones take it.
    #[test]
    fn a_memory_file_system_is_written_or_reported() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("/dev/shm is needed for this test");
        let refuses = refuses_direct(dir.path());
        let writer = DirectWriter::new();
        let path = dir.path().join("f.parquet");
        for _ in 0..2 {
            let outcome = writer.write(&path, b"abc").expect("write");
            if refuses {
                assert_eq!(outcome, Written::Unsupported);
                assert!(names(dir.path()).is_empty(), "no staging file left");
                assert!(!writer.supported.load(Relaxed), "not asked again");
            } else {
                assert_eq!(outcome, Written::Direct);
                assert_eq!(std::fs::read(&path).expect("read"), b"abc");
            }
        }
    }
}
