//! The per-queue background task: releases delayed items when they become ready and
//! refreshes the unfinished-work gauges.

use std::hash::Hash;
use std::pin::{Pin, pin};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

use super::queue::Shared;

/// How often the unfinished-work and longest-running gauges are refreshed (client-go's
/// period).
pub const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Runs until the queue shuts down or its last handle is dropped. Holds only a weak
/// reference while sleeping, so it never keeps a queue alive.
pub(super) async fn run<K: Clone + Eq + Hash + Send + Sync + 'static>(
    queue: Weak<Shared<K>>,
    wake: Arc<Notify>,
) {
    let mut next_tick = None;
    loop {
        let mut notified = pin!(wake.notified());
        let Some(deadline) = step(&queue, &mut next_tick, notified.as_mut()) else {
            return;
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// One pass under the lock. `None`: stop. `Some(None)`: sleep until woken.
/// `Some(Some(t))`: sleep until `t` or until woken.
fn step<K: Clone + Eq + Hash>(
    queue: &Weak<Shared<K>>,
    next_tick: &mut Option<Instant>,
    notified: Pin<&mut Notified<'_>>,
) -> Option<Option<Instant>> {
    let shared = queue.upgrade()?;
    let now = Instant::now();
    let mut st = shared.lock();
    if st.shutting_down {
        // client-go stops refreshing the gauges at shutdown too.
        return None;
    }
    // Registered under the lock: a deadline pushed after this pass wakes us.
    notified.enable();
    let pushed = st.release_due(now, shared.metrics.as_ref());
    let wake = pushed.min(st.parked);
    if let Some(m) = shared.metrics.as_ref() {
        let tick = *next_tick.get_or_insert(now);
        if now >= tick {
            let (total, longest) = st.unfinished_work(now);
            m.unfinished_work.set(total.as_secs_f64());
            m.longest_running.set(longest.as_secs_f64());
            let mut next = tick + UNFINISHED_WORK_UPDATE_PERIOD;
            if next <= now {
                // Fell behind (a stalled runtime): skip the missed ticks.
                next = now + UNFINISHED_WORK_UPDATE_PERIOD;
            }
            *next_tick = Some(next);
        }
    }
    let head = st.waiting.peek().map(|w| w.ready);
    drop(st);
    shared.wake_workers(wake);
    let deadline = match (head, shared.metrics.as_ref().and(*next_tick)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Some(deadline)
}
