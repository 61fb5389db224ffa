//! Reads the watch cache cannot answer: lists at revisions older than its ring, on a small
//! pool of read-only connections used off the async threads.
//!
//! In WAL mode readers never block the writer nor each other; each read runs in its own read
//! transaction, a consistent snapshot of the last commit.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use tokio::sync::Semaphore;

use super::schema::{kv_from_row, meta, open_reader, revision};
use crate::storage::types::prefix_end;
use crate::storage::{KeyValue, ListOptions, ListResult, Result, StorageError};

/// At most `size` connections; a read beyond that waits for one to be free.
pub(super) struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

impl ReadPool {
    pub fn new(path: PathBuf, size: usize) -> Result<Self> {
        let size = size.max(1);
        let idle = (0..size)
            .map(|_| open_reader(&path))
            .collect::<Result<Vec<_>>>()?;
        Ok(ReadPool {
            path,
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
            None => open_reader(&self.path)?,
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

/// One page of keys under `prefix` at one snapshot revision, from the version log: the
/// versions written at or before the revision and not replaced by then (see `schema`).
///
/// The log has no index by key (writes stay appends), so this scans it; the watch cache
/// answers every list at a revision inside its ring, this serves only older ones.
pub(super) fn list(conn: &Connection, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
    // One read transaction: the counters and the rows come from the same snapshot.
    conn.execute_batch("BEGIN")?;
    let r = list_in_txn(conn, prefix, opts);
    if let Err(e) = conn.execute_batch("COMMIT") {
        tracing::debug!(error = %e, "ending read transaction");
    }
    r
}

fn list_in_txn(conn: &Connection, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
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
    let sql = format!(
        "SELECT key, value, create_rev, rev FROM versions
         WHERE rev <= ?3 AND value IS NOT NULL AND (next_rev IS NULL OR next_rev > ?3)
           AND key {lower_op} ?1 {upper_sql}
         ORDER BY key LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut items: Vec<KeyValue> = stmt
        .query_map(params![lower, upper, at, fetch], kv_from_row)?
        .collect::<rusqlite::Result<_>>()?;
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
