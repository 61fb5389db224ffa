//! The watch cache: the recent committed writes held in memory, serving watches so that they
//! do not read the database. Gets and lists read the backend's own store.
//!
//! Every backend publishes each committed write here, in revision order, *before* it
//! acknowledges the write; so anything a client has been told is written is already here.
//! (The [`EtcdBackend`](super::EtcdBackend) is fed by one etcd watch instead, which brings the
//! other replicas' writes too; its writes return once the feed has published them, or after
//! its request timeout if the feed is down.)
//! The hub keeps:
//!
//! - **a bounded ring of the most recent events**, which serves both purposes of a watch:
//!   replay (a watch from revision `R` starts reading the ring just after `R`) and live delivery
//!   (watchers have no queues of their own; each holds a cursor and, when woken, copies the next
//!   batch of matching events out of the ring as `Arc`s, no value copies);
//! - **a count of the live keys** ([`WatchHub::live_keys`]), kept from the count the backend
//!   starts it with and every create and delete it publishes (the registry's `max_events`
//!   bound reads it);
//! - **shared encodings** of each event ([`CachedEvent::encoding`]): a watch line is encoded
//!   once and the same bytes go to every watcher (kube-apiserver's `cachingObject`).
//!
//! **Bounds.** The ring has two bounds, both from [`HistoryOptions`]: at most
//! [`watch_window`](HistoryOptions::watch_window) events, and at most
//! [`watch_window_bytes`](HistoryOptions::watch_window_bytes) bytes ([`WatchHub::bytes`]: what
//! its events refer to, and every encoding made of them). Publishing past either bound, or an
//! encoding that takes the ring past its bytes, evicts the oldest events until both hold again
//! (the newest event always stays, so one event larger than the byte bound is still
//! delivered). A few large writes thus move the window as far as many small ones: the
//! revisions of an event that was replaced, deleted or expired leave with it. A watcher whose
//! cursor falls behind the evicted part (a slow consumer, or a watch from a revision older than
//! the window) receives one [`StorageError::Expired`] and its stream ends; memory never grows
//! with slow watchers. Kubernetes clients answer that 410 by re-listing. Unlike
//! kube-apiserver's watch cache, the hub keeps no copy of the current state: its memory does
//! not grow with the number of stored events.
//!
//! **Wake-ups.** A watcher that has just taken a batch waits a little before it takes the next
//! one ([`PACE_PER_WATCHER`] times the number of open watchers, at most [`MAX_PACE`]), so that
//! under a write storm each watcher wakes a bounded number of times per second, each time for
//! a larger batch, instead of once per commit. A watcher that is idle or behind is not paced.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;

use super::{
    HistoryOptions, INITIAL_REVISION, KeyValue, Revision, StorageError, WatchEvent, WatchStream,
};

/// The most events a watcher copies out of the ring per wake-up (bounds its batch; the
/// [`CachedWatchStream`] docs repeat the number).
pub const BATCH: usize = 1024;

/// How long each open watcher adds to the pause between two batches of one watcher.
pub const PACE_PER_WATCHER: Duration = Duration::from_micros(20);

/// The longest pause between two batches of one watcher (reached at 1,250 watchers): the
/// delivery latency it adds under sustained writes.
pub const MAX_PACE: Duration = Duration::from_millis(25);

/// How many encodings of one event a [`CachedEvent`] can hold.
pub const ENCODINGS: usize = 4;

/// What a [`CachedEvent`] costs besides the keys and values it refers to: the event, its
/// `Arc`s, the `KeyValue`s and the ring's slot (counted in [`WatchHub::bytes`]).
const EVENT_OVERHEAD: usize = std::mem::size_of::<CachedEvent>()
    + std::mem::size_of::<WatchEvent>()
    + 2 * std::mem::size_of::<KeyValue>()
    + 4 * std::mem::size_of::<usize>();

/// Set in [`CachedEvent`]'s charge once the event has left the ring: encodings made after
/// that are not charged to the ring (they live only as long as the watchers holding them).
const EVICTED: usize = 1 << (usize::BITS - 1);

