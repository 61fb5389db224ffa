//! The exclusive lock that keeps two writers off one data directory.
//!
//! The lock is the operating system's advisory lock on `<dir>/herald.lock`, taken without
//! waiting. The kernel drops it when the process exits, a `kill -9` included, so a crashed
//! server never leaves a stale lock behind. The file's text names the holder (its pid, and
//! once the server listens, its address) for the error the next opener gets; the text is
//! only a description, the lock is what excludes.
//!
//! On Unix the lock is a POSIX record lock (`fcntl(F_SETLK)`) on the whole file, not a
//! `flock`. A `flock` belongs to the open file, which every child process inherits between
//! its `fork` and its `exec`: a process that spawns programs (a test harness, an application
//! embedding the store) would, for that moment, have a child holding the lock, and a store
//! it reopened in that instant was refused as "in use by" itself. A record lock belongs to
//! the process and is not inherited. It has two other properties, both handled here:
//! - it does not exclude within its own process, so the process keeps a table of the lock
//!   files it holds (by device and inode), which is checked first;
//! - closing *any* descriptor of the file releases it, so a held lock file is never opened a
//!   second time (the holder's description for an in-process refusal comes from the table),
//!   and the holder's descriptor is closed while the table is locked, before the entry goes.
//!
//! Elsewhere the lock is `File::try_lock` (`LockFileEx` on Windows).

use std::fs::{File, OpenOptions};
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
    // `Some` until dropped: `Drop` closes it while the table of held locks is locked.
    file: Option<File>,
    path: PathBuf,
    #[cfg(unix)]
    id: held::FileId,
}

impl DataDirLock {
    /// Takes the lock of `dir` (which must exist) or fails at once with
    /// [`StorageError::Locked`] naming the directory and the holder's description. A second
    /// lock of the same directory in the same process is refused too.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, StorageError> {
        let path = dir.join(LOCK_FILE);
        let io = |what: &str, e: std::io::Error| {
            StorageError::Backend(format!("{what} {}: {e}", path.display()))
        };
        let locked = |owner: &str| {
            let owner = owner.lines().next().unwrap_or("").trim();
            StorageError::Locked {
                dir: dir.display().to_string(),
                owner: if owner.is_empty() {
                    "another process".to_string()
                } else {
                    owner.to_string()
                },
            }
        };
        #[cfg(unix)]
        let mut table = held::table();
        #[cfg(unix)]
        if let Some(owner) = std::fs::metadata(&path)
            .ok()
            .and_then(|m| table.get(&held::FileId::of(&m)).cloned())
        {
            return Err(locked(&owner));
        }
        let file = crate::files::private(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .open(&path)
        .map_err(|e| io("cannot open the lock file", e))?;
        #[cfg(unix)]
        let id = {
            let id = held::FileId::of(&file.metadata().map_err(|e| io("cannot stat", e))?);
            if let Some(owner) = table.get(&id).cloned() {
                // The file was swapped for a held one since the check above. Closing this
                // descriptor would release the holder's lock, so it stays open.
                std::mem::forget(file);
                return Err(locked(&owner));
            }
            id
        };
        match try_lock(&file) {
            Ok(true) => {}
            Ok(false) => {
                let mut owner = String::new();
                let _ = (&file).take(MAX_OWNER_TEXT).read_to_string(&mut owner);
                return Err(locked(&owner));
            }
            Err(e) => return Err(io("cannot lock", e)),
        }
        let description = format!("herald pid {}", std::process::id());
        #[cfg(unix)]
        table.insert(id, description.clone());
        let lock = DataDirLock {
            file: Some(file),
            path: path.clone(),
            #[cfg(unix)]
            id,
        };
        #[cfg(unix)]
        drop(table);
        lock.describe(&description)
            .map_err(|e| io("cannot write", e))?;
        Ok(lock)
    }

    /// Replaces the holder's description (one line) that a refused opener reports.
    pub fn describe(&self, text: &str) -> std::io::Result<()> {
        let text = text.replace('\n', " ");
        #[cfg(unix)]
        if let Some(owner) = held::table().get_mut(&self.id) {
            owner.clone_from(&text);
        }
        let Some(mut f) = self.file.as_ref() else {
            return Ok(());
        };
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.flush()
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let mut table = held::table();
            // Closed first: once the entry is gone another opener in this process may take
            // the file, and a close after that would release its lock.
            drop(self.file.take());
            table.remove(&self.id);
        }
        #[cfg(not(unix))]
        drop(self.file.take());
    }
}

