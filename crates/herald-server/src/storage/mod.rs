//! The revisioned key-value store contract and its backends.
//!
//! The registry stores every event under a key such as `/events/<namespace>/<name>` with an
//! opaque value, through the [`Backend`] trait, and never knows which backend it holds:
//!
//! - [`MemoryBackend`]: a `BTreeMap` of versions plus a revision log; for tests and
//!   `--store memory`.
//! - [`SqliteBackend`]: the embedded default. WAL mode, `synchronous=FULL`, group commit by a
//!   dedicated writer thread, a small pool of read connections, a compacted history log
//!   indexed by key and by [index terms](index), and an indexed TTL column with a sweeper.
//!   The state lives on disk; memory does not grow with the number of stored events.
//!
//! - [`EtcdBackend`]: an etcd v3 cluster shared by many replicas (and by kube-apiserver), in
//!   kube-apiserver's `/registry/events/…` layout ([`etcd`]).
//!
//! The first two publish every committed write to a shared [`WatchHub`], the bounded in-memory
//! ring that serves watches (replay from a revision and live delivery); the etcd backend feeds
//! its hub from one etcd watch, so that it sees the other replicas' writes too.
//!
//! # The model
//!
//! It is etcd v3's (and kine's): one global revision counter, bumped by every write; each key
//! carries the revision it was created at and the revision of its last write
//! ([`KeyValue::mod_revision`], the Kubernetes `resourceVersion`); a list reads one snapshot
//! revision, page by page; a watch delivers the changes strictly after a revision; history older
//! than a bounded window is compacted away and asking for it is [`StorageError::Expired`]
//! (HTTP 410).
//!
//! # How etcd slots in
//!
//! An etcd backend implements the same trait with no change to it: the revision is etcd's
//! `header.revision` / `mod_revision`, and `create_revision` is etcd's `create_revision`.
//! `create` is a transaction `If(CreateRevision(key) == 0) Then(Put)`; `update` with an expected
//! revision is `If(ModRevision(key) == expected) Then(Put) Else(Get)` (the `Else` tells `NotFound`
//! from `Conflict`), unconditional `update` is `If(CreateRevision(key) > 0) Then(Put)`; `delete` is
//! the same with `Delete(prev_kv)`, its revision is the response header's. The TTL becomes a lease
//! (granted for the TTL, reused across writes that expire within a small window, as
//! kube-apiserver does) attached with `Put(lease)`; etcd deletes the keys itself when the lease
//! runs out, so `expire_due` returns 0. `list` is a `Range` with `revision` = `at_revision` (the
//! first page's header revision for later pages), `limit + 1` and a start key just after
//! `start_after`; etcd's `ErrCompacted` maps to `Expired` and `ErrFutureRev` to
//! `FutureRevision`. `watch` is an etcd watch with `start_revision = after + 1` and
//! `prev_kv = true`, whose compaction cancel maps to `Expired`; or, as here, one etcd watch
//! feeding a [`WatchHub`] that fans out to every client. `compact` is etcd's `Compact`.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use futures::StreamExt;
//! use herald_core::clock::SystemClock;
//! use herald_server::storage::{Backend, HistoryOptions, ListOptions, MemoryBackend, WatchEvent};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store: Arc<dyn Backend> =
//!     Arc::new(MemoryBackend::new(Arc::new(SystemClock), HistoryOptions::default()));
//! let a = store.create("/events/ns/a", Bytes::from_static(b"{}"), None).await.unwrap();
//! let mut w = store.watch("/events/", a.mod_revision).await.unwrap();
//! let b = store.update("/events/ns/a", Bytes::from_static(b"{\"x\":1}"), Some(a.mod_revision), None)
//!     .await
//!     .unwrap();
//! let ev = w.next().await.unwrap().unwrap();
//! assert!(matches!(&*ev, WatchEvent::Put { kv, .. } if kv.mod_revision == b.mod_revision));
//! let page = store.list("/events/", ListOptions::default()).await.unwrap();
//! assert_eq!(page.items.len(), 1);
//! assert_eq!(page.revision, b.mod_revision);
//! # });
//! ```

mod backend;
mod error;
pub mod etcd;
mod hub;
pub mod index;
mod memory;
mod options;
mod sqlite;
mod sweeper;
mod types;

pub use backend::Backend;
pub use error::{Result, StorageError};
pub use etcd::{EtcdBackend, EtcdError, EtcdOptions, EtcdTlsOptions, StorageMediaType};
pub use hub::{CachedEvent, CachedWatchStream, ENCODINGS, WatchHub, WatchProgress};
pub use index::{INDEX_SLOTS, IndexQuery, IndexValues};
pub use memory::MemoryBackend;
pub use options::{DEFAULT_HISTORY_BYTES, HistoryOptions, SqliteOptions};
pub use sqlite::{
    CommitMetrics, DataDirLock, INDEX_FILE, IndexMetrics, LOCK_FILE, RESERVE_FILE, RETRY_READY,
    SqliteBackend,
};
pub use sweeper::spawn_sweeper;
pub use types::{
    Deleted, INITIAL_REVISION, KeyValue, ListOptions, ListOrder, ListResult, Revision, WatchEvent,
    WatchStream,
};
