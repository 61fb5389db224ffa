//! The index changes the writer has made and the merger has not yet moved into the index
//! database: a bounded window in memory, shared by the writer, the merger and the readers.
//!
//! The writer thread adds every write's change here (its key and revision, its terms, the
//! version it replaces) before it commits the write to the version log, and forgets the
//! changes of a batch it rolls back. The merger thread (`index_db::run_merger`) takes the
//! committed changes in batches, writes them to the index database sorted (a batch of
//! thousands of writes touches each index page once, where one write at a time would touch
//! one page per index entry), commits, and then drops them from here: at every moment a change
//! is here, in the committed index database, or both.
//!
//! A lookup by key or by term therefore reads the index database *after* taking its
//! candidates from here (see `read`): changes leave this window only once the index database
//! has committed them. Candidates are only revisions: the caller checks each against the
//! version log, which is the authority (a candidate of a batch not yet committed, or rolled
//! back, is simply not there).
//!
//! **Who drops merged changes.** The writer, at the start of a batch ([`PendingIndex::prune`]),
//! not the merger: the writer reads the index database in one read transaction per batch,
//! begun after the prune, so a change it no longer finds here is in that snapshot.
//!
//! **Bounds.** At most [`SqliteOptions::max_pending_index`](crate::storage::SqliteOptions)
//! changes are held (about 200 bytes each); at that bound the writer waits for the merger
//! before it applies its next batch. The merger starts a batch when
//! [`SqliteOptions::merge_index_every`](crate::storage::SqliteOptions) changes are committed
//! and unmerged, or a second after the last merge if any are.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::writer::Terms;
use crate::storage::{INDEX_SLOTS, Result, Revision, StorageError};

/// How long the merger waits for [`PendingIndex`] to fill before it merges what there is.
pub(super) const MERGE_IDLE: Duration = Duration::from_secs(1);

/// What one write did to the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// A new version of the key (create or update), with its index terms.
    Put { terms: Terms },
    /// A deletion: only the version it replaces changes.
    Delete,
}

/// One write's index change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub rev: Revision,
    pub key: Arc<str>,
    pub change: Change,
    /// The key's version this write replaced (its `next_rev` becomes `rev`).
    pub replaces: Option<Revision>,
}

/// A batch for the merger: committed changes in revision order, and the compaction to apply
/// after them.
#[derive(Debug, Default)]
pub(super) struct MergeBatch {
    pub entries: Vec<Arc<Entry>>,
    pub compact: Option<Revision>,
    /// The revision the index database is complete up to once the batch is merged.
    pub upto: Revision,
}

#[derive(Debug, Default)]
struct Window {
    /// Every change at or below this revision is in the committed index database (and may
    /// still be here until the writer prunes it).
    merged: Revision,
    /// The version log holds every change at or below this revision.
    committed: Revision,
    /// The changes not yet pruned, in revision order.
    entries: VecDeque<Arc<Entry>>,
    /// The revisions of each key's and each term's changes, oldest first.
    by_key: BTreeMap<Arc<str>, VecDeque<Revision>>,
    by_term: HashMap<(usize, i64), VecDeque<Revision>>,
    /// The newest committed compaction not yet merged.
    compaction: Option<Revision>,
    /// Why the last merge failed, until one succeeds.
    failed: Option<String>,
    stopping: bool,
    /// Changes merged since the store opened.
    merged_changes: u64,
    /// Merges since the store opened, by outcome.
    merges: u64,
    failed_merges: u64,
}

impl Window {
    /// The index of the first change not merged yet.
    fn first_unmerged(&self) -> usize {
        self.entries.partition_point(|e| e.rev <= self.merged)
    }

    fn unmerged_committed(&self) -> usize {
        let n = self.entries.partition_point(|e| e.rev <= self.committed);
        n - self.first_unmerged() + usize::from(self.compaction.is_some())
    }

    /// The changes added and not merged yet, committed or not.
    fn unmerged(&self) -> usize {
        self.entries.len() - self.first_unmerged()
    }

