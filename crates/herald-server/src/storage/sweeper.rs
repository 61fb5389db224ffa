//! The periodic TTL sweep every backend without native expiry needs.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::Backend;

/// Spawns a tokio task that calls [`Backend::expire_due`] every `period` (at least 1 ms) until
/// the backend is dropped (the task holds only a weak reference). Which keys are due is decided
/// by the backend's injected clock; the interval only paces the sweeps. A failed sweep is
/// logged and retried at the next tick; ticks missed while a sweep runs are skipped, not
/// queued. Must be called inside a tokio runtime.
pub fn spawn_sweeper<B: Backend + ?Sized>(backend: &Arc<B>, period: Duration) -> JoinHandle<()> {
    let weak: Weak<B> = Arc::downgrade(backend);
    let period = period.max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let Some(backend) = weak.upgrade() else {
                return;
            };
            match backend.expire_due().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(expired = n, "TTL sweep"),
                Err(e) => tracing::warn!(error = %e, "TTL sweep failed"),
            }
        }
    })
}
