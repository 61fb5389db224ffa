//! The shared state of a broadcaster and the distribution step.
//!
//! Ordering by construction: every accepted item gets the next sequence number under the
//! incoming lock, and a new watcher records the sequence number of the next item under the
//! same lock. The distribution hands a watcher exactly the items numbered from its start, so
//! registration is ordered with the item stream without any barrier round trip.
//!
//! The distribution step ([`Shared::run`]) never blocks: a watcher that is full in Wait mode
//! only records how far it got, and the step resumes when that watcher makes room or stops.
//! Who runs the step is the [`Distribution`] choice (see [`Shared::kick`]).

use std::collections::VecDeque;
use std::sync::atomic::fence;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;

use tokio::sync::Notify;

use super::slot::Slot;
use super::{Distribution, FullChannelBehavior};

/// How often the distribution thread yields, looking for more work, before it parks.
const SPIN_YIELDS: u32 = 8;

const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const DIRTY: u8 = 2;

pub(crate) struct Incoming<T> {
    /// Accepted items not yet taken by the distribution.
    pub(crate) queue: VecDeque<T>,
    /// Items taken by the distribution but not yet delivered to every watcher; they still
    /// count against the incoming bound.
    pub(crate) in_flight: usize,
    /// Sequence number the next accepted item gets.
    pub(crate) next_seq: u64,
    /// Watchers registered since the distribution last looked.
    pub(crate) new_watchers: Vec<Arc<Slot<T>>>,
    pub(crate) stopped: bool,
}

struct Registered<T> {
    slot: Arc<Slot<T>>,
    /// Sequence number of the next item this watcher has not received.
    next_seq: u64,
}

/// Owned by whoever runs the distribution step.
pub(crate) struct Dist<T> {
    watchers: Vec<Registered<T>>,
    /// Items taken from the incoming queue, numbered from `batch_seq`, not yet delivered to
    /// every watcher.
    batch: VecDeque<T>,
    batch_seq: u64,
}

pub(crate) struct Shared<T> {
    pub(crate) behavior: FullChannelBehavior,
    pub(crate) watcher_queue_len: usize,
    pub(crate) incoming_len: usize,
    incoming: Mutex<Incoming<T>>,
    dist: Mutex<Dist<T>>,
    /// Whether a dedicated thread runs the distribution (else the callers do).
    threaded: AtomicBool,
    /// Caller driver: IDLE / RUNNING / DIRTY (running, and asked to run once more).
    state: AtomicU8,
    /// Thread driver: a distribution step has been requested.
    pending: AtomicBool,
    /// Thread driver: the distribution thread, once it has started.
    thread: OnceLock<Thread>,
    /// Producers waiting in `action` for room in the incoming queue, and how many there are
    /// (so that the distribution only pays for a notification when someone listens).
    room: Notify,
    room_waiters: AtomicUsize,
    finished: AtomicBool,
    finished_notify: Notify,
    next_id: AtomicU64,
}

/// Result of offering an item to the incoming queue.
pub(crate) enum Offer<T> {
    Accepted,
    Full(T),
    Stopped(T),
}