/// A committed change as the watch cache holds it: the event and the encodings of it that
/// consumers have made so far. Each encoding slot is filled once, by the first consumer that
/// needs it, and shared by all the others.
#[derive(Debug)]
pub struct CachedEvent {
    event: Arc<WatchEvent>,
    encodings: [OnceLock<Bytes>; ENCODINGS],
    /// The hub whose ring holds this event (dangling for events outside any ring).
    hub: Weak<WatchHub>,
    /// The bytes charged to that ring for this event (its own and its encodings'), with
    /// [`EVICTED`] set once it left.
    charged: AtomicUsize,
}

impl CachedEvent {
    /// Wraps `event` with empty encoding slots, outside any hub's ring (nothing is counted).
    pub fn new(event: WatchEvent) -> Self {
        CachedEvent {
            event: Arc::new(event),
            encodings: Default::default(),
            hub: Weak::new(),
            charged: AtomicUsize::new(EVICTED),
        }
    }

    /// `event` as `hub`'s ring holds it, charged [`CachedEvent::size_of`] bytes.
    fn in_ring(event: WatchEvent, hub: &Weak<WatchHub>) -> Self {
        let charged = Self::size_of(&event);
        CachedEvent {
            event: Arc::new(event),
            encodings: Default::default(),
            hub: hub.clone(),
            charged: AtomicUsize::new(charged),
        }
    }

    /// The bytes the watch cache counts for `event` before any encoding of it: its keys and
    /// values and a fixed overhead. A `Put`'s previous value is counted too, even though it
    /// usually shares its bytes with an older event: the count is an
    /// upper bound of what the event keeps alive.
    pub fn size_of(event: &WatchEvent) -> usize {
        let kv = |kv: &KeyValue| kv.key.len() + kv.value.len();
        EVENT_OVERHEAD
            + match event {
                WatchEvent::Put { kv: new, prev } => kv(new) + prev.as_ref().map_or(0, kv),
                WatchEvent::Delete { prev, .. } => kv(prev),
            }
    }

    /// The event.
    pub fn event(&self) -> &Arc<WatchEvent> {
        &self.event
    }

    /// The event's revision.
    pub fn revision(&self) -> Revision {
        self.event.revision()
    }

    /// The encoding in `slot` (`0..ENCODINGS`), made by `encode` the first time it is asked
    /// for. Storage does not know encodings: slots are numbered by the one consumer, the
    /// registry's `Change`, after `herald_wire::encoding::WatchEncoding` (a compile-time check
    /// there keeps them within [`ENCODINGS`]). A `slot` out of range is encoded on every call
    /// and not kept.
    ///
    /// While the event is in a hub's ring, a new encoding counts towards the ring's bytes
    /// ([`WatchHub::bytes`]) and may evict the oldest events to keep it within its bound.
    pub fn encoding(&self, slot: usize, encode: impl FnOnce(&WatchEvent) -> Bytes) -> Bytes {
        match self.encodings.get(slot) {
            Some(cell) => {
                let mut made = None;
                let bytes = cell
                    .get_or_init(|| {
                        let b = encode(&self.event);
                        made = Some(b.len());
                        b
                    })
                    .clone();
                if let Some(n) = made {
                    self.charge(n);
                }
                bytes
            }
            None => encode(&self.event),
        }
    }

    /// Charges `n` more bytes to the ring holding this event, if it still does.
    fn charge(&self, n: usize) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        let still_held = self
            .charged
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c & EVICTED == 0).then(|| c.saturating_add(n))
            })
            .is_ok();
        if still_held {
            hub.grow(n);
        }
    }

    /// Marks the event evicted and returns the bytes it had been charged.
    fn evict(&self) -> usize {
        self.charged.swap(EVICTED, Ordering::AcqRel) & !EVICTED
    }
}

/// A watch as batches of shared events: each item holds the next matching events (at least
/// one, at most 1,024, what a watcher copies out of the ring per wake-up) in revision order.
/// It ends like a [`WatchStream`]: with one `Err(StorageError::Expired)` when the watcher
/// fell out of the window, without an error when the backend shuts down.
///
/// It also reports how far it has read the store ([`CachedWatchStream::progress`]), which
/// moves past changes outside the watched prefix too: a namespace watch in a quiet namespace
/// can still hand out a fresh resourceVersion (in its bookmarks) to resume from.
pub struct CachedWatchStream {
    batches: BoxStream<'static, Result<Vec<Arc<CachedEvent>>, StorageError>>,
    progress: WatchProgress,
}

