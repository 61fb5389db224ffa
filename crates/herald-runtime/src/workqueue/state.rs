//! The queue's lock-protected state: one map entry per distinct item, a FIFO of ready
//! items, and a min-heap of delayed items.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use hashbrown::HashMap;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::metrics::QueueMetrics;

/// Everything the queue knows about one item. The entry exists while any of `dirty`,
/// `processing` or `waiting` holds, and is removed as soon as none does.
#[derive(Debug, Default)]
pub(super) struct Slot {
    /// Needs processing: it is in the FIFO, or will be pushed there by `done`.
    pub(super) dirty: bool,
    /// Handed to a worker and not yet done.
    pub(super) processing: bool,
    /// Re-queued by `done` during shutdown; a drain waits until it is handed out.
    pub(super) owed: bool,
    /// Ready time and sequence number of its live heap entry, if it waits for a delay.
    pub(super) waiting: Option<(Instant, u64)>,
    /// When it became dirty (metrics only).
    pub(super) added_at: Option<Instant>,
    /// When a worker took it (metrics only).
    pub(super) started_at: Option<Instant>,
}

impl Slot {
    pub(super) fn mark_dirty(&mut self, metrics: Option<&QueueMetrics>, now: Option<Instant>) {
        self.dirty = true;
        if let Some(m) = metrics {
            m.adds.inc();
            m.depth.inc();
            if self.added_at.is_none() {
                self.added_at = now;
            }
        }
    }

    fn is_idle(&self) -> bool {
        !self.dirty && !self.processing && self.waiting.is_none()
    }
}

/// A delayed item in the heap. Ordered so that `BinaryHeap` (a max-heap) pops the earliest
/// ready time first, ties broken by insertion order.
pub(super) struct Waiting<K> {
    pub(super) ready: Instant,
    pub(super) seq: u64,
    pub(super) item: K,
}

impl<K> PartialEq for Waiting<K> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq && self.ready == other.ready
    }
}

impl<K> Eq for Waiting<K> {}

impl<K> PartialOrd for Waiting<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Waiting<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready, other.seq).cmp(&(self.ready, self.seq))
    }
}

pub(super) struct State<K> {
    /// Items ready to be handed out, in order.
    pub(super) queue: VecDeque<K>,
    pub(super) slots: HashMap<K, Slot>,
    /// Delayed items; entries whose `seq` no longer matches their slot are stale.
    pub(super) waiting: BinaryHeap<Waiting<K>>,
    /// Live entries in `waiting` (distinct waiting items).
    pub(super) waiting_items: usize,
    pub(super) next_seq: u64,
    /// Items being processed.
    pub(super) processing: usize,
    /// Items with `owed` set.
    pub(super) owed: usize,
    /// Workers parked in `get`.
    pub(super) parked: usize,
    pub(super) shutting_down: bool,
    pub(super) draining: bool,
    pub(super) task: Option<JoinHandle<()>>,
}

impl<K: Clone + Eq + Hash> State<K> {
    pub(super) fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            slots: HashMap::new(),
            waiting: BinaryHeap::new(),
            waiting_items: 0,
            next_seq: 0,
            processing: 0,
            owed: 0,
            parked: 0,
            shutting_down: false,
            draining: false,
            task: None,
        }
    }

    /// Moves `item` (just popped from the FIFO) to processing.
    pub(super) fn take(&mut self, item: &K, metrics: Option<&QueueMetrics>, now: Option<Instant>) {
        let Some(slot) = self.slots.get_mut(item) else {
            // Unreachable by construction: every queued item has a slot.
            return;
        };
        slot.dirty = false;
        slot.processing = true;
        self.processing += 1;
        if slot.owed {
            slot.owed = false;
            self.owed -= 1;
        }
        if let (Some(m), Some(now)) = (metrics, now) {
            m.depth.dec();
            if let Some(added) = slot.added_at.take() {
                m.queue_duration
                    .observe(now.saturating_duration_since(added).as_secs_f64());
            }
            slot.started_at = Some(now);
        }
    }

    /// Drops superseded heap entries once they outnumber live ones (plus slack), keeping
    /// the heap within `2 × waiting_items + 64`.
    pub(super) fn compact_waiting(&mut self) {
        if self.waiting.len() <= 2 * self.waiting_items + 64 {
            return;
        }
        let slots = &self.slots;
        self.waiting.retain(|w| {
            slots
                .get(&w.item)
                .and_then(|s| s.waiting)
                .is_some_and(|(_, seq)| seq == w.seq)
        });
    }

    /// Forgets every delayed item (shutdown).
    pub(super) fn discard_waiting(&mut self) {
        if self.waiting_items == 0 && self.waiting.is_empty() {
            return;
        }
        self.waiting.clear();
        self.waiting_items = 0;
        self.slots.retain(|_, s| {
            s.waiting = None;
            !s.is_idle()
        });
    }

    /// Adds every delayed item whose time has come; returns how many were pushed onto the
    /// FIFO.
    pub(super) fn release_due(&mut self, now: Instant, metrics: Option<&QueueMetrics>) -> usize {
        let mut pushed = 0;
        while self.waiting.peek().is_some_and(|w| w.ready <= now) {
            let Some(w) = self.waiting.pop() else { break };
            let Some(slot) = self.slots.get_mut(&w.item) else {
                continue;
            };
            if slot.waiting.is_none_or(|(_, seq)| seq != w.seq) {
                continue;
            }
            slot.waiting = None;
            self.waiting_items -= 1;
            if slot.dirty {
                continue;
            }
            slot.mark_dirty(metrics, Some(now));
            if !slot.processing {
                self.queue.push_back(w.item);
                pushed += 1;
            }
        }
        pushed
    }

    /// Sum and maximum of the ages of the items being processed.
    pub(super) fn unfinished_work(&self, now: Instant) -> (Duration, Duration) {
        let mut total = Duration::ZERO;
        let mut longest = Duration::ZERO;
        if self.processing == 0 {
            return (total, longest);
        }
        for slot in self.slots.values() {
            if let Some(start) = slot.started_at {
                let age = now.saturating_duration_since(start);
                total += age;
                longest = longest.max(age);
            }
        }
        (total, longest)
    }
}
