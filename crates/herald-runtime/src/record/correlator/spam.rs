//! The spam filter: one token bucket per spam key (client-go's
//! `EventSourceObjectSpamFilter`).

use herald_core::clock::add_saturating;
use herald_core::flow::TokenBucket;
use jiff::Timestamp;

use hashbrown::DefaultHashBuilder;

use super::keys::KeyBuf;
use super::lru::Lru;

/// Spam state. Bound: `lru_cache_size` buckets, evicting the least recently used; an evicted
/// key gets a fresh, full bucket next time (a new burst), as in client-go.
#[derive(Debug)]
pub(crate) struct SpamFilter {
    buckets: Lru<TokenBucket>,
    /// The spam key of the event being checked (reused buffer; the slot it remembers is in
    /// `buckets`).
    pub(crate) key: KeyBuf,
    qps: f32,
    burst: u32,
    pub(crate) evictions: u64,
}

/// The outcome of one token request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decision {
    pub(crate) accepted: bool,
    /// Another key's bucket was evicted to make room.
    pub(crate) evicted: bool,
}

impl SpamFilter {
    pub(crate) fn new(capacity: usize, qps: f32, burst: u32) -> Self {
        Self {
            buckets: Lru::new(capacity),
            key: KeyBuf::default(),
            qps,
            burst,
            evictions: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// [`SpamFilter::try_accept`] for the key in [`SpamFilter::key`].
    pub(crate) fn try_accept_key(
        &mut self,
        hasher: &DefaultHashBuilder,
        now: Timestamp,
    ) -> Decision {
        let (idx, evicted) = match self.buckets.get_key(&mut self.key, hasher) {
            Some(idx) => (idx, false),
            None => {
                let bucket = TokenBucket::new(self.qps, self.burst);
                let (idx, old) = self.buckets.insert_key(&mut self.key, hasher, bucket);
                (idx, old.is_some())
            }
        };
        self.evictions += u64::from(evicted);
        let accepted = self.buckets.value_mut(idx).try_accept_at(now);
        Decision { accepted, evicted }
    }

    /// Takes a token for `key` at `now`: fetches (promoting) or creates the key's bucket, which
    /// starts full. A refused request leaves the bucket unchanged.
    pub(crate) fn try_accept(&mut self, hash: u64, key: &[u8], now: Timestamp) -> Decision {
        let (idx, evicted) = match self.buckets.get(hash, key) {
            Some(idx) => (idx, false),
            None => {
                let (idx, old) =
                    self.buckets
                        .insert(hash, key, TokenBucket::new(self.qps, self.burst));
                (idx, old.is_some())
            }
        };
        self.evictions += u64::from(evicted);
        let accepted = self.buckets.value_mut(idx).try_accept_at(now);
        Decision { accepted, evicted }
    }

    /// When `key`'s bucket will next have a token, judged at `now` without changing anything:
    /// `now` if it has one (or has no bucket, which would start full), `None` if it never will.
    pub(crate) fn available_at(&self, hash: u64, key: &[u8], now: Timestamp) -> Option<Timestamp> {
        match self.buckets.peek(hash, key) {
            None => TokenBucket::new(self.qps, self.burst)
                .time_until_available(now)
                .map(|_| now),
            Some(idx) => self
                .buckets
                .value(idx)
                .time_until_available(now)
                .map(|d| add_saturating(now, d)),
        }
    }
}