impl CachedWatchStream {
    /// A watch whose `progress` the producer of `batches` advances.
    pub fn new(
        batches: BoxStream<'static, Result<Vec<Arc<CachedEvent>>, StorageError>>,
        progress: WatchProgress,
    ) -> Self {
        Self { batches, progress }
    }

    /// A watch that reports as progress the revision of the last event it yielded (for
    /// producers that cannot see past their prefix).
    pub fn tracking_yielded(
        batches: BoxStream<'static, Result<Vec<Arc<CachedEvent>>, StorageError>>,
        after: Revision,
    ) -> Self {
        let progress = WatchProgress::new(after);
        let seen = progress.clone();
        let batches = batches
            .inspect(move |b| {
                if let Ok(Some(last)) = b.as_ref().map(|b| b.last()) {
                    seen.advance(last.revision());
                }
            })
            .boxed();
        Self { batches, progress }
    }

    /// Every change under the prefix with a revision at or below this has been yielded
    /// already. Read it between polls (the stream's owner is the only reader that can rely
    /// on that statement); it never goes backwards.
    pub fn progress(&self) -> Revision {
        self.progress.get()
    }
}

impl std::fmt::Debug for CachedWatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedWatchStream")
            .field("progress", &self.progress())
            .finish_non_exhaustive()
    }
}

impl futures::Stream for CachedWatchStream {
    type Item = Result<Vec<Arc<CachedEvent>>, StorageError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.batches.poll_next_unpin(cx)
    }
}

/// How far a [`CachedWatchStream`] has read the store: shared between its producer, which
/// advances it, and its owner, which reads it.
#[derive(Debug, Clone, Default)]
pub struct WatchProgress(Arc<AtomicU64>);

impl WatchProgress {
    /// Starts at `after`, the revision the watch starts after.
    pub fn new(after: Revision) -> Self {
        Self(Arc::new(AtomicU64::new(after)))
    }

    /// The revision read up to.
    pub fn get(&self) -> Revision {
        // One task both advances and reads it (the producer runs inside the owner's poll).
        self.0.load(Ordering::Relaxed)
    }

    /// Moves to `to` unless already past it.
    pub fn advance(&self, to: Revision) {
        self.0.fetch_max(to, Ordering::Relaxed);
    }
}

/// The shared ring of recent events, the count of live keys, and the wake-up signal for
/// watchers.
#[derive(Debug)]
pub struct WatchHub {
    ring: RwLock<Ring>,
    /// Carries the head revision; every publish bumps it and wakes all watchers.
    signal: watch::Sender<Revision>,
    capacity: usize,
    max_bytes: usize,
    /// The bytes the ring holds ([`WatchHub::bytes`]); a gauge, so `/metrics` exports it as
    /// is. It can dip below the true figure for an instant while an encoding of an event
    /// being evicted is charged.
    bytes: Gauge<i64, AtomicI64>,
    /// This hub, for the events of its ring to charge their encodings to.
    me: Weak<WatchHub>,
    watchers: Arc<AtomicUsize>,
    /// Live keys, when the hub knows how many there were at its start (the backend counted
    /// them, or it started on an empty store): creates add one, deletes take one away. Read
    /// without the lock.
    live: Option<AtomicUsize>,
}

#[derive(Debug)]
struct Ring {
    events: VecDeque<Arc<CachedEvent>>,
    /// Every event with a revision greater than `floor` is in `events`.
    floor: Revision,
    /// The revision of the newest published write.
    head: Revision,
    closed: bool,
}

impl WatchHub {
    /// An empty hub for a store currently at `revision`; its ring is bounded by `window`'s
    /// [`watch_window`](HistoryOptions::watch_window) events (at least 1) and
    /// [`watch_window_bytes`](HistoryOptions::watch_window_bytes) bytes. It knows how many
    /// keys are live ([`WatchHub::live_keys`]) only for a store never written to (`revision`
    /// at most [`INITIAL_REVISION`]), counting from the writes it is given.
    pub fn new(window: &HistoryOptions, revision: Revision) -> Arc<Self> {
        Self::build(window, revision, revision, Vec::new(), None)
    }

