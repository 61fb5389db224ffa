//! The aggregator: decides whether an event is one of too many "similar" events.
//!
//! Per aggregate key it keeps the set of local keys seen within a sliding window and the time
//! of the last similar event. When an event brings the set to `max_events` distinct local keys,
//! the event is replaced by a "combined" one and one local key leaves the set again.
//!
//! Which key leaves is random in client-go (Go map order). Herald removes the **least recently
//! seen** local key (a repeat of a message refreshes it), so the set always holds the
//! `max_events − 1` most recently seen distinct messages. Every outcome client-go's tests pin
//! (§3.11) is unchanged: a repeat of a message still in the set is counted under its own key, a
//! message not in the set is aggregated.

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Event;

use super::keys::{KeyBuf, KeyBuilder, KeyFunc, Marks, aggregate_by_reason_marked};
use super::lru::Lru;

/// Up to this many local keys per record are kept in a short list searched from the most
/// recently seen end (faster than hashing for client-go's 9); larger sets use a hashed LRU.
const SHORT_SET_MAX: usize = 16;

/// The distinct local keys of one aggregate key, with their recency. Bound: `capacity` keys;
/// inserting one more evicts the least recently seen.
#[derive(Debug)]
enum LocalSet {
    /// Least recently seen first, each with its hash (compared first: similar messages tend
    /// to share long prefixes). Buffers past `len` are spare, kept for reuse so that a record
    /// (and an evicted record's slot) is refilled without allocating. Bound: `capacity`
    /// buffers, each as long as the longest key it held.
    Short {
        keys: Vec<(u64, Vec<u8>)>,
        len: usize,
        capacity: usize,
    },
    Hashed(Lru<()>),
}

impl LocalSet {
    fn new(capacity: usize) -> Self {
        if capacity <= SHORT_SET_MAX {
            LocalSet::Short {
                keys: Vec::new(),
                len: 0,
                capacity,
            }
        } else {
            LocalSet::Hashed(Lru::new(capacity))
        }
    }

    fn clear(&mut self) {
        match self {
            LocalSet::Short { len, .. } => *len = 0,
            LocalSet::Hashed(lru) => lru.clear(),
        }
    }

