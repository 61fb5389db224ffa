//! The single writer thread: group commit.
//!
//! Callers put a request on a bounded queue and await a oneshot reply. The thread takes
//! whatever is queued (up to `max_batch`), applies it all in one `BEGIN IMMEDIATE … COMMIT`
//! transaction, whose commit fsyncs the WAL once (`synchronous=FULL`), then publishes the events
//! to the watch cache and answers every caller. Under load the batch grows with the number of
//! waiting writers, so one fsync is shared by many writes.
//!
//! Each write appends a row to the version log (see `schema`); an update or delete also marks
//! the version it replaces, and every write leaves its index change in `pending` for the
//! index thread. The current version of a key comes from the transaction itself (keys already
//! written in the batch), else from the unmerged changes, else from the index database (one
//! seek, in one read transaction per batch).
//!
//! A rejected operation (exists, conflict, not found) writes nothing and does not disturb the
//! others in its batch. A database error (I/O, disk full) rolls the whole batch back and every
//! caller in it gets the error; nothing from the batch is visible or published. Out of space,
//! the batch is tried once more with its creates and updates refused, so that its deletes and
//! expiries can still free space (see `space`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use rusqlite::{CachedStatement, Connection, OptionalExtension as _, params};
use tokio::sync::{mpsc, oneshot};

use super::pending::{Change, Entry, Latest, PendingIndex};
use super::schema::kv_from_row;
use super::space::{RELIEF_CHUNK, Space};
use crate::storage::{
    Deleted, HistoryOptions, INDEX_SLOTS, KeyValue, Result, Revision, StorageError, WatchEvent,
    WatchHub,
};

/// The index terms of one write, by slot (see [`crate::storage::index`]).
pub(super) type Terms = [Option<i64>; INDEX_SLOTS];

/// One write operation.
pub(super) enum Op {
    Create {
        key: String,
        value: Bytes,
        terms: Terms,
        expires_at: Option<i64>,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Option<Revision>,
        terms: Terms,
        expires_at: Option<i64>,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    /// Deletes up to `limit` keys whose `expires_at <= now`.
    Expire {
        now: i64,
        limit: usize,
    },
    Compact {
        revision: Revision,
    },
    /// Makes the writer thread panic, as a bug in it would (tests of what a stopped writer
    /// does to the backend).
    #[cfg(test)]
    Panic,
}

/// What an operation answers.
pub(super) enum Reply {
    Kv(KeyValue),
    Deleted(Deleted),
    Count(usize),
    Done,
}

pub(super) struct Request {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Reply>>,
}

/// What the writer thread measures of its group commits. Cheap to clone (the histograms are
/// shared); register them with a `prometheus_client` registry to export them.
#[derive(Debug, Clone)]
pub struct CommitMetrics {
    /// Writes per committed transaction (one fsync each): small batches under load mean the
    /// fsyncs are not being shared.
    pub batch_size: Histogram,
    /// Seconds per commit (applying the batch, writing the WAL, fsync, publishing).
    pub duration_seconds: Histogram,
}

impl Default for CommitMetrics {
    fn default() -> Self {
        CommitMetrics {
            // 1 … 2,048 writes (the default `max_batch`).
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            // 0.1 ms … 3.3 s.
            duration_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
        }
    }
}

/// Revision counters shared with the readers of the backend.
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// The last committed revision.
    pub revision: AtomicU64,
    /// The last compacted revision.
    pub compacted: AtomicU64,
}

pub(super) struct Writer {
    pub conn: Connection,
    pub hub: Arc<WatchHub>,
    pub counters: Arc<Counters>,
    pub history: HistoryOptions,
    pub max_batch: usize,
    pub max_linger: Duration,
    /// Wakes the checkpointer thread (capacity 1: requests coalesce).
    pub checkpoint: std::sync::mpsc::SyncSender<()>,
    pub commits: u64,
    pub metrics: CommitMetrics,
    /// The reserve and the full state (see `space`).
    pub space: Space,
    /// Whether the database gives free pages back (`auto_vacuum=INCREMENTAL`, see `schema`).
    pub shrinks: bool,
    /// The index changes not yet in the index database (see `pending`).
    pub pending: Arc<PendingIndex>,
    /// A read-only connection to the index database, for the key lookups.
    pub index: Connection,
}

