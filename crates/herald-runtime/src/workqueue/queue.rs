//! [`WorkQueue`]: the fair, stingy, delaying work queue.

use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hashbrown::hash_map::{Entry, EntryRef};
use prometheus_client::registry::Registry;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::{QueueMetrics, WorkQueueMetrics};
use super::state::{Slot, State, Waiting};
use super::task;

/// The longest delay [`WorkQueue::add_after`] honours; longer delays are clamped to it.
///
/// A year is far beyond any sane backoff, and clamping keeps deadlines representable
/// (tokio's timer cannot express arbitrarily distant instants).
pub const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// A work queue with client-go's guarantees, for feeding a reconcile loop.
///
/// - **Fair**: items are handed out in the order they were added.
/// - **Stingy**: an item added several times before it is handed out is handed out once
///   (duplicates collapse); an item is never handed to two workers at once. An item added
///   again while a worker processes it is handed out again after [`done`](Self::done).
/// - **Delaying**: [`add_after`](Self::add_after) adds an item once a delay has passed; if
///   the item is already waiting, the earliest ready time wins.
/// - **Shutdown**: after [`shutdown`](Self::shutdown) new adds are ignored, items already
///   queued are still handed out, and [`get`](Self::get) returns `None` once the queue is
///   empty. [`shutdown_with_drain`](Self::shutdown_with_drain) also waits for the items being
///   processed.
///
/// The handle is cheap to clone (one `Arc`); clones share the queue.
///
/// **Bound**: the queue keeps at most one entry per distinct item (queued, processing or
/// waiting), so its memory is bounded by the number of distinct keys; at that bound further
/// adds coalesce into the existing entry. The internal heap of delayed items holds at most
/// twice the number of waiting items plus 64 (superseded deadlines are compacted away).
///
/// Delayed items are released, and metric gauges refreshed, by one small background task
/// per queue, started on the current tokio runtime when first needed. It holds no strong
/// reference to the queue and ends when the queue shuts down or its last handle is dropped.
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

/// State shared by every handle of one queue.
pub(super) struct Shared<K> {
    state: Mutex<State<K>>,
    /// Wakes workers parked in `get`.
    ready: Notify,
    /// Wakes callers of `shutdown_with_drain`.
    drained: Notify,
    /// Wakes the background task (new earliest deadline, shutdown, last handle dropped).
    pub(super) wake: Arc<Notify>,
    pub(super) metrics: Option<QueueMetrics>,
    /// Mirror of `State::shutting_down` for lock-free reads.
    closed: AtomicBool,
}

impl<K> Drop for Shared<K> {
    fn drop(&mut self) {
        // Lets the background task notice that the queue is gone.
        self.wake.notify_one();
    }
}

impl<K> Shared<K> {
    pub(super) fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Nothing under this lock runs user code except K's Hash/Eq; a panic there leaves
        // the state usable, so poisoning is ignored rather than propagated to every worker.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes up to `n` parked workers.
    pub(super) fn wake_workers(&self, n: usize) {
        for _ in 0..n {
            self.ready.notify_one();
        }
    }
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("len", &st.queue.len())
            .field("processing", &st.processing)
            .field("waiting", &st.waiting_items)
            .field("shutting_down", &st.shutting_down)
            .field("metrics", &self.shared.metrics.is_some())
            .finish()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// An unmetered queue (no clock reads on the hot path).
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A queue reporting into `metrics` under the label `name="<name>"`.
    ///
    /// Gauges of unfinished work are refreshed every 500 ms by the queue's background task
    /// (started now if a tokio runtime is current, otherwise on first use inside one).
    pub fn with_metrics(name: &str, metrics: &WorkQueueMetrics) -> Self {
        Self::build(Some(metrics.for_queue(name)))
    }

    /// A queue that registers the work-queue metric families in `registry` and reports
    /// under `name`. For several queues in one registry, call
    /// [`WorkQueueMetrics::register`] once and use [`with_metrics`](Self::with_metrics).
    pub fn with_registry(name: &str, registry: &mut Registry) -> Self {
        Self::with_metrics(name, &WorkQueueMetrics::register(registry))
    }