    /// Marks `key` (whose hash is `hash`) as seen now: true when it was in the set already.
    /// Otherwise it is added, and the result tells whether the least recently seen key was
    /// evicted to make room.
    fn see(&mut self, key: &[u8], hash: u64) -> Seen {
        match self {
            LocalSet::Short {
                keys,
                len,
                capacity,
            } => {
                let n = *len;
                let live = &mut keys[..n];
                if let Some(pos) = live
                    .iter()
                    .rposition(|(h, k)| *h == hash && k.as_slice() == key)
                {
                    live[pos..].rotate_left(1);
                    return Seen::Present;
                }
                let slot = if n == *capacity {
                    // The least recently seen key leaves; its buffer takes the new key.
                    live.rotate_left(1);
                    &mut live[n - 1]
                } else {
                    *len += 1;
                    if n == keys.len() {
                        keys.push((hash, Vec::with_capacity(key.len())));
                    }
                    &mut keys[n]
                };
                slot.0 = hash;
                slot.1.clear();
                slot.1.extend_from_slice(key);
                if n == *capacity {
                    Seen::AddedEvicting
                } else {
                    Seen::Added
                }
            }
            LocalSet::Hashed(lru) => {
                if lru.get(hash, key).is_some() {
                    return Seen::Present;
                }
                match lru.insert(hash, key, ()).1 {
                    Some(()) => Seen::AddedEvicting,
                    None => Seen::Added,
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Present,
    Added,
    AddedEvicting,
}

#[derive(Debug)]
struct Record {
    /// Bound: `max_events − 1` after every event.
    locals: LocalSet,
    /// `None` is Go's zero time: the window has always expired.
    last: Option<Timestamp>,
}

/// Aggregation state. Bound: `lru_cache_size` records (evicting the least recently used), each
/// holding at most `max_events − 1` local keys.
#[derive(Debug)]
pub(crate) struct Aggregator {
    records: Lru<Record>,
    max_events: usize,
    max_interval: SignedDuration,
    /// The aggregate key of the last observed event (reused buffer).
    pub(crate) aggregate_key: KeyBuf,
    /// Its local key.
    pub(crate) local_key: Vec<u8>,
    /// With the default key function ([`aggregate_by_reason`](super::aggregate_by_reason)):
    /// where the last aggregate key ends the parts other default keys share.
    pub(crate) marks: Option<Marks>,
    pub(crate) evictions: u64,
}

impl Aggregator {
    pub(crate) fn new(
        capacity: usize,
        max_events: usize,
        max_interval: std::time::Duration,
    ) -> Self {
        Self {
            records: Lru::new(capacity),
            max_events,
            max_interval: SignedDuration::try_from(max_interval).unwrap_or(SignedDuration::MAX),
            aggregate_key: KeyBuf::default(),
            local_key: Vec::new(),
            marks: None,
            evictions: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Records `event` at `now`; true when it must be replaced by the combined event (whose
    /// dedup key is then [`Aggregator::aggregate_key`]). `key_func` is `None` for the default
    /// key function, which is then called directly and leaves [`Aggregator::marks`].
    pub(crate) fn observe(
        &mut self,
        event: &Event,
        now: Timestamp,
        key_func: Option<&KeyFunc>,
        hasher: &DefaultHashBuilder,
    ) -> bool {
        self.local_key.clear();
        let local_key = &mut self.local_key;
        let mut marks = None;
        self.aggregate_key.build(|aggregate| {
            let local = &mut KeyBuilder::new(local_key);
            match key_func {
                Some(f) => f(event, aggregate, local),
                None => marks = Some(aggregate_by_reason_marked(event, aggregate, local)),
            }
        });
        self.marks = marks;
        let local_capacity = self.max_events.saturating_sub(1).max(1);
        let idx = match self.records.get_key(&mut self.aggregate_key, hasher) {
            Some(idx) => idx,
            None => {
                let (idx, evicted) = self.records.insert_key_with(
                    &mut self.aggregate_key,
                    hasher,
                    || Record {
                        locals: LocalSet::new(local_capacity),
                        last: None,
                    },
                    // Reuse the evicted record's allocations.
                    |r| {
                        r.locals.clear();
                        r.last = None;
                    },
                );
                self.evictions += u64::from(evicted);
                idx
            }
        };
        let record = self.records.value_mut(idx);
        // Strictly greater: exactly `max_interval` since the last similar event is still
        // within the window. Time going backwards gives a negative span: within the window.
        let expired = match record.last {
            None => true,
            Some(last) => now.duration_since(last) > self.max_interval,
        };
        if expired {
            record.locals.clear();
        }
        record.last = Some(now);
        if self.max_events <= 1 {
            // The new local key would fill the set and be removed again at once.
            return true;
        }
        // The set holds at most max_events − 1 keys, so a key already in it cannot bring it to
        // max_events. A new key at max_events − 1 keys fills the set: aggregate, and the least
        // recently seen key is evicted so the set is back at max_events − 1.
        let local_hash = hasher.hash_one(self.local_key.as_slice());
        record.locals.see(&self.local_key, local_hash) == Seen::AddedEvicting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_hashed_sets_agree() {
        let hasher = DefaultHashBuilder::default();
        for capacity in [1, 2, 9, SHORT_SET_MAX] {
            let mut short = LocalSet::new(capacity);
            let mut hashed = LocalSet::Hashed(Lru::new(capacity));
            assert!(matches!(short, LocalSet::Short { .. }));
            // A deterministic walk with repeats, refreshes and clears.
            let mut x = 7u32;
            for step in 0..2000 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                if step % 97 == 0 {
                    short.clear();
                    hashed.clear();
                }
                let key = format!("m{}", (x >> 16) % 23);
                let hash = hasher.hash_one(key.as_bytes());
                assert_eq!(
                    short.see(key.as_bytes(), hash),
                    hashed.see(key.as_bytes(), hash),
                    "capacity {capacity}, step {step}"
                );
            }
        }
    }
}
