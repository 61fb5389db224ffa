//! The [`RateLimiter`] trait and the limiters that combine others.

use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::{Clock, SystemClock};

use super::bucket::BucketRateLimiter;
use super::item_limiters::ItemExponentialRateLimiter;

/// Decides how long an item waits before it is retried.
///
/// Every call to [`when`](Self::when) counts as one failure of `item` and may advance the
/// limiter's state. Call [`forget`](Self::forget) once the item succeeds, or the limiter
/// keeps its failure count (bounded: see each implementation).
pub trait RateLimiter<K>: Send + Sync {
    /// How long `item` should wait before its next attempt; records one more failure.
    fn when(&self, item: &K) -> Duration;
    /// Stops tracking `item` (it succeeded): its next failure starts the ladder again.
    fn forget(&self, item: &K);
    /// How many times `item` has failed since it was last forgotten.
    fn num_requeues(&self, item: &K) -> u32;
}

impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for Arc<L> {
    fn when(&self, item: &K) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &K) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &K) -> u32 {
        (**self).num_requeues(item)
    }
}

impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<L> {
    fn when(&self, item: &K) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &K) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &K) -> u32 {
        (**self).num_requeues(item)
    }
}

/// The worst case of several limiters: [`when`](RateLimiter::when) asks **every** limiter
/// (so each one advances its state) and returns the longest wait; `num_requeues` is the
/// largest count; `forget` is forwarded to all.
///
/// With a [`BucketRateLimiter`] inside, every call takes a token even when another limiter
/// imposes the longer wait, so the bucket can look exhausted sooner than its burst suggests
/// (as in client-go).
pub struct MaxOfRateLimiter<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOfRateLimiter<K> {
    /// Combines `limiters`; with none, every wait is zero.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K> std::fmt::Debug for MaxOfRateLimiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> RateLimiter<K> for MaxOfRateLimiter<K> {
    fn when(&self, item: &K) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .fold(Duration::ZERO, Duration::max)
    }
    fn forget(&self, item: &K) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn num_requeues(&self, item: &K) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps another limiter's wait at `max_wait`.
#[derive(Debug)]
pub struct MaxWaitRateLimiter<L> {
    inner: L,
    max_wait: Duration,
}

impl<L> MaxWaitRateLimiter<L> {
    /// `inner`, with every wait clamped to at most `max_wait`.
    pub fn new(inner: L, max_wait: Duration) -> Self {
        Self { inner, max_wait }
    }
}

impl<K, L: RateLimiter<K>> RateLimiter<K> for MaxWaitRateLimiter<L> {
    fn when(&self, item: &K) -> Duration {
        self.inner.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &K) {
        self.inner.forget(item)
    }
    fn num_requeues(&self, item: &K) -> u32 {
        self.inner.num_requeues(item)
    }
}

/// client-go's default controller limiter on the system clock: the worse of a per-item
/// exponential backoff (5 ms doubling to 1000 s) and a queue-wide token bucket (10 qps,
/// burst 100).
pub fn default_controller_rate_limiter<K>() -> MaxOfRateLimiter<K>
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    default_controller_rate_limiter_with_clock(Arc::new(SystemClock))
}

/// [`default_controller_rate_limiter`] with the bucket reading `clock`.
pub fn default_controller_rate_limiter_with_clock<K>(clock: Arc<dyn Clock>) -> MaxOfRateLimiter<K>
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialRateLimiter::<K>::default()),
        Box::new(BucketRateLimiter::new(10.0, 100, clock)),
    ])
}