    fn build(metrics: Option<QueueMetrics>) -> Self {
        let metered = metrics.is_some();
        let queue = Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::new()),
                ready: Notify::new(),
                drained: Notify::new(),
                wake: Arc::new(Notify::new()),
                metrics,
                closed: AtomicBool::new(false),
            }),
        };
        if metered {
            let mut st = queue.shared.lock();
            queue.ensure_task(&mut st);
        }
        queue
    }

    /// The time now, read only when metrics need it.
    fn metrics_now(&self) -> Option<Instant> {
        self.shared.metrics.as_ref().map(|_| Instant::now())
    }

    /// Marks `item` as needing processing. Ignored after shutdown. If the item is already
    /// queued nothing changes (it keeps its place); if it is being processed it is handed
    /// out again after [`done`](Self::done).
    pub fn add(&self, item: K) {
        let now = self.metrics_now();
        let mut st = self.shared.lock();
        let wake = add_locked(&mut st, item, self.shared.metrics.as_ref(), now) && st.parked > 0;
        drop(st);
        if wake {
            self.shared.ready.notify_one();
        }
    }

    /// Adds `item` once `delay` has passed (tokio time). A zero delay adds at once. If the
    /// item is already waiting, the earlier of the two ready times is kept. Ignored after
    /// shutdown. Delays longer than [`MAX_DELAY`] are clamped to it. Counts a retry in the
    /// metrics.
    ///
    /// An item may wait here and sit in the queue at the same time; when it becomes ready it
    /// collapses into the queued entry.
    pub fn add_after(&self, item: K, delay: Duration) {
        let metrics = self.shared.metrics.as_ref();
        let now = Instant::now();
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        if st.shutting_down {
            return;
        }
        if let Some(m) = metrics {
            m.retries.inc();
        }
        if delay.is_zero() {
            let wake = add_locked(st, item, metrics, metrics.map(|_| now)) && st.parked > 0;
            drop(guard);
            if wake {
                self.shared.ready.notify_one();
            }
            return;
        }
        let ready = now + delay.min(MAX_DELAY);
        let seq = st.next_seq;
        st.next_seq += 1;
        let head_before = st.waiting.peek().map(|w| w.ready);
        let key = match st.slots.entry(item) {
            Entry::Occupied(mut o) => {
                let slot = o.get_mut();
                match slot.waiting {
                    Some((existing, _)) if existing <= ready => return,
                    Some(_) => {}
                    None => st.waiting_items += 1,
                }
                slot.waiting = Some((ready, seq));
                o.key().clone()
            }
            Entry::Vacant(v) => {
                let key = v.key().clone();
                v.insert(Slot {
                    waiting: Some((ready, seq)),
                    ..Slot::default()
                });
                st.waiting_items += 1;
                key
            }
        };
        st.waiting.push(Waiting {
            ready,
            seq,
            item: key,
        });
        st.compact_waiting();
        if head_before.is_none_or(|head| ready < head) {
            self.ensure_task(st);
            drop(guard);
            self.shared.wake.notify_one();
        }
    }

    /// Waits for the next item and marks it as being processed; the caller must call
    /// [`done`](Self::done) with it afterwards. Returns `None` once the queue is shutting
    /// down and holds no queued item.
    ///
    /// Cancel-safe: dropping the future before it completes takes nothing off the queue.
    pub async fn get(&self) -> Option<K> {
        let shared = &*self.shared;
        let mut parked = ParkGuard {
            shared,
            armed: false,
        };
        loop {
            let mut notified = pin!(shared.ready.notified());
            {
                let mut st = shared.lock();
                if parked.armed {
                    st.parked -= 1;
                    parked.armed = false;
                }
                if let Some(item) = st.queue.pop_front() {
                    st.take(&item, shared.metrics.as_ref(), self.metrics_now());
                    return Some(item);
                }
                if st.shutting_down {
                    return None;
                }
                // Registered while the lock is held, so an add after it is never missed.
                notified.as_mut().enable();
                st.parked += 1;
                parked.armed = true;
                if shared.metrics.is_some() || st.waiting_items > 0 {
                    self.ensure_task(&mut st);
                }
            }
            notified.await;
        }
    }

    /// Marks `item` as no longer being processed. If it was added again meanwhile, it goes
    /// to the back of the queue. Calling it for an item that is not being processed does
    /// nothing.
    pub fn done(&self, item: &K) {
        let now = self.metrics_now();
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        let EntryRef::Occupied(mut o) = st.slots.entry_ref(item) else {
            return;
        };
        let slot = o.get_mut();
        if !slot.processing {
            return;
        }
        slot.processing = false;
        st.processing -= 1;
        if let (Some(m), Some(now), Some(start)) =
            (self.shared.metrics.as_ref(), now, slot.started_at.take())
        {
            m.work_duration
                .observe(now.saturating_duration_since(start).as_secs_f64());
        }
        let mut requeued = false;
        if slot.dirty {
            if st.shutting_down {
                // A drain must also wait for this item's next round.
                slot.owed = true;
                st.owed += 1;
            }
            st.queue.push_back(o.key().clone());
            requeued = true;
        } else if slot.waiting.is_none() {
            o.remove();
        }
        let wake_worker = requeued && st.parked > 0;
        let drained = st.draining && st.processing == 0 && st.owed == 0;
        drop(guard);
        if wake_worker {
            self.shared.ready.notify_one();
        }
        if drained {
            self.shared.drained.notify_waiters();
        }
    }

    /// Items queued and ready to be handed out (not those being processed or waiting for a
    /// delay).
    pub fn len(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items currently being processed (handed out and not yet done).
    pub fn num_processing(&self) -> usize {
        self.shared.lock().processing
    }

    /// Distinct items waiting for their [`add_after`](Self::add_after) delay.
    pub fn num_waiting(&self) -> usize {
        self.shared.lock().waiting_items
    }

    /// Stops the queue: later adds are ignored, delayed items are discarded, items already
    /// queued are still handed out, then [`get`](Self::get) returns `None`. Does not wait
    /// for items being processed, and releases any [`shutdown_with_drain`] still waiting.
    ///
    /// [`shutdown_with_drain`]: Self::shutdown_with_drain
    pub fn shutdown(&self) {
        self.begin_shutdown(false);
        self.shared.drained.notify_waiters();
    }

    /// Like [`shutdown`](Self::shutdown), then waits until no item is being processed.
    /// An item that was added again while being processed is re-queued by `done` and
    /// handed out once more, and the drain waits for that round too. A concurrent
    /// [`shutdown`](Self::shutdown) ends the wait early.
    pub async fn shutdown_with_drain(&self) {
        self.begin_shutdown(true);
        loop {
            let mut notified = pin!(self.shared.drained.notified());
            {
                let st = self.shared.lock();
                if !st.draining || (st.processing == 0 && st.owed == 0) {
                    return;
                }
                notified.as_mut().enable();
            }
            notified.await;
        }
    }

    fn begin_shutdown(&self, drain: bool) {
        let mut st = self.shared.lock();
        st.shutting_down = true;
        self.shared.closed.store(true, Ordering::Release);
        st.draining = drain;
        st.discard_waiting();
        drop(st);
        self.shared.ready.notify_waiters();
        self.shared.wake.notify_one();
    }

    /// Whether [`shutdown`](Self::shutdown) or
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) has been called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Starts the background task if it is not running and a tokio runtime is current.
    fn ensure_task(&self, st: &mut State<K>) {
        if st.shutting_down || st.task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            st.task = Some(runtime.spawn(task::run(
                Arc::downgrade(&self.shared),
                self.shared.wake.clone(),
            )));
        }
    }
}

