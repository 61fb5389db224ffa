//! Running out of space, and the reserve that keeps the way out open.
//!
//! A store on a full disk must still take the writes that make room: deletes, and the TTL
//! expiry. In this store those writes need space too (a deletion appends a row to the version
//! log, and every commit appends pages to the WAL), so without a reserve a full disk refuses
//! them like any other write. So the store keeps one:
//!
//! - **the reserve file** (`herald.reserve`, [`SqliteOptions::reserve_bytes`], allocated with
//!   real blocks) held on the filesystem while there is space;
//! - with a size quota ([`SqliteOptions::max_db_bytes`], like etcd's `--quota-backend-bytes`),
//!   also the last `reserve_bytes` of the quota (SQLite's `max_page_count`).
//!
//! When a commit fails with `SQLITE_FULL` (the disk or the quota is full), the batch is rolled
//! back, the store becomes **full**: it releases the reserve, logs once what to do, reports
//! itself not ready ([`SqliteBackend`](super::SqliteBackend)'s `health`), and retries the
//! batch with its creates and updates refused ([`StorageError::NoSpace`]) and its deletes and
//! expiries applied. While full, creates and updates are refused at once (etcd does the same
//! under its `NOSPACE` alarm: only reads and deletes), and after every commit (the TTL sweep
//! commits at least once a sweep interval) the writer compacts one chunk of the replaced
//! history (so deletes and expiries give their pages back to SQLite's free list; lists at
//! revisions before the compaction get `410 Expired`), checkpoints the WAL so its file is
//! reused from the start, and measures the room: the free pages of the database plus what
//! the filesystem (and the quota) still has. Once that holds the reserve and a margin (a
//! quarter of it, at least 256 KiB), the reserve is taken back and creates are accepted
//! again. Nothing acknowledged is lost on the way: a
//! batch either commits whole or not at all.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;

use crate::storage::{Result, SqliteOptions, StorageError};

/// The reserve file's name inside the data directory.
pub const RESERVE_FILE: &str = "herald.reserve";

/// The least room (bytes) the store wants back before it leaves the full state when its
/// reserve is smaller (or off).
const MIN_ROOM: u64 = 256 << 10;

/// Replaced versions one compaction chunk removes while full: bounds the WAL a chunk writes.
pub(super) const RELIEF_CHUNK: u64 = 1_000;

/// Whether the store has room, shared between the writer and the backend's health check.
#[derive(Debug, Default)]
pub(super) struct SpaceState {
    full: AtomicBool,
    message: Mutex<String>,
}

impl SpaceState {
    /// `Some(why)` while the store is full.
    pub fn full(&self) -> Option<String> {
        if !self.full.load(Ordering::Acquire) {
            return None;
        }
        Some(
            self.message
                .lock()
                .map(|m| m.clone())
                .unwrap_or_else(|e| e.into_inner().clone()),
        )
    }
}

/// What the writer knows of its room: the reserve it holds and where it can get more.
pub(super) struct Space {
    dir: PathBuf,
    reserve_path: PathBuf,
    reserve_bytes: u64,
    /// The quota in pages, if any.
    quota_pages: Option<u64>,
    page_size: u64,
    /// Whether the reserve file is on disk now.
    holding_file: bool,
    pub state: std::sync::Arc<SpaceState>,
}

impl Space {
    /// Takes the reserve (the file, and the quota's last pages) for the store in `dir`.
    /// A reserve that cannot be allocated is a warning: the store starts without it.
    pub fn open(dir: &Path, conn: &Connection, opts: &SqliteOptions) -> Result<Space> {
        let page_size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let mut space = Space {
            dir: dir.to_path_buf(),
            reserve_path: dir.join(RESERVE_FILE),
            reserve_bytes: opts.reserve_bytes,
            quota_pages: opts.max_db_bytes.map(|b| (b / page_size.max(1)).max(1)),
            page_size,
            holding_file: false,
            state: Default::default(),
        };
        if let Err(e) = space.arm(conn) {
            tracing::warn!(error = %e, "starting without a space reserve: a full disk will refuse deletes too");
        }
        Ok(space)
    }

    /// The error of a create or update refused while full.
    pub fn refusal(&self) -> StorageError {
        StorageError::NoSpace(self.message())
    }

    fn message(&self) -> String {
        let raise = if self.quota_pages.is_some() {
            " or raise the store's size quota"
        } else {
            ""
        };
        format!(
            "the store in {} is out of space: creates and updates are refused until there is \
             room, deletes and expiry still work; delete events (or let them expire), free \
             disk space{raise}",
            self.dir.display()
        )
    }

    /// Whether the store is full.
    pub fn is_full(&self) -> bool {
        self.state.full.load(Ordering::Acquire)
    }