    /// Why a write is refused: the window is full (`max` changes) and the last merge failed.
    fn refusal(&self, max: usize) -> Option<String> {
        let why = self.failed.as_ref()?;
        (self.entries.len() >= max).then(|| {
            format!(
                "{} index changes wait for the index database, which cannot be written: {why}",
                self.entries.len()
            )
        })
    }

    fn entry(&self, rev: Revision) -> Option<&Arc<Entry>> {
        let i = self.entries.partition_point(|e| e.rev < rev);
        self.entries.get(i).filter(|e| e.rev == rev)
    }

    /// Drops `e` from the lookup maps. Its revision is the oldest (`Oldest`, a merge) or the
    /// newest (`Newest`, a rollback) of each of its lists, so this costs O(1) per list
    /// whatever their lengths (a common term has thousands of unmerged revisions).
    fn forget(&mut self, e: &Entry, end: End) {
        fn drop_rev(revs: &mut VecDeque<Revision>, rev: Revision, end: End) {
            match end {
                End::Oldest if revs.front() == Some(&rev) => {
                    revs.pop_front();
                }
                End::Newest if revs.back() == Some(&rev) => {
                    revs.pop_back();
                }
                _ => revs.retain(|&r| r != rev),
            }
        }
        if let Some(revs) = self.by_key.get_mut(&e.key) {
            drop_rev(revs, e.rev, end);
            if revs.is_empty() {
                self.by_key.remove(&e.key);
            }
        }
        if let Change::Put { terms } = &e.change {
            for (slot, term) in terms.iter().enumerate() {
                if let Some(term) = term
                    && let Some(revs) = self.by_term.get_mut(&(slot, *term))
                {
                    drop_rev(revs, e.rev, end);
                    if revs.is_empty() {
                        self.by_term.remove(&(slot, *term));
                    }
                }
            }
        }
    }
}

/// What the window holds and what the index thread has done since the store opened, read in
/// one snapshot: a change leaves `unmerged` as `merged_changes` counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct IndexStats {
    /// Changes not merged into the index database yet (committed or being committed).
    pub unmerged: usize,
    /// Changes merged since the store opened (an open's own catch-up not counted).
    pub merged_changes: u64,
    /// Merges committed since the store opened.
    pub merges: u64,
    /// Merges that failed since the store opened (each is tried again).
    pub failed_merges: u64,
}

/// Which end of the window a change leaves from.
#[derive(Debug, Clone, Copy)]
enum End {
    Oldest,
    Newest,
}

/// The window of unmerged index changes (see the module docs).
#[derive(Debug)]
pub(super) struct PendingIndex {
    window: Mutex<Window>,
    /// Signalled when there is more for the merger (or it should stop).
    work: Condvar,
    /// Signalled when the merger has made room.
    room: Condvar,
    merge_every: usize,
    max: usize,
}

/// The latest state of a key among the unmerged changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Latest {
    /// Its newest version is at this revision.
    Live(Revision),
    Deleted,
}

