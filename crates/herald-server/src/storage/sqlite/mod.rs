//! The SQLite backend: Herald's embedded default store.

mod index_db;
mod lock;
mod pending;
mod read;
mod schema;
mod space;
mod writer;

pub use self::index_db::INDEX_FILE;
pub use self::lock::{DataDirLock, LOCK_FILE};
pub use self::pending::IndexMetrics;
pub use self::space::RESERVE_FILE;
pub use self::writer::CommitMetrics;

use crate::files;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use herald_core::clock::{Clock, add_saturating};
use tokio::sync::{mpsc, oneshot};

use self::read::ReadPool;
use self::writer::{Counters, Op, Reply, Request, Writer};
use super::{
    Backend, CachedWatchStream, Deleted, IndexValues, KeyValue, ListOptions, ListResult, Result,
    Revision, SqliteOptions, StorageError, WatchHub, WatchStream,
};

/// The file name of the database inside the data directory.
pub const DB_FILE: &str = "herald.db";

/// A [`Backend`] on an SQLite database in a data directory.
///
/// - **Durability**: WAL journal with `synchronous=FULL`; a write's future resolves only after
///   the transaction holding it has committed and the WAL is fsynced.
/// - **Group commit**: one writer thread owns the write connection and commits whatever writes
///   are queued (up to [`SqliteOptions::max_batch`]) in one transaction with one fsync. The
///   queue holds [`SqliteOptions::queue_capacity`] requests; when it is full, writers wait for
///   room (back-pressure), nothing is dropped. Optionally, after a commit the writer briefly
///   waits (at most [`SqliteOptions::max_linger`], off by default, and only a quarter of the
///   last commit's time) for the writers it just acknowledged, so concurrent writers share
///   fsyncs instead of alternating.
/// - **Checkpoints** (WAL → database file) run on their own thread and connection, off the
///   commit path.
/// - **Version log**: every write appends a row (see the `schema` module), so a group commit of
///   many creates writes a few pages, not one B-tree leaf per key.
/// - **Indexes in a file of their own** ([`INDEX_FILE`], see the `index_db` module): the key
///   index and the term indexes are derived from the log and written by an index thread in
///   sorted batches of [`SqliteOptions::merge_index_every`] writes, not by each group commit
///   (an index entry lands on a random page, and each commit writes and fsyncs every page it
///   changed). Until a change is merged, lookups find it in memory (at most
///   [`SqliteOptions::max_pending_index`] changes); an open merges whatever the file lacks,
///   and rebuilds it if it is missing.
/// - **State on disk**: gets and lists read the database (the key index, or a term index for
///   a list with an [`IndexQuery`](crate::storage::IndexQuery)) on
///   [`SqliteOptions::read_connections`] read-only connections on tokio's blocking pool, so
///   they never block writes; the writer finds a key's current version with one index seek.
///   Memory holds the watch cache ([`WatchHub`]: the recent events, bounded), SQLite's page
///   caches ([`SqliteOptions::page_cache_bytes`]), the unmerged index changes and the write
///   queue, whatever the number of stored events; opening reads only the watch cache's window
///   (and the log's writes the index file lacks).
/// - **Revisions** live in the database with the data, so they continue after a restart.
/// - **TTL**: an indexed `expires_at` column (milliseconds on the injected clock);
///   [`Backend::expire_due`] deletes what is due in batches of [`SqliteOptions::sweep_batch`],
///   each deletion with its own revision and `Delete` event. Run it with
///   [`spawn_sweeper`](crate::storage::spawn_sweeper).
/// - **History**: replaced versions stay in the log for
///   [`HistoryOptions::keep_revisions`](crate::storage::HistoryOptions) revisions, for lists at
///   older revisions; the watch ring
///   ([`HistoryOptions::watch_window`](crate::storage::HistoryOptions) events and
///   [`HistoryOptions::watch_window_bytes`](crate::storage::HistoryOptions) bytes) is reloaded
///   from the log on open, so watches from revisions before a restart still replay.
///
/// - **One writer process**: opening takes the data directory's [`DataDirLock`]; a second
///   open (from any process) fails with [`StorageError::Locked`] until the first is dropped
///   or its process ends (however it ends).
///
/// Dropping the backend finishes the queued writes, stops the writer thread (waiting for it),
/// merges the index changes, ends every watch stream and releases the lock.
pub struct SqliteBackend {
    tx: Option<mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    checkpointer: Option<JoinHandle<()>>,
    merger: Option<JoinHandle<()>>,
    readers: Arc<ReadPool>,
    /// The index changes not yet in the index database.
    pending: Arc<pending::PendingIndex>,
    /// Whether index queries can be used (see `read::Indexed`).
    indexed: Arc<read::Indexed>,
    hub: Arc<WatchHub>,
    counters: Arc<Counters>,
    failure: LastFailure,
    /// Whether the store is out of space (see the `space` module).
    space: Arc<space::SpaceState>,
    commit_metrics: CommitMetrics,
    clock: Arc<dyn Clock>,
    sweep_batch: usize,
    path: PathBuf,
    // Released after `Drop` has stopped the writer.
    lock: DataDirLock,
    // Declared after the lock: its receivers learn of the close once the lock is released.
    closed: tokio::sync::watch::Sender<()>,
}

