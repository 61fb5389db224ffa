//! The in-memory backend: for tests and `herald serve --store memory`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use herald_core::clock::{Clock, add_saturating};
use jiff::Timestamp;

use super::types::prefix_end;
use super::{
    Backend, CachedWatchStream, Deleted, HistoryOptions, INITIAL_REVISION, KeyValue, ListOptions,
    ListOrder, ListResult, Result, Revision, StorageError, WatchEvent, WatchHub, WatchStream,
};

/// A [`Backend`] that keeps everything in memory (lost on drop).
///
/// Every key keeps the versions written since the last compaction (a multi-version
/// `BTreeMap`, like kine's log), so lists at older revisions are exact. That history is
/// bounded by [`HistoryOptions::keep_revisions`] and by [`HistoryOptions::keep_bytes`] (the
/// bytes of the versions replaced or deleted and not yet compacted,
/// [`MemoryBackend::history_bytes`]): past either, the oldest history is compacted away and a
/// list at a compacted revision gets `Expired`. The watch ring is bounded by
/// [`HistoryOptions::watch_window`] and [`HistoryOptions::watch_window_bytes`]. The current
/// data itself is not bounded here:
/// the registry's TTL and `max_events` keep it in check. TTL expiry happens on
/// [`Backend::expire_due`] (call it, or run [`spawn_sweeper`](super::spawn_sweeper)).
pub struct MemoryBackend {
    state: Mutex<State>,
    hub: Arc<WatchHub>,
    clock: Arc<dyn Clock>,
    history: HistoryOptions,
}

#[derive(Default)]
struct State {
    keys: BTreeMap<String, Vec<Version>>,
    /// `(expires_at, key)` of every live key with a TTL.
    expiry: BTreeSet<(Timestamp, String)>,
    revision: Revision,
    compacted: Revision,
    /// The replaced versions not compacted yet, as `(revision that replaced it, bytes)` in
    /// revision order (a deletion's tombstone counts as replaced by itself): a compaction to
    /// `R` drops exactly the entries at or before `R`.
    replaced: VecDeque<(Revision, usize)>,
    /// The sum of `replaced`'s bytes.
    history_bytes: usize,
}

/// What one version costs besides its key and value.
const VERSION_OVERHEAD: usize = std::mem::size_of::<Version>();

/// The bytes the history counts for one version of `key`.
fn version_bytes(key: &str, kv: Option<&KeyValue>) -> usize {
    VERSION_OVERHEAD + kv.map_or(0, |kv| key.len() + kv.value.len())
}

struct Version {
    /// `None` is a tombstone (the key was deleted at `revision`).
    kv: Option<KeyValue>,
    revision: Revision,
    expires_at: Option<Timestamp>,
}

impl MemoryBackend {
    /// An empty store at [`INITIAL_REVISION`]. TTLs are measured on `clock`.
    pub fn new(clock: Arc<dyn Clock>, history: HistoryOptions) -> Self {
        MemoryBackend {
            state: Mutex::new(State {
                revision: INITIAL_REVISION,
                ..State::default()
            }),
            // No write is at or below the initial revision: the ring is complete from 0.
            hub: WatchHub::new(&history, 0),
            clock,
            history,
        }
    }

    /// The hub this backend publishes to (shared with an in-process watch cache).
    pub fn hub(&self) -> &Arc<WatchHub> {
        &self.hub
    }

