//! The typed errors every backend returns.

use super::Revision;

/// Why a storage operation failed. The registry maps these to Kubernetes `Status` errors:
/// `NotFound` → 404, `AlreadyExists` → 409 AlreadyExists, `Conflict` → 409 Conflict,
/// `Expired` → 410 Expired, `FutureRevision` → 504 Timeout (kube-apiserver's "Too large
/// resource version"), `Unavailable` → 503 ServiceUnavailable, `Timeout` → 504 Timeout, the
/// rest (`NoSpace` included) → 500.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StorageError {
    /// The key does not exist.
    #[error("key {key:?} not found")]
    NotFound {
        /// The key asked for.
        key: String,
    },
    /// A create found the key already present.
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key asked for.
        key: String,
    },
    /// A conditional update or delete found another revision than the expected one.
    #[error("key {key:?} is at revision {actual}, not the expected {expected}")]
    Conflict {
        /// The key asked for.
        key: String,
        /// The revision the caller expected.
        expected: Revision,
        /// The key's current mod revision.
        actual: Revision,
    },
    /// The requested revision is older than the retained history (compacted, or out of the
    /// watch window, or a watcher fell behind it). Kubernetes answers 410 Gone / Expired.
    #[error("revision {requested} has been compacted; the oldest available is {oldest}")]
    Expired {
        /// The revision the caller asked to read or watch from.
        requested: Revision,
        /// The oldest revision that can still be served.
        oldest: Revision,
    },
    /// A list at a revision the store has not reached yet.
    #[error("revision {requested} is newer than the current revision {current}")]
    FutureRevision {
        /// The revision the caller asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// Another process holds the data directory's lock (see
    /// [`DataDirLock`](crate::storage::DataDirLock)).
    #[error("data directory {dir} is in use by {owner}")]
    Locked {
        /// The data directory.
        dir: String,
        /// The holder's description (e.g. `herald pid 42, serving http://127.0.0.1:6443`).
        owner: String,
    },
    /// The data directory cannot be created (a file is in the way, no permission, …).
    #[error("cannot create data directory {dir}: {reason}")]
    DataDir {
        /// The data directory.
        dir: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The backend has been shut down (its writer thread is gone).
    #[error("the storage backend is closed")]
    Closed,
    /// The store is out of space (a full disk, or its size quota): the write was not stored.
    /// Deletes and TTL expiry still work from the store's reserve; the message says what
    /// frees room. kube-apiserver answers etcd's "database space exceeded" with a 500, and
    /// so does the registry.
    #[error("{0}")]
    NoSpace(String),
    /// The store cannot take the request now and did not carry it out: a networked store
    /// (etcd) is unreachable or has no leader. 503 ServiceUnavailable with `Retry-After`: the
    /// client may retry the same request.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A networked store did not answer within its bound (etcd's "request timed out", a lost
    /// quorum). A write may or may not have been applied: a client that retries a create
    /// may find it there (409). 504 Timeout.
    #[error("storage timed out: {0}")]
    Timeout(String),
    /// The underlying database failed (I/O error, corruption, full disk, …).
    #[error("storage backend error: {0}")]
    Backend(String),
}

impl From<rusqlite::Error> for StorageError {
    /// `SQLITE_FULL` (disk or quota full) is [`StorageError::NoSpace`], anything else
    /// [`StorageError::Backend`].
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StorageError::NoSpace(e.to_string()),
            _ => StorageError::Backend(e.to_string()),
        }
    }
}

/// Shorthand for results of storage operations.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
