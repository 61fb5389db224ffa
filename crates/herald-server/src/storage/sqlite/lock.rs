//! The exclusive lock that keeps two processes from writing one data directory.
//!
//! The lock is the operating system's advisory file lock (`flock` on Unix, `LockFileEx` on
//! Windows) on `<dir>/herald.lock`, taken without waiting. The kernel drops it when the file
//! is closed, which happens on every kind of exit, a `kill -9` included, so a crashed server
//! never leaves a stale lock behind. The file's text names the holder (its pid, and once the
//! server listens, its address) for the error the next opener gets; the text is only a
//! description, the lock is what excludes.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::storage::StorageError;

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "herald.lock";

/// The most bytes of the holder's description read for an error message.
const MAX_OWNER_TEXT: u64 = 512;

/// An exclusive lock on a data directory, held until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the lock of `dir` (which must exist) or fails at once with
    /// [`StorageError::Locked`] naming the directory and the holder's description.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, StorageError> {
        let path = dir.join(LOCK_FILE);
        let io = |what: &str, e: std::io::Error| {
            StorageError::Backend(format!("{what} {}: {e}", path.display()))
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("cannot open the lock file", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut owner = String::new();
                let _ = (&file).take(MAX_OWNER_TEXT).read_to_string(&mut owner);
                let owner = owner.lines().next().unwrap_or("").trim();
                return Err(StorageError::Locked {
                    dir: dir.display().to_string(),
                    owner: if owner.is_empty() {
                        "another process".to_string()
                    } else {
                        owner.to_string()
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("cannot lock", e)),
        }
        let lock = DataDirLock {
            file,
            path: path.clone(),
        };
        lock.describe(&format!("herald pid {}", std::process::id()))
            .map_err(|e| io("cannot write", e))?;
        Ok(lock)
    }

    /// Replaces the holder's description (one line) that a refused opener reports.
    pub fn describe(&self, text: &str) -> std::io::Result<()> {
        let mut f = &self.file;
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        f.write_all(text.replace('\n', " ").as_bytes())?;
        f.write_all(b"\n")?;
        f.flush()
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holder_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        first
            .describe("herald pid 1, serving http://127.0.0.1:1")
            .unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        assert_eq!(
            err,
            StorageError::Locked {
                dir: dir.path().display().to_string(),
                owner: "herald pid 1, serving http://127.0.0.1:1".into(),
            }
        );
        assert!(err.to_string().contains(&dir.path().display().to_string()));
        drop(first);
        let again = DataDirLock::acquire(dir.path()).unwrap();
        assert_eq!(again.path(), dir.path().join(LOCK_FILE));
    }
}
