//! Reads: a small pool of read-only connections, used off the async threads.
//!
//! In WAL mode readers never block the writer nor each other; each read runs in its own read
//! transaction, a consistent snapshot of the last commit.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, Row, params};
use tokio::sync::Semaphore;

use super::schema::{meta, open_reader};
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

fn kv_from_row(r: &Row<'_>) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: r.get(0)?,
        value: Bytes::copy_from_slice(r.get_ref(1)?.as_blob()?),
        create_revision: r.get(2)?,
        mod_revision: r.get(3)?,
    })
}

/// The current state of one key.
pub(super) fn get(conn: &Connection, key: &str) -> Result<Option<KeyValue>> {
    Ok(conn
        .prepare_cached("SELECT key, value, create_rev, mod_rev FROM kv WHERE key = ?1")?
        .query_row([key], kv_from_row)
        .optional()?)
}

/// One page of keys under `prefix` at one snapshot revision (see the module doc of `schema`
/// for how older states are rebuilt from the log).
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
    let current = meta(conn, "revision")?;
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

    // Keys not written since `at`: their current row is their state at `at`.
    let mut items: Vec<KeyValue> = {
        let sql = format!(
            "SELECT key, value, create_rev, mod_rev FROM kv
             WHERE key {lower_op} ?1 {upper_sql} AND mod_rev <= ?3
             ORDER BY key LIMIT ?4"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        stmt.query_map(params![lower, upper, at, fetch], kv_from_row)?
            .collect::<rusqlite::Result<_>>()?
    };
    if at < current {
        // Keys written since `at`: their state at `at` is the previous state recorded by their
        // first log row after `at` (none if they did not exist then). SQLite returns the other
        // columns of the row holding MIN(rev).
        let sql = format!(
            "SELECT key, prev_value, prev_create_rev, prev_mod_rev FROM (
                 SELECT key, prev_value, prev_create_rev, prev_mod_rev, MIN(rev)
                 FROM log WHERE rev > ?3 AND key {lower_op} ?1 {upper_sql}
                 GROUP BY key)
             WHERE prev_mod_rev IS NOT NULL ORDER BY key LIMIT ?4"
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let older: Vec<KeyValue> = stmt
            .query_map(params![lower, upper, at, fetch], kv_from_row)?
            .collect::<rusqlite::Result<_>>()?;
        if !older.is_empty() {
            items = merge_sorted(items, older);
        }
    }
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

/// Merges two key-sorted lists with disjoint keys.
fn merge_sorted(a: Vec<KeyValue>, b: Vec<KeyValue>) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.key < y.key,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        let next = if take_a { a.next() } else { b.next() };
        out.extend(next);
    }
}