impl PendingIndex {
    /// An empty window over an index database complete up to `merged`.
    pub fn new(merged: Revision, merge_every: usize, max: usize) -> Self {
        let merge_every = merge_every.max(1);
        PendingIndex {
            window: Mutex::new(Window {
                merged,
                committed: merged,
                ..Window::default()
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            merge_every,
            max: max.max(merge_every),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writer, before a batch: drops the merged changes, then waits while the window is
    /// still full. Fails if it is full and the last merge failed (the index database cannot
    /// be written: the write is refused rather than held forever).
    pub fn prune_and_wait_for_room(&self) -> Result<()> {
        let mut w = self.lock();
        loop {
            let merged = w.merged;
            while w.entries.front().is_some_and(|e| e.rev <= merged) {
                if let Some(e) = w.entries.pop_front() {
                    w.forget(&e, End::Oldest);
                }
            }
            if w.entries.len() < self.max {
                return Ok(());
            }
            if let Some(why) = w.refusal(self.max) {
                return Err(StorageError::Backend(why));
            }
            w = self
                .room
                .wait_timeout(w, MERGE_IDLE)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Writer: adds a batch's changes (in revision order, all above the last committed
    /// revision), before the batch commits.
    pub fn add(&self, entries: Vec<Entry>) {
        let mut w = self.lock();
        for e in entries {
            w.by_key
                .entry(Arc::clone(&e.key))
                .or_default()
                .push_back(e.rev);
            if let Change::Put { terms } = &e.change {
                for (slot, term) in terms.iter().enumerate() {
                    if let Some(term) = term {
                        w.by_term.entry((slot, *term)).or_default().push_back(e.rev);
                    }
                }
            }
            w.entries.push_back(Arc::new(e));
        }
    }

    /// Writer: the version log has committed everything up to `revision`, and the compaction
    /// to `compacted` if any.
    pub fn commit(&self, revision: Revision, compacted: Option<Revision>) {
        let mut w = self.lock();
        w.committed = revision;
        if compacted.is_some() {
            w.compaction = w.compaction.max(compacted);
        }
        if w.unmerged_committed() >= self.merge_every {
            self.work.notify_one();
        }
    }

    /// Writer: forgets the changes above `committed`: their batch was rolled back.
    pub fn roll_back(&self, committed: Revision) {
        let mut w = self.lock();
        while w.entries.back().is_some_and(|e| e.rev > committed) {
            if let Some(e) = w.entries.pop_back() {
                w.forget(&e, End::Newest);
            }
        }
    }

    /// The newest state of `key` among the unmerged changes, if it has any.
    pub fn latest(&self, key: &str) -> Option<Latest> {
        let w = self.lock();
        let rev = *w.by_key.get(key)?.back()?;
        Some(match w.entry(rev).map(|e| &e.change) {
            Some(Change::Put { .. }) => Latest::Live(rev),
            _ => Latest::Deleted,
        })
    }

    /// Candidates: the revisions of `key`'s unmerged versions.
    pub fn key_revisions(&self, key: &str) -> Vec<Revision> {
        self.lock()
            .by_key
            .get(key)
            .map(|revs| revs.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Candidates: the revisions of the unmerged versions of keys in the range.
    pub fn range_revisions(&self, lower: Bound<&str>, upper: Bound<&str>) -> Vec<Revision> {
        let w = self.lock();
        w.by_key
            .range::<str, _>((lower, upper))
            .flat_map(|(_, revs)| revs.iter().copied())
            .collect()
    }

    /// Candidates: the revisions of the unmerged versions with `term` in `slot`.
    pub fn term_revisions(&self, slot: usize, term: i64) -> Vec<Revision> {
        if slot >= INDEX_SLOTS {
            return Vec::new();
        }
        self.lock()
            .by_term
            .get(&(slot, term))
            .map(|revs| revs.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Merger: waits until there is a batch worth merging ([`MERGE_IDLE`] at most, then any
    /// committed change will do), and returns it; `None` once stopped with nothing left.
    pub fn take(&self) -> Option<MergeBatch> {
        let mut w = self.lock();
        loop {
            let ready = w.unmerged_committed();
            if ready >= self.merge_every || (ready > 0 && w.stopping) {
                break;
            }
            if w.stopping {
                return None;
            }
            let (guard, timeout) = self
                .work
                .wait_timeout(w, MERGE_IDLE)
                .unwrap_or_else(|e| e.into_inner());
            w = guard;
            if timeout.timed_out() && w.unmerged_committed() > 0 {
                break;
            }
        }
        let committed = w.committed;
        let n = w.entries.partition_point(|e| e.rev <= committed);
        let entries: Vec<Arc<Entry>> = w.entries.range(w.first_unmerged()..n).cloned().collect();
        let compact = w.compaction;
        Some(MergeBatch {
            entries,
            compact,
            upto: committed,
        })
    }

    /// Merger: the index database has committed `batch`; the writer drops its changes
    /// before its next batch.
    pub fn merged(&self, batch: &MergeBatch) {
        let mut w = self.lock();
        if w.compaction == batch.compact {
            w.compaction = None;
        }
        w.merged = w.merged.max(batch.upto);
        w.failed = None;
        w.merged_changes += batch.entries.len() as u64;
        w.merges += 1;
        self.room.notify_all();
    }

    /// Merger: the merge of a batch failed (it stays in the window and is tried again).
    pub fn failed(&self, why: String) {
        let mut w = self.lock();
        w.failed = Some(why);
        w.failed_merges += 1;
        self.room.notify_all();
    }

    /// Why writes are refused, while they are: the window is full and the index database
    /// cannot be written (the store's health).
    pub fn refusal(&self) -> Option<String> {
        self.lock().refusal(self.max)
    }

    /// The window's counts now, in one snapshot.
    pub fn stats(&self) -> IndexStats {
        let w = self.lock();
        IndexStats {
            unmerged: w.unmerged(),
            merged_changes: w.merged_changes,
            merges: w.merges,
            failed_merges: w.failed_merges,
        }
    }

    /// Asks the merger to merge what is committed and stop.
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.work.notify_all();
    }

    /// Merger, after a failed merge: waits [`MERGE_IDLE`] before the next try, or until asked
    /// to stop; returns whether it was asked to stop.
    pub fn pause_after_failure(&self) -> bool {
        let w = self.lock();
        let (w, _) = self
            .work
            .wait_timeout_while(w, MERGE_IDLE, |w| !w.stopping)
            .unwrap_or_else(|e| e.into_inner());
        w.stopping
    }

    /// Committed changes not merged yet.
    #[cfg(test)]
    fn take_now_len(&self) -> usize {
        self.lock().unmerged_committed()
    }

    /// Changes held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// The index thread's metrics, read from the window at every scrape (register it with a
/// `prometheus_client` registry as a collector; the names get the registry's prefix):
///
/// - `storage_index_unmerged_changes` (gauge): index changes not merged into
///   [`INDEX_FILE`](crate::storage::INDEX_FILE) yet. It rises by one per write and falls by a
///   batch at each merge; at [`SqliteOptions::max_pending_index`](crate::storage::SqliteOptions)
///   the writer waits for the index thread, so a value that stays near it means the index
///   thread cannot keep up (or cannot write).
/// - `storage_index_merged_changes_total` (counter): changes merged since the store opened.
///   Read in the same snapshot as the gauge: the two add up to the writes since the open.
/// - `storage_index_merges_total{outcome}` (counter): merges, `ok` or `failed`. A failed
///   merge is logged and tried again a second later; while merges fail and the window is
///   full, writes are refused and the store is not ready (`/readyz` says why).
#[derive(Debug, Clone)]
pub struct IndexMetrics(pub(super) Arc<PendingIndex>);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl Collector for IndexMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::result::Result<(), std::fmt::Error> {
        let stats = self.0.stats();
        let unmerged = ConstGauge::new(i64::try_from(stats.unmerged).unwrap_or(i64::MAX));
        unmerged.encode(encoder.encode_descriptor(
            "storage_index_unmerged_changes",
            "Index changes held in memory and not yet merged into herald-index.db; writes wait \
             for the index thread at the store's max_pending_index (131,072 by default)",
            None,
            unmerged.metric_type(),
        )?)?;
        let merged = ConstCounter::new(stats.merged_changes);
        merged.encode(encoder.encode_descriptor(
            "storage_index_merged_changes",
            "Index changes merged into herald-index.db since the store opened",
            None,
            merged.metric_type(),
        )?)?;
        let mut merges = encoder.encode_descriptor(
            "storage_index_merges",
            "Merges of index changes into herald-index.db, by outcome (a failed one is retried)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, n) in [("ok", stats.merges), ("failed", stats.failed_merges)] {
            ConstCounter::new(n).encode(merges.encode_family(&OutcomeLabels { outcome })?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(rev: Revision, key: &str, t0: Option<i64>, replaces: Option<Revision>) -> Entry {
        Entry {
            rev,
            key: key.into(),
            change: Change::Put {
                terms: [t0, None, None, None, None, None],
            },
            replaces,
        }
    }

    #[test]
    fn candidates_come_from_every_unmerged_change_until_merged() {
        let p = PendingIndex::new(0, 2, 10);
        p.add(vec![put(1, "a", Some(7), None), put(2, "b", Some(7), None)]);
        p.commit(2, None);
        p.add(vec![
            put(3, "a", None, Some(1)),
            Entry {
                rev: 4,
                key: "b".into(),
                change: Change::Delete,
                replaces: Some(2),
            },
        ]);
        assert_eq!(p.latest("a"), Some(Latest::Live(3)));
        assert_eq!(p.latest("b"), Some(Latest::Deleted));
        assert_eq!(p.latest("c"), None);
        assert_eq!(p.term_revisions(0, 7), vec![1, 2]);
        assert_eq!(
            p.range_revisions(Bound::Included("a"), Bound::Excluded("b")),
            vec![1, 3]
        );
        // Only the committed changes are merged; the uncommitted batch waits.
        let batch = p.take().unwrap();
        assert_eq!(batch.upto, 2);
        assert_eq!(batch.entries.len(), 2);
        assert_eq!(batch.compact, None);
        p.merged(&batch);
        // Still candidates until the writer prunes them.
        assert_eq!(p.term_revisions(0, 7), vec![1, 2]);
        assert_eq!(p.take_now_len(), 0);
        p.prune_and_wait_for_room().unwrap();
        assert_eq!(p.term_revisions(0, 7), Vec::<Revision>::new());
        assert_eq!(p.key_revisions("a"), vec![3]);
        // A rolled back batch leaves nothing behind.
        p.roll_back(2);
        assert_eq!(p.len(), 0);
        assert_eq!(p.latest("a"), None);
        p.stop();
        assert!(p.take().is_none());
    }

    #[test]
    fn a_full_window_refuses_writes_once_merging_fails() {
        let p = PendingIndex::new(0, 1, 1);
        p.add(vec![put(1, "a", None, None)]);
        p.commit(1, None);
        p.failed("disk full".into());
        let e = p.prune_and_wait_for_room().unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        // The store's health says the same.
        let StorageError::Backend(why) = e else {
            panic!("not a backend error: {e:?}");
        };
        assert_eq!(p.refusal(), Some(why));
        // A merger pausing before its next try stops at once when asked to.
        p.stop();
        assert!(p.pause_after_failure());
    }

    #[test]
    fn a_failed_merge_refuses_nothing_until_the_window_is_full() {
        let p = PendingIndex::new(0, 1, 2);
        p.add(vec![put(1, "a", None, None)]);
        p.commit(1, None);
        p.failed("disk full".into());
        assert_eq!(p.refusal(), None);
        p.prune_and_wait_for_room().unwrap();
        p.add(vec![put(2, "b", None, None)]);
        p.commit(2, None);
        assert!(p.refusal().is_some_and(|why| why.contains("disk full")));
        // A merge that succeeds ends it.
        let batch = p.take().unwrap();
        p.merged(&batch);
        assert_eq!(p.refusal(), None);
    }

    #[test]
    fn the_metrics_add_up_to_the_writes() {
        let p = Arc::new(PendingIndex::new(0, 2, 100));
        p.add(vec![put(1, "a", None, None), put(2, "b", None, None)]);
        p.commit(2, None);
        p.add(vec![put(3, "c", None, None)]);
        let batch = p.take().unwrap();
        p.failed("busy".into());
        p.merged(&batch);
        // Rolled back: never counted.
        p.add(vec![put(4, "d", None, None)]);
        p.roll_back(3);
        assert_eq!(
            p.len(),
            3,
            "the merged changes are held until the writer drops them"
        );
        assert_eq!(
            p.stats(),
            IndexStats {
                unmerged: 1,
                merged_changes: 2,
                merges: 1,
                failed_merges: 1,
            }
        );
        p.prune_and_wait_for_room().unwrap();
        assert_eq!(p.len(), 1);

        let mut registry = prometheus_client::registry::Registry::with_prefix("herald");
        registry.register_collector(Box::new(IndexMetrics(p)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "herald_storage_index_unmerged_changes 1",
            "herald_storage_index_merged_changes_total 2",
            r#"herald_storage_index_merges_total{outcome="ok"} 1"#,
            r#"herald_storage_index_merges_total{outcome="failed"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }
}