/// Free pages the writer leaves alone (16 MiB of 4 KiB pages): churn reuses them.
const KEEP_FREE_PAGES: u64 = 4096;

/// The most free pages one shrink gives back (64 MiB): bounds the time it holds the writer.
const SHRINK_STEP_PAGES: u64 = 16_384;

/// How many commits pass between checkpoint requests to the checkpointer thread.
const CHECKPOINT_EVERY: u64 = 32;

/// Runs SQLite checkpoints (copying the WAL back into the database file) off the writer's
/// path. `PRAGMA wal_checkpoint(PASSIVE)` never blocks the writer; if it cannot keep up under
/// sustained writes, the writer's own automatic checkpoint (set high, see `schema`) bounds
/// the WAL size. Ends when the writer is gone.
pub(super) fn run_checkpointer(conn: Connection, wake: std::sync::mpsc::Receiver<()>) {
    while wake.recv().is_ok() {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "background checkpoint failed");
        }
    }
}

/// The state of the transaction being built.
struct Txn {
    revision: Revision,
    compacted: Revision,
    events: Vec<WatchEvent>,
    /// Set by an explicit compaction: the watch ring forgets the same history.
    hub_compact: Option<Revision>,
    /// The keys this transaction wrote, with their state after it (`None`: deleted); the
    /// database holds every other key's current state.
    written: HashMap<String, Option<KeyValue>>,
    /// Keys created minus keys deleted (for `meta.live`).
    live_delta: i64,
    /// The index changes of the writes, for [`PendingIndex`].
    index: Vec<Entry>,
    /// The compaction this transaction made, for [`PendingIndex`].
    compacted_to: Option<Revision>,
}

impl Txn {
    fn new(counters: &Counters, capacity: usize) -> Self {
        Txn {
            revision: counters.revision.load(Ordering::Acquire),
            compacted: counters.compacted.load(Ordering::Acquire),
            events: Vec::with_capacity(capacity),
            hub_compact: None,
            written: HashMap::with_capacity(capacity),
            live_delta: 0,
            index: Vec::with_capacity(capacity),
            compacted_to: None,
        }
    }
}