/// `Ok(false)` when another process holds the lock.
#[cfg(unix)]
// `fcntl` is a C call: `unsafe`, with each site's reason beside it.
#[allow(unsafe_code)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: `flock` is a plain C struct for which all-zero bytes are a valid value.
    let mut whole: libc::flock = unsafe { std::mem::zeroed() };
    whole.l_type = libc::F_WRLCK as libc::c_short;
    whole.l_whence = libc::SEEK_SET as libc::c_short;
    // l_start = 0, l_len = 0: from the start to the end of the file, however long it grows.
    // SAFETY: the descriptor is open for the duration of the call (`file` is borrowed) and
    // `whole` is a valid `flock` the call only reads.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &whole) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(unix))]
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// The lock files this process holds.
#[cfg(unix)]
mod held {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex, MutexGuard};

    /// A file's identity: device and inode.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub(super) struct FileId(u64, u64);

    impl FileId {
        pub(super) fn of(m: &std::fs::Metadata) -> Self {
            use std::os::unix::fs::MetadataExt as _;
            FileId(m.dev(), m.ino())
        }
    }

    static HELD: LazyLock<Mutex<HashMap<FileId, String>>> = LazyLock::new(Default::default);

    /// The table, locked. Poisoning is ignored: every update leaves it consistent.
    pub(super) fn table() -> MutexGuard<'static, HashMap<FileId, String>> {
        HELD.lock().unwrap_or_else(|p| p.into_inner())
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

    /// The lock is a record lock (owned by the process, so children never inherit it), and a
    /// refused second lock in the same process does not release it (closing any descriptor
    /// of a record-locked file would): the kernel's lock table shows it until the drop.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_lock_is_the_process_record_lock_and_survives_refusals() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        assert!(DataDirLock::acquire(dir.path()).is_err());
        assert!(DataDirLock::acquire(dir.path()).is_err());
        let ino = std::fs::metadata(first.path()).unwrap().ino();
        let ours = || {
            let table = std::fs::read_to_string("/proc/locks").unwrap();
            table
                .lines()
                .filter(|l| l.contains(&format!(":{ino} ")))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let held = ours();
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(held[0].contains(" POSIX "), "{}", held[0]);
        assert!(
            held[0].contains(&format!(" {} ", std::process::id())),
            "{}",
            held[0]
        );
        drop(first);
        assert!(ours().is_empty(), "released on drop");
    }

    /// The flake this lock design fixes, made deterministic: a child process is held between
    /// its `fork` and its `exec` (where it has a copy of every open descriptor, the lock
    /// file's included) while the parent drops its lock and takes it again. With a `flock`
    /// the child's copy kept the lock and the second acquire failed as `Locked`.
    #[cfg(unix)]
    #[test]
    // `pre_exec` is `unsafe`; the call site says why it is sound.
    #[allow(unsafe_code)]
    fn a_child_between_fork_and_exec_does_not_hold_the_lock() {
        use std::io::{Read as _, Write as _};
        use std::os::fd::AsRawFd as _;
        use std::os::unix::process::CommandExt as _;

        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let (mut forked_r, forked_w) = std::io::pipe().unwrap();
        let (go_r, mut go_w) = std::io::pipe().unwrap();
        let (forked_w, go_r) = (forked_w.as_raw_fd(), go_r.as_raw_fd());
        let mut cmd = std::process::Command::new("true");
        // SAFETY: the hook only calls `write` and `read`, which are async-signal-safe, on
        // descriptors that stay open until the child has exec'd (the pipes live until the
        // end of the test).
        unsafe {
            cmd.pre_exec(move || {
                let mut b = [1u8];
                libc::write(forked_w, b.as_ptr().cast(), 1);
                libc::read(go_r, b.as_mut_ptr().cast(), 1);
                Ok(())
            });
        }
        // `spawn` returns only once the child has exec'd, so it runs on its own thread.
        let spawner = std::thread::spawn(move || cmd.spawn().map(|mut c| c.wait()));
        let mut b = [0u8];
        forked_r.read_exact(&mut b).unwrap();

        // The child now holds a copy of the lock file's descriptor.
        drop(first);
        let again = DataDirLock::acquire(dir.path());
        go_w.write_all(b"x").unwrap();
        let status = spawner.join().unwrap().unwrap().unwrap();
        assert!(status.success());
        assert!(again.is_ok(), "{again:?}");
    }
}
