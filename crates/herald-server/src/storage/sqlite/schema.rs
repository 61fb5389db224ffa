//! The SQLite schema, connection settings and start-up state.
//!
//! Tables:
//! - `kv`: the current state, one row per live key (`WITHOUT ROWID`, so a list is one ordered
//!   scan of the primary key), with a partial index on `expires_at` for the TTL sweep;
//! - `log`: one row per revision (the history), holding what is needed to rebuild the *previous*
//!   state of the key: a create row has no blob, an update or delete row holds the value it
//!   replaced. The new value of a log row is the next row's previous value, or `kv`'s. Compaction
//!   is therefore a plain `DELETE FROM log WHERE rev <= ?`;
//! - `meta`: the revision counter and the compacted revision, written in the same transaction
//!   as the data, so both survive restarts exactly.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::storage::{KeyValue, Result, Revision, WatchEvent};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(name, value) VALUES ('revision', 0), ('compacted', 0);
CREATE TABLE IF NOT EXISTS kv (
    key        TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    create_rev INTEGER NOT NULL,
    mod_rev    INTEGER NOT NULL,
    expires_at INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_expires ON kv(expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS log (
    rev             INTEGER PRIMARY KEY,
    key             TEXT NOT NULL,
    deleted         INTEGER NOT NULL,
    prev_value      BLOB,
    prev_create_rev INTEGER,
    prev_mod_rev    INTEGER
);
";

/// Opens (creating if needed) the writer connection: WAL, `synchronous=FULL` (a commit returns
/// only once the WAL is fsynced), and the schema.
pub(super) fn open_writer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(crate::storage::StorageError::Backend(format!(
            "could not switch {} to WAL mode (got {mode})",
            path.display()
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
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
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
    // Memory-mapped reads: a 100,000-key list touches tens of MiB, and reading them through
    // the page cache with one pread per page costs more than the query itself.
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

/// Every live key (the watch cache's starting state).
pub(super) fn current_state(conn: &Connection) -> Result<Vec<KeyValue>> {
    let mut stmt = conn.prepare("SELECT key, value, create_rev, mod_rev FROM kv")?;
    let rows = stmt.query_map([], |r| {
        Ok(KeyValue {
            key: r.get(0)?,
            value: Bytes::copy_from_slice(r.get_ref(1)?.as_blob()?),
            create_revision: r.get(2)?,
            mod_revision: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The last `window` writes as watch events (oldest first) and the revision after which they
/// are complete, to preload the watch ring after a restart.
pub(super) fn recent_events(
    conn: &Connection,
    window: usize,
) -> Result<(Revision, Vec<WatchEvent>)> {
    let revision = meta(conn, "revision")?;
    let compacted = meta(conn, "compacted")?;
    let mut stmt = conn.prepare(
        "SELECT rev, key, deleted, prev_value, prev_create_rev, prev_mod_rev
         FROM log WHERE rev > ?1 ORDER BY rev DESC LIMIT ?2",
    )?;
    let limit = i64::try_from(window).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![compacted, limit], |r| {
        let prev = match r.get::<_, Option<Revision>>(5)? {
            Some(prev_mod) => Some((
                Bytes::copy_from_slice(r.get_ref(3)?.as_blob_or_null()?.unwrap_or_default()),
                r.get::<_, Revision>(4)?,
                prev_mod,
            )),
            None => None,
        };
        Ok((
            r.get::<_, Revision>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, bool>(2)?,
            prev,
        ))
    })?;
    // Walk newest to oldest; `after` holds, per key, the state right after the row being looked
    // at (the current `kv` row for the newest one).
    let mut after: HashMap<String, Option<KeyValue>> = HashMap::new();
    let mut current = conn.prepare("SELECT value, create_rev, mod_rev FROM kv WHERE key = ?1")?;
    let mut events = Vec::new();
    let mut oldest = revision;
    for row in rows {
        let (rev, key, deleted, prev) = row?;
        oldest = rev;
        let state_after = match after.get(&key) {
            Some(s) => s.clone(),
            None => current
                .query_row([&key], |r| {
                    Ok(KeyValue {
                        key: key.clone(),
                        value: Bytes::copy_from_slice(r.get_ref(0)?.as_blob()?),
                        create_revision: r.get(1)?,
                        mod_revision: r.get(2)?,
                    })
                })
                .optional()?,
        };
        let prev_kv = prev.map(|(value, create_revision, mod_revision)| KeyValue {
            key: key.clone(),
            value,
            create_revision,
            mod_revision,
        });
        let ev = match (deleted, state_after, prev_kv.clone()) {
            (true, _, Some(prev)) => Some(WatchEvent::Delete {
                prev,
                revision: rev,
            }),
            (false, Some(kv), prev) if kv.mod_revision == rev => Some(WatchEvent::Put { kv, prev }),
            _ => None,
        };
        match ev {
            Some(ev) => events.push(ev),
            None => {
                // A row that does not fit its neighbours means the log is not what this code
                // wrote; replay cannot be trusted before it.
                tracing::warn!(rev, key = %key, "inconsistent history row; watch replay starts after it");
                events.reverse();
                return Ok((rev, events));
            }
        }
        after.insert(key, prev_kv);
    }
    events.reverse();
    let floor = if events.len() < window {
        compacted
    } else {
        oldest.saturating_sub(1)
    };
    Ok((floor, events))
}