impl Writer {
    /// Runs until every sender is gone, then returns (the connection closes on drop).
    ///
    /// **Adaptive linger.** With N writers each waiting for its own ack, the writers acked by
    /// one commit come back while the next batch is already committing, so a naive loop
    /// alternates between two half-size groups and pays two fsyncs per round. After a commit
    /// the thread therefore expects the writers it just acked plus those already queued, and
    /// waits for them, but never longer than a quarter of the last commit's duration (capped
    /// by `max_linger`): when fsync is fast the wait is negligible; when fsync is slow, merging
    /// the groups doubles what one fsync acknowledges.
    pub fn run(mut self, mut rx: mpsc::Receiver<Request>) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "SQLite writer cannot start its timer runtime");
                return;
            }
        };
        rt.block_on(async move {
            let mut batch: Vec<Request> = Vec::with_capacity(self.max_batch);
            let mut expect = 0usize;
            let mut linger = Duration::ZERO;
            while let Some(first) = rx.recv().await {
                batch.push(first);
                self.drain(&mut rx, &mut batch);
                let want = expect.min(self.max_batch);
                if batch.len() < want && !linger.is_zero() {
                    let deadline = tokio::time::Instant::now() + linger;
                    while batch.len() < want {
                        match tokio::time::timeout_at(deadline, rx.recv()).await {
                            Ok(Some(r)) => {
                                batch.push(r);
                                self.drain(&mut rx, &mut batch);
                            }
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
                let acked = batch.len();
                let took = self.commit(&mut batch);
                linger = (took / 4).min(self.max_linger);
                expect = acked + rx.len();
                self.commits += 1;
                if self.commits.is_multiple_of(CHECKPOINT_EVERY) {
                    self.shrink();
                    // Coalesces: if a checkpoint is already pending, this one is not needed.
                    let _ = self.checkpoint.try_send(());
                }
            }
            // A clean stop leaves no WAL behind: the next open has none to read back (up
            // to 64 MiB of it, read page by page before the store could serve).
            if let Err(e) = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            {
                tracing::debug!(error = %e, "final checkpoint");
            }
        });
    }

    /// Gives free pages back to the file system when more than a quarter of the file (and
    /// more than [`KEEP_FREE_PAGES`]) is free — after a storm has expired, not under steady
    /// churn, whose writes reuse the pages its expiries free — at most
    /// [`SHRINK_STEP_PAGES`] per call, keeping [`KEEP_FREE_PAGES`] for reuse.
    fn shrink(&self) {
        if !self.shrinks || self.space.is_full() {
            return;
        }
        let pages = |pragma: &str| -> rusqlite::Result<u64> {
            self.conn
                .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
        };
        let (free, total) = match (pages("freelist_count"), pages("page_count")) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(error = %e, "reading the free page count");
                return;
            }
        };
        if free <= KEEP_FREE_PAGES || free * 4 <= total {
            return;
        }
        let give = (free - KEEP_FREE_PAGES).min(SHRINK_STEP_PAGES);
        // The pragma frees one page per step: run it to the end.
        let vacuum = || -> rusqlite::Result<()> {
            let mut stmt = self
                .conn
                .prepare(&format!("PRAGMA incremental_vacuum({give})"))?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        };
        match vacuum() {
            Ok(()) => tracing::debug!(pages = give, "gave free pages back to the file system"),
            Err(e) => tracing::warn!(error = %e, "incremental vacuum failed"),
        }
    }

    fn drain(&self, rx: &mut mpsc::Receiver<Request>, batch: &mut Vec<Request>) {
        while batch.len() < self.max_batch {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
    }

    /// Commits the batch and answers every caller in it; returns how long it took.
    ///
    /// The batch is counted in [`CommitMetrics`] before any caller is answered, so a client
    /// that has its acknowledgement and then reads `/metrics` always sees its commit.
    fn commit(&mut self, batch: &mut Vec<Request>) -> Duration {
        let started = tokio::time::Instant::now();
        let results = match self.attempt(batch, self.space.is_full()) {
            Ok(results) => results,
            // Out of space: release the reserve and commit what frees space (see `space`).
            Err(StorageError::NoSpace(cause)) if !self.space.is_full() => {
                self.space.enter_full(&self.conn, &cause);
                self.attempt(batch, true)
                    .unwrap_or_else(|e| self.fail_all(batch, e))
            }
            Err(e) => self.fail_all(batch, e),
        };
        if self.space.is_full() {
            self.relieve();
        }
        let took = started.elapsed();
        self.metrics.batch_size.observe(batch.len() as f64);
        self.metrics.duration_seconds.observe(took.as_secs_f64());
        for (req, res) in batch.drain(..).zip(results) {
            // A caller that stopped waiting is fine: a committed write is durable anyway.
            let _ = req.reply.send(res);
        }
        took
    }

    /// Commits the batch in one transaction and publishes it, creates and updates refused
    /// when `refuse_growth`; on a database failure rolls it back and returns the error.
    fn attempt(&mut self, batch: &[Request], refuse_growth: bool) -> Result<Vec<Result<Reply>>> {
        self.pending.prune_and_wait_for_room()?;
        // One snapshot of the index database for the batch's lookups, taken after the prune
        // (see `pending`).
        self.index.execute_batch("BEGIN")?;
        let mut txn = Txn::new(&self.counters, batch.len());
        let applied = self.apply_all(batch, &mut txn, refuse_growth);
        if let Err(e) = self.index.execute_batch("COMMIT") {
            tracing::debug!(error = %e, "ending the index read transaction");
        }
        match applied {
            Ok(results) => {
                self.pending.commit(txn.revision, txn.compacted_to);
                // The watch cache first: a revision read from the counters is then always
                // already in it.
                self.hub.publish(txn.events);
                self.counters
                    .revision
                    .store(txn.revision, Ordering::Release);
                self.counters
                    .compacted
                    .store(txn.compacted, Ordering::Release);
                if let Some(rev) = txn.hub_compact {
                    self.hub.compact(rev);
                }
                Ok(results)
            }
            Err(e) => {
                tracing::error!(error = %e, writes = batch.len(), "write batch rolled back");
                self.rollback();
                self.pending
                    .roll_back(self.counters.revision.load(Ordering::Acquire));
                Err(e)
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit()
            && let Err(rb) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::debug!(error = %rb, "rollback after failed batch");
        }
    }

    /// Every caller of the batch gets `e` (out of space: what to do about it).
    fn fail_all(&self, batch: &[Request], e: StorageError) -> Vec<Result<Reply>> {
        let e = match e {
            StorageError::NoSpace(_) => self.space.refusal(),
            e => e,
        };
        batch.iter().map(|_| Err(e.clone())).collect()
    }

    /// While full: compacts one chunk of the replaced history (its pages go to SQLite's free
    /// list), checkpoints so the WAL is reused from its start (a passive checkpoint: it never
    /// waits for readers, the next one finishes what it could not), and leaves the full state
    /// if there is room again.
    fn relieve(&mut self) {
        if let Err(e) = self.compact_chunk() {
            tracing::warn!(error = %e, "cannot compact the history while the store is full");
            self.rollback();
        }
        if let Err(e) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        {
            tracing::debug!(error = %e, "checkpoint while the store is full");
        }
        self.space.try_leave(&self.conn);
    }

    /// Compacts the history up to the [`RELIEF_CHUNK`]-th oldest replaced version (or all of
    /// it), in one transaction.
    fn compact_chunk(&mut self) -> Result<()> {
        let target: Option<Revision> = self
            .conn
            .prepare_cached(
                "SELECT next_rev FROM versions WHERE next_rev IS NOT NULL
                 ORDER BY next_rev LIMIT 1 OFFSET ?1",
            )?
            .query_row([RELIEF_CHUNK - 1], |r| r.get(0))
            .optional()?;
        let mut txn = Txn::new(&self.counters, 0);
        let target = target.unwrap_or(txn.revision);
        if target <= txn.compacted {
            return Ok(());
        }
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.compact(target, &mut txn)?;
        self.conn.execute_batch("COMMIT")?;
        self.pending.commit(txn.revision, txn.compacted_to);
        self.counters
            .compacted
            .store(txn.compacted, Ordering::Release);
        Ok(())
    }

    /// Applies the batch in one transaction; `Err` only for database failures (then the
    /// transaction is still open and must be rolled back). With `refuse_growth`, creates and
    /// updates are answered [`StorageError::NoSpace`] without touching the database.
    fn apply_all(
        &mut self,
        batch: &[Request],
        txn: &mut Txn,
        refuse_growth: bool,
    ) -> Result<Vec<Result<Reply>>> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let mut results = Vec::with_capacity(batch.len());
        // Taken from the statement cache once per batch, not once per write: a cache lookup
        // hashes and compares the SQL text and puts the statement back on drop.
        let mut insert_new = None;
        for req in batch {
            if refuse_growth && matches!(req.op, Op::Create { .. } | Op::Update { .. }) {
                results.push(Err(self.space.refusal()));
                continue;
            }
            let r = self.apply(&req.op, txn, &mut insert_new);
            if let Err(StorageError::Backend(_) | StorageError::NoSpace(_)) = &r {
                return r.map(|_| Vec::new());
            }
            results.push(r);
        }
        if let Some(target) = self
            .history
            .auto_compact_target(txn.revision, txn.compacted)
        {
            self.compact(target, txn)?;
        }
        if txn.live_delta != 0 {
            self.conn
                .prepare_cached("UPDATE meta SET value = value + ?1 WHERE name = 'live'")?
                .execute([txn.live_delta])?;
        }
        // Before the commit: a reader that sees the commit finds its changes here or in the
        // index database (see `pending`).
        self.pending.add(std::mem::take(&mut txn.index));
        // No write of the revision counter: it is the newest row's (see `schema::revision`).
        self.conn.execute_batch("COMMIT")?;
        Ok(results)
    }

    /// Applies one write. `insert_new` holds the insert statement of creates and updates for
    /// the rest of the batch once a write has prepared it.
    fn apply<'c>(
        &'c self,
        op: &Op,
        txn: &mut Txn,
        insert_new: &mut Option<CachedStatement<'c>>,
    ) -> Result<Reply> {
        match op {
            Op::Create {
                key,
                value,
                terms: t,
                expires_at,
            } => {
                if self.exists(key, txn)? {
                    return Err(StorageError::AlreadyExists { key: key.clone() });
                }
                let rev = txn.revision + 1;
                self.insert_version(insert_new, rev, key, value, (rev, None), *expires_at, t)?;
                txn.revision = rev;
                txn.live_delta += 1;
                txn.index.push(Entry {
                    rev,
                    key: key.as_str().into(),
                    change: Change::Put { terms: *t },
                    replaces: None,
                });
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: rev,
                    mod_revision: rev,
                };
                txn.written.insert(key.clone(), Some(kv.clone()));
                txn.events.push(WatchEvent::Put {
                    kv: kv.clone(),
                    prev: None,
                });
                Ok(Reply::Kv(kv))
            }
            Op::Update {
                key,
                value,
                expected,
                terms: t,
                expires_at,
            } => {
                let prev = check(key, self.current(key, txn)?, *expected)?;
                let rev = txn.revision + 1;
                let lineage = (prev.create_revision, Some(prev.mod_revision));
                self.insert_version(insert_new, rev, key, value, lineage, *expires_at, t)?;
                self.replace(prev.mod_revision, rev)?;
                txn.revision = rev;
                txn.index.push(Entry {
                    rev,
                    key: key.as_str().into(),
                    change: Change::Put { terms: *t },
                    replaces: Some(prev.mod_revision),
                });
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: prev.create_revision,
                    mod_revision: rev,
                };
                txn.written.insert(key.clone(), Some(kv.clone()));
                txn.events.push(WatchEvent::Put {
                    kv: kv.clone(),
                    prev: Some(prev),
                });
                Ok(Reply::Kv(kv))
            }
            Op::Delete { key, expected } => {
                let prev = check(key, self.current(key, txn)?, *expected)?;
                Ok(Reply::Deleted(self.remove(prev, txn)?))
            }
            Op::Expire { now, limit } => {
                let due: Vec<(Revision, String)> = {
                    let mut stmt = self.conn.prepare_cached(
                        "SELECT rev, key FROM versions
                         WHERE next_rev IS NULL AND expires_at IS NOT NULL AND expires_at <= ?1
                         ORDER BY expires_at LIMIT ?2",
                    )?;
                    let limit = i64::try_from(*limit).unwrap_or(i64::MAX);
                    stmt.query_map(params![now, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<rusqlite::Result<_>>()?
                };
                let mut n = 0;
                for (rev, key) in due {
                    // Skips a version this batch already replaced.
                    if let Some(prev) = self.current(&key, txn)?
                        && prev.mod_revision == rev
                    {
                        self.remove(prev, txn)?;
                        n += 1;
                    }
                }
                Ok(Reply::Count(n))
            }
            Op::Compact { revision } => {
                self.compact(*revision, txn)?;
                txn.hub_compact = Some(txn.compacted);
                Ok(Reply::Done)
            }
            #[cfg(test)]
            Op::Panic => panic!("injected writer failure"),
        }
    }

    /// Appends the version `rev` of `key` with its `(create_rev, prev_rev)` lineage, TTL
    /// deadline and index terms. `insert` holds the statement for the rest of the batch once
    /// a write has prepared it.
    #[allow(clippy::too_many_arguments)]
    fn insert_version<'c>(
        &'c self,
        insert: &mut Option<CachedStatement<'c>>,
        rev: Revision,
        key: &str,
        value: &Bytes,
        (create_rev, prev_rev): (Revision, Option<Revision>),
        expires_at: Option<i64>,
        t: &Terms,
    ) -> Result<()> {
        let stmt = match insert {
            Some(stmt) => stmt,
            None => insert.insert(self.conn.prepare_cached(
                "INSERT INTO versions(rev, key, value, create_rev, prev_rev, expires_at,
                                      t0, t1, t2, t3, t4, t5)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?),
        };
        stmt.execute(params![
            rev,
            key,
            &value[..],
            create_rev,
            prev_rev,
            expires_at,
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[5]
        ])?;
        Ok(())
    }

    /// Deletes the current version `prev`: a deletion row replacing it.
    fn remove(&self, prev: KeyValue, txn: &mut Txn) -> Result<Deleted> {
        let rev = txn.revision + 1;
        self.conn
            .prepare_cached(
                "INSERT INTO versions(rev, key, value, create_rev, prev_rev, expires_at, next_rev)
                 VALUES (?1, ?2, NULL, ?3, ?4, NULL, ?1)",
            )?
            .execute(params![
                rev,
                &prev.key,
                prev.create_revision,
                prev.mod_revision
            ])?;
        self.replace(prev.mod_revision, rev)?;
        txn.revision = rev;
        txn.live_delta -= 1;
        txn.index.push(Entry {
            rev,
            key: prev.key.as_str().into(),
            change: Change::Delete,
            replaces: Some(prev.mod_revision),
        });
        txn.written.insert(prev.key.clone(), None);
        txn.events.push(WatchEvent::Delete {
            prev: prev.clone(),
            revision: rev,
        });
        Ok(Deleted {
            prev,
            revision: rev,
        })
    }

    /// Marks the version at `old` as replaced by the write at `rev`.
    fn replace(&self, old: Revision, rev: Revision) -> Result<()> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE versions SET next_rev = ?2 WHERE rev = ?1 AND next_rev IS NULL",
            )?
            .execute(params![old, rev])?;
        if n != 1 {
            // The key index and the log disagree: refuse the whole batch rather than write a
            // history that does not add up.
            return Err(StorageError::Backend(format!(
                "version {old} is not a current version in the database"
            )));
        }
        Ok(())
    }

    fn compact(&self, revision: Revision, txn: &mut Txn) -> Result<()> {
        let target = revision.min(txn.revision);
        if target <= txn.compacted {
            return Ok(());
        }
        self.conn
            .prepare_cached("DELETE FROM versions WHERE next_rev IS NOT NULL AND next_rev <= ?1")?
            .execute([target])?;
        self.conn
            .prepare_cached("UPDATE meta SET value = ?1 WHERE name = 'compacted'")?
            .execute([target])?;
        txn.compacted = target;
        txn.compacted_to = Some(target);
        Ok(())
    }

    /// The current version of `key`: as this transaction left it, else the database's.
    fn current(&self, key: &str, txn: &Txn) -> Result<Option<KeyValue>> {
        if let Some(state) = txn.written.get(key) {
            return Ok(state.clone());
        }
        let rev = match self.current_revision(key)? {
            Some(rev) => rev,
            None => return Ok(None),
        };
        let kv = self
            .conn
            .prepare_cached("SELECT key, value, create_rev, rev FROM versions WHERE rev = ?1")?
            .query_row([rev], kv_from_row)
            .optional()?;
        match kv {
            Some(kv) if kv.key == key => Ok(Some(kv)),
            // The index and the log disagree: refuse the write rather than guess.
            _ => Err(StorageError::Backend(format!(
                "the index has version {rev} for {key}, which the log does not hold"
            ))),
        }
    }

    /// Whether `key` is live: as this transaction left it, else as the index says.
    fn exists(&self, key: &str, txn: &Txn) -> Result<bool> {
        match txn.written.get(key) {
            Some(state) => Ok(state.is_some()),
            None => Ok(self.current_revision(key)?.is_some()),
        }
    }

    /// The revision of `key`'s current version as committed: from the unmerged changes if
    /// they have the key (the newest state), else from the index database, which then has
    /// every change of it (changes leave [`PendingIndex`] only once merged).
    fn current_revision(&self, key: &str) -> Result<Option<Revision>> {
        match self.pending.latest(key) {
            Some(Latest::Live(rev)) => Ok(Some(rev)),
            Some(Latest::Deleted) => Ok(None),
            None => Ok(self
                .index
                .prepare_cached("SELECT rev FROM keys WHERE key = ?1 AND next_rev IS NULL")?
                .query_row([key], |r| r.get(0))
                .optional()?),
        }
    }
}

/// Checks that `key` exists and, if asked, is at revision `expected`.
fn check(key: &str, prev: Option<KeyValue>, expected: Option<Revision>) -> Result<KeyValue> {
    let prev = prev.ok_or_else(|| StorageError::NotFound {
        key: key.to_owned(),
    })?;
    match expected {
        Some(e) if e != prev.mod_revision => Err(StorageError::Conflict {
            key: key.to_owned(),
            expected: e,
            actual: prev.mod_revision,
        }),
        _ => Ok(prev),
    }
}
