//! The passive token bucket.
//!
//! [`TokenBucket`] is the passive bucket behind client-go's spam filter
//! (`golang.org/x/time/rate` semantics): it starts full, refills continuously at `qps`
//! tokens per second up to `burst`, and treats time going backwards as no time at all.
//! It never reads a clock itself; callers pass the time, so it is trivially deterministic.

use std::time::Duration;

use jiff::Timestamp;

use crate::clock::elapsed;

/// A passive token bucket: `try_accept_at(now)` takes one token if one is available at `now`.
///
/// Bound: holds at most `burst` tokens; at the bound further refill is discarded.
///
/// ```
/// use herald_core::flow::TokenBucket;
/// let t0: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
/// let mut b = TokenBucket::new(1.0, 3);
/// assert!(b.try_accept_at(t0) && b.try_accept_at(t0) && b.try_accept_at(t0));
/// assert!(!b.try_accept_at(t0));
/// assert!(b.try_accept_at(t0 + jiff::SignedDuration::from_secs(1)));
/// ```
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Refill rate in tokens per second (client-go stores qps as float32 and widens it).
    rate: f64,
    burst: u32,
    tokens: f64,
    /// When `tokens` was last brought up to date; `None` is Go's zero time.
    last: Option<Timestamp>,
}

impl TokenBucket {
    /// A full bucket refilling at `qps` tokens per second up to `burst` tokens.
    /// `qps <= 0` never refills; `qps` infinite always accepts; `burst == 0` never accepts
    /// (unless `qps` is infinite).
    pub fn new(qps: f32, burst: u32) -> Self {
        Self {
            rate: f64::from(qps),
            burst,
            tokens: f64::from(burst),
            last: None,
        }
    }

    /// The configured rate.
    pub fn qps(&self) -> f64 {
        self.rate
    }

    /// The configured burst.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Tokens that would be available at `now` (not mutating).
    pub fn tokens_at(&self, now: Timestamp) -> f64 {
        let burst = f64::from(self.burst);
        if self.rate <= 0.0 {
            return self.tokens.min(burst);
        }
        let since = match self.last {
            // Go's zero time is far enough in the past that the bucket is full.
            None => return burst,
            Some(last) => elapsed(last, now),
        };
        // Refill only what is missing, computed the way x/time/rate does to avoid overflow.
        let missing = burst - self.tokens;
        let max_elapsed = missing / self.rate;
        let secs = since.as_secs_f64().min(max_elapsed);
        (self.tokens + secs * self.rate).min(burst)
    }

    /// Takes one token if available at `now`. On refusal the state is unchanged.
    pub fn try_accept_at(&mut self, now: Timestamp) -> bool {
        if self.rate.is_infinite() && self.rate > 0.0 {
            return true;
        }
        if self.burst == 0 {
            return false;
        }
        let remaining = self.tokens_at(now) - 1.0;
        if remaining < 0.0 {
            // x/time/rate allows when the deficit converts to a wait of 0 whole nanoseconds.
            let wait_ns = if self.rate > 0.0 {
                (-remaining / self.rate * 1e9) as i64
            } else {
                i64::MAX
            };
            if wait_ns > 0 {
                return false;
            }
        }
        self.tokens = remaining;
        self.last = Some(match self.last {
            Some(last) if last > now => last,
            _ => now,
        });
        true
    }

    /// Takes one token at `now` even if that puts the bucket into debt, and returns how long
    /// the caller must wait before acting on it (`golang.org/x/time/rate` `Reserve`): zero if a
    /// token was available, otherwise the time the refill needs to pay the debt back.
    ///
    /// Bound: returns `None` and leaves the state unchanged when no token will ever be
    /// available (`burst == 0`, or no refill and no token left).
    pub fn reserve_at(&mut self, now: Timestamp) -> Option<Duration> {
        self.reserve_within_at(now, Duration::MAX)
    }

    /// Like [`reserve_at`](Self::reserve_at), but only reserves if the wait is at most
    /// `max_wait`; otherwise returns `None` and leaves the state unchanged (the way
    /// x/time/rate's `Wait` refuses a reservation that would outlive its deadline).
    pub fn reserve_within_at(&mut self, now: Timestamp, max_wait: Duration) -> Option<Duration> {
        if self.rate.is_infinite() && self.rate > 0.0 {
            return Some(Duration::ZERO);
        }
        if self.burst == 0 {
            return None;
        }
        let remaining = self.tokens_at(now) - 1.0;
        let wait = if remaining >= 0.0 {
            Duration::ZERO
        } else if self.rate > 0.0 {
            // x/time/rate truncates the debt's duration to whole nanoseconds.
            Duration::from_nanos((-remaining / self.rate * 1e9) as u64)
        } else {
            return None;
        };
        if wait > max_wait {
            return None;
        }
        self.tokens = remaining;
        self.last = Some(match self.last {
            Some(last) if last > now => last,
            _ => now,
        });
        Some(wait)
    }

