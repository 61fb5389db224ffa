//! Trailing flushes: the last word of a storm the spam filter silenced.
//!
//! client-go counts skipped events into the dedup cache but writes nothing until the next event
//! for the same object gets a token — which may never come, leaving the stored count short.
//! Herald remembers, per dedup key, the latest skipped observation and writes it once the key's
//! spam bucket has a token again.

use std::sync::Mutex;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use hashbrown::DefaultHashBuilder;

use super::keys::KeyBuf;
use super::lru::Lru;
use super::spam::SpamFilter;

/// One remembered skipped observation.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) spam_hash: u64,
    pub(crate) spam_key: Vec<u8>,
    /// The observed event when the key was first remembered; count, lastTimestamp and message
    /// (the fields the dedup patch writes) follow the latest observation.
    pub(crate) event: Event,
    /// The latest observation was a repeat (so the write is a patch).
    pub(crate) repeat: bool,
    pub(crate) aggregated: bool,
    /// Skipped occurrences under this key since its last write: the write that carries
    /// them settles their outcome.
    pub(crate) held: u64,
}

#[derive(Debug, Clone, Copy)]
enum NextAt {
    Unknown,
    Known(Option<Timestamp>),
}

/// Remembered flushes. Bound: `lru_cache_size` dedup keys; at the bound the least recently
/// skipped key is forgotten (its stored count stays short until its next write) and counted in
/// `evictions`.
#[derive(Debug)]
pub(crate) struct Flushes {
    pub(crate) pending: Lru<Pending>,
    pub(crate) evictions: u64,
    /// Cache for `next_flush_at`, which takes `&self`; recomputing walks every pending key.
    next_at: Mutex<NextAt>,
}

impl Flushes {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            pending: Lru::new(capacity),
            evictions: 0,
            next_at: Mutex::new(NextAt::Known(None)),
        }
    }

    /// Something that may move the earliest flush time happened.
    pub(crate) fn invalidate(&mut self) {
        *self.next_at_mut() = NextAt::Unknown;
    }

    fn next_at_mut(&mut self) -> &mut NextAt {
        self.next_at.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the remembered flush of `key`, if any (a write for it just went out, carrying
    /// its count); returns the occurrences it held.
    #[inline]
    pub(crate) fn clear_key(&mut self, key: &mut KeyBuf, hasher: &DefaultHashBuilder) -> u64 {
        if self.pending.is_empty() {
            return 0;
        }
        match self.pending.peek(key.hash(hasher), &key.bytes) {
            Some(idx) => {
                let (_, _, p) = self.pending.remove(idx);
                self.invalidate();
                p.held
            }
            None => 0,
        }
    }

    /// Forgets every remembered flush; returns the occurrences they held.
    pub(crate) fn forget_all(&mut self) -> u64 {
        let mut held = 0;
        while let Some(idx) = self.pending.indices_lru_first().next() {
            held += self.pending.remove(idx).2.held;
        }
        self.invalidate();
        held
    }

    /// Updates the remembered flush of `key` with the latest skipped observation; false when
    /// `key` has none.
    pub(crate) fn update_existing(
        &mut self,
        key: &mut KeyBuf,
        hasher: &DefaultHashBuilder,
        spam_hash: u64,
        spam_key: &[u8],
        observed: Observation<'_>,
    ) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let Some(idx) = self.pending.get(key.hash(hasher), &key.bytes) else {
            return false;
        };
        let p = self.pending.value_mut(idx);
        p.event.count = observed.count;
        p.event.last_timestamp.clone_from(observed.last_timestamp);
        p.event.message.clone_from(observed.message);
        p.repeat = observed.repeat;
        p.aggregated = observed.aggregated;
        p.held += 1;
        if p.spam_hash != spam_hash || p.spam_key != spam_key {
            p.spam_hash = spam_hash;
            p.spam_key.clear();
            p.spam_key.extend_from_slice(spam_key);
            self.invalidate();
        }
        true
    }

    /// Remembers a new key (absent before), evicting the least recently skipped key at the
    /// bound; returns the occurrences the evicted key held (0 when none was evicted).
    pub(crate) fn insert_new(
        &mut self,
        hash: u64,
        key: &[u8],
        pending: Pending,
        spam: &SpamFilter,
        now: Timestamp,
    ) -> u64 {
        let at = spam.available_at(pending.spam_hash, &pending.spam_key, now);
        let (_, evicted) = self.pending.insert(hash, key, pending);
        if let Some(evicted) = evicted {
            self.evictions += 1;
            self.invalidate();
            return evicted.held;
        } else if let NextAt::Known(known) = *self.next_at_mut() {
            let merged = match (known, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            *self.next_at_mut() = NextAt::Known(merged);
        }
        0
    }

    /// The earliest time a remembered key's bucket has a token, judged at `now`.
    pub(crate) fn next_flush_at(
        &self,
        spam: &SpamFilter,
        now: Option<Timestamp>,
    ) -> Option<Timestamp> {
        if self.pending.is_empty() {
            return None;
        }
        let mut cache = self.next_at.lock().unwrap_or_else(|e| e.into_inner());
        if let NextAt::Known(at) = *cache {
            return at;
        }
        let now = now?;
        let at = self
            .pending
            .indices_lru_first()
            .filter_map(|idx| {
                let p = self.pending.value(idx);
                spam.available_at(p.spam_hash, &p.spam_key, now)
            })
            .min();
        *cache = NextAt::Known(at);
        at
    }
}

/// The parts of a skipped observation a remembered flush follows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observation<'a> {
    pub(crate) count: Option<i32>,
    pub(crate) last_timestamp: &'a Option<Time>,
    pub(crate) message: &'a Option<String>,
    pub(crate) repeat: bool,
    pub(crate) aggregated: bool,
}
