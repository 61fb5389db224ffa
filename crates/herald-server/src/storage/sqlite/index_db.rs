//! The index database: the key index and the term indexes of the version log, in a file of
//! their own ([`INDEX_FILE`]), written in sorted batches by the merger thread.
//!
//! **Why a file of its own.** An index entry lands at a random page of its index, and a
//! commit writes (and fsyncs) every page it changed: written with each group commit, the
//! key, name and uid indexes cost three 4 KiB pages per create, more than the version itself.
//! Written here in batches of thousands of writes, sorted, without an fsync per commit, a page
//! takes many entries per write. The writer's commits then write only the version log.
//!
//! **Nothing here is the authority.** Every entry is derived from a row of the version log
//! (`schema`): the merger writes the changes the writer left in [`PendingIndex`], and an open
//! merges every row the file does not have yet (`meta.merged` is the revision it is complete
//! up to; a missing or unreadable file is rebuilt from the whole log). The file uses WAL with
//! `synchronous=NORMAL`: a power loss can take back its last merges, never corrupt it, and
//! the next open merges them again. Readers check every entry against the log.
//!
//! Tables:
//! - `keys` (`key, rev` → `next_rev, t0…t5`): every version of every key that the log keeps,
//!   except deletions, with the revision that replaced it (`NULL` while current). A key's
//!   current version is its entry with `next_rev IS NULL`; a list at revision `R` walks the
//!   keys in order and keeps the entries with `rev <= R` not replaced by `R`.
//! - `keys_replaced` (`next_rev`): the replaced versions, for compaction.
//! - `t0`…`t5` (`term, rev`): the versions holding a term in a slot.
//! - `meta`: `merged` (above), `compacted` (the last compaction applied here).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension as _, params};

use super::pending::{Change, Entry, MergeBatch, PendingIndex};
use super::schema::{has_table, meta, revision, set_cache, use_wal};
use crate::storage::{INDEX_SLOTS, Result, Revision, StorageError};

/// The index database's file name, next to the version log's `herald.db`.
pub const INDEX_FILE: &str = "herald-index.db";

/// The schema version of the index database; a file of another version is rebuilt.
const INDEX_SCHEMA: Revision = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keys (
    key TEXT NOT NULL,
    rev INTEGER NOT NULL,
    next_rev INTEGER,
    t0 INTEGER, t1 INTEGER, t2 INTEGER, t3 INTEGER, t4 INTEGER, t5 INTEGER,
    PRIMARY KEY (key, rev)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS keys_replaced ON keys(next_rev) WHERE next_rev IS NOT NULL;
CREATE TABLE IF NOT EXISTS t0 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS t1 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS t2 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS t3 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS t4 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS t5 (term INTEGER NOT NULL, rev INTEGER NOT NULL, PRIMARY KEY (term, rev)) WITHOUT ROWID;
";

/// Versions of the log merged per transaction when an open catches the file up.
const CATCH_UP_CHUNK: i64 = 65_536;

/// Opens (creating, or rebuilding if it is not an index of this version) the index database
/// for writing; the caller then [`catch_up`]s it with the log.
pub(super) fn open_writer(path: &Path, cache_bytes: usize) -> Result<Connection> {
    let name = |e: StorageError| match e {
        StorageError::Backend(cause) => {
            StorageError::Backend(format!("{}: {cause}", path.display()))
        }
        e => e,
    };
    match prepare(path, cache_bytes) {
        Ok(conn) => Ok(conn),
        Err(e) => {
            // Derived data: a file that cannot be used is rebuilt from the log.
            tracing::warn!(path = %path.display(), error = %e, "rebuilding the index database");
            for suffix in ["", "-wal", "-shm"] {
                let f = format!("{}{suffix}", path.display());
                if let Err(e) = std::fs::remove_file(&f)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(StorageError::Backend(format!("cannot remove {f}: {e}")));
                }
            }
            crate::files::create_file(path).map_err(|e| {
                StorageError::Backend(format!("cannot create {}: {e}", path.display()))
            })?;
            prepare(path, cache_bytes).map_err(name)
        }
    }
}