impl SqliteBackend {
    /// Opens (creating if needed) the store in `dir` (the directory is created too, `0700`;
    /// its files are created `0600`). Blocks while it opens the files and preloads the watch
    /// ring; call it before serving.
    pub fn open(dir: impl AsRef<Path>, clock: Arc<dyn Clock>, opts: SqliteOptions) -> Result<Self> {
        let dir = dir.as_ref();
        files::create_dir(dir).map_err(|e| StorageError::DataDir {
            dir: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let lock = DataDirLock::acquire(dir)?;
        let path = dir.join(DB_FILE);
        files::create_file(&path)
            .map_err(|e| StorageError::Backend(format!("cannot create {}: {e}", path.display())))?;
        let conn = schema::open_writer(&path, opts.page_cache_bytes)?;
        let index_path = dir.join(INDEX_FILE);
        files::create_file(&index_path).map_err(|e| {
            StorageError::Backend(format!("cannot create {}: {e}", index_path.display()))
        })?;
        let index = index_db::open_writer(&index_path, opts.page_cache_bytes / 2)?;
        let merged = index_db::catch_up(&conn, &index)?;
        let pending = Arc::new(pending::PendingIndex::new(
            merged,
            opts.merge_index_every,
            opts.max_pending_index,
        ));
        let counters = Arc::new(Counters::default());
        counters
            .revision
            .store(schema::revision(&conn)?, Ordering::Release);
        counters
            .compacted
            .store(schema::meta(&conn, "compacted")?, Ordering::Release);
        let (floor, history) = schema::recent_events(
            &conn,
            opts.history.watch_window.max(1),
            opts.history.watch_window_bytes,
        )?;
        let live = usize::try_from(schema::meta(&conn, "live")?).ok();
        let hub = WatchHub::preloaded(
            &opts.history,
            floor,
            counters.revision.load(Ordering::Acquire),
            history,
            live,
        );
        let shrinks = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))? == 2;
        let readers = Arc::new(ReadPool::new(
            path.clone(),
            index_path.clone(),
            opts.read_connections,
            opts.page_cache_bytes / 4,
        )?);
        let (tx, rx) = mpsc::channel(opts.queue_capacity.max(1));
        let commit_metrics = CommitMetrics::default();
        let space = space::Space::open(dir, &conn, &opts)?;
        let space_state = Arc::clone(&space.state);
        let checkpoint_conn = schema::open_checkpointer(&path)?;
        let (wake, wake_rx) = std::sync::mpsc::sync_channel(1);
        let checkpointer = std::thread::Builder::new()
            .name("herald-sqlite-checkpoint".into())
            .spawn(move || writer::run_checkpointer(checkpoint_conn, wake_rx))
            .map_err(|e| StorageError::Backend(format!("cannot start checkpoint thread: {e}")))?;
        let w = Writer {
            conn,
            hub: Arc::clone(&hub),
            counters: Arc::clone(&counters),
            history: opts.history,
            max_batch: opts.max_batch.max(1),
            max_linger: opts.max_linger,
            checkpoint: wake,
            commits: 0,
            metrics: commit_metrics.clone(),
            space,
            shrinks,
            pending: Arc::clone(&pending),
            index: index_db::open_reader(&index_path, opts.page_cache_bytes / 4)?,
        };
        let merger = {
            let pending = Arc::clone(&pending);
            std::thread::Builder::new()
                .name("herald-sqlite-index".into())
                .spawn(move || index_db::run_merger(index, pending))
                .map_err(|e| StorageError::Backend(format!("cannot start index thread: {e}")))?
        };
        let writer = std::thread::Builder::new()
            .name("herald-sqlite-writer".into())
            .spawn(move || w.run(rx))
            .map_err(|e| StorageError::Backend(format!("cannot start writer thread: {e}")))?;
        files::warn_if_shared(dir);
        tracing::info!(path = %path.display(), revision = counters.revision.load(Ordering::Acquire), "opened SQLite store");
        Ok(SqliteBackend {
            tx: Some(tx),
            writer: Some(writer),
            checkpointer: Some(checkpointer),
            merger: Some(merger),
            readers,
            pending,
            indexed: Arc::default(),
            hub,
            counters,
            failure: LastFailure::default(),
            space: space_state,
            commit_metrics,
            clock,
            sweep_batch: opts.sweep_batch.max(1),
            path,
            lock,
            closed: tokio::sync::watch::Sender::new(()),
        })
    }

