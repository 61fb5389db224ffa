//! Work queues that feed a reconcile loop, with client-go's semantics.
//!
//! - [`WorkQueue`]: fair (FIFO), stingy (duplicates collapse; an item is never processed
//!   by two workers at once; an item added while being processed is processed again after
//!   `done`), delaying (`add_after`, earliest ready time wins), with `shutdown` and
//!   `shutdown_with_drain`.
//! - [`RateLimitingQueue`]: a `WorkQueue` whose retries are paced by a [`RateLimiter`]:
//!   per-item exponential backoff ([`ItemExponentialRateLimiter`]), fast/slow
//!   ([`ItemFastSlowRateLimiter`]), a queue-wide token bucket ([`BucketRateLimiter`]),
//!   their maximum ([`MaxOfRateLimiter`]) and a cap ([`MaxWaitRateLimiter`]).
//!   [`default_controller_rate_limiter`] is client-go's default (exponential 5 ms → 1000 s,
//!   bucket 10 qps / burst 100).
//! - Prometheus metrics with client-go's names ([`WorkQueueMetrics`]), off by default.
//!
//! All timing uses tokio time, so tests run on paused time.
//!
//! # Bounds
//!
//! A queue holds one entry per distinct item, whatever its state; adds beyond that coalesce.
//! Per-item limiters track at most [`DEFAULT_MAX_TRACKED_ITEMS`] items each and forget one
//! at the bound. Delays are clamped to [`MAX_DELAY`].
//!
//! # A worker loop
//!
//! ```
//! use std::time::Duration;
//! use herald_runtime::workqueue::{ItemExponentialRateLimiter, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue: RateLimitingQueue<String> = RateLimitingQueue::new(ItemExponentialRateLimiter::new(
//!     Duration::from_millis(5),
//!     Duration::from_secs(60),
//! ));
//!
//! // A worker: take a key, reconcile it, retry it with backoff on failure.
//! let worker = tokio::spawn({
//!     let queue = queue.clone();
//!     async move {
//!         let mut attempts = 0;
//!         while let Some(key) = queue.get().await {
//!             attempts += 1;
//!             let ok = attempts >= 3; // pretend the first two reconciles fail
//!             if ok {
//!                 queue.forget(&key); // success: reset the backoff
//!             } else {
//!                 queue.add_rate_limited(key.clone()); // failure: retry after 5 ms, 10 ms…
//!             }
//!             queue.done(&key);
//!         }
//!         attempts
//!     }
//! });
//!
//! queue.add("default/my-pod".to_string());
//! queue.add("default/my-pod".to_string()); // collapses with the first
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! queue.shutdown_with_drain().await;
//! assert_eq!(worker.await.unwrap(), 3);
//! # }
//! ```

mod bucket;
mod item_limiters;
mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod state;
mod task;

pub use bucket::BucketRateLimiter;
pub use item_limiters::{
    DEFAULT_MAX_TRACKED_ITEMS, ItemExponentialRateLimiter, ItemFastSlowRateLimiter,
};
pub use metrics::WorkQueueMetrics;
pub use queue::{MAX_DELAY, WorkQueue};
pub use rate_limiter::{
    MaxOfRateLimiter, MaxWaitRateLimiter, RateLimiter, default_controller_rate_limiter,
    default_controller_rate_limiter_with_clock,
};
pub use rate_limiting::RateLimitingQueue;
pub use task::UNFINISHED_WORK_UPDATE_PERIOD;
