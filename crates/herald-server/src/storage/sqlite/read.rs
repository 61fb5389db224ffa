//! Gets and lists, on a small pool of read-only connections used off the async threads.
//!
//! In WAL mode readers never block the writer nor each other; each read runs in its own read
//! transaction, a consistent snapshot of the last commit (every acknowledged write is in it:
//! the writer acknowledges only after its commit).
//!
//! **Indexes.** Each connection has the index database attached as `ix` (see `index_db`).
//! A read that needs an index takes its snapshot of the log first, then the candidates among
//! the unmerged changes ([`PendingIndex`]), then reads the index database: a change leaves
//! the window only after the index database has committed it, so every version the snapshot
//! holds is found in one or the other. Every candidate is checked against the snapshot of the
//! log (its key, its revision, whether it is visible at the read's revision); the index
//! database is read relative to that revision too (a version it marks replaced after the
//! snapshot is still a candidate).

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::Semaphore;

use super::index_db;
use super::pending::PendingIndex;
use super::schema::{kv_from_row, meta, revision};
use crate::storage::types::prefix_end;
use crate::storage::{
    INDEX_SLOTS, KeyValue, ListOptions, ListOrder, ListResult, Result, Revision, StorageError,
};

/// At most `size` connections; a read beyond that waits for one to be free.
pub(super) struct ReadPool {
    path: PathBuf,
    index_path: PathBuf,
    cache_bytes: usize,
    idle: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

impl ReadPool {
    /// `cache_bytes` is each connection's page cache, half for the log and half for the index.
    pub fn new(
        path: PathBuf,
        index_path: PathBuf,
        size: usize,
        cache_bytes: usize,
    ) -> Result<Self> {
        let size = size.max(1);
        let idle = (0..size)
            .map(|_| open_reader(&path, &index_path, cache_bytes))
            .collect::<Result<Vec<_>>>()?;
        Ok(ReadPool {
            path,
            index_path,
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
            None => open_reader(&self.path, &self.index_path, self.cache_bytes)?,
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

fn open_reader(
    path: &std::path::Path,
    index_path: &std::path::Path,
    cache_bytes: usize,
) -> Result<Connection> {
    let conn = super::schema::open_reader(path, cache_bytes / 2)?;
    index_db::attach(&conn, index_path, cache_bytes / 2)?;
    Ok(conn)
}

/// Runs `f` in one read transaction (one snapshot of the log and, from its first read of
/// it, of the index database).
fn in_txn<R>(conn: &Connection, f: impl FnOnce() -> Result<R>) -> Result<R> {
    conn.execute_batch("BEGIN")?;
    let r = f();
    if let Err(e) = conn.execute_batch("COMMIT") {
        tracing::debug!(error = %e, "ending read transaction");
    }
    r
}

/// The current version of `key`, if it is live.
pub(super) fn get(
    conn: &Connection,
    pending: &PendingIndex,
    key: &str,
) -> Result<Option<KeyValue>> {
    in_txn(conn, || {
        // The log's snapshot, then the unmerged changes, then the index (see the module docs).
        let at = revision(conn)?;
        let mut revs = pending.key_revisions(key);
        let mut stmt = conn.prepare_cached(
            "SELECT rev FROM ix.keys WHERE key = ?1 AND rev <= ?2
             AND (next_rev IS NULL OR next_rev > ?2)",
        )?;
        for rev in stmt.query_map(params![key, at], |r| r.get(0))? {
            revs.push(rev?);
        }
        revs.sort_unstable_by(|a, b| b.cmp(a));
        revs.dedup();
        for rev in revs {
            if let Some(kv) = visible(conn, rev, at)?.filter(|kv| kv.key == key) {
                return Ok(Some(kv));
            }
        }
        Ok(None)
    })
}

/// The version at `rev` if it is visible at revision `at` (written by then, not replaced by
/// then, not a deletion).
fn visible(conn: &Connection, rev: Revision, at: Revision) -> Result<Option<KeyValue>> {
    if rev > at {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached(
            "SELECT key, value, create_rev, rev FROM versions
             WHERE rev = ?1 AND (next_rev IS NULL OR next_rev > ?2)",
        )?
        .query_row(params![rev, at], kv_from_row)
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
/// filtering in the index, and adds the unmerged changes in range; with one
/// ([`ListOptions::index`]) it reads the versions holding the query's term in its slot (and
/// the unmerged ones) and sorts them by key: O(versions of matching keys), whatever
/// the store holds. In write order ([`ListOrder::Written`]) it reads the table, or the term's
/// index entries, from the revision after the previous page on: O(versions examined) for a
/// page, with no sort (see [`fastest`] for when a list is read so).
pub(super) fn list(
    conn: &Connection,
    pending: &PendingIndex,
    prefix: &str,
    opts: &ListOptions,
    indexed: &Indexed,
) -> Result<ListResult> {
    // One read transaction: the counters and the rows come from the same snapshot.
    in_txn(conn, || list_in_txn(conn, pending, prefix, opts, indexed))
}

fn list_in_txn(
    conn: &Connection,
    pending: &PendingIndex,
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
    // The unmerged changes, before the first read of the index database (see the module
    // docs): those with the term, else those of keys under the prefix (none needed for a list
    // in write order without an index query, which reads the log itself).
    let candidates = match (index, opts.order) {
        (Some((slot, term)), _) => pending.term_revisions(slot, term),
        (None, ListOrder::Written { .. }) => Vec::new(),
        (None, _) => pending.range_revisions(
            Bound::Included(prefix),
            upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
        ),
    };
    let order = match (opts.order, &opts.start_after) {
        (ListOrder::Fastest, None) => {
            fastest(conn, candidates.len(), prefix, &upper, index, limit)?
        }
        (ListOrder::Fastest, Some(_)) => ListOrder::Key,
        (order, _) => order,
    };
    // A deletion row is its own replacement (`next_rev = rev`), so the visibility test alone
    // leaves it out.
    let visible_v = "v.rev <= ?3 AND (v.next_rev IS NULL OR v.next_rev > ?3)";
    let upper_v = upper_bound_sql(&upper, "v.key");
    let in_range = |kv: &KeyValue| {
        kv.key.as_str() >= prefix && upper.as_deref().is_none_or(|u| kv.key.as_str() < u)
    };
    let mut items: Vec<KeyValue> = match (order, index) {
        (ListOrder::Written { after }, None) => {
            // The table itself, from `after` on: its pages in file order.
            let sql = format!(
                "SELECT key, value, create_rev, rev FROM versions v NOT INDEXED
                 WHERE rev > ?5 AND {visible_v} AND key >= ?1 {upper_v}
                 ORDER BY rev LIMIT ?4"
            );
            conn.prepare_cached(&sql)?
                .query_map(params![prefix, upper, at, fetch, after], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?
        }
        (ListOrder::Written { after }, Some((slot, term))) => {
            // A term's index entries are in revision order: no sort.
            let sql = format!(
                "SELECT v.key, v.value, v.create_rev, v.rev FROM ix.t{slot} t
                 CROSS JOIN versions v ON v.rev = t.rev
                 WHERE t.term = ?6 AND t.rev > ?5 AND t.rev <= ?3 AND v.t{slot} = ?6
                 AND {visible_v} AND v.key >= ?1 {upper_v}
                 ORDER BY t.rev LIMIT ?4"
            );
            let mut items: Vec<KeyValue> = conn
                .prepare_cached(&sql)?
                .query_map(params![prefix, upper, at, fetch, after, term], kv_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            for rev in candidates.into_iter().filter(|&r| r > after) {
                items.extend(visible(conn, rev, at)?.filter(in_range));
            }
            items.sort_unstable_by_key(|kv| kv.mod_revision);
            items.dedup_by_key(|kv| kv.mod_revision);
            items
        }
        (_, index) => {
            let (lower_op, lower) = match opts.start_after.as_deref() {
                Some(s) if s >= prefix => (">", s),
                _ => (">=", prefix),
            };
            let after_lower = |kv: &KeyValue| {
                if lower_op == ">" {
                    kv.key.as_str() > lower
                } else {
                    kv.key.as_str() >= lower
                }
            };
            let mut items: Vec<KeyValue> = match index {
                None => {
                    let upper_k = upper_bound_sql(&upper, "k.key");
                    let sql = format!(
                        "SELECT v.key, v.value, v.create_rev, v.rev FROM ix.keys k
                         CROSS JOIN versions v ON v.rev = k.rev AND v.key = k.key
                         WHERE k.key {lower_op} ?1 {upper_k} AND k.rev <= ?3
                         AND (k.next_rev IS NULL OR k.next_rev > ?3) AND {visible_v}
                         ORDER BY k.key LIMIT ?4"
                    );
                    conn.prepare_cached(&sql)?
                        .query_map(params![lower, upper, at, fetch], kv_from_row)?
                        .collect::<rusqlite::Result<_>>()?
                }
                Some((slot, term)) => {
                    let sql = format!(
                        "SELECT v.key, v.value, v.create_rev, v.rev FROM ix.t{slot} t
                         CROSS JOIN versions v ON v.rev = t.rev
                         WHERE t.term = ?5 AND t.rev <= ?3 AND v.t{slot} = ?5
                         AND v.key {lower_op} ?1 {upper_v} AND {visible_v}
                         ORDER BY v.key LIMIT ?4"
                    );
                    conn.prepare_cached(&sql)?
                        .query_map(params![lower, upper, at, fetch, term], kv_from_row)?
                        .collect::<rusqlite::Result<_>>()?
                }
            };
            if !candidates.is_empty() {
                for rev in candidates {
                    items.extend(
                        visible(conn, rev, at)?.filter(|kv| in_range(kv) && after_lower(kv)),
                    );
                }
                items.sort_unstable_by(|a, b| a.key.cmp(&b.key));
                items.dedup_by_key(|kv| kv.mod_revision);
            }
            items
        }
    };
    if let Ok(fetch) = usize::try_from(fetch) {
        items.truncate(fetch);
    }
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

/// The SQL of a list's upper key bound `?2` on `column` (`prefix_end`, `None` when there is
/// none): a term of its own, so SQLite bounds the key index's range with it (`?2 IS NULL OR
/// key < ?2` would leave it a filter, and a short prefix would walk the rest of the index).
fn upper_bound_sql(upper: &Option<String>, column: &str) -> String {
    if upper.is_some() {
        format!("AND {column} < ?2")
    } else {
        "AND ?2 IS NULL".to_owned()
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
/// `unmerged` is the number of matching changes not in the index database yet.
fn fastest(
    conn: &Connection,
    unmerged: usize,
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
    let unmerged = i64::try_from(unmerged).unwrap_or(i64::MAX);
    let written = match index {
        Some((slot, term)) => {
            let sql =
                format!("SELECT count(*) FROM (SELECT 1 FROM ix.t{slot} WHERE term = ?1 LIMIT ?2)");
            entries(&sql, &[&term, &page])?.saturating_add(unmerged) >= page
        }
        None => {
            let live = i64::try_from(meta(conn, "live")?).unwrap_or(i64::MAX);
            let enough = (live / 8).max(page);
            let upper_sql = upper_bound_sql(upper, "key");
            let sql = format!(
                "SELECT count(*) FROM (SELECT 1 FROM ix.keys WHERE key >= ?1 {upper_sql} LIMIT ?3)"
            );
            entries(&sql, &[&prefix, upper, &enough])?.saturating_add(unmerged) >= enough
        }
    };
    Ok(if written {
        ListOrder::Written { after: 0 }
    } else {
        ListOrder::Key
    })
}
