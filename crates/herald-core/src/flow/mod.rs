//! Flow control with client-go's arithmetic: token buckets, rate limiters and backoff.
//!
//! - [`TokenBucket`]: the passive bucket (`golang.org/x/time/rate` semantics) that callers
//!   feed with the time.
//! - [`RateLimiter`]: a thread-safe bucket that reads an injected clock; `try_accept` never
//!   waits, `reserve` tells the caller how long to wait (the caller sleeps with its own
//!   runtime). [`AlwaysRateLimiter`] and [`NeverRateLimiter`] are fakes behind [`RateLimit`].
//! - [`Backoff`]: exponential backoff kept per item (`flowcontrol.Backoff`).
//! - [`jitter`] and [`ExponentialBackoff`]: delays for retry loops.
//!
//! Nothing here reads the system time or sleeps; randomness is always injected.

mod backoff;
mod bucket;
mod limiter;
mod retry;

pub use backoff::{Backoff, DEFAULT_MAX_ENTRIES, HasExpiredFn};
pub use bucket::TokenBucket;
pub use limiter::{AlwaysRateLimiter, NeverRateLimiter, RateLimit, RateLimiter};
pub use retry::{ExponentialBackoff, JitterMode, jitter};