    /// A hub preloaded with `history` (events in increasing revision order, complete after
    /// `floor`: every write with a revision above `floor` is in it) for a store at `revision`
    /// (the newest event's, or later when the newest writes left no event, as on a new store at
    /// [`INITIAL_REVISION`](super::INITIAL_REVISION)) that holds `live` keys (`None`: unknown,
    /// then [`WatchHub::live_keys`] is `None`). Used by persistent backends on start so
    /// watches from revisions before a restart still replay. Only the newest events within
    /// `window`'s bounds are kept.
    pub fn preloaded(
        window: &HistoryOptions,
        floor: Revision,
        revision: Revision,
        history: Vec<WatchEvent>,
        live: Option<usize>,
    ) -> Arc<Self> {
        Self::build(window, floor, revision, history, live)
    }

    fn build(
        window: &HistoryOptions,
        floor: Revision,
        revision: Revision,
        history: Vec<WatchEvent>,
        live: Option<usize>,
    ) -> Arc<Self> {
        let capacity = window.watch_window.max(1);
        let head = history
            .last()
            .map_or(floor, WatchEvent::revision)
            .max(revision);
        let (signal, _) = watch::channel(head);
        let live = match live {
            Some(n) => Some(AtomicUsize::new(n)),
            // A store that has never been written to has no keys yet.
            None if revision <= INITIAL_REVISION => Some(AtomicUsize::new(0)),
            None => None,
        };
        Arc::new_cyclic(|me| {
            let hub = WatchHub {
                ring: RwLock::new(Ring {
                    events: VecDeque::with_capacity(capacity.min(history.len().max(16))),
                    floor,
                    head,
                    closed: false,
                }),
                signal,
                capacity,
                max_bytes: window.watch_window_bytes,
                bytes: Gauge::default(),
                me: me.clone(),
                watchers: Arc::new(AtomicUsize::new(0)),
                live,
            };
            {
                let mut ring = hub.write();
                for ev in history {
                    hub.push(&mut ring, ev);
                }
            }
            hub
        })
    }

