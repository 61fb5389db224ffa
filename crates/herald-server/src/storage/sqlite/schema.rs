//! The SQLite schema, connection settings and start-up state.
//!
//! The database is a log of versions, written append-only; its indexes by key and by the
//! values of [index slots](crate::storage::IndexQuery) live in the index database
//! (`index_db`), derived from it:
//!
//! - `versions`: one row per write, keyed by its revision: the key, the new value (`NULL` for a
//!   deletion), the key's create revision, the revision of the version it replaced
//!   (`prev_rev`), its TTL deadline, `next_rev`, the revision of the write that replaced it
//!   (`NULL` while it is the key's current version; a deletion row is replaced by itself), and
//!   `t0`…`t5`, the [terms](crate::storage::index::term) of the write's index values (what
//!   the index database is rebuilt from).
//!   The current state is the rows whose `next_rev` is `NULL`; the state at an older revision
//!   `R` is the rows with `rev <= R` that had not been replaced by then (`next_rev > R`; a
//!   deletion row never qualifies, its `next_rev` is its own `rev`).
//! - `versions_expiry`: the current versions with a TTL, by deadline (the TTL sweep);
//! - `versions_replaced`: the replaced versions, by `next_rev` (compaction deletes the rows
//!   replaced at or before its revision: no read at or after it can see them);
//! - `meta`: the compacted revision, written in the same transaction as the compaction; a
//!   revision floor (`revision`: 1 on a new store; stores written before the floor existed
//!   kept their current revision there); `live`, the number of live keys, written by each
//!   commit that changes it; `indexed_from`, the first revision written with index terms (a
//!   store upgraded from schema 2 has versions without them, see `read`). The current
//!   revision itself is never written: every revision is a row of `versions`, and a row is
//!   only ever deleted by a compaction at or after its revision, so the current revision is
//!   the largest of the newest row's `rev`, the compacted revision and that floor
//!   ([`revision`]).
//!
//! **Why a log.** A create appends one row at the end of `versions` and one entry at the end
//! of `versions_expiry` (deadlines grow with time): a group commit of many creates writes a
//! few pages. Nothing of the state is held in memory: a store of any size opens in the time
//! it takes to read the watch cache's window of recent writes.
//!
//! **File size.** A new database uses `auto_vacuum=INCREMENTAL`: pages freed by expiries and
//! compactions are reused by later writes, and when many are free at once (after a storm has
//! expired) the writer gives them back to the file system (`writer`). Databases created
//! before that keep SQLite's default (no shrinking; free pages are still reused).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::storage::{CachedEvent, KeyValue, Result, Revision, StorageError, WatchEvent};

/// The schema version this code writes (`meta.schema`); version 1 (no entry) had a
/// key-ordered `kv` table and a `log` of previous values, version 2 the log without the key
/// and term indexes, version 3 those indexes in this file; all are migrated on open.
const SCHEMA_VERSION: u64 = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(name, value) VALUES ('revision', 1), ('compacted', 0);
-- Stores created before revisions started at 1 (see INITIAL_REVISION) and never written.
UPDATE meta SET value = 1 WHERE name = 'revision' AND value = 0;
CREATE TABLE IF NOT EXISTS versions (
    rev        INTEGER PRIMARY KEY,
    key        TEXT NOT NULL,
    value      BLOB,
    create_rev INTEGER NOT NULL,
    prev_rev   INTEGER,
    expires_at INTEGER,
    next_rev   INTEGER,
    t0 INTEGER, t1 INTEGER, t2 INTEGER, t3 INTEGER, t4 INTEGER, t5 INTEGER
);
-- Schema 3 kept the key and term indexes here; they are in the index database now.
DROP INDEX IF EXISTS versions_key;
DROP INDEX IF EXISTS versions_t0;
DROP INDEX IF EXISTS versions_t1;
DROP INDEX IF EXISTS versions_t2;
DROP INDEX IF EXISTS versions_t3;
DROP INDEX IF EXISTS versions_t4;
DROP INDEX IF EXISTS versions_t5;
CREATE INDEX IF NOT EXISTS versions_expiry ON versions(expires_at)
    WHERE next_rev IS NULL AND expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS versions_replaced ON versions(next_rev)
    WHERE next_rev IS NOT NULL;
";

/// Opens (creating if needed) the writer connection: WAL, `synchronous=FULL` (a commit returns
/// only once the WAL is fsynced), and the schema (migrating an older one).
pub(super) fn open_writer(path: &Path, cache_bytes: usize) -> Result<Connection> {
    // Name the file: "file is not a database" alone does not say which file.
    prepare_writer(path, cache_bytes).map_err(|e| match e {
        StorageError::Backend(cause) => {
            StorageError::Backend(format!("{}: {cause}", path.display()))
        }
        e => e,
    })
}

