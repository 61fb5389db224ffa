//! [`RealFifo`]: every change, in arrival order (client-go's `RealFIFO`, non-atomic mode).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;
use tokio::sync::Notify;

use super::delta::{DeletedFinalStateUnknown, DeletedObject, Delta};
use super::indexer::Indexer;
use super::key::object_key;

/// A function applied once to every object entering the cache (for example to drop
/// `managedFields`), before it is shared.
pub type TransformFn<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Default [`RealFifoOptions::capacity`].
pub const DEFAULT_FIFO_CAPACITY: usize = 1024;

/// Options of a [`RealFifo`].
pub struct RealFifoOptions<K> {
    /// Soft bound on queued deltas. Producers that respect it (the reflector does) wait in
    /// [`RealFifo::wait_for_room`] while the queue holds this many; that back-pressure
    /// reaches the server through the watch connection. A relist is queued whole, so the
    /// peak is `capacity` + one list + its tombstones.
    pub capacity: usize,
    /// The objects the consumer has already stored (normally the informer's indexer): a
    /// relist turns known objects missing from the list into tombstones, and a resync emits
    /// a `Sync` for each of them.
    pub known_objects: Option<Indexer<K>>,
    /// Applied once to every incoming object (never to tombstones or `Sync` deltas, whose
    /// objects were transformed on the way in).
    pub transform: Option<TransformFn<K>>,
}

impl<K> Default for RealFifoOptions<K> {
    fn default() -> Self {
        Self {
            capacity: DEFAULT_FIFO_CAPACITY,
            known_objects: None,
            transform: None,
        }
    }
}

struct State<K> {
    items: VecDeque<Delta<K>>,
    /// Deltas popped but not yet processed (their [`Popped`] guard is alive), by pop id, in
    /// pop order. A relist must treat them like queued ones: the consumer has not stored them
    /// yet, so neither the queue nor the known objects show them.
    in_flight: Vec<(u64, Delta<K>)>,
    next_pop: u64,
    populated: bool,
    /// Deltas of the first population still to be popped *and processed*.
    initial_population_count: usize,
    closed: bool,
}

/// A queue of [`Delta`]s delivered in exactly the order they arrived: duplicates, every
/// update, and deletes of objects never seen are all kept (client-go's `RealFIFO`).
///
/// [`replace`](RealFifo::replace) (a relist) first queues a [`DeletedFinalStateUnknown`]
/// tombstone for every object that vanished — keys whose last pending delta is not already a
/// delete, then known objects that are not pending — and then a `Replaced` delta for every
/// listed object in list order. *Pending* covers the queue and the deltas popped but not yet
/// processed (client-go processes under the queue lock; here the consumer works outside it,
/// so a relist landing between a pop and its processing must still see that delta, or an
/// object added by it and deleted before the relist would stay cached). The first `replace` (or any change before it) populates the
/// queue; [`has_synced`](RealFifo::has_synced) turns true only once every delta of that first
/// population has been popped **and** its [`Popped`] guard dropped, i.e. processed.
///
/// Bound: see [`RealFifoOptions::capacity`] (back-pressure for producers that wait for room).
pub struct RealFifo<K> {
    state: Mutex<State<K>>,
    readable: Notify,
    room: Notify,
    capacity: usize,
    known: Option<Indexer<K>>,
    transform: Option<TransformFn<K>>,
}

/// A delta taken from a [`RealFifo`]. Dropping it marks it processed (which is what
/// [`RealFifo::has_synced`] waits for during the initial population).
pub struct Popped<'a, K> {
    delta: Delta<K>,
    id: u64,
    is_in_initial_list: bool,
    counted: bool,
    fifo: &'a RealFifo<K>,
}

impl<K> Popped<'_, K> {
    /// The delta.
    pub fn delta(&self) -> &Delta<K> {
        &self.delta
    }

    /// True if the queue had not synced when this delta was popped (it belongs to the
    /// initial list).
    pub fn is_in_initial_list(&self) -> bool {
        self.is_in_initial_list
    }
}

