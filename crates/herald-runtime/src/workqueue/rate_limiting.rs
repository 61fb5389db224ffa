//! [`RateLimitingQueue`]: a [`WorkQueue`] whose retries are paced by a [`RateLimiter`].

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;

use super::metrics::WorkQueueMetrics;
use super::queue::WorkQueue;
use super::rate_limiter::{RateLimiter, default_controller_rate_limiter};

/// A [`WorkQueue`] plus a [`RateLimiter`]: [`add_rate_limited`](Self::add_rate_limited)
/// re-adds a failed item after the limiter's delay, [`forget`](Self::forget) resets its
/// failure history once it succeeds.
///
/// Cheap to clone; clones share the queue and the limiter. Bounds are those of the
/// [`WorkQueue`] and of the limiter.
pub struct RateLimitingQueue<K> {
    queue: WorkQueue<K>,
    limiter: Arc<dyn RateLimiter<K>>,
}

impl<K> Clone for RateLimitingQueue<K> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<K> fmt::Debug for RateLimitingQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for RateLimitingQueue<K> {
    /// An unmetered queue with [`default_controller_rate_limiter`].
    fn default() -> Self {
        Self::new(default_controller_rate_limiter())
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> RateLimitingQueue<K> {
    /// An unmetered queue paced by `limiter`.
    pub fn new(limiter: impl RateLimiter<K> + 'static) -> Self {
        Self::from_queue(WorkQueue::new(), limiter)
    }

    /// A queue reporting into `metrics` under `name`, paced by `limiter`.
    pub fn with_metrics(
        name: &str,
        metrics: &WorkQueueMetrics,
        limiter: impl RateLimiter<K> + 'static,
    ) -> Self {
        Self::from_queue(WorkQueue::with_metrics(name, metrics), limiter)
    }

    /// A queue registering the metric families in `registry` (see
    /// [`WorkQueue::with_registry`]), paced by `limiter`.
    pub fn with_registry(
        name: &str,
        registry: &mut Registry,
        limiter: impl RateLimiter<K> + 'static,
    ) -> Self {
        Self::from_queue(WorkQueue::with_registry(name, registry), limiter)
    }

    /// Wraps an existing queue (and its clones) with `limiter`.
    pub fn from_queue(queue: WorkQueue<K>, limiter: impl RateLimiter<K> + 'static) -> Self {
        Self {
            queue,
            limiter: Arc::new(limiter),
        }
    }

    /// The underlying queue.
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }

    /// Re-adds `item` after the limiter's delay for it (recording one more failure).
    /// Ignored after shutdown, without touching the limiter.
    pub fn add_rate_limited(&self, item: K) {
        if self.queue.is_shutting_down() {
            return;
        }
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Clears `item`'s failure history in the limiter. Does not remove it from the queue
    /// and does not replace [`done`](Self::done).
    pub fn forget(&self, item: &K) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &K) -> u32 {
        self.limiter.num_requeues(item)
    }

    /// See [`WorkQueue::add`].
    pub fn add(&self, item: K) {
        self.queue.add(item);
    }

    /// See [`WorkQueue::add_after`].
    pub fn add_after(&self, item: K, delay: Duration) {
        self.queue.add_after(item, delay);
    }

    /// See [`WorkQueue::get`].
    pub async fn get(&self) -> Option<K> {
        self.queue.get().await
    }

    /// See [`WorkQueue::done`].
    pub fn done(&self, item: &K) {
        self.queue.done(item);
    }

    /// See [`WorkQueue::len`].
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// See [`WorkQueue::is_empty`].
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// See [`WorkQueue::shutdown`].
    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    /// See [`WorkQueue::shutdown_with_drain`].
    pub async fn shutdown_with_drain(&self) {
        self.queue.shutdown_with_drain().await;
    }

    /// See [`WorkQueue::is_shutting_down`].
    pub fn is_shutting_down(&self) -> bool {
        self.queue.is_shutting_down()
    }
}
