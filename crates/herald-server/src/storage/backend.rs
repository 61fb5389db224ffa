//! The [`Backend`] trait: the revisioned key-value contract the registry is written against.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

use futures::StreamExt;

use super::{
    CachedEvent, CachedWatchStream, Deleted, IndexValues, KeyValue, ListOptions, ListResult,
    Result, Revision, WatchStream,
};

/// A revisioned key-value store (the model of etcd v3 and kine).
///
/// Held by the registry as `Arc<dyn Backend>`; methods return boxed futures so the trait stays
/// dyn-compatible. All writes are durable when their future resolves `Ok` (for SQLite: the
/// transaction holding them is fsynced).
///
/// Rules every implementation follows:
/// - every successful write (create, update, delete, TTL expiry) takes the next global
///   [`Revision`], strictly increasing, never reused, kept across restarts;
/// - `ttl` on create/update: the key is deleted by the backend once `ttl` has passed since that
///   write (each write restarts it; `None` removes any previous TTL). The expiry is a normal delete
///   with its own revision and a [`WatchEvent::Delete`](super::WatchEvent::Delete); a key may stay
///   visible a little past its TTL, until the next sweep;
/// - lists and watches are served from a bounded history: asking for a revision that has left it
///   is [`StorageError::Expired`](super::StorageError::Expired).
pub trait Backend: Send + Sync + 'static {
    /// Creates `key` if it is absent. Fails with `AlreadyExists` otherwise.
    fn create<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>>;

    /// [`Backend::create`] with the write's [index values](super::index): backends that keep
    /// indexes store them, so lists with an [`IndexQuery`](super::IndexQuery) find the key.
    /// The default ignores them.
    fn create_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let _ = index;
        self.create(key, value, ttl)
    }

    /// [`Backend::update`] with the write's [index values](super::index) (see
    /// [`Backend::create_indexed`]). The default ignores them.
    fn update_indexed<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        index: IndexValues,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let _ = index;
        self.update(key, value, expected, ttl)
    }

    /// Replaces the value of an existing `key`. With `expected = Some(rev)` the write happens
    /// only if the key's mod revision is `rev` (else `Conflict`); with `None` it is
    /// unconditional. A missing key is `NotFound`.
    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>>;

    /// Deletes `key`, optionally only if its mod revision is `expected` (else `Conflict`).
    /// Returns the deleted state and the revision of the deletion; a missing key is `NotFound`.
    fn delete<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Revision>,
    ) -> BoxFuture<'a, Result<Deleted>>;

    /// The current state of `key`, if present (a linearizable read: it sees every write
    /// acknowledged before it started).
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<KeyValue>>>;

    /// The keys starting with `prefix`, in bytewise order, as of one snapshot revision. See
    /// [`ListOptions`] for paging and [`ListResult`] for what comes back.
    fn list<'a>(&'a self, prefix: &'a str, opts: ListOptions) -> BoxFuture<'a, Result<ListResult>>;

    /// Watches the keys starting with `prefix` for changes strictly after `after_revision`.
    ///
    /// Fails at once with `Expired` if events after `after_revision` are no longer all
    /// retained. A revision at or beyond the current one simply waits for new writes.
    fn watch<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<WatchStream>>;

    /// [`Backend::watch`] as batches of shared events, the form that lets many watchers share
    /// the work of encoding each event (see [`CachedEvent::encoding`]).
    ///
    /// Backends with a [`WatchHub`](super::WatchHub) answer from it, so every watcher gets the
    /// same `Arc<CachedEvent>` for an event. The default adapts [`Backend::watch`]: each
    /// watcher gets its own `CachedEvent`s, in batches of what is ready.
    fn watch_batches<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<CachedWatchStream>> {
        Box::pin(async move {
            let inner = self.watch(prefix, after_revision).await?;
            let batches = inner
                .ready_chunks(super::hub::BATCH)
                .flat_map(|chunk| {
                    // An error ends the stream: the events before it are one batch, the error
                    // the next item.
                    let mut out = Vec::with_capacity(2);
                    let mut batch = Vec::with_capacity(chunk.len());
                    for item in chunk {
                        match item {
                            Ok(ev) => batch.push(std::sync::Arc::new(CachedEvent::new(
                                std::sync::Arc::unwrap_or_clone(ev),
                            ))),
                            Err(e) => {
                                if !batch.is_empty() {
                                    out.push(Ok(std::mem::take(&mut batch)));
                                }
                                out.push(Err(e));
                                break;
                            }
                        }
                    }
                    if !batch.is_empty() {
                        out.push(Ok(batch));
                    }
                    futures::stream::iter(out)
                })
                .boxed();
            Ok(CachedWatchStream::tracking_yielded(batches, after_revision))
        })
    }

    /// The revision of the last acknowledged write ([`INITIAL_REVISION`](super::INITIAL_REVISION)
    /// for a new store).
    fn current_revision(&self) -> BoxFuture<'_, Result<Revision>>;

    /// Deletes every key whose TTL has run out by the backend's clock, each with its own
    /// revision and `Delete` event, and returns how many. Backends run this periodically on
    /// their own (see [`spawn_sweeper`](super::spawn_sweeper)); it is public so tests and
    /// operators can force a sweep. Backends whose store expires keys itself (etcd leases)
    /// return `Ok(0)`.
    fn expire_due(&self) -> BoxFuture<'_, Result<usize>>;

    /// Discards history at and before `revision`: lists at such revisions become `Expired`.
    /// A revision beyond the current one is clamped to it. Backends also compact on their own
    /// to keep the history window bounded (see [`HistoryOptions`](super::HistoryOptions)).
    fn compact(&self, revision: Revision) -> BoxFuture<'_, Result<()>>;

    /// How many keys are live, when the backend knows without I/O (the registry reads it on
    /// every create to enforce its `max_events` bound); `None` when it does not, and then no
    /// bound applies. The default is `None`.
    fn live_keys(&self) -> Option<usize> {
        None
    }

    /// Why this backend cannot store writes right now, if it cannot: `/readyz` runs it on
    /// every probe, so it must answer at once from state the backend already keeps (no I/O).
    /// The default is always ready.
    fn health(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}