fn prepare(path: &Path, cache_bytes: usize) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    if !has_table(&conn, "meta")? {
        // Only possible on a new database, before its first table and before WAL mode.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    use_wal(&conn)?;
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;")?;
    set_cache(&conn, "main", cache_bytes)?;
    conn.execute_batch(SCHEMA)?;
    let version: Option<Revision> = conn
        .query_row("SELECT value FROM meta WHERE name = 'schema'", [], |r| {
            r.get(0)
        })
        .optional()?;
    match version {
        None => {
            conn.execute(
                "INSERT INTO meta(name, value) VALUES ('schema', ?1), ('merged', 0), ('compacted', 0)",
                [INDEX_SCHEMA],
            )?;
        }
        Some(v) if v == INDEX_SCHEMA => {}
        Some(v) => {
            return Err(StorageError::Backend(format!(
                "index schema {v}, this version of herald writes {INDEX_SCHEMA}"
            )));
        }
    }
    Ok(conn)
}

/// Opens a read-only connection to the index database (for the writer's lookups), with a
/// page cache of `cache_bytes`.
pub(super) fn open_reader(path: &Path, cache_bytes: usize) -> Result<Connection> {
    super::schema::open_reader(path, cache_bytes)
}

/// Attaches the index database to a read connection of the log as `ix`.
pub(super) fn attach(conn: &Connection, path: &Path, cache_bytes: usize) -> Result<()> {
    let path = path
        .to_str()
        .ok_or_else(|| StorageError::Backend(format!("{} is not UTF-8", path.display())))?;
    conn.execute("ATTACH DATABASE ?1 AS ix", [path])?;
    conn.execute_batch("PRAGMA ix.mmap_size = 0;")?;
    set_cache(conn, "ix", cache_bytes)
}

/// The revision the index database is complete up to.
pub(super) fn merged(conn: &Connection) -> Result<Revision> {
    meta(conn, "merged")
}