    /// The most events the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The most bytes the ring holds ([`WatchHub::bytes`]), but for its newest event.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The bytes the ring holds: for each event its keys, values (a `Put`'s previous value
    /// included) and a fixed overhead ([`CachedEvent::size_of`]), plus every encoding of it
    /// made while it was in the ring. At most [`WatchHub::max_bytes`], or the size of the
    /// newest event when that alone is larger.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.bytes.get()).unwrap_or(0)
    }

    /// The gauge behind [`WatchHub::bytes`], to register with `/metrics`.
    pub fn bytes_gauge(&self) -> Gauge<i64, AtomicI64> {
        self.bytes.clone()
    }

    /// The events in the ring.
    pub fn len(&self) -> usize {
        self.read().events.len()
    }

    /// Whether the ring holds no event.
    pub fn is_empty(&self) -> bool {
        self.read().events.is_empty()
    }

    /// The revision of the newest published event (or the start revision).
    pub fn head(&self) -> Revision {
        self.read().head
    }

    /// The oldest revision a watch can start after.
    pub fn floor(&self) -> Revision {
        self.read().floor
    }

    /// Watch streams currently open on this hub.
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// How many keys are live after the newest published write; `None` when this hub does not
    /// know (it was not given a count and did not start on an empty store). No lock.
    pub fn live_keys(&self) -> Option<usize> {
        self.live.as_ref().map(|n| n.load(Ordering::Relaxed))
    }

    /// Appends committed events (increasing revisions, each above the current head), counts
    /// their creates and deletes, and wakes the watchers. Events at or below the head are ignored (they
    /// were already published).
    pub fn publish(&self, events: impl IntoIterator<Item = WatchEvent>) {
        let head = {
            let mut ring = self.write();
            let mut live_delta = 0isize;
            for ev in events {
                if ev.revision() > ring.head {
                    ring.head = ev.revision();
                    live_delta += match &ev {
                        WatchEvent::Put { prev: None, .. } => 1,
                        WatchEvent::Put { prev: Some(_), .. } => 0,
                        WatchEvent::Delete { .. } => -1,
                    };
                    self.push(&mut ring, ev);
                }
            }
            // Under the write lock, so updates never interleave.
            if let Some(live) = &self.live {
                let before = live.load(Ordering::Relaxed);
                debug_assert!(
                    before.checked_add_signed(live_delta).is_some(),
                    "more deletes than live keys: {before} {live_delta:+}"
                );
                live.store(before.saturating_add_signed(live_delta), Ordering::Relaxed);
            }
            ring.head
        };
        self.signal.send_replace(head);
    }

    /// Forgets every event at or before `revision`; watches from such revisions become
    /// `Expired` (what etcd does after a compaction).
    pub fn compact(&self, revision: Revision) {
        let mut ring = self.write();
        let revision = revision.min(ring.head);
        while ring
            .events
            .front()
            .is_some_and(|e| e.revision() <= revision)
        {
            self.evict_oldest(&mut ring);
        }
        ring.floor = ring.floor.max(revision);
    }

    /// Appends `ev` to the ring, then evicts down to the bounds.
    fn push(&self, ring: &mut Ring, ev: WatchEvent) {
        let ev = CachedEvent::in_ring(ev, &self.me);
        self.bytes
            .inc_by(gauge_value(ev.charged.load(Ordering::Relaxed)));
        ring.events.push_back(Arc::new(ev));
        self.trim(ring);
    }

    /// Evicts the oldest events while the ring is over either bound, keeping the newest.
    fn trim(&self, ring: &mut Ring) {
        let max_bytes = gauge_value(self.max_bytes);
        while ring.events.len() > self.capacity
            || (ring.events.len() > 1 && self.bytes.get() > max_bytes)
        {
            self.evict_oldest(ring);
        }
    }

    fn evict_oldest(&self, ring: &mut Ring) {
        if let Some(old) = ring.events.pop_front() {
            ring.floor = ring.floor.max(old.revision());
            self.bytes.dec_by(gauge_value(old.evict()));
        }
    }

    /// Counts `n` bytes of a new encoding of an event in the ring, and evicts if that takes
    /// the ring over its bytes.
    fn grow(&self, n: usize) {
        let before = self.bytes.inc_by(gauge_value(n));
        if before.saturating_add(gauge_value(n)) > gauge_value(self.max_bytes) {
            let mut ring = self.write();
            self.trim(&mut ring);
        }
    }

    /// Ends every watch stream (after delivering what they have already copied). Called when
    /// the backend shuts down.
    pub fn close(&self) {
        self.write().closed = true;
        self.signal.send_modify(|_| {});
    }

    /// A stream of the events under `prefix` with revisions above `after`. `Expired` at once
    /// if the ring no longer holds all of them.
    pub fn subscribe(
        self: &Arc<Self>,
        prefix: &str,
        after: Revision,
    ) -> Result<WatchStream, StorageError> {
        let batches = self.subscribe_batches(prefix, after)?;
        Ok(batches
            .batches
            .flat_map(|batch| {
                let items: Vec<Result<Arc<WatchEvent>, StorageError>> = match batch {
                    Ok(events) => events.iter().map(|e| Ok(Arc::clone(e.event()))).collect(),
                    Err(e) => vec![Err(e)],
                };
                futures::stream::iter(items)
            })
            .boxed())
    }

    /// [`WatchHub::subscribe`] as batches of shared events (see [`CachedWatchStream`]).
    pub fn subscribe_batches(
        self: &Arc<Self>,
        prefix: &str,
        after: Revision,
    ) -> Result<CachedWatchStream, StorageError> {
        let floor = self.floor();
        if after < floor {
            return Err(StorageError::Expired {
                requested: after,
                oldest: floor,
            });
        }
        let progress = WatchProgress::new(after);
        let state = Watcher {
            hub: Arc::clone(self),
            rx: self.signal.subscribe(),
            prefix: prefix.to_owned(),
            cursor: after,
            progress: progress.clone(),
            not_before: None,
            done: false,
            _count: WatcherCount::new(&self.watchers),
        };
        Ok(CachedWatchStream::new(
            futures::stream::unfold(state, Watcher::next).boxed(),
            progress,
        ))
    }

    fn read(&self) -> RwLockReadGuard<'_, Ring> {
        // The ring is only mutated by short non-panicking sections; a poisoned lock still
        // holds a consistent ring.
        self.ring.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Ring> {
        self.ring.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A byte count as a gauge value (saturating; no count comes near `i64::MAX`).
fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Counts an open watcher for as long as it lives.
struct WatcherCount(Arc<AtomicUsize>);

impl WatcherCount {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        WatcherCount(Arc::clone(count))
    }
}

