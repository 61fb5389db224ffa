//! Tuning knobs for the backends, each with its bound and what happens at it.

use std::time::Duration;

use super::Revision;

/// How much history a backend keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryOptions {
    /// Events held in memory by the [`WatchHub`](super::WatchHub) ring for watch replay and live
    /// fan-out (default 65,536). A watch from an older revision, or a watcher that falls further
    /// behind, gets `Expired`.
    pub watch_window: usize,
    /// Revisions of history kept for lists at older revisions (default 100,000). When the
    /// history grows past this by an eighth, the backend compacts it back to this size; a list
    /// at a compacted revision gets `Expired`.
    pub keep_revisions: u64,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            watch_window: 65_536,
            keep_revisions: 100_000,
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
    /// Read-only connections serving the lists the watch cache cannot answer (default 4).
    /// More concurrent reads than this wait for a free connection.
    pub read_connections: usize,
    /// Expired keys deleted per transaction by a TTL sweep (default 1,000); a sweep runs
    /// transactions until nothing due is left, so writers interleave with a large expiry.
    pub sweep_batch: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            history: HistoryOptions::default(),
            queue_capacity: 8_192,
            max_batch: 2_048,
            max_linger: Duration::ZERO,
            read_connections: 4,
            sweep_batch: 1_000,
        }
    }
}
