//! The spam filter: one token bucket per spam key (client-go's
//! `EventSourceObjectSpamFilter`).

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

    /// Takes a token for the key in [`SpamFilter::key`] at `now`: fetches (promoting) or
    /// creates the key's bucket, which starts full (evicting the least recently used bucket at
    /// the bound). A refused request leaves the bucket unchanged.
    pub(crate) fn try_accept_key(&mut self, hasher: &DefaultHashBuilder, now: Timestamp) -> bool {
        let idx = match self.buckets.get_key(&mut self.key, hasher) {
            Some(idx) => idx,
            None => {
                let bucket = TokenBucket::new(self.qps, self.burst);
                let (idx, old) = self.buckets.insert_key(&mut self.key, hasher, bucket);
                self.evictions += u64::from(old.is_some());
                idx
            }
        };
        self.buckets.value_mut(idx).try_accept_at(now)
    }
}
