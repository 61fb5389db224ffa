//! Gets and lists, on a small pool of read-only connections used off the async threads.
//!
//! In WAL mode readers never block the writer nor each other; each read runs in its own read
//! transaction, a consistent snapshot of the last commit (every acknowledged write is in it:
//! the writer acknowledges only after its commit).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::Semaphore;

use super::schema::{kv_from_row, meta, open_reader, revision};
use crate::storage::types::prefix_end;
use crate::storage::{INDEX_SLOTS, KeyValue, ListOptions, ListResult, Result, StorageError};

/// At most `size` connections; a read beyond that waits for one to be free.
pub(super) struct ReadPool {
    path: PathBuf,
    cache_bytes: usize,
    idle: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

impl ReadPool {
    pub fn new(path: PathBuf, size: usize, cache_bytes: usize) -> Result<Self> {
        let size = size.max(1);
        let idle = (0..size)
            .map(|_| open_reader(&path, cache_bytes))
            .collect::<Result<Vec<_>>>()?;
        Ok(ReadPool {
            path,
            cache_bytes,
            idle: Mutex::new(idle),
            permits: Semaphore::new(size),
        })
    }

    /// Runs `f` on a pooled connection in the blocking thread pool.
    pub async fn with<R, F>(self: &Arc<Self>, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StorageError::Closed)?;
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match pooled {
            Some(c) => c,
            // A connection lost to a panicking read is replaced.
            None => open_reader(&self.path, self.cache_bytes)?,
        };
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let r = f(&conn);
            pool.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
            r
        })
        .await
        .map_err(|e| StorageError::Backend(format!("read task failed: {e}")))?
    }
}

/// The current version of `key`, if it is live.
pub(super) fn get(conn: &Connection, key: &str) -> Result<Option<KeyValue>> {
    Ok(conn
        .prepare_cached(
            "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_key
             WHERE key = ?1 AND next_rev IS NULL",
        )?
        .query_row([key], kv_from_row)
        .optional()?)
}

/// Whether every version a list can still see has index terms: false while versions
/// written before `meta.indexed_from` (a store upgraded from schema 2) are live or retained
/// for older revisions. Once true it stays true (no such version is ever written again), so
/// it is asked of the database only until then.
#[derive(Debug, Default)]
pub(super) struct Indexed(AtomicBool);

impl Indexed {
    fn check(&self, conn: &Connection) -> Result<bool> {
        if self.0.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let from = meta(conn, "indexed_from")?;
        let unindexed: Option<i64> = conn
            .prepare_cached("SELECT 1 FROM versions WHERE rev < ?1 AND value IS NOT NULL LIMIT 1")?
            .query_row([from], |r| r.get(0))
            .optional()?;
        let indexed = unindexed.is_none();
        self.0.store(indexed, Ordering::Relaxed);
        Ok(indexed)
    }
}

/// One page of keys under `prefix` at one snapshot revision, from the version log: the
/// versions written at or before the revision and not replaced by then (see `schema`).
///
/// Without an index query it walks the key index from the page's first key, filtering in the
/// index; with one ([`ListOptions::index`]) it reads the versions holding the query's term in
/// its slot and sorts them by key: O(versions of matching keys), whatever the store holds.
pub(super) fn list(
    conn: &Connection,
    prefix: &str,
    opts: &ListOptions,
    indexed: &Indexed,
) -> Result<ListResult> {
    // One read transaction: the counters and the rows come from the same snapshot.
    conn.execute_batch("BEGIN")?;
    let r = list_in_txn(conn, prefix, opts, indexed);
    if let Err(e) = conn.execute_batch("COMMIT") {
        tracing::debug!(error = %e, "ending read transaction");
    }
    r
}

fn list_in_txn(
    conn: &Connection,
    prefix: &str,
    opts: &ListOptions,
    indexed: &Indexed,
) -> Result<ListResult> {
    let current = revision(conn)?;
    let compacted = meta(conn, "compacted")?;
    let at = opts.at_revision.unwrap_or(current);
    if at < compacted {
        return Err(StorageError::Expired {
            requested: at,
            oldest: compacted,
        });
    }
    if at > current {
        return Err(StorageError::FutureRevision {
            requested: at,
            current,
        });
    }
    let (lower_op, lower) = match opts.start_after.as_deref() {
        Some(s) if s >= prefix => (">", s),
        _ => (">=", prefix),
    };
    let upper = prefix_end(prefix);
    let upper_sql = if upper.is_some() {
        "AND key < ?2"
    } else {
        "AND ?2 IS NULL"
    };
    let limit = opts.limit.filter(|&l| l > 0);
    // One more than asked, to learn whether more remain.
    let fetch = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX - 1) + 1);
    let index = opts
        .index
        .as_ref()
        .filter(|q| q.slot < INDEX_SLOTS)
        .map(|q| (q.slot, crate::storage::index::term(&q.value)));
    let index = match index {
        Some(q) if indexed.check(conn)? => Some(q),
        _ => None,
    };
    // A deletion row is its own replacement (`next_rev = rev`), so the visibility test alone
    // leaves it out, and the key index answers it without reading the row.
    let mut items: Vec<KeyValue> = match index {
        None => {
            let sql = format!(
                "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_key
                 WHERE key {lower_op} ?1 {upper_sql}
                   AND rev <= ?3 AND (next_rev IS NULL OR next_rev > ?3)
                 ORDER BY key LIMIT ?4"
            );
            conn.prepare_cached(&sql)?
                .query_map(params![lower, upper, at, fetch], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?
        }
        Some((slot, term)) => {
            let sql = format!(
                "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_t{slot}
                 WHERE t{slot} = ?5 AND key {lower_op} ?1 {upper_sql}
                   AND rev <= ?3 AND (next_rev IS NULL OR next_rev > ?3)
                 ORDER BY key LIMIT ?4"
            );
            conn.prepare_cached(&sql)?
                .query_map(params![lower, upper, at, fetch, term], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?
        }
    };
    let more = limit.is_some_and(|l| items.len() > l);
    if let Some(l) = limit {
        items.truncate(l);
    }
    Ok(ListResult {
        items,
        revision: at,
        more,
    })
}