    /// The bytes of history kept for lists at older revisions: the versions replaced or
    /// deleted and not compacted yet (keys, values and a fixed overhead each). At most
    /// [`HistoryOptions::keep_bytes`] after each write, or one version when that alone is
    /// larger.
    pub fn history_bytes(&self) -> usize {
        self.lock().history_bytes
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation below completes before it can panic, so a poisoned state is consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expiry_of(&self, ttl: Option<Duration>) -> Option<Timestamp> {
        ttl.map(|d| add_saturating(self.clock.now(), d))
    }

    fn put(
        &self,
        key: &str,
        value: Bytes,
        ttl: Option<Duration>,
        check: impl FnOnce(Option<&KeyValue>) -> Result<()>,
    ) -> Result<KeyValue> {
        let expires_at = self.expiry_of(ttl);
        let mut st = self.lock();
        let (prev, prev_expiry) = match st.keys.get(key).and_then(|v| v.last()) {
            Some(v) => (v.kv.clone(), v.expires_at),
            None => (None, None),
        };
        check(prev.as_ref())?;
        st.revision += 1;
        let revision = st.revision;
        let kv = KeyValue {
            key: key.to_owned(),
            value,
            create_revision: prev.as_ref().map_or(revision, |p| p.create_revision),
            mod_revision: revision,
        };
        if let Some(t) = prev_expiry {
            st.expiry.remove(&(t, key.to_owned()));
        }
        if let Some(t) = expires_at {
            st.expiry.insert((t, key.to_owned()));
        }
        if let Some(p) = &prev {
            st.record_replaced(revision, version_bytes(key, Some(p)));
        }
        st.keys.entry(key.to_owned()).or_default().push(Version {
            kv: Some(kv.clone()),
            revision,
            expires_at,
        });
        self.hub.publish([WatchEvent::Put {
            kv: kv.clone(),
            prev,
        }]);
        self.maybe_compact(&mut st);
        Ok(kv)
    }

    fn remove(&self, st: &mut State, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        let (prev, prev_expiry) = match st.keys.get(key).and_then(|v| v.last()) {
            Some(Version {
                kv: Some(kv),
                expires_at,
                ..
            }) => (kv.clone(), *expires_at),
            _ => {
                return Err(StorageError::NotFound {
                    key: key.to_owned(),
                });
            }
        };
        if let Some(expected) = expected
            && expected != prev.mod_revision
        {
            return Err(StorageError::Conflict {
                key: key.to_owned(),
                expected,
                actual: prev.mod_revision,
            });
        }
        st.revision += 1;
        let revision = st.revision;
        if let Some(t) = prev_expiry {
            st.expiry.remove(&(t, key.to_owned()));
        }
        // The deleted version and the tombstone go with the same compaction.
        st.record_replaced(
            revision,
            version_bytes(key, Some(&prev)) + version_bytes(key, None),
        );
        st.keys.entry(key.to_owned()).or_default().push(Version {
            kv: None,
            revision,
            expires_at: None,
        });
        self.hub.publish([WatchEvent::Delete {
            prev: prev.clone(),
            revision,
        }]);
        Ok(Deleted { prev, revision })
    }

    /// Compacts when the history has outgrown [`HistoryOptions::keep_revisions`] or
    /// [`HistoryOptions::keep_bytes`] (amortised like the revision bound: past the bytes, it
    /// compacts down to seven eighths of them, so a compaction, which visits every key, runs
    /// once per eighth of the bound written).
    fn maybe_compact(&self, st: &mut State) {
        let by_revisions = self.history.auto_compact_target(st.revision, st.compacted);
        let by_bytes = (st.history_bytes > self.history.keep_bytes).then(|| {
            let keep = self.history.keep_bytes - self.history.keep_bytes / 8;
            let mut left = st.history_bytes;
            let mut target = st.compacted;
            for &(rev, bytes) in &st.replaced {
                if left <= keep {
                    break;
                }
                left -= bytes;
                target = rev;
            }
            target
        });
        if let Some(target) = by_revisions.max(by_bytes) {
            compact_state(st, target);
        }
    }

    fn list_now(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        let st = self.lock();
        let at = opts.at_revision.unwrap_or(st.revision);
        if at < st.compacted {
            return Err(StorageError::Expired {
                requested: at,
                oldest: st.compacted,
            });
        }
        if at > st.revision {
            return Err(StorageError::FutureRevision {
                requested: at,
                current: st.revision,
            });
        }
        let end = prefix_end(prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let limit = opts.limit.filter(|&l| l > 0).unwrap_or(usize::MAX);
        let visible =
            |versions: &Vec<Version>| match versions.iter().rev().find(|v| v.revision <= at) {
                Some(Version { kv: Some(kv), .. }) => Some(kv.clone()),
                _ => None,
            };
        if let ListOrder::Written { after } = opts.order {
            // Nothing here is faster in write order: it is read for callers that ask for it.
            let mut items: Vec<KeyValue> = st
                .keys
                .range::<str, _>((Bound::Included(prefix), upper))
                .filter_map(|(_, versions)| visible(versions))
                .filter(|kv| kv.mod_revision > after)
                .collect();
            items.sort_unstable_by_key(|kv| kv.mod_revision);
            let more = items.len() > limit;
            items.truncate(limit);
            let after = items.last().map_or(after, |kv| kv.mod_revision);
            return Ok(ListResult {
                items,
                revision: at,
                more,
                order: ListOrder::Written { after },
            });
        }
        let lower = match opts.start_after.as_deref() {
            Some(s) if s >= prefix => Bound::Excluded(s),
            _ => Bound::Included(prefix),
        };
        let mut items = Vec::new();
        let mut more = false;
        for (_, versions) in st.keys.range::<str, _>((lower, upper)) {
            if let Some(kv) = visible(versions) {
                if items.len() == limit {
                    more = true;
                    break;
                }
                items.push(kv);
            }
        }
        Ok(ListResult {
            items,
            revision: at,
            more,
            order: ListOrder::Key,
        })
    }
}

impl State {
    /// Counts a version replaced (or a deletion) at `revision` in the history's bytes.
    fn record_replaced(&mut self, revision: Revision, bytes: usize) {
        self.replaced.push_back((revision, bytes));
        self.history_bytes += bytes;
    }
}

/// Drops every version that no read at or after `target` can see.
fn compact_state(st: &mut State, target: Revision) {
    let target = target.min(st.revision);
    if target <= st.compacted {
        return;
    }
    while let Some(&(rev, bytes)) = st.replaced.front()
        && rev <= target
    {
        st.replaced.pop_front();
        st.history_bytes -= bytes;
    }
    st.keys.retain(|_, versions| {
        // The newest version at or before `target` stays (it is the state at `target`) unless
        // it is a tombstone; everything older goes.
        let visible = versions.partition_point(|v| v.revision <= target);
        if visible > 0 {
            let drop = if versions[visible - 1].kv.is_none() {
                visible
            } else {
                visible - 1
            };
            versions.drain(..drop);
        }
        !versions.is_empty()
    });
    st.compacted = target;
}

impl Backend for MemoryBackend {
    fn create<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let r = self.put(key, value, ttl, |prev| match prev {
            Some(_) => Err(StorageError::AlreadyExists {
                key: key.to_owned(),
            }),
            None => Ok(()),
        });
        std::future::ready(r).boxed()
    }

    fn update<'a>(
        &'a self,
        key: &'a str,
        value: Bytes,
        expected: Option<Revision>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<KeyValue>> {
        let r = self.put(key, value, ttl, |prev| match (prev, expected) {
            (None, _) => Err(StorageError::NotFound {
                key: key.to_owned(),
            }),
            (Some(p), Some(e)) if p.mod_revision != e => Err(StorageError::Conflict {
                key: key.to_owned(),
                expected: e,
                actual: p.mod_revision,
            }),
            _ => Ok(()),
        });
        std::future::ready(r).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Revision>,
    ) -> BoxFuture<'a, Result<Deleted>> {
        let mut st = self.lock();
        let r = self.remove(&mut st, key, expected);
        if r.is_ok() {
            self.maybe_compact(&mut st);
        }
        std::future::ready(r).boxed()
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<KeyValue>>> {
        let st = self.lock();
        let kv = st
            .keys
            .get(key)
            .and_then(|v| v.last())
            .and_then(|v| v.kv.clone());
        std::future::ready(Ok(kv)).boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str, opts: ListOptions) -> BoxFuture<'a, Result<ListResult>> {
        std::future::ready(self.list_now(prefix, &opts)).boxed()
    }