/// Marks `item` dirty; returns whether it was pushed onto the queue (so a parked worker
/// should be woken).
pub(super) fn add_locked<K: Clone + Eq + Hash>(
    st: &mut State<K>,
    item: K,
    metrics: Option<&QueueMetrics>,
    now: Option<Instant>,
) -> bool {
    if st.shutting_down {
        return false;
    }
    match st.slots.entry(item) {
        Entry::Occupied(mut o) => {
            let slot = o.get_mut();
            if slot.dirty {
                return false;
            }
            slot.mark_dirty(metrics, now);
            if slot.processing {
                return false;
            }
            st.queue.push_back(o.key().clone());
        }
        Entry::Vacant(v) => {
            let key = v.key().clone();
            v.insert(Slot::default()).mark_dirty(metrics, now);
            st.queue.push_back(key);
        }
    }
    true
}

/// Decrements the parked-worker count if a parked `get` is cancelled.
struct ParkGuard<'a, K> {
    shared: &'a Shared<K>,
    armed: bool,
}

impl<K> Drop for ParkGuard<'_, K> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().parked -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_of<K>(q: &WorkQueue<K>) -> Option<JoinHandleState> {
        q.shared
            .lock()
            .task
            .as_ref()
            .map(|t| JoinHandleState(t.is_finished()))
    }

    #[derive(Debug, PartialEq)]
    struct JoinHandleState(bool);

    #[tokio::test(start_paused = true)]
    async fn superseded_deadlines_are_compacted() {
        let q = WorkQueue::new();
        for i in 0..10_000u64 {
            q.add_after(i % 10, Duration::from_secs(100_000 - i));
            let st = q.shared.lock();
            assert!(
                st.waiting.len() <= 2 * st.waiting_items + 64,
                "heap {} for {} items",
                st.waiting.len(),
                st.waiting_items
            );
        }
        assert_eq!(q.num_waiting(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn unmetered_queue_without_delays_starts_no_task() {
        let q = WorkQueue::new();
        q.add(1);
        assert_eq!(q.get().await, Some(1));
        q.done(&1);
        assert_eq!(task_of(&q), None);
    }

    #[tokio::test(start_paused = true)]
    async fn background_task_ends_with_the_last_handle() {
        let q = WorkQueue::new();
        q.add_after(1, Duration::from_secs(60));
        let task = q.shared.lock().task.take().unwrap();
        // The task holds only a weak reference, so dropping the queue ends it.
        drop(q);
        tokio::time::timeout(Duration::from_millis(1), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn background_task_ends_at_shutdown() {
        let mut registry = Registry::default();
        let q: WorkQueue<u8> = WorkQueue::with_registry("t", &mut registry);
        assert_eq!(task_of(&q), Some(JoinHandleState(false)));
        q.shutdown();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(task_of(&q), Some(JoinHandleState(true)));
    }
}
