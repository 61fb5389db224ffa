//! The SQLite schema, connection settings and start-up state.
//!
//! The database is a log of versions, written append-only:
//!
//! - `versions`: one row per write, keyed by its revision: the key, the new value (`NULL` for a
//!   deletion), the key's create revision, the revision of the version it replaced
//!   (`prev_rev`), its TTL deadline, and `next_rev`, the revision of the write that replaced it
//!   (`NULL` while it is the key's current version; a deletion row is replaced by itself).
//!   The current state is the rows whose `next_rev` is `NULL`; the state at an older revision
//!   `R` is the rows with `rev <= R` that had not been replaced by then.
//! - `versions_expiry`: the current versions with a TTL, by deadline (the TTL sweep);
//! - `versions_replaced`: the replaced versions, by `next_rev` (compaction deletes the rows
//!   replaced at or before its revision: no read at or after it can see them);
//! - `meta`: the compacted revision, written in the same transaction as the compaction, and a
//!   revision floor (`revision`: 1 on a new store; stores written before the floor existed
//!   kept their current revision there). The current revision itself is never written: every
//!   revision is a row of `versions`, and a row is only ever deleted by a compaction at or
//!   after its revision, so the current revision is the largest of the newest row's `rev`, the
//!   compacted revision and that floor ([`revision`]); a commit thus writes no page of `meta`.
//!
//! **Why a log.** A create appends one row at the end of `versions` (and one entry at the end
//! of `versions_expiry`, deadlines grow with time): a group commit of many creates writes a few
//! new pages instead of one random B-tree leaf (and its splits) per key, which is what bounded
//! the old key-ordered table. There is no index by key: the writer finds a key's current
//! version in the watch cache, which holds the whole current state and is updated by every
//! commit; lists at the newest revision are served from there too. A list at an older revision
//! that the cache cannot answer scans the log (see `read`).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::storage::{CachedEvent, KeyValue, Result, Revision, StorageError, WatchEvent};

/// The schema version this code writes (`meta.schema`); version 1 (no entry) had a
/// key-ordered `kv` table and a `log` of previous values, and is migrated on open.
const SCHEMA_VERSION: u64 = 2;

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
    next_rev   INTEGER
);
CREATE INDEX IF NOT EXISTS versions_expiry ON versions(expires_at)
    WHERE next_rev IS NULL AND expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS versions_replaced ON versions(next_rev)
    WHERE next_rev IS NOT NULL;
";

/// Opens (creating if needed) the writer connection: WAL, `synchronous=FULL` (a commit returns
/// only once the WAL is fsynced), and the schema (migrating an older one).
pub(super) fn open_writer(path: &Path) -> Result<Connection> {
    // Name the file: "file is not a database" alone does not say which file.
    prepare_writer(path).map_err(|e| match e {
        StorageError::Backend(cause) => {
            StorageError::Backend(format!("{}: {cause}", path.display()))
        }
        e => e,
    })
}

fn prepare_writer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StorageError::Backend(format!(
            "could not switch to WAL mode (got {mode})"
        )));
    }
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         PRAGMA temp_store=MEMORY;
         PRAGMA cache_size=-65536;",
    )?;
    // Checkpoints normally run on the checkpointer thread; this large automatic one in the
    // writer only bounds the WAL (~64 MiB) if the background ones fall behind.
    conn.pragma_update(None, "wal_autocheckpoint", 16_384)?;
    migrate_v1(&conn)?;
    conn.execute_batch(SCHEMA)?;
    conn.execute(
        "INSERT OR REPLACE INTO meta(name, value) VALUES ('schema', ?1)",
        [SCHEMA_VERSION],
    )?;
    Ok(conn)
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
pub(super) fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // Memory-mapped reads: a list at an old revision scans the log, tens of MiB, and reading
    // them through the page cache with one pread per page costs more than the query itself.
    conn.execute_batch(
        "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-32768; PRAGMA mmap_size=1073741824;",
    )?;
    Ok(conn)
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

/// Every live key (the watch cache's starting state), in no particular order.
pub(super) fn current_state(conn: &Connection) -> Result<Vec<KeyValue>> {
    let mut stmt = conn.prepare(
        "SELECT key, value, create_rev, rev FROM versions
         WHERE next_rev IS NULL AND value IS NOT NULL",
    )?;
    let rows = stmt.query_map([], kv_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
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
pub(super) fn recent_events(
    conn: &Connection,
    window: usize,
    max_bytes: usize,
) -> Result<(Revision, Vec<WatchEvent>)> {
    let revision = revision(conn)?;
    let compacted = meta(conn, "compacted")?;
    let mut stmt = conn.prepare(
        "SELECT rev, key, value, create_rev, prev_rev FROM versions
         WHERE rev > ?1 ORDER BY rev DESC LIMIT ?2",
    )?;
    let mut prev_stmt =
        conn.prepare("SELECT key, value, create_rev, rev FROM versions WHERE rev = ?1")?;
    let limit = i64::try_from(window).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![compacted, limit], |r| {
        Ok((
            r.get::<_, Revision>(0)?,
            r.get::<_, String>(1)?,
            r.get_ref(2)?.as_blob_or_null()?.map(Bytes::copy_from_slice),
            r.get::<_, Revision>(3)?,
            r.get::<_, Option<Revision>>(4)?,
        ))
    })?;
    let mut events = Vec::new();
    let mut oldest = revision;
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
        match ev {
            Some(ev) => {
                bytes = bytes.saturating_add(CachedEvent::size_of(&ev));
                if bytes > max_bytes && !events.is_empty() {
                    // Every write after this one is loaded: the ring is complete after it.
                    events.reverse();
                    return Ok((rev, events));
                }
                oldest = rev;
                events.push(ev);
            }
            None => {
                // A row whose previous version is missing means the log is not what this code
                // wrote; replay cannot be trusted before it.
                tracing::warn!(
                    rev,
                    "inconsistent history row; watch replay starts after it"
                );
                events.reverse();
                return Ok((rev, events));
            }
        }
    }
    events.reverse();
    let floor = if events.len() < window {
        compacted
    } else {
        oldest.saturating_sub(1)
    };
    Ok((floor, events))
}
