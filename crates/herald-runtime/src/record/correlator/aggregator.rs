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

use super::keys::{KeyBuilder, KeyFunc};
use super::lru::Lru;

#[derive(Debug)]
struct Record {
    /// Local keys, least recently seen first. Bound: `max_events − 1` after every event.
    locals: Lru<()>,
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
    pub(crate) aggregate_key: Vec<u8>,
    local_key: Vec<u8>,
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
            aggregate_key: Vec::new(),
            local_key: Vec::new(),
            evictions: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// Records `event` at `now`; true when it must be replaced by the combined event (whose
    /// dedup key is then [`Aggregator::aggregate_key`]).
    pub(crate) fn observe(
        &mut self,
        event: &Event,
        now: Timestamp,
        key_func: &KeyFunc,
        hasher: &DefaultHashBuilder,
    ) -> bool {
        self.aggregate_key.clear();
        self.local_key.clear();
        key_func(
            event,
            &mut KeyBuilder::new(&mut self.aggregate_key),
            &mut KeyBuilder::new(&mut self.local_key),
        );
        let hash = hasher.hash_one(self.aggregate_key.as_slice());
        let local_capacity = self.max_events.saturating_sub(1).max(1);
        let idx = match self.records.get(hash, &self.aggregate_key) {
            Some(idx) => idx,
            None => {
                let (idx, evicted) = self.records.insert_with(
                    hash,
                    &self.aggregate_key,
                    || Record {
                        locals: Lru::new(local_capacity),
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
        let local_hash = hasher.hash_one(self.local_key.as_slice());
        if record.locals.get(local_hash, &self.local_key).is_some() {
            // The set holds at most max_events − 1 keys, so it cannot reach max_events.
            return false;
        }
        // At max_events − 1 keys the new one fills the set: aggregate, and the least recently
        // seen key is evicted so the set is back at max_events − 1.
        let (_, evicted) = record.locals.insert(local_hash, &self.local_key, ());
        evicted.is_some()
    }
}
