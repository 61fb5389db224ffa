//! The watch hub: in-memory fan-out of committed writes to every watcher.
//!
//! Every backend publishes each committed write here, in revision order. The hub keeps the most
//! recent events in a bounded ring buffer that serves both purposes of a watch:
//!
//! - **replay**: a watch from revision `R` starts reading the ring just after `R`;
//! - **live delivery**: watchers do not have their own queues; each holds a cursor (the last
//!   revision it has seen) and, when woken, copies the next batch of matching events out of the
//!   ring (`Arc`s, no value copies).
//!
//! **Bound.** The ring holds at most `capacity` events; publishing into a full ring evicts the
//! oldest. A watcher whose cursor falls behind the evicted part (a slow consumer, or a watch from
//! a revision older than the window) receives one [`StorageError::Expired`] and its stream ends;
//! memory never grows with slow watchers. Kubernetes clients answer that 410 by re-listing.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::StreamExt;
use tokio::sync::watch;

use super::{Revision, StorageError, WatchEvent, WatchStream};

/// How many events a watcher copies out of the ring per wake-up (bounds its private buffer).
const BATCH: usize = 1024;

/// The shared ring of recent events and the wake-up signal for watchers.
#[derive(Debug)]
pub struct WatchHub {
    ring: RwLock<Ring>,
    /// Carries the head revision; every publish bumps it and wakes all watchers.
    signal: watch::Sender<Revision>,
    capacity: usize,
}

#[derive(Debug)]
struct Ring {
    events: VecDeque<Arc<WatchEvent>>,
    /// Every event with a revision greater than `floor` is in `events`.
    floor: Revision,
    /// The revision of the newest published write.
    head: Revision,
    closed: bool,
}

impl WatchHub {
    /// An empty hub for a store currently at `revision`; it holds at most `capacity` events
    /// (at least 1).
    pub fn new(capacity: usize, revision: Revision) -> Arc<Self> {
        Self::with_history(capacity, revision, Vec::new())
    }

    /// A hub preloaded with `history` (events in increasing revision order, complete after
    /// `floor`: every write with a revision above `floor` is in it). Used by persistent backends
    /// on start so watches from revisions before a restart still replay. Only the newest
    /// `capacity` events are kept.
    pub fn with_history(capacity: usize, floor: Revision, history: Vec<WatchEvent>) -> Arc<Self> {
        let capacity = capacity.max(1);
        let head = history.last().map_or(floor, WatchEvent::revision);
        let (signal, _) = watch::channel(head);
        let hub = WatchHub {
            ring: RwLock::new(Ring {
                events: VecDeque::with_capacity(capacity.min(history.len().max(16))),
                floor,
                head,
                closed: false,
            }),
            signal,
            capacity,
        };
        {
            let mut ring = hub.write();
            for ev in history {
                ring.push(Arc::new(ev), capacity);
            }
        }
        Arc::new(hub)
    }

    /// The most events the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The revision of the newest published event (or the start revision).
    pub fn head(&self) -> Revision {
        self.read().head
    }

    /// The oldest revision a watch can start after.
    pub fn floor(&self) -> Revision {
        self.read().floor
    }

    /// Appends committed events (increasing revisions, each above the current head) and wakes
    /// the watchers. Events at or below the head are ignored (they were already published).
    pub fn publish(&self, events: impl IntoIterator<Item = WatchEvent>) {
        let head = {
            let mut ring = self.write();
            for ev in events {
                if ev.revision() > ring.head {
                    ring.head = ev.revision();
                    ring.push(Arc::new(ev), self.capacity);
                }
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
            ring.events.pop_front();
        }
        ring.floor = ring.floor.max(revision);
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
        let floor = self.floor();
        if after < floor {
            return Err(StorageError::Expired {
                requested: after,
                oldest: floor,
            });
        }
        let state = Watcher {
            hub: Arc::clone(self),
            rx: self.signal.subscribe(),
            prefix: prefix.to_owned(),
            cursor: after,
            buf: VecDeque::new(),
            done: false,
        };
        Ok(futures::stream::unfold(state, Watcher::next).boxed())
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

impl Ring {
    fn push(&mut self, ev: Arc<WatchEvent>, capacity: usize) {
        if self.events.len() >= capacity
            && let Some(old) = self.events.pop_front()
        {
            self.floor = old.revision();
        }
        self.events.push_back(ev);
    }
}

struct Watcher {
    hub: Arc<WatchHub>,
    rx: watch::Receiver<Revision>,
    prefix: String,
    cursor: Revision,
    buf: VecDeque<Arc<WatchEvent>>,
    done: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<Arc<WatchEvent>, StorageError>, Self)> {
        loop {
            if let Some(ev) = self.buf.pop_front() {
                return Some((Ok(ev), self));
            }
            if self.done {
                return None;
            }
            // Mark the signal seen *before* reading the ring so a publish that lands after the
            // read still wakes us.
            self.rx.borrow_and_update();
            match self.fill() {
                Err(e) => {
                    self.done = true;
                    return Some((Err(e), self));
                }
                Ok(true) => {
                    self.done = true;
                    continue;
                }
                Ok(false) => {}
            }
            if self.buf.is_empty() && self.rx.changed().await.is_err() {
                self.done = true;
            }
        }
    }

    /// Copies the next matching events into `buf`; `Ok(true)` when the hub is closed.
    fn fill(&mut self) -> Result<bool, StorageError> {
        let ring = self.hub.read();
        if self.cursor < ring.floor {
            return Err(StorageError::Expired {
                requested: self.cursor,
                oldest: ring.floor,
            });
        }
        let start = ring.events.partition_point(|e| e.revision() <= self.cursor);
        for ev in ring.events.range(start..) {
            self.cursor = ev.revision();
            if ev.key().starts_with(&self.prefix) {
                self.buf.push_back(Arc::clone(ev));
                if self.buf.len() >= BATCH {
                    break;
                }
            }
        }
        Ok(ring.closed)
    }
}
