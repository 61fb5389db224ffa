//! The recorder's storm-proof incoming queue.
//!
//! client-go drops every event that arrives while its 1000-slot queue is full, so a storm
//! loses most of its occurrences silently — and, worse, a storm of one event fills every slot
//! and crowds out every other event. This queue has the same bound, but an event *identical*
//! to one already queued is merged into it: the queued event's `count` grows and its
//! `lastTimestamp` moves forward. Identical means the correlator's full dedup identity
//! (source, object, type, reason, message) plus the fields a merged event can keep only one
//! copy of (annotations, reporting component and instance, namespace); the name and the
//! timestamps are ignored. A storm of one event
//! therefore takes one slot, and only a genuinely distinct event arriving at a full queue is
//! dropped (the caller counts that drop).
//!
//! Merging only ever happens while the first event is still queued, i.e. while the pipeline
//! is behind; an idle pipeline sees every event individually, exactly as client-go does.
//!
//! Bound: at most `capacity` events, each of bounded size; a merge allocates nothing.
//!
//! The queue is shared by both recorders: it is generic over [`Mergeable`], which says what
//! "identical" means and how a merge counts (core/v1: `count` and `lastTimestamp`;
//! events.k8s.io/v1: the occurrence count and the last observation).

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use hashbrown::{DefaultHashBuilder, HashTable};
use k8s_openapi::api::core::v1::Event;
use tokio::sync::Notify;

/// What happened to a pushed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Push {
    /// Queued as a new entry.
    Queued,
    /// Merged into an identical queued event.
    Merged,
    /// The queue was full of other events; the event was not queued.
    Full,
    /// The queue is closed (shutting down); the event was not queued.
    Closed,
}

/// An item the incoming queue can merge: one with an identity and a count of occurrences.
pub(crate) trait Mergeable: Send + 'static {
    /// Hashes the identity (every field [`same_identity`](Self::same_identity) compares).
    fn identity_hash(&self, hasher: &DefaultHashBuilder) -> u64;
    /// True when `other` is the same occurrence as `self` but for its time and name.
    fn same_identity(&self, other: &Self) -> bool;
    /// Folds `newer` (an identical occurrence) into `self`: its occurrences add up, its time
    /// moves forward.
    fn absorb(&mut self, newer: Self);
}

impl Mergeable for Event {
    fn identity_hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        identity_hash(hasher, self)
    }

    fn same_identity(&self, other: &Self) -> bool {
        same_identity(self, other)
    }

    fn absorb(&mut self, newer: Self) {
        let add = newer.count.unwrap_or(1).max(1);
        self.count = Some(self.count.unwrap_or(1).saturating_add(add));
        if newer.last_timestamp > self.last_timestamp {
            self.last_timestamp = newer.last_timestamp;
        }
    }
}

pub(crate) struct IncomingQueue<T = Event> {
    state: Mutex<State<T>>,
    notify: Notify,
    capacity: usize,
    hasher: DefaultHashBuilder,
}

struct State<T> {
    slots: VecDeque<Slot<T>>,
    /// Sequence number of `slots[0]`.
    head: u64,
    /// Sequence numbers of queued slots, hashed by their identity.
    index: HashTable<u64>,
    closed: bool,
}

struct Slot<T> {
    hash: u64,
    event: T,
}

impl<T: Mergeable> IncomingQueue<T> {
    /// A queue holding at most `capacity` (≥ 1) distinct events.
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            state: Mutex::new(State {
                slots: VecDeque::with_capacity(capacity.min(4096)),
                head: 0,
                index: HashTable::with_capacity(capacity.min(4096)),
                closed: false,
            }),
            notify: Notify::new(),
            capacity,
            hasher: DefaultHashBuilder::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `event` without ever blocking on room.
    pub(crate) fn push(&self, event: T) -> Push {
        let hash = event.identity_hash(&self.hasher);
        let mut st = self.lock();
        if st.closed {
            return Push::Closed;
        }
        {
            let State {
                slots, head, index, ..
            } = &mut *st;
            let found = index.find(hash, |&seq| {
                let slot = &slots[(seq - *head) as usize];
                slot.hash == hash && slot.event.same_identity(&event)
            });
            if let Some(&seq) = found {
                slots[(seq - *head) as usize].event.absorb(event);
                return Push::Merged;
            }
        }
        if st.slots.len() >= self.capacity {
            return Push::Full;
        }
        let seq = st.head + st.slots.len() as u64;
        st.slots.push_back(Slot { hash, event });
        let State {
            slots, head, index, ..
        } = &mut *st;
        index.insert_unique(hash, seq, |&s| slots[(s - *head) as usize].hash);
        drop(st);
        self.notify.notify_one();
        Push::Queued
    }