impl<K> Drop for Popped<'_, K> {
    fn drop(&mut self) {
        let mut st = self.fifo.lock();
        if let Some(i) = st.in_flight.iter().position(|(id, _)| *id == self.id) {
            st.in_flight.remove(i);
        }
        if self.counted {
            st.initial_population_count = st.initial_population_count.saturating_sub(1);
        }
    }
}

impl<K> std::fmt::Debug for Popped<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Popped")
            .field("kind", &self.delta.kind())
            .field("is_in_initial_list", &self.is_in_initial_list)
            .finish()
    }
}

impl<K> RealFifo<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // No user code runs under this lock, so a poisoned lock still holds consistent data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of queued deltas.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The configured soft bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// True once the first population has been popped and processed (or a change arrived
    /// before any relist).
    pub fn has_synced(&self) -> bool {
        let st = self.lock();
        st.populated && st.initial_population_count == 0
    }

    /// Closes the queue: [`pop`](Self::pop) returns `None` once it is empty, and waiters for
    /// room are released. Queued deltas can still be popped.
    pub fn close(&self) {
        self.lock().closed = true;
        self.readable.notify_waiters();
        self.room.notify_waiters();
    }

    /// True after [`close`](Self::close).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Waits while the queue holds [`capacity`](Self::capacity) or more deltas (returns at
    /// once when closed).
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.room.notified();
            {
                let st = self.lock();
                if st.closed || st.items.len() < self.capacity {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Takes the oldest delta, waiting for one; `None` once closed and empty.
    pub async fn pop(&self) -> Option<Popped<'_, K>> {
        loop {
            let notified = self.readable.notified();
            {
                let mut st = self.lock();
                if let Some(p) = self.take(&mut st) {
                    return Some(p);
                }
                if st.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Waits until a delta is queued, the queue is closed, or [`has_synced`](Self::has_synced)
    /// differs from `synced_seen` (an empty first relist syncs without queueing anything).
    pub async fn wait_readable(&self, synced_seen: bool) {
        loop {
            let notified = self.readable.notified();
            {
                let st = self.lock();
                let synced = st.populated && st.initial_population_count == 0;
                if !st.items.is_empty() || st.closed || synced != synced_seen {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Takes the oldest delta if there is one.
    pub fn try_pop(&self) -> Option<Popped<'_, K>> {
        let mut st = self.lock();
        self.take(&mut st)
    }

    fn take(&self, st: &mut State<K>) -> Option<Popped<'_, K>> {
        let is_in_initial_list = !(st.populated && st.initial_population_count == 0);
        let delta = st.items.pop_front()?;
        let counted = st.initial_population_count > 0;
        if st.items.len() + 1 == self.capacity {
            self.room.notify_waiters();
        }
        let id = st.next_pop;
        st.next_pop += 1;
        st.in_flight.push((id, delta.clone()));
        Some(Popped {
            delta,
            id,
            is_in_initial_list,
            counted,
            fifo: self,
        })
    }

    fn push(&self, delta: Delta<K>) {
        {
            let mut st = self.lock();
            st.populated = true;
            st.items.push_back(delta);
        }
        self.readable.notify_waiters();
    }

    fn transformed(&self, obj: K) -> Arc<K> {
        Arc::new(match &self.transform {
            Some(f) => f(obj),
            None => obj,
        })
    }
}

impl<K: Resource> RealFifo<K> {
    /// An empty queue.
    pub fn new(options: RealFifoOptions<K>) -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(16),
                in_flight: Vec::new(),
                next_pop: 0,
                populated: false,
                initial_population_count: 0,
                closed: false,
            }),
            readable: Notify::new(),
            room: Notify::new(),
            capacity: options.capacity.max(1),
            known: options.known_objects,
            transform: options.transform,
        }
    }

    /// Queues an `Added` delta.
    pub fn add(&self, obj: K) {
        let obj = self.transformed(obj);
        self.push(Delta::Added(obj));
    }

    /// Queues an `Updated` delta.
    pub fn update(&self, obj: K) {
        let obj = self.transformed(obj);
        self.push(Delta::Updated(obj));
    }

    /// Queues a `Deleted` delta carrying the server's final state (queued even for an object
    /// never seen).
    pub fn delete(&self, obj: K) {
        let obj = self.transformed(obj);
        self.push(Delta::Deleted(DeletedObject::Known(obj)));
    }

    /// Queues a relist: tombstones for vanished objects, then `Replaced` for each listed one.
    /// The resourceVersion is not needed by the queue (the reflector tracks it).
    pub fn replace(&self, list: Vec<K>, _resource_version: &str) {
        let list: Vec<Arc<K>> = list.into_iter().map(|o| self.transformed(o)).collect();
        {
            let mut st = self.lock();
            // Checked under the queue lock: the consumer only learns objects by popping.
            let has_known = self.known.as_ref().is_some_and(|k| !k.is_empty());
            let mut tombstones = Vec::new();
            // Nothing can have vanished when nothing is queued or known (the first list).
            if !st.items.is_empty() || !st.in_flight.is_empty() || has_known {
                tombstones = self.vanished(&st, &list);
            }
            st.items.extend(tombstones);
            st.items.extend(list.into_iter().map(Delta::Replaced));
            if !st.populated {
                st.populated = true;
                st.initial_population_count = st.items.len();
            }
        }
        self.readable.notify_waiters();
    }

    /// Tombstones for everything in flight, queued or known that `list` no longer has.
    fn vanished(&self, st: &State<K>, list: &[Arc<K>]) -> Vec<Delta<K>> {
        let listed: HashSet<String> = list.iter().map(|o| object_key(o.as_ref())).collect();
        // In-flight deltas come before every queued one.
        let pending: Vec<&Delta<K>> = st
            .in_flight
            .iter()
            .map(|(_, d)| d)
            .chain(st.items.iter())
            .collect();
        // Last pending delta per key, in order of that delta's position.
        let mut last: HashMap<String, usize> = HashMap::new();
        for (i, d) in pending.iter().enumerate() {
            last.insert(d.key(), i);
        }
        let mut vanished: Vec<(usize, String)> = last
            .iter()
            .filter(|(k, _)| !listed.contains(*k))
            .map(|(k, i)| (*i, k.clone()))
            .collect();
        vanished.sort();
        let mut tombstones = Vec::new();
        for (i, key) in vanished {
            let d = pending[i];
            if matches!(d, Delta::Deleted(_)) {
                continue;
            }
            tombstones.push(Delta::Deleted(DeletedObject::FinalStateUnknown(
                DeletedFinalStateUnknown {
                    key,
                    obj: d.object().cloned(),
                },
            )));
        }
        if let Some(known) = &self.known {
            let mut keys = known.list_keys();
            keys.sort();
            for key in keys {
                if listed.contains(&key) || last.contains_key(&key) {
                    continue;
                }
                let obj = known.get_by_key(&key);
                if obj.is_none() {
                    tracing::debug!(%key, "known object vanished while building a tombstone");
                }
                tombstones.push(Delta::Deleted(DeletedObject::FinalStateUnknown(
                    DeletedFinalStateUnknown { key, obj },
                )));
            }
        }
        tombstones
    }

    /// Queues a `Sync` delta for every known object whose key is not already queued (so a
    /// resync never resurrects an older version). No-op without known objects.
    pub fn resync(&self) {
        let Some(known) = &self.known else {
            return;
        };
        {
            let mut st = self.lock();
            let queued: HashSet<String> = st.items.iter().map(|d| d.key()).collect();
            let mut keys = known.list_keys();
            keys.sort();
            for key in keys {
                if queued.contains(&key) {
                    continue;
                }
                if let Some(obj) = known.get_by_key(&key) {
                    st.items.push_back(Delta::Sync(obj));
                }
            }
        }
        self.readable.notify_waiters();
    }
}
