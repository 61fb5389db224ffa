//! Per-item limiters: exponential backoff and fast/slow, over a bounded failure table.

use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hashbrown::HashMap;

use super::rate_limiter::RateLimiter;

/// Default bound on the number of items a per-item limiter tracks at once.
pub const DEFAULT_MAX_TRACKED_ITEMS: usize = 100_000;

/// Failure counts per item, bounded.
///
/// Bound: at most `max_tracked` items. At the bound, tracking a new item forgets one
/// arbitrary tracked item first (its next failure starts from the bottom of the ladder)
/// and a warning is logged once: an ever-growing table means `forget` is not being called.
#[derive(Debug)]
struct FailureCounts<K> {
    counts: Mutex<HashMap<K, u32>>,
    max_tracked: usize,
    warned: AtomicBool,
}

impl<K: Clone + Eq + Hash> FailureCounts<K> {
    fn new(max_tracked: usize) -> Self {
        Self {
            counts: Mutex::new(HashMap::new()),
            max_tracked: max_tracked.max(1),
            warned: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // Only plain integer updates happen under this lock.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one failure; returns the count *before* it.
    fn record(&self, item: &K) -> u32 {
        let mut counts = self.lock();
        if let Some(n) = counts.get_mut(item) {
            let before = *n;
            *n = n.saturating_add(1);
            return before;
        }
        if counts.len() >= self.max_tracked {
            if let Some(victim) = counts.keys().next().cloned() {
                counts.remove(&victim);
            }
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    max_tracked = self.max_tracked,
                    "rate limiter is tracking its maximum number of items; forgetting some \
                     (is forget() called when an item succeeds?)"
                );
            }
        }
        counts.insert(item.clone(), 1);
        0
    }

    fn forget(&self, item: &K) {
        self.lock().remove(item);
    }

    fn get(&self, item: &K) -> u32 {
        self.lock().get(item).copied().unwrap_or(0)
    }
}

/// `base × 2^exp`, or `max` when that is larger or does not fit (never overflows).
fn exponential(base: Duration, max: Duration, exp: u32) -> Duration {
    let base_ns = base.as_nanos();
    if base_ns == 0 {
        return Duration::ZERO.min(max);
    }
    if exp >= base_ns.leading_zeros() {
        return max;
    }
    let ns = base_ns << exp;
    if ns >= max.as_nanos() {
        return max;
    }
    // ns < max.as_nanos(), so the seconds fit in u64.
    Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
}

/// Per-item exponential backoff: an item's n-th consecutive failure waits
/// `base × 2^(n-1)`, capped at `max`. Exact integer arithmetic, so any number of failures
/// (up to `u32::MAX`, where the count saturates) yields `max` rather than overflowing.
///
/// [`Default`] is client-go's controller ladder: 5 ms, 10 ms, 20 ms, … capped at 1000 s
/// (reached at the 19th failure).
///
/// Bound: tracks at most [`DEFAULT_MAX_TRACKED_ITEMS`] items (see
/// [`with_max_tracked`](Self::with_max_tracked)); at the bound one arbitrary tracked item is
/// forgotten to make room.
#[derive(Debug)]
pub struct ItemExponentialRateLimiter<K> {
    base: Duration,
    max: Duration,
    failures: FailureCounts<K>,
}

impl<K: Clone + Eq + Hash> ItemExponentialRateLimiter<K> {
    /// Backoff starting at `base` and doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: FailureCounts::new(DEFAULT_MAX_TRACKED_ITEMS),
        }
    }

    /// Changes the bound on tracked items (at least 1).
    #[must_use]
    pub fn with_max_tracked(mut self, max_tracked: usize) -> Self {
        self.failures = FailureCounts::new(max_tracked);
        self
    }
}

impl<K: Clone + Eq + Hash> Default for ItemExponentialRateLimiter<K> {
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<K: Clone + Eq + Hash + Send + Sync> RateLimiter<K> for ItemExponentialRateLimiter<K> {
    fn when(&self, item: &K) -> Duration {
        exponential(self.base, self.max, self.failures.record(item))
    }
    fn forget(&self, item: &K) {
        self.failures.forget(item)
    }
    fn num_requeues(&self, item: &K) -> u32 {
        self.failures.get(item)
    }
}

/// Per-item two-speed limiter: the first `max_fast_attempts` failures of an item wait
/// `fast`, later ones wait `slow`.
///
/// Bound: tracks at most [`DEFAULT_MAX_TRACKED_ITEMS`] items (see
/// [`with_max_tracked`](Self::with_max_tracked)); at the bound one arbitrary tracked item is
/// forgotten to make room.
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    failures: FailureCounts<K>,
}

impl<K: Clone + Eq + Hash> ItemFastSlowRateLimiter<K> {
    /// `fast` for the first `max_fast_attempts` failures, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            failures: FailureCounts::new(DEFAULT_MAX_TRACKED_ITEMS),
        }
    }

    /// Changes the bound on tracked items (at least 1).
    #[must_use]
    pub fn with_max_tracked(mut self, max_tracked: usize) -> Self {
        self.failures = FailureCounts::new(max_tracked);
        self
    }
}

impl<K: Clone + Eq + Hash + Send + Sync> RateLimiter<K> for ItemFastSlowRateLimiter<K> {
    fn when(&self, item: &K) -> Duration {
        let attempts = self.failures.record(item).saturating_add(1);
        if attempts <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &K) {
        self.failures.forget(item)
    }
    fn num_requeues(&self, item: &K) -> u32 {
        self.failures.get(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_is_exact_and_saturates() {
        let ms = Duration::from_millis;
        assert_eq!(exponential(ms(5), Duration::from_secs(1000), 0), ms(5));
        assert_eq!(
            exponential(ms(5), Duration::from_secs(1000), 17),
            Duration::from_millis(655_360)
        );
        assert_eq!(
            exponential(ms(5), Duration::from_secs(1000), 18),
            Duration::from_secs(1000)
        );
        for exp in [63, 64, 100, 127, 128, u32::MAX] {
            assert!(!exponential(ms(1), Duration::MAX, exp).is_zero());
            assert_eq!(exponential(ms(1), ms(7), exp), ms(7));
        }
        assert_eq!(exponential(Duration::ZERO, ms(7), 1000), Duration::ZERO);
        assert_eq!(exponential(Duration::MAX, Duration::MAX, 1), Duration::MAX);
    }

    #[test]
    fn failure_table_is_bounded() {
        let counts = FailureCounts::new(3);
        for i in 0..10u32 {
            counts.record(&i);
            counts.record(&i);
        }
        assert_eq!(counts.lock().len(), 3);
        // The most recent item is always kept.
        assert_eq!(counts.get(&9), 2);
    }
}