    fn watch<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<WatchStream>> {
        std::future::ready(self.hub.subscribe(prefix, after_revision)).boxed()
    }

    fn watch_batches<'a>(
        &'a self,
        prefix: &'a str,
        after_revision: Revision,
    ) -> BoxFuture<'a, Result<CachedWatchStream>> {
        std::future::ready(self.hub.subscribe_batches(prefix, after_revision)).boxed()
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<Revision>> {
        std::future::ready(Ok(self.lock().revision)).boxed()
    }

    fn expire_due(&self) -> BoxFuture<'_, Result<usize>> {
        let now = self.clock.now();
        let mut st = self.lock();
        let due: Vec<String> = st
            .expiry
            .iter()
            .take_while(|(t, _)| *t <= now)
            .map(|(_, k)| k.clone())
            .collect();
        let mut n = 0;
        for key in due {
            if self.remove(&mut st, &key, None).is_ok() {
                n += 1;
            }
        }
        self.maybe_compact(&mut st);
        std::future::ready(Ok(n)).boxed()
    }

    fn live_keys(&self) -> Option<usize> {
        self.hub.live_keys()
    }

    fn compact(&self, revision: Revision) -> BoxFuture<'_, Result<()>> {
        let mut st = self.lock();
        compact_state(&mut st, revision);
        self.hub.compact(st.compacted);
        std::future::ready(Ok(())).boxed()
    }
}

impl Drop for MemoryBackend {
    fn drop(&mut self) {
        self.hub.close();
    }
}