    /// A receiver whose [`changed`](tokio::sync::watch::Receiver::changed) fails once this
    /// backend has been dropped: its writes are durable, its threads have stopped and the
    /// data directory is released (another [`SqliteBackend::open`] on it succeeds).
    pub fn closed(&self) -> tokio::sync::watch::Receiver<()> {
        self.closed.subscribe()
    }

    /// The data directory's lock (to describe the holder, e.g. with the address it serves).
    pub fn data_lock(&self) -> &DataDirLock {
        &self.lock
    }

    /// What the writer thread measures of its group commits (to register with `/metrics`).
    pub fn commit_metrics(&self) -> &CommitMetrics {
        &self.commit_metrics
    }

    /// The index thread's metrics (a collector to register with `/metrics`; see
    /// [`IndexMetrics`]).
    pub fn index_metrics(&self) -> IndexMetrics {
        IndexMetrics(Arc::clone(&self.pending))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The hub this backend publishes to (shared with an in-process watch cache).
    pub fn hub(&self) -> &Arc<WatchHub> {
        &self.hub
    }

    /// The error of a write that found the writer thread gone (it died: a bug, or it could
    /// not start its timer). The write
    /// was not stored; `/readyz` reports the same until the server is restarted.
    fn writer_stopped(&self) -> StorageError {
        StorageError::Backend(self.writer_stopped_message())
    }

    fn writer_stopped_message(&self) -> String {
        format!(
            "the writer of {} has stopped: writes cannot be stored until herald is restarted",
            self.path.display()
        )
    }

    fn expiry_of(&self, ttl: Option<Duration>) -> Option<i64> {
        ttl.map(|d| add_saturating(self.clock.now(), d).as_millisecond())
    }

    async fn submit(&self, op: Op) -> Result<Reply> {
        let tx = self.tx.as_ref().ok_or(StorageError::Closed)?;
        let (reply, rx) = oneshot::channel();
        // Only `Drop` closes the queue, and it takes `tx` first: a queue closed while `tx` is
        // here, or a request dropped unanswered, means the writer thread died.
        // Waits while the queue is full: back-pressure on the callers.
        tx.send(Request { op, reply })
            .await
            .map_err(|_| self.writer_stopped())?;
        let res = rx.await.map_err(|_| self.writer_stopped())?;
        let failed_at = &self.failure.at_ms;
        match &res {
            Err(StorageError::Backend(e)) => {
                if let Ok(mut message) = self.failure.message.lock() {
                    message.clone_from(e);
                }
                failed_at.store(self.clock.now().as_millisecond().max(1), Ordering::Relaxed);
            }
            // One relaxed load per write while all is well.
            Ok(_) if failed_at.load(Ordering::Relaxed) != 0 => {
                failed_at.store(0, Ordering::Relaxed);
                tracing::info!(path = %self.path.display(), "writes succeed again");
            }
            _ => {}
        }
        res
    }

    async fn write_kv(&self, op: Op) -> Result<KeyValue> {
        match self.submit(op).await? {
            Reply::Kv(kv) => Ok(kv),
            _ => Err(StorageError::Backend(
                "writer answered with the wrong reply".into(),
            )),
        }
    }
}

/// The last write that failed in the database, for [`Backend::health`].
#[derive(Debug, Default)]
struct LastFailure {
    /// When (milliseconds on the backend's clock) it failed; 0 once a write succeeded.
    at_ms: std::sync::atomic::AtomicI64,
    /// Its error.
    message: std::sync::Mutex<String>,
}

/// How long after a failed write the store reports itself not ready (see
/// [`SqliteBackend`]'s [`Backend::health`]).
pub const RETRY_READY: Duration = Duration::from_secs(10);

impl Backend for SqliteBackend {
    fn create<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        self.create_indexed(key, value, IndexValues::default(), ttl)
    }