impl<T: Clone + Send + 'static> Shared<T> {
    pub(crate) fn new(
        incoming_len: usize,
        watcher_queue_len: usize,
        behavior: FullChannelBehavior,
    ) -> Self {
        Self {
            behavior,
            watcher_queue_len,
            incoming_len,
            incoming: Mutex::new(Incoming {
                queue: VecDeque::new(),
                in_flight: 0,
                next_seq: 0,
                new_watchers: Vec::new(),
                stopped: false,
            }),
            dist: Mutex::new(Dist {
                watchers: Vec::new(),
                batch: VecDeque::new(),
                batch_seq: 0,
            }),
            threaded: AtomicBool::new(false),
            state: AtomicU8::new(IDLE),
            pending: AtomicBool::new(false),
            thread: OnceLock::new(),
            room: Notify::new(),
            room_waiters: AtomicUsize::new(0),
            finished: AtomicBool::new(false),
            finished_notify: Notify::new(),
            next_id: AtomicU64::new(0),
        }
    }

    /// Starts the distribution thread if asked to; falls back to distributing in the callers
    /// when the thread cannot be spawned (the behaviour is the same, only who does the work
    /// differs).
    pub(crate) fn start(self: &Arc<Self>, distribution: Distribution) {
        if distribution != Distribution::OnThread {
            return;
        }
        self.threaded.store(true, Ordering::SeqCst);
        let shared = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("herald-broadcast".into())
            .spawn(move || shared.thread_main());
        if spawned.is_err() {
            self.threaded.store(false, Ordering::SeqCst);
            self.kick();
        }
    }

    pub(crate) fn lock_incoming(&self) -> MutexGuard<'_, Incoming<T>> {
        // All updates under this lock are single assignments/pushes; nothing can panic
        // half-way, so a poisoned lock still holds consistent state.
        self.incoming.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts `item` if the broadcaster runs and the incoming queue has room.
    pub(crate) fn offer(&self, item: T) -> Offer<T> {
        let mut inc = self.lock_incoming();
        if inc.stopped {
            return Offer::Stopped(item);
        }
        if inc.queue.len() + inc.in_flight >= self.incoming_len {
            return Offer::Full(item);
        }
        inc.queue.push_back(item);
        inc.next_seq += 1;
        drop(inc);
        self.kick();
        Offer::Accepted
    }

    /// Accepts `item`, waiting for room while the incoming queue is full; gives the item
    /// back if the broadcaster is (or gets) stopped. Dropping the future drops the item.
    pub(crate) async fn offer_waiting(&self, item: T) -> Result<(), T> {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let mut item = match self.offer(item) {
            Offer::Accepted => return Ok(()),
            Offer::Stopped(item) => return Err(item),
            Offer::Full(item) => item,
        };
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.room_waiters);
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            match self.offer(item) {
                Offer::Accepted => return Ok(()),
                Offer::Stopped(back) => return Err(back),
                Offer::Full(back) => item = back,
            }
            notified.await;
        }
    }

    /// Registers a watcher whose first item is the next one accepted.
    pub(crate) fn register(&self, cap: usize, prefix: Vec<T>) -> Option<Arc<Slot<T>>> {
        let mut inc = self.lock_incoming();
        if inc.stopped {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::new(id, cap, inc.next_seq, prefix));
        inc.new_watchers.push(Arc::clone(&slot));
        Some(slot)
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.lock_incoming().stopped
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Refuses new items and watchers from now on and lets the distribution drain and close.
    pub(crate) fn request_shutdown(&self) {
        {
            let mut inc = self.lock_incoming();
            inc.stopped = true;
        }
        // Producers waiting for room must see the stop.
        self.room.notify_waiters();
        self.kick();
    }

    pub(crate) async fn wait_finished(&self) {
        loop {
            let notified = self.finished_notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_finished() {
                return;
            }
            notified.await;
        }
    }

    /// Asks for a distribution step.
    pub(crate) fn kick(&self) {
        if self.threaded.load(Ordering::SeqCst) {
            // Only the first request after the thread took the last one pays for the unpark
            // (itself only a syscall when the thread is actually parked).
            if !self.pending.swap(true, Ordering::SeqCst) {
                // Pairs with the fence in `thread_main`: either the thread sees `pending`
                // after publishing its handle, or we see the handle.
                fence(Ordering::SeqCst);
                if let Some(t) = self.thread.get() {
                    t.unpark();
                }
            }
        } else {
            self.run_in_caller();
        }
    }

    /// Caller driver: at most one caller runs the step at a time; a caller arriving while it
    /// runs marks it DIRTY and returns at once, and the running caller goes round again, so
    /// no request is lost and no caller ever waits for another.
    fn run_in_caller(&self) {
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            let next = match state {
                IDLE => RUNNING,
                RUNNING => DIRTY,
                _ => return,
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) if next == RUNNING => break,
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        // Resets the state if `T::clone` panics inside the step, so the broadcaster is not
        // wedged for everyone else.
        struct Reset<'a>(&'a AtomicU8);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(IDLE, Ordering::SeqCst);
                }
            }
        }
        let _reset = Reset(&self.state);
        loop {
            self.run(&mut self.lock_dist());
            if self
                .state
                .compare_exchange(RUNNING, IDLE, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
            self.state.store(RUNNING, Ordering::SeqCst);
        }
    }

    fn thread_main(&self) {
        let _ = self.thread.set(std::thread::current());
        fence(Ordering::SeqCst);
        loop {
            if self.pending.swap(false, Ordering::SeqCst) {
                let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.run(&mut self.lock_dist())
                }));
                if step.is_err() {
                    // Only `T::clone` can panic here. Rather than leave accepted items
                    // stranded with no distributor, hand the work to the callers, where a
                    // repeated panic is at least visible to whoever caused it.
                    self.threaded.store(false, Ordering::SeqCst);
                    // Requests that arrived before the switch went to this thread: serve
                    // them (and anything stalled) once more, now as a caller.
                    self.run_in_caller();
                    return;
                }
                if self.is_finished() {
                    return;
                }
                continue;
            }
            // Give producers a moment before parking: a batch that builds up meanwhile is
            // delivered with one lock and one wake-up per watcher instead of one per item.
            for _ in 0..SPIN_YIELDS {
                if self.pending.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::yield_now();
            }
            if !self.pending.load(Ordering::SeqCst) {
                // An unpark issued after our check is remembered, so this cannot miss it.
                std::thread::park();
            }
        }
    }

    fn lock_dist(&self) -> MutexGuard<'_, Dist<T>> {
        self.dist.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One distribution step: take what was accepted, deliver as much as every watcher can
    /// hold, retire what everyone has, repeat until nothing moves; close everything once
    /// stopped and drained. Never blocks.
    fn run(&self, d: &mut Dist<T>) {
        loop {
            let (stopped, fetched) = self.fetch(d);
            let retired = self.deliver(d);
            if !fetched && retired == 0 {
                if stopped && d.batch.is_empty() {
                    self.finish(d);
                }
                return;
            }
        }
    }

    /// Moves accepted items and new watchers over to the distribution; returns whether the
    /// broadcaster is stopped and whether anything new arrived.
    fn fetch(&self, d: &mut Dist<T>) -> (bool, bool) {
        let (stopped, fetched, freed) = {
            let mut inc = self.lock_incoming();
            let freed = inc.in_flight > d.batch.len();
            let arrived = inc.queue.len();
            d.batch_seq = inc.next_seq - (d.batch.len() + arrived) as u64;
            if d.batch.is_empty() {
                // Swap rather than copy, recycling both buffers.
                std::mem::swap(&mut d.batch, &mut inc.queue);
            } else {
                d.batch.extend(inc.queue.drain(..));
            }
            inc.in_flight = d.batch.len();
            let joined = !inc.new_watchers.is_empty();
            d.watchers
                .extend(inc.new_watchers.drain(..).map(|slot| Registered {
                    next_seq: slot.start_seq,
                    slot,
                }));
            (inc.stopped, arrived > 0 || joined, freed)
        };
        // Pairs with the increment in `offer_waiting` (SeqCst on both sides, around the
        // incoming lock): a producer that saw the queue full is counted by now.
        if freed && self.room_waiters.load(Ordering::SeqCst) > 0 {
            self.room.notify_waiters();
        }
        (stopped, fetched)
    }

    /// Delivers the batch to every watcher as far as each can take it and retires the
    /// prefix everyone has; returns how many items were retired.
    fn deliver(&self, d: &mut Dist<T>) -> usize {
        d.watchers
            .retain(|r| !r.slot.stopped.load(Ordering::SeqCst));
        let end = d.batch_seq + d.batch.len() as u64;
        let mut low = end;
        for r in &mut d.watchers {
            if r.next_seq < end {
                let from = r.next_seq.max(d.batch_seq);
                let skip = (from - d.batch_seq) as usize;
                r.next_seq = from + self.deliver_to(&r.slot, &d.batch, skip) as u64;
            }
            low = low.min(r.next_seq);
        }
        let retired = (low - d.batch_seq) as usize;
        d.batch.drain(..retired);
        d.batch_seq = low;
        retired
    }

    /// Delivers `batch[skip..]` to one watcher; returns how many items the distribution is
    /// done with for it (delivered, plus dropped in Drop mode).
    fn deliver_to(&self, slot: &Slot<T>, batch: &VecDeque<T>, skip: usize) -> usize {
        let pending = batch.len() - skip;
        let mut q = slot.lock();
        if q.closed {
            return pending;
        }
        let mut sent = slot.room(&q).min(pending);
        q.buf.extend(batch.range(skip..skip + sent).cloned());
        let done = match self.behavior {
            FullChannelBehavior::DropIfChannelFull => {
                if sent < pending {
                    slot.dropped
                        .fetch_add((pending - sent) as u64, Ordering::Relaxed);
                }
                pending
            }
            FullChannelBehavior::WaitIfChannelFull => {
                if sent < pending {
                    slot.hot.0.runner_waiting.store(true, Ordering::SeqCst);
                    // The consumer may have made room after we looked and before it could
                    // see the flag: look once more now that the flag is visible.
                    let more = slot.room(&q).min(pending - sent);
                    let at = skip + sent;
                    q.buf.extend(batch.range(at..at + more).cloned());
                    sent += more;
                }
                sent
            }
        };
        let waker = if sent > 0 { q.waker.take() } else { None };
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
        done
    }

    fn finish(&self, d: &mut Dist<T>) {
        for r in d.watchers.drain(..) {
            r.slot.close();
        }
        if !self.finished.swap(true, Ordering::AcqRel) {
            self.finished_notify.notify_waiters();
            self.room.notify_waiters();
        }
    }
}
