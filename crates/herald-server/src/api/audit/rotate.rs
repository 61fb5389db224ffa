//! [`RotatingFile`]: the audit log file, rotated as kube-apiserver rotates it (it uses the
//! Go package `lumberjack`), so log shippers and scripts written for kube-apiserver's audit
//! files work unchanged.
//!
//! - A line that would take the file past [`RotationOptions::max_size_mb`] megabytes
//!   (`--audit-log-maxsize`; 0 = lumberjack's default of 100 MB) first moves the file aside
//!   to `<name>-<timestamp>.<ext>` in the same directory, the timestamp being the rotation
//!   time in UTC as `2006-01-02T15-04-05.000` (`audit.log` →
//!   `audit-2026-11-29T01-13-55.123.log`), and starts a new file. An existing file that is
//!   already too big is rotated before the first line.
//! - After a rotation, rotated files beyond the newest [`RotationOptions::max_backups`]
//!   (`--audit-log-maxbackup`; 0 = keep all) and those older than
//!   [`RotationOptions::max_age_days`] days (`--audit-log-maxage`; 0 = keep forever, by the
//!   timestamp in the name) are removed. Only files whose names parse as rotated files of
//!   this log are ever touched.
//! - The log and its rotated files are owner-only (`0600`, [`crate::files`]); a missing
//!   directory is created `0700`.
//! - A single line bigger than the maximum size is refused (an error), as lumberjack does.
//!
//! ```
//! use std::sync::Arc;
//! use herald_core::clock::FakeClock;
//! use herald_server::api::audit::rotate::{RotatingFile, RotationOptions};
//! let dir = tempfile::tempdir()?;
//! let clock = Arc::new(FakeClock::new("2026-11-29T01:13:55.123Z".parse().unwrap()));
//! let mut f = RotatingFile::open(&dir.path().join("audit.log"), RotationOptions::default(), clock)?;
//! f.write_line(b"{}\n")?;
//! f.flush()?;
//! assert_eq!(std::fs::read(dir.path().join("audit.log"))?, b"{}\n");
//! assert_eq!(
//!     RotatingFile::backup_name(&dir.path().join("audit.log"), "2026-11-29T01:13:55.123Z".parse().unwrap()),
//!     dir.path().join("audit-2026-11-29T01-13-55.123.log"),
//! );
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use herald_core::clock::Clock;

use crate::files;

/// One megabyte, lumberjack's unit.
pub const MEGABYTE: u64 = 1024 * 1024;
/// The maximum size of a log file when [`RotationOptions::max_size_mb`] is 0 (lumberjack's
/// default).
pub const DEFAULT_MAX_SIZE_MB: u64 = 100;

/// When the log is rotated and which rotated files are kept (`--audit-log-maxsize`,
/// `--audit-log-maxbackup`, `--audit-log-maxage`). `Default` is kube-apiserver's: rotate at
/// 100 MB, keep every rotated file forever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RotationOptions {
    /// Megabytes (MiB) a file may reach before it is rotated; 0 = [`DEFAULT_MAX_SIZE_MB`].
    pub max_size_mb: u64,
    /// Rotated files kept (the newest); 0 = all.
    pub max_backups: usize,
    /// Days a rotated file is kept, by the time in its name; 0 = forever.
    pub max_age_days: u64,
}

impl RotationOptions {
    /// The size in bytes a file may reach.
    pub fn max_bytes(&self) -> u64 {
        let mb = if self.max_size_mb == 0 {
            DEFAULT_MAX_SIZE_MB
        } else {
            self.max_size_mb
        };
        mb.saturating_mul(MEGABYTE)
    }
}

/// An append-only, size-rotated, owner-only log file (see the [module docs](self)).
/// Writes are buffered; [`RotatingFile::flush`] pushes them to the file.
pub struct RotatingFile {
    path: PathBuf,
    options: RotationOptions,
    clock: Arc<dyn Clock>,
    file: BufWriter<File>,
    size: u64,
}

impl std::fmt::Debug for RotatingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatingFile")
            .field("path", &self.path)
            .field("options", &self.options)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S";

fn open_append(path: &Path) -> io::Result<File> {
    files::private(OpenOptions::new().append(true).create(true)).open(path)
}

impl RotatingFile {
    /// Opens (or creates, `0600`) `path` for appending, creating its directory (`0700`) if
    /// missing. `clock` dates the rotated files.
    pub fn open(
        path: &Path,
        options: RotationOptions,
        clock: Arc<dyn Clock>,
    ) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            files::create_dir(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            options,
            clock,
            file: BufWriter::new(file),
            size,
        })
    }

    /// The name `path` is rotated to at `at`: `<stem>-<UTC time as
    /// 2006-01-02T15-04-05.000><.ext>`, beside it.
    pub fn backup_name(path: &Path, at: jiff::Timestamp) -> PathBuf {
        let (stem, ext) = split_name(path);
        let stamp = format!(
            "{}.{:03}",
            at.strftime(BACKUP_TIME_FORMAT),
            at.subsec_millisecond()
        );
        path.with_file_name(format!("{stem}-{stamp}{ext}"))
    }

    /// Appends `line` (which should end in `\n`), rotating first if it would take the file
    /// past the maximum size. A line bigger than the maximum size is refused.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let len = line.len() as u64;
        let max = self.options.max_bytes();
        if len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("write length {len} exceeds maximum file size {max}"),
            ));
        }
        if self.size + len > max {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += len;
        Ok(())
    }

    /// Pushes buffered lines to the file (no fsync).
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Moves the current file aside to its [backup name](Self::backup_name), starts a new
    /// one, then removes the rotated files the options do not keep.
    pub fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let now = self.clock.now();
        std::fs::rename(&self.path, Self::backup_name(&self.path, now))?;
        self.file = BufWriter::new(open_append(&self.path)?);
        self.size = 0;
        self.remove_old(now);
        Ok(())
    }

    /// The rotated files of this log, newest first, with their times.
    pub fn backups(&self) -> io::Result<Vec<(jiff::Timestamp, PathBuf)>> {
        let (stem, ext) = split_name(&self.path);
        let prefix = format!("{stem}-");
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(stamp) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&ext))
            else {
                continue;
            };
            if let Some(t) = parse_stamp(stamp) {
                out.push((t, entry.path()));
            }
        }
        out.sort_by_key(|b| std::cmp::Reverse(b.0));
        Ok(out)
    }

    fn remove_old(&self, now: jiff::Timestamp) {
        let backups = match self.backups() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot list the rotated audit logs");
                return;
            }
        };
        let cutoff = (self.options.max_age_days > 0).then(|| {
            let secs =
                i64::try_from(self.options.max_age_days.saturating_mul(86_400)).unwrap_or(i64::MAX);
            now.checked_sub(jiff::SignedDuration::from_secs(secs))
                .unwrap_or(jiff::Timestamp::MIN)
        });
        for (i, (t, path)) in backups.iter().enumerate() {
            let too_many = self.options.max_backups > 0 && i >= self.options.max_backups;
            let too_old = cutoff.is_some_and(|c| *t < c);
            if (too_many || too_old)
                && let Err(e) = std::fs::remove_file(path)
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a rotated audit log");
            }
        }
    }
}