    fn create_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let op = Op::Create {
            key: key.to_owned(),
            value,
            terms: index.terms(),
            expires_at: self.expiry_of(ttl),
        };
        self.write_kv(op).boxed()
    }

    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        self.update_indexed(key, value, expected, IndexValues::default(), ttl)
    }

    fn update_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let op = Op::Update {
            key: key.to_owned(),
            value,
            expected,
            terms: index.terms(),
            expires_at: self.expiry_of(ttl),
        };
        self.write_kv(op).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Revision>,
    ) -> BoxFuture<'a, Result<Deleted>> {
        let op = Op::Delete {
            key: key.to_owned(),
            expected,
        };
        async move {
            match self.submit(op).await? {
                Reply::Deleted(d) => Ok(d),
                _ => Err(StorageError::Backend(
                    "writer answered with the wrong reply".into(),
                )),
            }
        }
        .boxed()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<KeyValue>>> {
        let key = key.to_owned();
        let pending = Arc::clone(&self.pending);
        self.readers
            .with(move |c| read::get(c, &pending, &key))
            .boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str, opts: ListOptions) -> BoxFuture<'a, Result<ListResult>> {
        let compacted = self.counters.compacted.load(Ordering::Acquire);
        if let Some(at) = opts.at_revision.filter(|at| *at < compacted) {
            return std::future::ready(Err(StorageError::Expired {
                requested: at,
                oldest: compacted,
            }))
            .boxed();
        }
        let prefix = prefix.to_owned();
        let indexed = Arc::clone(&self.indexed);
        let pending = Arc::clone(&self.pending);
        self.readers
            .with(move |c| read::list(c, &pending, &prefix, &opts, &indexed))
            .boxed()
    }

    fn watch<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<WatchStream>> {
        std::future::ready(self.hub.subscribe(prefix, after_revision)).boxed()
    }

    fn watch_batches<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<CachedWatchStream>> {
        std::future::ready(self.hub.subscribe_batches(prefix, after_revision)).boxed()
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<Revision>> {
        std::future::ready(Ok(self.counters.revision.load(Ordering::Acquire))).boxed()
    }

    fn expire_due(&self) -> BoxFuture<'_, Result<usize>> {
        let now = self.clock.now().as_millisecond();
        async move {
            let mut total = 0;
            loop {
                let op = Op::Expire {
                    now,
                    limit: self.sweep_batch,
                };
                match self.submit(op).await? {
                    Reply::Count(n) => {
                        total += n;
                        if n < self.sweep_batch {
                            return Ok(total);
                        }
                    }
                    _ => {
                        return Err(StorageError::Backend(
                            "writer answered with the wrong reply".into(),
                        ));
                    }
                }
            }
        }
        .boxed()
    }

    fn live_keys(&self) -> Option<usize> {
        self.hub.live_keys()
    }

    fn compact(&self, revision: Revision) -> BoxFuture<'_, Result<()>> {
        async move {
            self.submit(Op::Compact { revision }).await?;
            Ok(())
        }
        .boxed()
    }

    /// Not ready when the writer thread has stopped, while the store is out of space (see
    /// [`SqliteOptions::reserve_bytes`]), while writes wait for an index database that cannot
    /// be written (see [`SqliteOptions::max_pending_index`]), or for [`RETRY_READY`] after a
    /// write failed in the database. Then it is ready again, so that a load balancer sends it
    /// the writes that show whether the store recovered (a server nobody writes to could not
    /// find out); a write that succeeds makes it ready at once.
    fn health(&self) -> std::result::Result<(), String> {
        if self.tx.as_ref().is_none_or(|tx| tx.is_closed()) {
            return Err(self.writer_stopped_message());
        }
        if let Some(why) = self.space.full() {
            return Err(why);
        }
        if let Some(why) = self.pending.refusal() {
            return Err(why);
        }
        let failed_at = self.failure.at_ms.load(Ordering::Relaxed);
        let ago = self.clock.now().as_millisecond().saturating_sub(failed_at);
        if failed_at != 0 && u128::try_from(ago).is_ok_and(|ago| ago < RETRY_READY.as_millis()) {
            let why = self
                .failure
                .message
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default();
            return Err(format!(
                "a write to {} failed {ago} ms ago: {why}",
                self.path.display()
            ));
        }
        Ok(())
    }
}

