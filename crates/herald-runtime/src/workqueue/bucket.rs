//! A queue-wide token bucket limiter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_core::clock::{Clock, add_saturating, elapsed};
use herald_core::flow::TokenBucket;
use jiff::Timestamp;

use super::rate_limiter::RateLimiter;

/// A token bucket shared by all items (client-go's `BucketRateLimiter`): every
/// [`when`](RateLimiter::when) reserves the next token and returns how long until it is
/// available. Reservations are never cancelled, so `k` calls in a burst beyond the bucket
/// wait `1/qps`, `2/qps`, … `k/qps`. `forget` does nothing and `num_requeues` is always 0.
///
/// Built on [`TokenBucket`] (starts full, refills at `qps` up to `burst`) and an injected
/// [`Clock`]. A bucket that can never yield a token (`burst == 0`, or empty with
/// `qps <= 0`) answers `Duration::MAX`, which the queue clamps to its maximum delay.
///
/// Bound: constant memory.
pub struct BucketRateLimiter {
    clock: Arc<dyn Clock>,
    state: Mutex<Reservations>,
}

#[derive(Debug)]
struct Reservations {
    bucket: TokenBucket,
    /// When the latest reservation's token becomes available; later reservations queue
    /// behind it.
    last_grant: Option<Timestamp>,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilling at `qps` per second, read against `clock`.
    pub fn new(qps: f32, burst: u32, clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            state: Mutex::new(Reservations {
                bucket: TokenBucket::new(qps, burst),
                last_grant: None,
            }),
        }
    }

    /// Reserves one token at `now`; returns the wait until it is available.
    fn reserve(&self, now: Timestamp) -> Duration {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Tokens are handed out in reservation order: never earlier than the last grant.
        let mut at = match st.last_grant {
            Some(last) if last > now => last,
            _ => now,
        };
        // Float rounding may leave the bucket a hair short at the computed instant; a few
        // nanosecond steps always settle it.
        for _ in 0..4 {
            if st.bucket.try_accept_at(at) {
                st.last_grant = Some(at);
                return elapsed(now, at);
            }
            match st.bucket.time_until_available(at) {
                Some(wait) => at = add_saturating(at, wait.max(Duration::from_nanos(1))),
                None => return Duration::MAX,
            }
        }
        if st.bucket.try_accept_at(at) {
            st.last_grant = Some(at);
            return elapsed(now, at);
        }
        Duration::MAX
    }
}

impl std::fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("BucketRateLimiter")
            .field("qps", &st.bucket.qps())
            .field("burst", &st.bucket.burst())
            .finish()
    }
}

impl<K> RateLimiter<K> for BucketRateLimiter {
    fn when(&self, _item: &K) -> Duration {
        self.reserve(self.clock.now())
    }
    fn forget(&self, _item: &K) {}
    fn num_requeues(&self, _item: &K) -> u32 {
        0
    }
}