impl Drop for WatcherCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Watcher {
    hub: Arc<WatchHub>,
    rx: watch::Receiver<Revision>,
    prefix: String,
    cursor: Revision,
    /// `cursor`, for the stream's owner. It moves when a look at the ring ends, and every
    /// matching event up to it is in the batch that look returns.
    progress: WatchProgress,
    /// After a batch that emptied the ring, the next one is not taken before this.
    not_before: Option<tokio::time::Instant>,
    done: bool,
    _count: WatcherCount,
}

/// What one look at the ring found.
struct Fill {
    batch: Vec<Arc<CachedEvent>>,
    /// The batch stopped at [`BATCH`] with more events waiting.
    more: bool,
    closed: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<Vec<Arc<CachedEvent>>, StorageError>, Self)> {
        loop {
            if self.done {
                return None;
            }
            if let Some(t) = self.not_before.take()
                && tokio::time::Instant::now() < t
            {
                tokio::time::sleep_until(t).await;
            }
            // Mark the signal seen *before* reading the ring so a publish that lands after the
            // read still wakes us.
            self.rx.borrow_and_update();
            match self.fill() {
                Err(e) => {
                    self.done = true;
                    return Some((Err(e), self));
                }
                Ok(fill) => {
                    self.done = fill.closed;
                    if !fill.batch.is_empty() {
                        if !fill.more {
                            self.not_before = Some(tokio::time::Instant::now() + self.pace());
                        }
                        return Some((Ok(fill.batch), self));
                    }
                }
            }
            if !self.done && self.rx.changed().await.is_err() {
                self.done = true;
            }
        }
    }

    fn pace(&self) -> Duration {
        let n = u32::try_from(self.hub.watchers()).unwrap_or(u32::MAX);
        PACE_PER_WATCHER.saturating_mul(n).min(MAX_PACE)
    }

    /// Copies the next matching events (at most [`BATCH`]).
    fn fill(&mut self) -> Result<Fill, StorageError> {
        let ring = self.hub.read();
        if self.cursor < ring.floor {
            return Err(StorageError::Expired {
                requested: self.cursor,
                oldest: ring.floor,
            });
        }
        let start = ring.events.partition_point(|e| e.revision() <= self.cursor);
        let mut batch = Vec::new();
        let mut more = false;
        for ev in ring.events.range(start..) {
            if batch.len() >= BATCH {
                more = true;
                break;
            }
            self.cursor = ev.revision();
            if ev.event().key().starts_with(&self.prefix) {
                batch.push(Arc::clone(ev));
            }
        }
        self.progress.advance(self.cursor);
        Ok(Fill {
            batch,
            more,
            closed: ring.closed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, mod_revision: Revision, create_revision: Revision) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Bytes::from_static(b"{}"),
            create_revision,
            mod_revision,
        }
    }

    /// A create (`prev` none) or an update of the version written at `create_revision`.
    fn put(key: &str, revision: Revision, create_revision: Revision) -> WatchEvent {
        WatchEvent::Put {
            kv: kv(key, revision, create_revision),
            prev: (create_revision != revision).then(|| kv(key, create_revision, create_revision)),
        }
    }

    fn delete(key: &str, revision: Revision, prev_revision: Revision) -> WatchEvent {
        WatchEvent::Delete {
            prev: kv(key, prev_revision, prev_revision),
            revision,
        }
    }

    /// A ring of `events` events and the default byte bound.
    fn window(events: usize) -> HistoryOptions {
        HistoryOptions {
            watch_window: events,
            ..HistoryOptions::default()
        }
    }

    /// A create or update of `key` at `revision` with a value of `len` bytes, replacing a
    /// value of `prev_len` bytes (0: a create).
    fn big_put(key: &str, revision: Revision, len: usize, prev_len: usize) -> WatchEvent {
        let kv = |rev: Revision, len: usize| KeyValue {
            key: key.to_string(),
            value: Bytes::from(vec![b'x'; len]),
            create_revision: 2,
            mod_revision: rev,
        };
        WatchEvent::Put {
            kv: kv(revision, len),
            prev: (prev_len > 0).then(|| kv(revision - 1, prev_len)),
        }
    }

    /// Finding 4 of issue 29: 2,500 updates of one key with 1 MB values held ~2.6 GB because
    /// the ring was bounded by its count of events only. Now its bytes are bounded too:
    /// updates of 64 KiB values into a 1 MiB ring keep it at 1 MiB, the window moves past
    /// the old revisions, and a watch from them is `Expired`.
    #[test]
    fn watch_cache_is_bounded_in_bytes_not_revisions() {
        const VALUE: usize = 64 * 1024;
        let opts = HistoryOptions {
            watch_window: 65_536,
            watch_window_bytes: 1 << 20,
            ..HistoryOptions::default()
        };
        let hub = WatchHub::new(&opts, INITIAL_REVISION);
        hub.publish([big_put("/events/ns/a", 2, VALUE, 0)]);
        for rev in 3..=500 {
            hub.publish([big_put("/events/ns/a", rev, VALUE, VALUE)]);
            assert!(hub.bytes() <= 1 << 20, "at {rev}: {} bytes", hub.bytes());
        }
        let per_event = CachedEvent::size_of(&big_put("/events/ns/a", 3, VALUE, VALUE));
        assert_eq!(
            hub.len(),
            (1 << 20) / per_event,
            "as many as fit, not 65,536"
        );
        assert_eq!(hub.bytes(), hub.len() * per_event);
        assert_eq!(hub.floor(), 500 - hub.len() as Revision);
        assert!(matches!(
            hub.subscribe_batches("/events/", INITIAL_REVISION),
            Err(StorageError::Expired { .. })
        ));
        assert!(hub.subscribe_batches("/events/", hub.floor()).is_ok());
    }

    /// The encodings watchers make of the ring's events count towards its bytes: encoding
    /// evicts the oldest events to stay within the bound, and an encoding of an event that
    /// already left the ring (a watcher still held it) is not counted.
    #[tokio::test(start_paused = true)]
    async fn encodings_count_towards_the_watch_cache_bytes() {
        const VALUE: usize = 100_000;
        let opts = HistoryOptions {
            watch_window_bytes: 1_200_000,
            ..HistoryOptions::default()
        };
        let hub = WatchHub::new(&opts, INITIAL_REVISION);
        let mut w = hub.subscribe_batches("/events/", INITIAL_REVISION).unwrap();
        // About 500 KB of events.
        for rev in 2..=6 {
            hub.publish([big_put(&format!("/events/ns/e{rev}"), rev, VALUE, 0)]);
        }
        let before = hub.bytes();
        let batch = w.next().await.unwrap().unwrap();
        assert_eq!(batch.len(), 5);
        // One encoding of each event, twice its value: the first three fit.
        for ev in &batch[..3] {
            let line = ev.encoding(0, |_| Bytes::from(vec![b'j'; 2 * VALUE]));
            assert_eq!(line.len(), 2 * VALUE);
        }
        assert_eq!(hub.bytes(), before + 3 * 2 * VALUE);
        assert_eq!(hub.len(), 5);
        // The same slot again costs nothing: it is shared.
        batch[0].encoding(0, |_| unreachable!("encoded once"));
        assert_eq!(hub.bytes(), before + 3 * 2 * VALUE);
        // The fourth takes the ring over its bound: the oldest events go.
        batch[3].encoding(0, |_| Bytes::from(vec![b'j'; 2 * VALUE]));
        assert!(hub.bytes() <= 1_200_000, "{} bytes", hub.bytes());
        assert_eq!(hub.len(), 4, "the oldest went, with its encoding");
        assert_eq!(hub.floor(), 6 - hub.len() as Revision);
        // Event 2 has left the ring; a watcher still holding it encodes it uncounted.
        let held = hub.bytes();
        batch[0].encoding(1, |_| Bytes::from(vec![b'p'; VALUE]));
        assert_eq!(hub.bytes(), held);
        // Compaction gives back the bytes of what it drops, encodings included.
        hub.compact(6);
        assert_eq!(hub.len(), 0);
        assert_eq!(hub.bytes(), 0);
    }

    /// One event larger than the whole byte bound is still delivered: the ring keeps its
    /// newest event whatever its size.
    #[tokio::test(start_paused = true)]
    async fn an_event_larger_than_the_byte_bound_is_still_delivered() {
        let opts = HistoryOptions {
            watch_window_bytes: 1_000,
            ..HistoryOptions::default()
        };
        let hub = WatchHub::new(&opts, INITIAL_REVISION);
        let mut w = hub.subscribe_batches("/events/", INITIAL_REVISION).unwrap();
        hub.publish([big_put("/events/ns/a", 2, 10_000, 0)]);
        assert_eq!(hub.len(), 1);
        let batch = w.next().await.unwrap().unwrap();
        assert_eq!(batch[0].revision(), 2);
        hub.publish([big_put("/events/ns/b", 3, 10, 0)]);
        assert_eq!(hub.len(), 1, "the large one left once a newer event came");
        assert!(hub.bytes() <= 1_000);
    }

    #[test]
    fn a_hub_on_an_empty_store_counts_creates_and_deletes_only() {
        let hub = WatchHub::new(&window(2), INITIAL_REVISION);
        assert_eq!(hub.live_keys(), Some(0));
        hub.publish([put("a", 2, 2), put("b", 3, 3), put("a", 4, 2)]);
        assert_eq!(hub.live_keys(), Some(2), "an update is not a new key");
        // Writes at or below the head were published already: not counted again.
        hub.publish([put("c", 3, 3)]);
        assert_eq!(hub.live_keys(), Some(2));
        hub.publish([delete("a", 5, 4)]);
        assert_eq!(hub.live_keys(), Some(1));
        // The ring (capacity 2) has evicted older events; the count does not depend on it.
        hub.compact(5);
        assert_eq!(hub.live_keys(), Some(1));
    }

    #[test]
    fn a_hub_given_a_count_keeps_it_and_one_without_knows_it_cannot() {
        let hub = WatchHub::preloaded(&window(8), 3, 3, Vec::new(), Some(2));
        assert_eq!(hub.live_keys(), Some(2));
        hub.publish([put("c", 4, 4), delete("a", 5, 2), put("b", 6, 3)]);
        assert_eq!(hub.live_keys(), Some(2));

        // A hub started on a store written to before, without a count, cannot know how
        // many keys there are.
        assert_eq!(WatchHub::new(&window(8), 10).live_keys(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_moves_past_changes_outside_the_prefix_only_once_read() {
        let hub = WatchHub::new(&window(8), INITIAL_REVISION);
        let mut w = hub.subscribe_batches("/ns/a/", INITIAL_REVISION).unwrap();
        assert_eq!(w.progress(), INITIAL_REVISION);
        hub.publish([
            put("/ns/b/x", 2, 2),
            put("/ns/a/y", 3, 3),
            put("/ns/b/z", 4, 4),
        ]);
        // Nothing is read until the stream is polled.
        assert_eq!(w.progress(), INITIAL_REVISION);
        let batch = w.next().await.unwrap().unwrap();
        let revs: Vec<Revision> = batch.iter().map(|e| e.revision()).collect();
        assert_eq!(revs, [3]);
        assert_eq!(
            w.progress(),
            4,
            "read up to the newest change, matching or not"
        );
        // Only changes elsewhere: no batch, but the progress moves.
        hub.publish([put("/ns/b/q", 5, 5)]);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), w.next())
                .await
                .is_err()
        );
        assert_eq!(w.progress(), 5);
    }
}
