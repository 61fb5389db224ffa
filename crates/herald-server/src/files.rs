//! Owner-only files: the data directory is created `0700` and every file in it `0600` (the
//! database, its `-wal` and `-shm`, which SQLite creates with the database file's mode, the
//! lock file, the space reserve, the generated keys and certificates under `pki/`), so that
//! other users of the machine cannot read the events or the keys. An existing directory that
//! others can read or enter is left as it is, with a warning (as etcd does): its owner may
//! share it on purpose.
//!
//! Shared by every layer that writes under the data directory (the SQLite store, the TLS
//! layer's generated certificates) and by the `herald` binary (the kubeconfig it writes).

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

/// The mode of the data directory when herald creates it.
#[cfg(unix)]
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file herald creates in it.
#[cfg(unix)]
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) owner-only if it does not exist.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Warns if other users can access `dir` (the data directory) (called once the store has opened, so that an open
/// that fails prints only its failure).
pub fn warn_if_shared(dir: &Path) {
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
                "this directory can be accessed by other users; `chmod 700` it to keep its files (events, keys) private"
            );
        }
    }
}

/// `opts` creating owner-only files.
pub fn private(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(FILE_MODE);
    }
    opts
}

/// Creates `path` empty and owner-only if it does not exist (an empty file is a new SQLite
/// database, and SQLite gives its `-wal` and `-shm` the same mode).
pub fn create_file(path: &Path) -> io::Result<()> {
    private(OpenOptions::new().write(true).create(true).truncate(false))
        .open(path)
        .map(drop)
}

/// Writes `contents` to `path` owner-only, replacing it whole: the bytes go to a new
/// `0600` file beside it, which is synced and then renamed over `path`, so a reader (or a
/// crash) sees the old file or the new one, never a mix, and the contents are never
/// readable by others, not even for a moment.
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut f =
            private(OpenOptions::new().write(true).create(true).truncate(true)).open(&tmp)?;
        // An existing file keeps its mode on open: make it owner-only in any case.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            f.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        }
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
