//! Owner-only files: the data directory is created `0700` and every file in it `0600` (the
//! database, its `-wal` and `-shm`, which SQLite creates with the database file's mode, the
//! lock file and the space reserve), so that other users of the machine cannot read the
//! events. An existing directory that others can read or enter is left as it is, with a
//! warning (as etcd does): its owner may share it on purpose.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

/// The mode of the data directory when herald creates it.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
/// The mode of every file herald creates in it.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) owner-only if it does not exist.
pub(super) fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Warns if other users can access `dir` (called once the store has opened, so that an open
/// that fails prints only its failure).
pub(super) fn warn_if_shared(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let Ok(meta) = std::fs::metadata(dir) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                dir = %dir.display(),
                mode = format!("{mode:o}"),
                "the data directory can be accessed by other users; `chmod 700` it to keep the events private"
            );
        }
    }
}

/// `opts` creating owner-only files.
pub(super) fn private(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(FILE_MODE);
    }
    opts
}

/// Creates `path` empty and owner-only if it does not exist (an empty file is a new SQLite
/// database, and SQLite gives its `-wal` and `-shm` the same mode).
pub(super) fn create_file(path: &Path) -> io::Result<()> {
    private(OpenOptions::new().write(true).create(true).truncate(false))
        .open(path)
        .map(drop)
}
