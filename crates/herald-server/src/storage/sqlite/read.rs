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
use crate::storage::{
    INDEX_SLOTS, KeyValue, ListOptions, ListOrder, ListResult, Result, StorageError,
};

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
/// In key order without an index query it walks the key index from the page's first key,
/// filtering in the index; with one ([`ListOptions::index`]) it reads the versions holding
/// the query's term in its slot and sorts them by key: O(versions of matching keys), whatever
/// the store holds. In write order ([`ListOrder::Written`]) it reads the table, or the term's
/// index entries, from the revision after the previous page on: O(versions examined) for a
/// page, with no sort (see [`fastest`] for when a list is read so).
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
    let upper = prefix_end(prefix);
    let upper_sql = upper_bound(&upper);
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
    let order = match (opts.order, &opts.start_after) {
        (ListOrder::Fastest, None) => fastest(conn, prefix, &upper, index, limit)?,
        (ListOrder::Fastest, Some(_)) => ListOrder::Key,
        (order, _) => order,
    };
    // A deletion row is its own replacement (`next_rev = rev`), so the visibility test alone
    // leaves it out, and the key index answers it without reading the row.
    let visible = "rev <= ?3 AND (next_rev IS NULL OR next_rev > ?3)";
    let mut items: Vec<KeyValue> = match (order, index) {
        (ListOrder::Written { after }, None) => {
            // The table itself, from `after` on: its pages in file order.
            let sql = format!(
                "SELECT key, value, create_rev, rev FROM versions NOT INDEXED
                 WHERE rev > ?5 AND {visible} AND key >= ?1 {upper_sql}
                 ORDER BY rev LIMIT ?4"
            );
            conn.prepare_cached(&sql)?
                .query_map(params![prefix, upper, at, fetch, after], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?
        }
        (ListOrder::Written { after }, Some((slot, term))) => {
            // A term's index entries are in revision order: no sort.
            let sql = format!(
                "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_t{slot}
                 WHERE t{slot} = ?6 AND rev > ?5 AND {visible} AND key >= ?1 {upper_sql}
                 ORDER BY rev LIMIT ?4"
            );
            conn.prepare_cached(&sql)?
                .query_map(params![prefix, upper, at, fetch, after, term], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?
        }
        (_, index) => {
            let (lower_op, lower) = match opts.start_after.as_deref() {
                Some(s) if s >= prefix => (">", s),
                _ => (">=", prefix),
            };
            match index {
                None => {
                    let sql = format!(
                        "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_key
                         WHERE key {lower_op} ?1 {upper_sql} AND {visible}
                         ORDER BY key LIMIT ?4"
                    );
                    conn.prepare_cached(&sql)?
                        .query_map(params![lower, upper, at, fetch], kv_from_row)?
                        .collect::<rusqlite::Result<_>>()?
                }
                Some((slot, term)) => {
                    let sql = format!(
                        "SELECT key, value, create_rev, rev FROM versions INDEXED BY versions_t{slot}
                         WHERE t{slot} = ?5 AND key {lower_op} ?1 {upper_sql} AND {visible}
                         ORDER BY key LIMIT ?4"
                    );
                    conn.prepare_cached(&sql)?
                        .query_map(params![lower, upper, at, fetch, term], kv_from_row)?
                        .collect::<rusqlite::Result<_>>()?
                }
            }
        }
    };
    let more = limit.is_some_and(|l| items.len() > l);
    if let Some(l) = limit {
        items.truncate(l);
    }
    let order = match order {
        ListOrder::Written { after } => ListOrder::Written {
            after: items.last().map_or(after, |kv| kv.mod_revision),
        },
        _ => ListOrder::Key,
    };
    Ok(ListResult {
        items,
        revision: at,
        more,
        order,
    })
}

/// The SQL of a list's upper key bound `?2` (`prefix_end`, `None` when there is none): a
/// term of its own, so SQLite bounds the key index's range with it (`?2 IS NULL OR key < ?2`
/// would leave it a filter, and a short prefix would walk the rest of the index).
fn upper_bound(upper: &Option<String>) -> &'static str {
    if upper.is_some() {
        "AND key < ?2"
    } else {
        "AND ?2 IS NULL"
    }
}

/// The order a list that may come in either reads faster in ([`ListOrder::Fastest`]).
///
/// Write order reads the table (or a term's index entries) sequentially, examining every
/// version from the start on, a page read for every few versions; key order reads each item's
/// row at a random place, a page read for every item (from the OS's page cache, 2.5–3 times
/// the cost of the sequential read per item; from disk, far more). So a list is read in write
/// order when it returns at least an eighth of the live keys (counted in the key index, at
/// most that many entries) and more than one page; with an index query, as soon as it holds
/// more than one page (a key-ordered page of a term reads and sorts every version holding
/// it). Small lists, which fit one page, stay in key order.
fn fastest(
    conn: &Connection,
    prefix: &str,
    upper: &Option<String>,
    index: Option<(usize, i64)>,
    limit: Option<usize>,
) -> Result<ListOrder> {
    let Some(limit) = limit else {
        // One page whatever the order.
        return Ok(ListOrder::Key);
    };
    let page = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
    let entries = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<i64> {
        Ok(conn.prepare_cached(sql)?.query_row(p, |r| r.get(0))?)
    };
    let written = match index {
        Some((slot, term)) => {
            let sql = format!(
                "SELECT count(*) FROM (SELECT 1 FROM versions INDEXED BY versions_t{slot}
                 WHERE t{slot} = ?1 LIMIT ?2)"
            );
            entries(&sql, &[&term, &page])? >= page
        }
        None => {
            let live = i64::try_from(meta(conn, "live")?).unwrap_or(i64::MAX);
            let enough = (live / 8).max(page);
            let upper_sql = upper_bound(upper);
            let sql = format!(
                "SELECT count(*) FROM (SELECT 1 FROM versions INDEXED BY versions_key
                 WHERE key >= ?1 {upper_sql} LIMIT ?3)"
            );
            entries(&sql, &[&prefix, upper, &enough])? >= enough
        }
    };
    Ok(if written {
        ListOrder::Written { after: 0 }
    } else {
        ListOrder::Key
    })
}