fn prepare_writer(path: &Path, cache_bytes: usize) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    if !has_table(&conn, "versions")? && !has_table(&conn, "kv")? {
        // Only possible on a new database, before its first table and before WAL mode.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    use_wal(&conn)?;
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         PRAGMA temp_store=MEMORY;",
    )?;
    set_cache(&conn, "main", cache_bytes)?;
    // Checkpoints normally run on the checkpointer thread; this large automatic one in the
    // writer only bounds the WAL (~64 MiB) if the background ones fall behind.
    conn.pragma_update(None, "wal_autocheckpoint", 16_384)?;
    migrate_v1(&conn)?;
    migrate_v2(&conn)?;
    conn.execute_batch(SCHEMA)?;
    conn.execute(
        "INSERT OR REPLACE INTO meta(name, value) VALUES ('schema', ?1)",
        [SCHEMA_VERSION],
    )?;
    // Absent on a new store and after an upgrade: versions up to the newest one were written
    // without terms, and nobody counted the live keys. Only then are they computed: counting
    // reads every live key, which an open must not do on every start.
    if !has_meta(&conn, "indexed_from")? {
        conn.execute(
            "INSERT INTO meta(name, value)
             SELECT 'indexed_from', coalesce(max(rev) + 1, 0) FROM versions",
            [],
        )?;
    }
    if !has_meta(&conn, "live")? {
        conn.execute(
            "INSERT INTO meta(name, value)
             SELECT 'live', count(*) FROM versions WHERE next_rev IS NULL AND value IS NOT NULL",
            [],
        )?;
    }
    Ok(conn)
}

/// Whether `meta` has the entry `name`.
fn has_meta(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row("SELECT 1 FROM meta WHERE name = ?1", [name], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether the database has the table `name`.
pub(super) fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Adds the term columns to a version-2 log (its indexes are made by `index_db`). The old
/// versions have no terms: `meta.indexed_from` says which (see [`open_writer`]).
fn migrate_v2(conn: &Connection) -> Result<()> {
    if !has_table(conn, "versions")? || conn.prepare("SELECT t0 FROM versions LIMIT 0").is_ok() {
        return Ok(());
    }
    tracing::info!("migrating the SQLite store to schema 3 (index terms)");
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         ALTER TABLE versions ADD COLUMN t0 INTEGER;
         ALTER TABLE versions ADD COLUMN t1 INTEGER;
         ALTER TABLE versions ADD COLUMN t2 INTEGER;
         ALTER TABLE versions ADD COLUMN t3 INTEGER;
         ALTER TABLE versions ADD COLUMN t4 INTEGER;
         ALTER TABLE versions ADD COLUMN t5 INTEGER;
         COMMIT;",
    )?;
    Ok(())
}

/// Turns a version-1 database (`kv` + `log`) into the version log: every live key becomes one
/// current version at its mod revision, and the history before the current revision is
/// compacted (lists and watches from before the upgrade get `Expired`, as after any
/// compaction). One transaction: an interrupted migration leaves the old tables.
fn migrate_v1(conn: &Connection) -> Result<()> {
    let has_kv: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'kv'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if has_kv.is_none() {
        return Ok(());
    }
    tracing::info!("migrating the SQLite store to the version log (schema 2)");
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE;
         {SCHEMA}
         INSERT INTO versions(rev, key, value, create_rev, prev_rev, expires_at, next_rev)
             SELECT mod_rev, key, value, create_rev, NULL, expires_at, NULL FROM kv;
         DROP TABLE kv;
         DROP TABLE IF EXISTS log;
         UPDATE meta SET value = (SELECT value FROM meta WHERE name = 'revision')
             WHERE name = 'compacted';
         COMMIT;"
    ))?;
    Ok(())
}

/// Opens the connection the checkpointer thread uses.
pub(super) fn open_checkpointer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA synchronous=FULL;")?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    Ok(conn)
}

/// Opens a read-only connection to the same database (after [`open_writer`] created it).
pub(super) fn open_reader(path: &Path, cache_bytes: usize) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // No memory map: a full list of a large store would map (and count as resident) the
    // whole file in every reader. Each reader's page cache is bounded instead.
    conn.execute_batch("PRAGMA temp_store=MEMORY; PRAGMA mmap_size=0;")?;
    set_cache(&conn, "main", cache_bytes)?;
    Ok(conn)
}

/// Bounds the page cache of the connection's database `schema` (`main`, or an attached one)
/// to `bytes` (at least 64 KiB).
pub(super) fn set_cache(conn: &Connection, schema: &str, bytes: usize) -> Result<()> {
    // A negative cache_size is in KiB.
    let kib = i64::try_from(bytes / 1024).unwrap_or(i64::MAX).max(64);
    conn.execute_batch(&format!("PRAGMA {schema}.cache_size = -{kib};"))?;
    Ok(())
}