/// `audit.log` → (`audit`, `.log`); a name without an extension has an empty one.
fn split_name(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.').filter(|&i| i > 0) {
        Some(i) => (name[..i].to_string(), name[i..].to_string()),
        None => (name, String::new()),
    }
}

/// `2026-11-29T01-13-55.123` → the time (UTC).
fn parse_stamp(stamp: &str) -> Option<jiff::Timestamp> {
    let b = stamp.as_bytes();
    if b.len() != 23 || b[13] != b'-' || b[16] != b'-' || b[19] != b'.' {
        return None;
    }
    let rfc3339 = format!("{}:{}:{}Z", &stamp[..13], &stamp[14..16], &stamp[17..]);
    rfc3339.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::clock::FakeClock;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn backup_names_are_lumberjacks() {
        assert_eq!(
            RotatingFile::backup_name(
                Path::new("/var/log/audit.log"),
                ts("2026-11-29T01:13:55.123456Z")
            ),
            PathBuf::from("/var/log/audit-2026-11-29T01-13-55.123.log")
        );
        assert_eq!(
            RotatingFile::backup_name(Path::new("/var/log/audit"), ts("2026-01-02T03:04:05Z")),
            PathBuf::from("/var/log/audit-2026-01-02T03-04-05.000")
        );
        assert_eq!(
            parse_stamp("2026-11-29T01-13-55.123"),
            Some(ts("2026-11-29T01:13:55.123Z"))
        );
        assert_eq!(parse_stamp("2026-11-29T01:13:55.123"), None);
        assert_eq!(parse_stamp("x"), None);
    }

    #[test]
    fn rotates_at_the_size_keeps_max_backups_and_drops_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let clock = Arc::new(FakeClock::new(ts("2026-11-29T00:00:00Z")));
        // A stranger's file with a similar name is never touched.
        std::fs::write(dir.path().join("audit-notes.log"), b"keep").unwrap();
        let options = RotationOptions {
            max_size_mb: 1,
            max_backups: 2,
            max_age_days: 0,
        };
        let mut f = RotatingFile::open(&path, options, clock.clone()).unwrap();
        let line = vec![b'x'; 400 * 1024];
        for _ in 0..10 {
            f.write_line(&line).unwrap();
            clock.advance(std::time::Duration::from_secs(1));
        }
        f.flush().unwrap();
        // 10 lines of 400 KiB, two to a 1 MiB file: 4 rotations, the newest 2 kept.
        let backups = f.backups().unwrap();
        let names: Vec<_> = backups
            .iter()
            .map(|(_, p)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "audit-2026-11-29T00-00-08.000.log",
                "audit-2026-11-29T00-00-06.000.log"
            ]
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * 400 * 1024);
        for (_, p) in &backups {
            assert_eq!(std::fs::metadata(p).unwrap().len(), 2 * 400 * 1024);
        }
        assert!(dir.path().join("audit-notes.log").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            for p in backups.iter().map(|(_, p)| p.clone()).chain([path.clone()]) {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", p.display());
            }
        }
        // By age: a week later, a rotation removes everything older than a day.
        let options = RotationOptions {
            max_size_mb: 1,
            max_backups: 0,
            max_age_days: 1,
        };
        let mut f = RotatingFile::open(&path, options, clock.clone()).unwrap();
        clock.advance(std::time::Duration::from_secs(7 * 86_400));
        f.rotate().unwrap();
        let left: Vec<_> = f.backups().unwrap().into_iter().map(|(t, _)| t).collect();
        assert_eq!(left, [clock.now()]);
    }

    #[test]
    fn a_full_existing_file_is_rotated_before_the_first_line_and_huge_lines_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, vec![b'x'; MEGABYTE as usize]).unwrap();
        let clock = Arc::new(FakeClock::new(ts("2026-11-29T00:00:00Z")));
        let options = RotationOptions {
            max_size_mb: 1,
            ..RotationOptions::default()
        };
        let mut f = RotatingFile::open(&path, options, clock).unwrap();
        f.write_line(b"{}\n").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        assert_eq!(f.backups().unwrap().len(), 1);
        let err = f
            .write_line(&vec![b'x'; MEGABYTE as usize + 1])
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(RotationOptions::default().max_bytes(), 100 * MEGABYTE);
    }
}
