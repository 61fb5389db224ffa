//! Leases for TTLs, reused across writes as kube-apiserver's `leaseManager` does.
//!
//! One lease per key would cost etcd a lease object and an expiry per event. Instead, a
//! lease granted for a TTL serves every later write with the same TTL for a while: it is
//! granted for `ttl + reuse` (reuse = the smaller of the reuse duration and 5 % of the TTL)
//! and handed out as long as it outlives the new write's TTL and has no more than `ttl +
//! reuse` left, and until `max_objects` writes have used it. A key thus lives between its TTL
//! and its TTL plus the reuse duration. Each write attaches a lease, so each write restarts
//! the key's TTL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::{Clock, add_saturating};
use jiff::Timestamp;
use tokio::sync::Mutex;

/// The most TTLs the manager remembers a lease for; past it, the lease expiring first is
/// forgotten (writes with that TTL get a new one).
const MAX_TTLS: usize = 16;

/// Hands out lease IDs for TTLs (see the module docs).
pub(super) struct LeaseManager {
    clock: Arc<dyn Clock>,
    reuse: Duration,
    max_objects: u64,
    /// Per TTL in whole seconds: the last lease granted for it. Held across the grant
    /// request, as kube-apiserver does, so concurrent writes share one grant.
    leases: Mutex<HashMap<i64, Granted>>,
}

#[derive(Debug, Clone, Copy)]
struct Granted {
    id: i64,
    expires: Timestamp,
    attached: u64,
}

impl LeaseManager {
    pub(super) fn new(clock: Arc<dyn Clock>, reuse: Duration, max_objects: u64) -> Self {
        LeaseManager {
            clock,
            reuse,
            max_objects,
            leases: Mutex::new(HashMap::new()),
        }
    }

    /// A lease for a write with `ttl` (rounded up to whole seconds, at least 1), granting
    /// one through `grant(ttl_seconds)` when no remembered lease fits.
    pub(super) async fn lease_for<F, Fut, E>(&self, ttl: Duration, grant: F) -> Result<i64, E>
    where
        F: FnOnce(i64) -> Fut,
        Fut: Future<Output = Result<i64, E>>,
    {
        let ttl_secs = ttl_seconds(ttl);
        let reuse_secs = reuse_seconds(ttl_secs, self.reuse);
        let now = self.clock.now();
        let mut leases = self.leases.lock().await;
        if let Some(g) = leases.get_mut(&ttl_secs) {
            let valid = add_saturating(now, secs(ttl_secs)) < g.expires;
            let sufficient = add_saturating(now, secs(ttl_secs + reuse_secs)) >= g.expires;
            g.attached += 1;
            if valid && sufficient && (self.max_objects == 0 || g.attached <= self.max_objects) {
                return Ok(g.id);
            }
        }
        let granted_for = ttl_secs + reuse_secs;
        let id = grant(granted_for).await?;
        if leases.len() >= MAX_TTLS && !leases.contains_key(&ttl_secs) {
            let first = leases
                .iter()
                .min_by_key(|(_, g)| g.expires)
                .map(|(k, _)| *k);
            if let Some(k) = first {
                leases.remove(&k);
            }
        }
        leases.insert(
            ttl_secs,
            Granted {
                id,
                expires: add_saturating(now, secs(granted_for)),
                attached: 1,
            },
        );
        Ok(id)
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// etcd leases are whole seconds: a TTL rounds up, and is at least 1.
fn ttl_seconds(ttl: Duration) -> i64 {
    let s = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(s.max(1)).unwrap_or(i64::MAX / 2)
}

/// kube-apiserver's reuse: 5 % of the TTL, at most the reuse duration.
fn reuse_seconds(ttl_secs: i64, reuse: Duration) -> i64 {
    let max = i64::try_from(reuse.as_secs()).unwrap_or(i64::MAX / 2);
    (ttl_secs / 20).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::clock::FakeClock;
    use std::sync::atomic::{AtomicI64, Ordering};

    fn manager(clock: Arc<FakeClock>, max_objects: u64) -> LeaseManager {
        LeaseManager::new(clock, Duration::from_secs(60), max_objects)
    }

    async fn lease(m: &LeaseManager, ttl: u64, next: &AtomicI64) -> (i64, Option<i64>) {
        let mut granted = None;
        let id = m
            .lease_for(Duration::from_secs(ttl), |secs| {
                granted = Some(secs);
                let id = next.fetch_add(1, Ordering::Relaxed);
                async move { Ok::<_, ()>(id) }
            })
            .await
            .unwrap();
        (id, granted)
    }

    #[tokio::test]
    async fn a_lease_is_reused_for_its_ttl_within_the_reuse_window_then_renewed() {
        let clock = Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()));
        let m = manager(clock.clone(), 1_000);
        let next = AtomicI64::new(1);
        // 1 h TTL: reuse is min(60 s, 5 % of 3600 s = 180 s) = 60 s; granted for 3660 s.
        assert_eq!(lease(&m, 3600, &next).await, (1, Some(3660)));
        clock.advance(Duration::from_secs(59));
        assert_eq!(lease(&m, 3600, &next).await, (1, None), "reused");
        // Another TTL has its own lease.
        assert_eq!(lease(&m, 600, &next).await, (2, Some(630)));
        // Past the reuse window the lease would expire before the new write's TTL.
        clock.advance(Duration::from_secs(1));
        assert_eq!(lease(&m, 3600, &next).await, (3, Some(3660)));
        // A sub-second TTL is one second, and a short TTL has no reuse window.
        assert_eq!(lease(&m, 0, &next).await, (4, Some(1)));
    }

    #[tokio::test]
    async fn a_lease_takes_at_most_max_objects_keys() {
        let clock = Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()));
        let m = manager(clock, 3);
        let next = AtomicI64::new(1);
        let ids = [
            lease(&m, 3600, &next).await.0,
            lease(&m, 3600, &next).await.0,
            lease(&m, 3600, &next).await.0,
            lease(&m, 3600, &next).await.0,
        ];
        assert_eq!(ids, [1, 1, 1, 2]);
    }
}