    /// Enters the full state after a commit failed with `SQLITE_FULL`: releases the reserve
    /// and says so, once.
    pub fn enter_full(&mut self, conn: &Connection, cause: &str) {
        if self.is_full() {
            return;
        }
        if self.holding_file {
            match std::fs::remove_file(&self.reserve_path) {
                Ok(()) => self.holding_file = false,
                Err(e) => tracing::warn!(
                    path = %self.reserve_path.display(), error = %e,
                    "cannot release the space reserve"
                ),
            }
        }
        if let Some(q) = self.quota_pages
            && let Err(e) = set_max_pages(conn, q)
        {
            tracing::warn!(error = %e, "cannot release the quota's reserve");
        }
        let message = self.message();
        tracing::error!(
            dir = %self.dir.display(), %cause,
            "{message}; herald released its {} byte reserve for them and takes writes again by \
             itself once there is room",
            self.reserve_bytes
        );
        if let Ok(mut m) = self.state.message.lock() {
            *m = message;
        }
        self.state.full.store(true, Ordering::Release);
    }

    /// Leaves the full state if there is room again: room for the reserve and a margin of
    /// writes beyond it (a quarter of the reserve, at least [`MIN_ROOM`]). The reserve is
    /// then taken back; if the disk space went to others meanwhile (the room is in the
    /// database's free pages), the store goes on without it until its next start, and says
    /// so. Returns whether it left.
    pub fn try_leave(&mut self, conn: &Connection) -> bool {
        if !self.is_full() {
            return true;
        }
        let room = match self.room(conn) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot measure the store's free space");
                return false;
            }
        };
        let margin = (self.reserve_bytes / 4).max(MIN_ROOM);
        if room < self.reserve_bytes.saturating_add(margin) {
            return false;
        }
        if let Err(e) = self.arm(conn) {
            tracing::warn!(
                error = %e,
                "the database has room again but the disk has none for the reserve: until \
                 herald restarts with room for it, a full disk will refuse deletes too"
            );
        }
        self.state.full.store(false, Ordering::Release);
        tracing::info!(
            dir = %self.dir.display(), room,
            "the store has room again: creates and updates are accepted"
        );
        true
    }

    /// Allocates the reserve file (if off disk) and lowers the quota by the reserve.
    fn arm(&mut self, conn: &Connection) -> Result<()> {
        if self.reserve_bytes > 0 && !self.holding_file {
            allocate(&self.reserve_path, self.reserve_bytes).map_err(|e| {
                // A partial reserve would only hold space the store may need.
                let _ = std::fs::remove_file(&self.reserve_path);
                StorageError::Backend(format!(
                    "cannot allocate the space reserve {}: {e}",
                    self.reserve_path.display()
                ))
            })?;
            self.holding_file = true;
        }
        if let Some(q) = self.quota_pages {
            let reserve_pages = self.reserve_bytes / self.page_size.max(1);
            set_max_pages(conn, q.saturating_sub(reserve_pages).max(1))?;
        }
        Ok(())
    }

    /// Bytes the store can still write: the database's free pages, plus what the filesystem
    /// has left (within the quota, if any).
    fn room(&self, conn: &Connection) -> Result<u64> {
        let free_pages: u64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        let mut room = filesystem_room(&self.dir).unwrap_or(u64::MAX);
        if let Some(q) = self.quota_pages {
            let pages: u64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            room = room.min(q.saturating_sub(pages).saturating_mul(self.page_size));
        }
        Ok(room.saturating_add(free_pages.saturating_mul(self.page_size)))
    }
}

/// Sets SQLite's `max_page_count` (never below the current size; SQLite keeps it there).
fn set_max_pages(conn: &Connection, pages: u64) -> rusqlite::Result<()> {
    conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
}

/// Writes `bytes` of zeros to `path` and syncs it: real blocks, not a sparse file, so that
/// removing it really frees them.
fn allocate(path: &Path, bytes: u64) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == bytes) {
        return Ok(());
    }
    let mut f: File =
        crate::files::private(OpenOptions::new().write(true).create(true).truncate(true))
            .open(path)?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.sync_all()
}

/// Bytes available to unprivileged users on the filesystem of `dir`.
#[cfg(unix)]
// `statvfs` is a C call: `unsafe`, with the reason beside it.
#[allow(unsafe_code)]
fn filesystem_room(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is a plain C struct for which all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string alive for the call, and `st` a valid
    // `statvfs` the call writes.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    #[allow(clippy::useless_conversion)] // the field types differ between platforms
    let (avail, frsize) = (u64::from(st.f_bavail), u64::from(st.f_frsize));
    Some(avail.saturating_mul(frsize))
}

#[cfg(not(unix))]
fn filesystem_room(_dir: &Path) -> Option<u64> {
    None
}