impl Drop for SqliteBackend {
    fn drop(&mut self) {
        // Closing the queue lets the writer finish what is queued and exit.
        self.tx.take();
        if let Some(w) = self.writer.take()
            && w.join().is_err()
        {
            tracing::error!("SQLite writer thread panicked");
        }
        // The merger merges what the writer committed, then stops.
        self.pending.stop();
        if let Some(m) = self.merger.take()
            && m.join().is_err()
        {
            tracing::error!("SQLite index thread panicked");
        }
        // The writer held the only wake sender, so the checkpointer ends too.
        if let Some(c) = self.checkpointer.take()
            && c.join().is_err()
        {
            tracing::error!("SQLite checkpoint thread panicked");
        }
        self.hub.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::clock::FakeClock;

    /// A writer thread that dies (a bug) must not look like a shutdown or like a slow disk:
    /// every later write fails with an error that says so, nothing is acknowledged that was
    /// not stored, reads still work, and the backend reports itself not ready.
    #[tokio::test]
    async fn a_dead_writer_refuses_writes_and_is_not_ready() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(
            dir.path(),
            Arc::new(FakeClock::default()),
            SqliteOptions::default(),
        )
        .unwrap();
        backend
            .create("/events/ns/a", Bytes::from_static(b"{}"), None)
            .await
            .unwrap();
        assert_eq!(backend.health(), Ok(()));

        let died = backend.submit(Op::Panic).await.err();
        // The queue closes as the thread unwinds; `closed` returns once it has.
        backend.tx.as_ref().unwrap().closed().await;
        let stopped = format!(
            "the writer of {} has stopped: writes cannot be stored until herald is restarted",
            dir.path().join(DB_FILE).display()
        );
        assert_eq!(died, Some(StorageError::Backend(stopped.clone())));
        assert_eq!(backend.health(), Err(stopped.clone()));
        let refused = backend
            .create("/events/ns/b", Bytes::from_static(b"{}"), None)
            .await;
        assert_eq!(refused, Err(StorageError::Backend(stopped)));
        assert!(backend.get("/events/ns/a").await.unwrap().is_some());
        assert_eq!(backend.get("/events/ns/b").await.unwrap(), None);
    }
}