/// Switches the connection's database to WAL mode (readers never block the writer).
pub(super) fn use_wal(conn: &Connection) -> Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StorageError::Backend(format!(
            "could not switch to WAL mode (got {mode})"
        )));
    }
    Ok(())
}

/// Reads a `meta` counter.
pub(super) fn meta(conn: &Connection, name: &str) -> Result<Revision> {
    let v: Option<Revision> = conn
        .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0))
}

/// The current revision: the newest write's, which is the newest row of `versions` unless a
/// compaction removed it (then it is the compacted revision), and never below the floor in
/// `meta` (see the module docs).
pub(super) fn revision(conn: &Connection) -> Result<Revision> {
    let newest: Option<Revision> = conn
        .prepare_cached("SELECT max(rev) FROM versions")?
        .query_row([], |r| r.get(0))?;
    Ok(newest
        .unwrap_or(0)
        .max(meta(conn, "revision")?)
        .max(meta(conn, "compacted")?))
}

/// A `KeyValue` from the columns `key, value, create_rev, rev`.
pub(super) fn kv_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: r.get(0)?,
        value: Bytes::copy_from_slice(r.get_ref(1)?.as_blob()?),
        create_revision: r.get(2)?,
        mod_revision: r.get(3)?,
    })
}

/// The last `window` writes as watch events (oldest first), no more of them than fit in
/// `max_bytes` as the watch cache counts them ([`CachedEvent::size_of`], at least one), and
/// the revision after which they are complete, to preload the watch ring after a restart.
///
/// Revisions are unique and every row above the compacted revision is still in the log, so
/// the last `window` writes are the rows above `revision - window`: they are read forward,
/// in file order (the end of the file, which a cold start reads ahead of the cursor; read
/// backwards, each page was one disk read), and the oldest are dropped while they exceed
/// `max_bytes`.
pub(super) fn recent_events(
    conn: &Connection,
    window: usize,
    max_bytes: usize,
) -> Result<(Revision, Vec<WatchEvent>)> {
    let revision = revision(conn)?;
    let compacted = meta(conn, "compacted")?;
    let window = Revision::try_from(window).unwrap_or(Revision::MAX);
    let start = compacted.max(revision.saturating_sub(window));
    let mut stmt = conn.prepare(
        "SELECT rev, key, value, create_rev, prev_rev FROM versions
         WHERE rev > ?1 ORDER BY rev",
    )?;
    let mut prev_stmt =
        conn.prepare("SELECT key, value, create_rev, rev FROM versions WHERE rev = ?1")?;
    let rows = stmt.query_map(params![start], |r| {
        Ok((
            r.get::<_, Revision>(0)?,
            r.get::<_, String>(1)?,
            r.get_ref(2)?.as_blob_or_null()?.map(Bytes::copy_from_slice),
            r.get::<_, Revision>(3)?,
            r.get::<_, Option<Revision>>(4)?,
        ))
    })?;
    // Each event with its size as the watch cache counts it.
    let mut events: VecDeque<(usize, WatchEvent)> = VecDeque::new();
    let mut floor = start;
    let mut bytes = 0usize;
    for row in rows {
        let (rev, key, value, create_rev, prev_rev) = row?;
        let prev = match prev_rev {
            Some(p) => prev_stmt
                .query_row([p], kv_from_row)
                .optional()?
                .filter(|kv| kv.key == key),
            None => None,
        };
        let ev = match (value, prev) {
            (Some(value), prev) if prev.is_some() || prev_rev.is_none() => Some(WatchEvent::Put {
                kv: KeyValue {
                    key,
                    value,
                    create_revision: create_rev,
                    mod_revision: rev,
                },
                prev,
            }),
            (None, Some(prev)) => Some(WatchEvent::Delete {
                prev,
                revision: rev,
            }),
            _ => None,
        };
        let Some(ev) = ev else {
            // A row whose previous version is missing means the log is not what this code
            // wrote; replay cannot be trusted up to it.
            tracing::warn!(
                rev,
                "inconsistent history row; watch replay starts after it"
            );
            events.clear();
            bytes = 0;
            floor = rev;
            continue;
        };
        let size = CachedEvent::size_of(&ev);
        bytes = bytes.saturating_add(size);
        events.push_back((size, ev));
        while bytes > max_bytes && events.len() > 1 {
            if let Some((size, oldest)) = events.pop_front() {
                bytes -= size;
                // Every write after this one is loaded: the ring is complete after it.
                floor = oldest.revision();
            }
        }
    }
    Ok((floor, events.into_iter().map(|(_, ev)| ev).collect()))
}