/// Merges every version of the log (`log`, the writer's connection) that the index database
/// (`ix`) does not have yet, and the log's compaction; returns the revision it is then
/// complete up to. An index ahead of the log (not this log's, or restored apart from it) is
/// emptied and rebuilt.
pub(super) fn catch_up(log: &Connection, ix: &Connection) -> Result<Revision> {
    let current = revision(log)?;
    let mut from = merged(ix)?;
    if from > current {
        tracing::warn!(
            merged = from,
            current,
            "the index database is ahead of the log; rebuilding it"
        );
        ix.execute_batch(
            "BEGIN IMMEDIATE; DELETE FROM keys; DELETE FROM t0; DELETE FROM t1; DELETE FROM t2;
             DELETE FROM t3; DELETE FROM t4; DELETE FROM t5;
             UPDATE meta SET value = 0 WHERE name IN ('merged', 'compacted'); COMMIT;",
        )?;
        from = 0;
    }
    let behind: i64 = log
        .prepare_cached("SELECT count(*) FROM versions WHERE rev > ?1")?
        .query_row([from], |r| r.get(0))?;
    if from == 0 && behind > 0 {
        return rebuild(log_path(log)?, ix, current, behind);
    }
    let mut stmt = log.prepare(
        "SELECT rev, key, value IS NULL, prev_rev, t0, t1, t2, t3, t4, t5 FROM versions
         WHERE rev > ?1 ORDER BY rev LIMIT ?2",
    )?;
    loop {
        let entries: Vec<Arc<Entry>> = stmt
            .query_map(params![from, CATCH_UP_CHUNK], |r| {
                let deleted: bool = r.get(2)?;
                Ok(Arc::new(Entry {
                    rev: r.get(0)?,
                    key: r.get::<_, String>(1)?.into(),
                    change: if deleted {
                        Change::Delete
                    } else {
                        Change::Put {
                            terms: [
                                r.get(4)?,
                                r.get(5)?,
                                r.get(6)?,
                                r.get(7)?,
                                r.get(8)?,
                                r.get(9)?,
                            ],
                        }
                    },
                    replaces: r.get(3)?,
                }))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let Some(last) = entries.last().map(|e| e.rev) else {
            break;
        };
        merge(
            ix,
            &MergeBatch {
                entries,
                compact: None,
                upto: last,
            },
        )?;
        from = last;
    }
    let compacted = meta(log, "compacted")?;
    if compacted > meta(ix, "compacted")? || from < current {
        merge(
            ix,
            &MergeBatch {
                entries: Vec::new(),
                compact: Some(compacted),
                upto: current,
            },
        )?;
    }
    merged(ix)
}

/// The file of the connection's main database.
fn log_path(log: &Connection) -> Result<String> {
    log.path()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| StorageError::Backend("the log has no file".into()))
}

/// Builds an empty index database from the whole log (`log_path`) in one transaction, each
/// table filled in its own order (an external sort, then appends: far faster than merging a
/// large log in batches, whose entries land all over each index).
fn rebuild(
    log_path: String,
    ix: &Connection,
    current: Revision,
    versions: i64,
) -> Result<Revision> {
    tracing::info!(versions, "building the index database from the log");
    let started = std::time::Instant::now();
    // The sort spills to temporary files rather than holding the log's keys in memory.
    ix.execute_batch("PRAGMA temp_store=FILE;")?;
    ix.execute("ATTACH DATABASE ?1 AS log", [&log_path])?;
    let built = (|| -> Result<()> {
        ix.execute_batch("BEGIN IMMEDIATE")?;
        ix.execute_batch(
            "DELETE FROM keys; DELETE FROM t0; DELETE FROM t1; DELETE FROM t2; DELETE FROM t3;
             DELETE FROM t4; DELETE FROM t5;
             INSERT INTO keys(key, rev, next_rev, t0, t1, t2, t3, t4, t5)
                 SELECT key, rev, next_rev, t0, t1, t2, t3, t4, t5 FROM log.versions
                 WHERE value IS NOT NULL ORDER BY key, rev;",
        )?;
        for slot in 0..INDEX_SLOTS {
            ix.execute_batch(&format!(
                "INSERT INTO t{slot}(term, rev) SELECT t{slot}, rev FROM log.versions
                 WHERE t{slot} IS NOT NULL AND value IS NOT NULL ORDER BY t{slot}, rev;"
            ))?;
        }
        ix.execute(
            "UPDATE meta SET value = CASE name WHEN 'merged' THEN ?1
                 ELSE (SELECT value FROM log.meta WHERE name = 'compacted') END
             WHERE name IN ('merged', 'compacted')",
            [current],
        )?;
        ix.execute_batch("COMMIT")?;
        Ok(())
    })();
    if built.is_err()
        && let Err(e) = ix.execute_batch("ROLLBACK")
    {
        tracing::debug!(error = %e, "rolling back the index build");
    }
    let detached = ix.execute_batch("DETACH DATABASE log; PRAGMA temp_store=MEMORY;");
    built?;
    detached?;
    // The build went through the WAL: give its space back now, not at the next clean stop.
    ix.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    tracing::info!(
        versions,
        seconds = started.elapsed().as_secs_f64(),
        "built the index database"
    );
    merged(ix)
}

/// Writes `batch` to the index database in one transaction: the new versions in key order,
/// the replaced versions' `next_rev`, the terms in term order, then the compaction (every
/// version replaced at or before it goes, with its terms). Idempotent: merging a change twice
/// (an open catching up after a lost merge) leaves the same entries.
pub(super) fn merge(ix: &Connection, batch: &MergeBatch) -> Result<()> {
    ix.execute_batch("BEGIN IMMEDIATE")?;
    let merged = merge_in_txn(ix, batch).and_then(|()| Ok(ix.execute_batch("COMMIT")?));
    // A failed COMMIT can leave the transaction open (SQLITE_BUSY does): end it, so that the
    // next try begins anew.
    if merged.is_err()
        && !ix.is_autocommit()
        && let Err(rb) = ix.execute_batch("ROLLBACK")
    {
        tracing::debug!(error = %rb, "rolling back a failed index merge");
    }
    merged
}

fn merge_in_txn(ix: &Connection, batch: &MergeBatch) -> Result<()> {
    use std::collections::HashMap;
    // Replacements within the batch are written with the version itself.
    let mut replaced_by: HashMap<Revision, Revision> = HashMap::new();
    for e in &batch.entries {
        if let Some(old) = e.replaces {
            replaced_by.insert(old, e.rev);
        }
    }
    let mut puts: Vec<(&Entry, &super::writer::Terms)> = batch
        .entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Put { terms } => Some((&**e, terms)),
            Change::Delete => None,
        })
        .collect();
    puts.sort_unstable_by(|(a, _), (b, _)| (&a.key, a.rev).cmp(&(&b.key, b.rev)));
    {
        let mut insert = ix.prepare_cached(
            "INSERT OR REPLACE INTO keys(key, rev, next_rev, t0, t1, t2, t3, t4, t5)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for (e, t) in &puts {
            insert.execute(params![
                &*e.key,
                e.rev,
                replaced_by.get(&e.rev),
                t[0],
                t[1],
                t[2],
                t[3],
                t[4],
                t[5]
            ])?;
        }
    }
    let in_batch = |rev: Revision| batch.entries.first().is_some_and(|f| rev >= f.rev);
    let mut outside: Vec<(&str, Revision, Revision)> = batch
        .entries
        .iter()
        .filter_map(|e| {
            e.replaces
                .filter(|&old| !in_batch(old))
                .map(|old| (&*e.key, old, e.rev))
        })
        .collect();
    outside.sort_unstable();
    {
        let mut update =
            ix.prepare_cached("UPDATE keys SET next_rev = ?3 WHERE key = ?1 AND rev = ?2")?;
        for (key, old, rev) in outside {
            update.execute(params![key, old, rev])?;
        }
    }
    for slot in 0..INDEX_SLOTS {
        let mut terms: Vec<(i64, Revision)> = puts
            .iter()
            .filter_map(|(e, t)| t[slot].map(|term| (term, e.rev)))
            .collect();
        if terms.is_empty() {
            continue;
        }
        terms.sort_unstable();
        let mut insert = ix.prepare_cached(&format!(
            "INSERT OR IGNORE INTO t{slot}(term, rev) VALUES (?1, ?2)"
        ))?;
        for (term, rev) in terms {
            insert.execute(params![term, rev])?;
        }
    }
    if let Some(c) = batch.compact
        && c > meta(ix, "compacted")?
    {
        for slot in 0..INDEX_SLOTS {
            ix.prepare_cached(&format!(
                "DELETE FROM t{slot} WHERE (term, rev) IN
                 (SELECT t{slot}, rev FROM keys WHERE next_rev <= ?1 AND t{slot} IS NOT NULL)"
            ))?
            .execute([c])?;
        }
        ix.prepare_cached("DELETE FROM keys WHERE next_rev <= ?1")?
            .execute([c])?;
        ix.prepare_cached("UPDATE meta SET value = ?1 WHERE name = 'compacted'")?
            .execute([c])?;
    }
    ix.prepare_cached("UPDATE meta SET value = max(value, ?1) WHERE name = 'merged'")?
        .execute([batch.upto])?;
    Ok(())
}

/// The merger thread: merges batches from `pending` into the index database until asked to
/// stop, then merges what is left and checkpoints the file. A failed merge is logged, reported
/// to the writer (see [`PendingIndex::prune_and_wait_for_room`]) and tried again after a pause
/// ([`PendingIndex::pause_after_failure`]).
pub(super) fn run_merger(ix: Connection, pending: Arc<PendingIndex>) {
    while let Some(batch) = pending.take() {
        match merge(&ix, &batch) {
            Ok(()) => pending.merged(&batch),
            Err(e) => {
                tracing::error!(error = %e, changes = batch.entries.len(), "merging index changes failed; retrying");
                pending.failed(match ix.path() {
                    Some(path) => format!("{path}: {e}"),
                    None => e.to_string(),
                });
                if pending.pause_after_failure() {
                    // The changes are in the log: the next open merges them.
                    break;
                }
            }
        }
    }
    if let Err(e) = ix.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::debug!(error = %e, "final index checkpoint");
    }
}
