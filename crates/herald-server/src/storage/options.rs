//! Tuning knobs for the backends, each with its bound and what happens at it.

use std::time::Duration;

use super::Revision;

/// The default of [`HistoryOptions::watch_window_bytes`] and
/// [`HistoryOptions::keep_bytes`]: 256 MiB.
///
/// Why this much: a typical stored event is 0.5–1.5 KB, so the 65,536 events of the default
/// [`HistoryOptions::watch_window`] take 100–250 MB counted as the watch cache counts them
/// (an update counts its previous value too, and each encoding a watcher asks for adds about
/// the value's size again). The count stays the bound that applies to ordinary traffic,
/// and the bytes bound applies only to large events: 2,500 updates of 1 MB, which held
/// 2.6 GB, now hold at most 256 MiB.
pub const DEFAULT_HISTORY_BYTES: usize = 256 << 20;

/// How much history a backend keeps, in events or revisions and in bytes: whichever bound
/// is reached first moves the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryOptions {
    /// Events held in memory by the [`WatchHub`](super::WatchHub) ring for watch replay and live
    /// fan-out (default 65,536). A watch from an older revision, or a watcher that falls further
    /// behind, gets `Expired` (HTTP 410).
    pub watch_window: usize,
    /// Bytes the [`WatchHub`](super::WatchHub) ring holds, encodings of its events included
    /// (default [`DEFAULT_HISTORY_BYTES`]; see [`WatchHub::bytes`](super::WatchHub::bytes) for
    /// what is counted). Past it the oldest events are evicted, as past `watch_window`; the
    /// newest event always stays.
    pub watch_window_bytes: usize,
    /// Revisions of history kept for lists at older revisions (default 100,000). When the
    /// history grows past this by an eighth, the backend compacts it back to this size; a list
    /// at a compacted revision gets `Expired`.
    pub keep_revisions: u64,
    /// Bytes of replaced and deleted values an in-memory history keeps for lists at older
    /// revisions (default [`DEFAULT_HISTORY_BYTES`]): the
    /// [`MemoryBackend`](super::MemoryBackend) compacts its oldest history away when it grows
    /// past this, and a list at a compacted revision gets `Expired`. The SQLite backend keeps
    /// that history on disk, not in memory, so this bound does not apply to it.
    pub keep_bytes: usize,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            watch_window: 65_536,
            watch_window_bytes: DEFAULT_HISTORY_BYTES,
            keep_revisions: 100_000,
            keep_bytes: DEFAULT_HISTORY_BYTES,
        }
    }
}

impl HistoryOptions {
    /// The revision to compact to, if the history between `compacted` and `current` has
    /// outgrown the window (amortised: compaction runs once per `keep_revisions / 8` writes).
    pub(crate) fn auto_compact_target(
        &self,
        current: Revision,
        compacted: Revision,
    ) -> Option<Revision> {
        let keep = self.keep_revisions.max(1);
        let slack = (keep / 8).max(1);
        let span = current.saturating_sub(compacted);
        (span > keep + slack).then(|| current - keep)
    }
}

/// Options of the [`SqliteBackend`](super::SqliteBackend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The history window (see [`HistoryOptions`]).
    pub history: HistoryOptions,
    /// Write requests waiting for the writer thread (default 8,192). When it is full, callers
    /// wait (`await`) for room: back-pressure, nothing is dropped.
    pub queue_capacity: usize,
    /// Most writes committed in one transaction / one fsync (default 2,048). Bounds the latency
    /// a single batch adds to its members.
    pub max_batch: usize,
    /// The longest the writer waits after a commit for the writers it just acknowledged to
    /// send their next write, so they share the next fsync (the wait is also at most a quarter
    /// of the last commit's time and ends as soon as they are all back). Default
    /// `Duration::ZERO`, off: every write that arrives during the wait wakes the writer
    /// thread, and on a machine whose CPUs are busy serving the requests those wake-ups cost
    /// more than the merged fsyncs save (measured with `herald bench` on 2 cores). Worth
    /// turning on where fsyncs are slow and CPU is spare.
    pub max_linger: Duration,
    /// Read-only connections serving gets and lists (default 4). More concurrent reads than
    /// this wait for a free connection.
    pub read_connections: usize,
    /// SQLite's page cache of the writer's connection (default 64 MiB); the index thread has
    /// half of it, the writer's index lookups a quarter, and each read connection a quarter
    /// (half for the log, half for the index database). With the watch cache's bytes and the write queue, this is what the
    /// store's memory is made of, whatever the number of stored events: a larger cache saves
    /// reads of index pages from the OS page cache, nothing more.
    pub page_cache_bytes: usize,
    /// Expired keys deleted per transaction by a TTL sweep (default 1,000); a sweep runs
    /// transactions until nothing due is left, so writers interleave with a large expiry.
    pub sweep_batch: usize,
    /// Bytes held in reserve in the data directory (the file `herald.reserve`, default
    /// 32 MiB; 0 turns it off) and, with [`SqliteOptions::max_db_bytes`], at the end of the
    /// quota. When the disk or the quota is full, the store releases the reserve so that
    /// deletes and TTL expiry can still free space, and refuses creates and updates until
    /// the reserve and a quarter more are free again. Without a reserve, a full disk refuses deletes too.
    pub reserve_bytes: u64,
    /// The most bytes the database may take (like etcd's `--quota-backend-bytes`; default
    /// `None`, no quota): past it the store is full as on a full disk (see
    /// [`SqliteOptions::reserve_bytes`]). Bounds the database file, not its WAL nor the index
    /// file ([`INDEX_FILE`](crate::storage::INDEX_FILE), about an eighth of the database's
    /// size: 1.87 GB next to 15.3 GB with 10 million events).
    pub max_db_bytes: Option<u64>,
    /// Committed index changes the index thread waits for before it merges them into the
    /// index database in one sorted batch (default 8,192; it also merges whatever there is a
    /// second after its last merge). Larger batches write each index page fewer times.
    pub merge_index_every: usize,
    /// The most index changes held in memory before they are merged (default 131,072, about
    /// 26 MiB): at this bound the writer waits for the index thread before its next batch,
    /// and if merging fails (the index file cannot be written) it refuses writes with the
    /// cause and the store reports itself not ready until a merge succeeds. The changes held
    /// are in `/metrics` ([`IndexMetrics`](crate::storage::IndexMetrics)).
    pub max_pending_index: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            history: HistoryOptions::default(),
            queue_capacity: 8_192,
            max_batch: 2_048,
            max_linger: Duration::ZERO,
            read_connections: 4,
            page_cache_bytes: 64 << 20,
            sweep_batch: 1_000,
            reserve_bytes: 32 << 20,
            max_db_bytes: None,
            merge_index_every: 8_192,
            max_pending_index: 131_072,
        }
    }
}
