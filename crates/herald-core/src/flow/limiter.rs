//! The clocked rate limiter: a [`TokenBucket`] that reads an injected [`Clock`].

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::Clock;

use super::TokenBucket;

/// What every rate limiter in this module offers (client-go's `RateLimiter` minus the
/// sleeping: the caller waits with its own runtime for the duration [`reserve`] returns).
///
/// [`reserve`]: RateLimit::reserve
pub trait RateLimit: Send + Sync {
    /// Takes one token if one is available now; never waits.
    fn try_accept(&self) -> bool;
    /// Takes one token now, going into debt if needed, and returns how long the caller must
    /// wait before proceeding. `Duration::MAX` means "never" (no token was taken).
    fn reserve(&self) -> Duration;
    /// The configured rate in tokens per second.
    fn qps(&self) -> f64;
}

/// A thread-safe token-bucket rate limiter reading an injected clock
/// (client-go's `NewTokenBucketRateLimiterWithClock`).
///
/// Bound: the bucket holds at most `burst` tokens (refill beyond that is discarded); debt
/// taken by [`reserve`](RateLimiter::reserve) is unbounded but each reservation reports the
/// wait that pays it back, so callers that honour the waits are held to `qps`.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use herald_core::clock::FakeClock;
/// use herald_core::flow::RateLimiter;
///
/// let clock = Arc::new(FakeClock::default());
/// let limiter = RateLimiter::new(10.0, 1, clock.clone());
/// assert_eq!(limiter.reserve(), Duration::ZERO);
/// assert_eq!(limiter.reserve(), Duration::from_millis(100));
/// assert!(!limiter.try_accept());
/// clock.advance(Duration::from_millis(200));
/// assert!(limiter.try_accept());
/// ```
pub struct RateLimiter {
    bucket: Mutex<TokenBucket>,
    qps: f32,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("bucket", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A full bucket of `burst` tokens refilling at `qps` per second (see [`TokenBucket::new`]
    /// for the degenerate values). Creating it does not read the clock.
    pub fn new(qps: f32, burst: u32, clock: Arc<dyn Clock>) -> Self {
        Self {
            bucket: Mutex::new(TokenBucket::new(qps, burst)),
            qps,
            clock,
        }
    }

    /// Takes one token if one is available now. Reads the clock exactly once; a refusal
    /// leaves the bucket unchanged.
    pub fn try_accept(&self) -> bool {
        let now = self.clock.now();
        self.lock().try_accept_at(now)
    }

    /// Takes one token now, possibly going into debt, and returns how long the caller must
    /// wait before proceeding (x/time/rate `Reserve`). Reads the clock exactly once.
    /// Returns `Duration::MAX` without taking a token when none will ever be available.
    pub fn reserve(&self) -> Duration {
        let now = self.clock.now();
        self.lock().reserve_at(now).unwrap_or(Duration::MAX)
    }

    /// Reserves one token only if the wait is at most `max_wait` (x/time/rate `Wait` with a
    /// deadline); otherwise returns `None` and takes nothing. Reads the clock exactly once.
    pub fn reserve_within(&self, max_wait: Duration) -> Option<Duration> {
        let now = self.clock.now();
        self.lock().reserve_within_at(now, max_wait)
    }

    /// The configured rate (client-go's `QPS()`).
    pub fn qps(&self) -> f64 {
        f64::from(self.qps)
    }

    /// The configured burst.
    pub fn burst(&self) -> u32 {
        self.lock().burst()
    }

    fn lock(&self) -> MutexGuard<'_, TokenBucket> {
        // The bucket's fields are plain numbers updated together after every check; a panic
        // elsewhere cannot leave them inconsistent.
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RateLimit for RateLimiter {
    fn try_accept(&self) -> bool {
        RateLimiter::try_accept(self)
    }
    fn reserve(&self) -> Duration {
        RateLimiter::reserve(self)
    }
    fn qps(&self) -> f64 {
        RateLimiter::qps(self)
    }
}

/// A limiter that accepts everything at once (client-go's `NewFakeAlwaysRateLimiter`):
/// `try_accept` is true, `reserve` is zero, `qps` is 1.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysRateLimiter;

impl RateLimit for AlwaysRateLimiter {
    fn try_accept(&self) -> bool {
        true
    }
    fn reserve(&self) -> Duration {
        Duration::ZERO
    }
    fn qps(&self) -> f64 {
        1.0
    }
}

/// A limiter that accepts nothing (client-go's `NewFakeNeverRateLimiter`): `try_accept` is
/// false, `reserve` is `Duration::MAX` ("never"), `qps` is 1.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverRateLimiter;

impl RateLimit for NeverRateLimiter {
    fn try_accept(&self) -> bool {
        false
    }
    fn reserve(&self) -> Duration {
        Duration::MAX
    }
    fn qps(&self) -> f64 {
        1.0
    }
}