    /// The oldest event, waiting for one; `None` once closed and empty.
    /// Meant for a single consumer.
    pub(crate) async fn pop(&self) -> Option<T> {
        loop {
            let notified = self.notify.notified();
            {
                let mut st = self.lock();
                if let Some(slot) = st.slots.pop_front() {
                    let seq = st.head;
                    st.head += 1;
                    if let Ok(entry) = st.index.find_entry(slot.hash, |&s| s == seq) {
                        entry.remove();
                    }
                    return Some(slot.event);
                }
                if st.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Refuses further pushes; queued events can still be popped.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_one();
    }

    /// Queued events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().slots.len()
    }
}

fn identity_hash(bh: &DefaultHashBuilder, e: &Event) -> u64 {
    let mut h = bh.build_hasher();
    // `str`'s Hash writes a terminator, so the tuple of fields cannot be ambiguous.
    identity_fields(e).hash(&mut h);
    e.metadata.annotations.hash(&mut h);
    h.finish()
}

type Fields<'a> = [Option<&'a str>; 13];

fn identity_fields(e: &Event) -> Fields<'_> {
    let src = e.source.as_ref();
    let r = &e.involved_object;
    [
        src.and_then(|s| s.component.as_deref()),
        src.and_then(|s| s.host.as_deref()),
        r.kind.as_deref(),
        r.namespace.as_deref(),
        r.name.as_deref(),
        r.field_path.as_deref(),
        r.uid.as_deref(),
        r.api_version.as_deref(),
        e.type_.as_deref(),
        e.reason.as_deref(),
        e.message.as_deref(),
        e.reporting_component.as_deref(),
        e.metadata.namespace.as_deref(),
    ]
}

fn same_identity(a: &Event, b: &Event) -> bool {
    identity_fields(a) == identity_fields(b)
        && a.reporting_instance == b.reporting_instance
        && a.metadata.annotations == b.metadata.annotations
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ev(name: &str, msg: &str, t: i64) -> Event {
        Event {
            involved_object: ObjectReference {
                name: Some(name.into()),
                ..Default::default()
            },
            message: Some(msg.into()),
            count: Some(1),
            last_timestamp: Some(Time(jiff::Timestamp::from_second(t).unwrap())),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn merges_identical_and_drops_only_distinct_when_full() {
        let q = IncomingQueue::<Event>::new(2);
        assert_eq!(q.push(ev("a", "m", 1)), Push::Queued);
        assert_eq!(q.push(ev("a", "m", 2)), Push::Merged);
        assert_eq!(q.push(ev("b", "m", 2)), Push::Queued);
        // Full: identical events still merge, distinct ones are refused.
        assert_eq!(q.push(ev("a", "m", 3)), Push::Merged);
        assert_eq!(q.push(ev("c", "m", 4)), Push::Full);
        assert_eq!(q.push(ev("a", "other", 4)), Push::Full);
        assert_eq!(q.len(), 2);
        let first = q.pop().await.unwrap();
        assert_eq!(first.count, Some(3));
        assert_eq!(first.last_timestamp.unwrap().0.as_second(), 3);
        // Once popped, an identical event is a new entry again.
        assert_eq!(q.push(ev("a", "m", 5)), Push::Queued);
        q.close();
        assert_eq!(q.push(ev("c", "m", 6)), Push::Closed);
        assert_eq!(
            q.pop().await.unwrap().involved_object.name.as_deref(),
            Some("b")
        );
        assert_eq!(q.pop().await.unwrap().count, Some(1));
        assert!(q.pop().await.is_none());
    }

    #[test]
    fn ambiguous_concatenations_are_different_identities() {
        let mut a = ev("ab", "c", 1);
        let mut b = ev("a", "bc", 1);
        a.involved_object.kind = None;
        b.involved_object.kind = None;
        assert!(!same_identity(&a, &b));
        let bh = DefaultHashBuilder::default();
        assert_ne!(identity_hash(&bh, &a), identity_hash(&bh, &b));
    }

    #[tokio::test]
    async fn index_survives_wraparound() {
        let q = IncomingQueue::<Event>::new(3);
        for round in 0..50 {
            for i in 0..3 {
                assert_eq!(q.push(ev(&format!("o{i}"), "m", round)), Push::Queued);
            }
            assert_eq!(q.push(ev("o1", "m", round)), Push::Merged);
            for i in 0..3 {
                let e = q.pop().await.unwrap();
                assert_eq!(
                    e.involved_object.name.as_deref(),
                    Some(format!("o{i}").as_str())
                );
                assert_eq!(e.count, Some(if i == 1 { 2 } else { 1 }));
            }
        }
    }
}