    /// How long after `now` until one token is available; `Duration::ZERO` if one is now,
    /// `None` if none ever will be (no refill and empty, or `burst == 0`).
    pub fn time_until_available(&self, now: Timestamp) -> Option<Duration> {
        if self.rate.is_infinite() && self.rate > 0.0 {
            return Some(Duration::ZERO);
        }
        if self.burst == 0 {
            return None;
        }
        let tokens = self.tokens_at(now);
        if tokens >= 1.0 {
            return Some(Duration::ZERO);
        }
        if self.rate <= 0.0 {
            return None;
        }
        // Round up to the next whole nanosecond so that waiting this long is always enough.
        let secs = (1.0 - tokens) / self.rate;
        Some(Duration::from_nanos((secs * 1e9).ceil() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::add_saturating;

    fn t0() -> Timestamp {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn basic_throttle() {
        let mut b = TokenBucket::new(1.0, 3);
        assert!(b.try_accept_at(t0()));
        assert!(b.try_accept_at(t0()));
        assert!(b.try_accept_at(t0()));
        assert!(!b.try_accept_at(t0()));
    }

    #[test]
    fn increment_throttle() {
        let mut b = TokenBucket::new(1.0, 1);
        assert!(b.try_accept_at(t0()));
        assert!(!b.try_accept_at(t0()));
        assert!(b.try_accept_at(add_saturating(t0(), Duration::from_secs(2))));
    }

    #[test]
    fn time_backwards_adds_nothing() {
        let mut b = TokenBucket::new(1.0, 1);
        let later = add_saturating(t0(), Duration::from_secs(10));
        assert!(b.try_accept_at(later));
        assert!(!b.try_accept_at(t0()));
        assert!(!b.try_accept_at(later));
    }

    #[test]
    fn rate_precision_bug() {
        // qps = 1 s / 1,031,425 µs, burst 1: TryAccept-then-advance-2 s must always succeed.
        let qps = (1.0f64 / 1.031425) as f32;
        let mut b = TokenBucket::new(qps, 1);
        let mut now = t0();
        for i in 0..60 {
            assert!(b.try_accept_at(now), "iteration {i}");
            now = add_saturating(now, Duration::from_secs(2));
        }
    }

    #[test]
    fn spam_defaults_refill_after_about_300_seconds() {
        let mut b = TokenBucket::new(1.0 / 300.0, 25);
        for _ in 0..25 {
            assert!(b.try_accept_at(t0()));
        }
        assert!(!b.try_accept_at(add_saturating(t0(), Duration::from_secs(299))));
        let wait = b.time_until_available(t0()).unwrap();
        assert!(
            wait > Duration::from_secs(299) && wait <= Duration::from_secs(301),
            "{wait:?}"
        );
        assert!(b.try_accept_at(add_saturating(t0(), wait)));
    }

    #[test]
    fn reserve_goes_into_debt_and_reports_the_wait() {
        let mut b = TokenBucket::new(2.0, 1);
        assert_eq!(b.reserve_at(t0()), Some(Duration::ZERO));
        assert_eq!(b.reserve_at(t0()), Some(Duration::from_millis(500)));
        assert_eq!(b.reserve_at(t0()), Some(Duration::from_secs(1)));
        // Paying back the debt takes the reported time; no token before that.
        assert!(!b.try_accept_at(add_saturating(t0(), Duration::from_millis(1400))));
        assert_eq!(
            b.reserve_within_at(t0(), Duration::from_millis(1499)),
            None,
            "refused without taking"
        );
        assert_eq!(
            b.reserve_at(add_saturating(t0(), Duration::from_secs(1))),
            Some(Duration::from_millis(500))
        );
        let mut never = TokenBucket::new(1.0, 0);
        assert_eq!(never.reserve_at(t0()), None);
    }

    #[test]
    fn degenerate_buckets() {
        let mut never = TokenBucket::new(1.0, 0);
        assert!(!never.try_accept_at(t0()));
        assert_eq!(never.time_until_available(t0()), None);
        let mut no_refill = TokenBucket::new(0.0, 1);
        assert!(no_refill.try_accept_at(t0()));
        assert!(!no_refill.try_accept_at(add_saturating(t0(), Duration::from_secs(1000))));
        assert_eq!(no_refill.time_until_available(t0()), None);
        let mut always = TokenBucket::new(f32::INFINITY, 0);
        assert!(always.try_accept_at(t0()));
    }
}
