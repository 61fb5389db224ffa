//! Rate-limited warnings for dropped events.
//!
//! Every drop is counted in [`RecordStats`](super::RecordStats) and the Prometheus counters;
//! the log only has to tell a person that drops are happening. A storm of *distinct* events
//! past the queue's bound would otherwise write one warning per event, which turns a recording
//! problem into a logging one. So a broadcaster logs at most one line per
//! [`DropLog::INTERVAL`] (on its injected clock), carrying how many events were dropped since
//! the previous line, split by cause.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herald_core::clock::Clock;
use herald_core::flow::RateLimiter;

/// Why the recorder dropped an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropCause {
    /// The incoming queue was full of other (distinct) events.
    QueueFull,
    /// The broadcaster had been shut down.
    Shutdown,
}

/// One line per [`DropLog::INTERVAL`] at most; drops in between are summed into the next line.
///
/// Bound: two counters, whatever the drop rate. Drops that happen after the last line and are
/// followed by no further drop are never logged (they are counted in the stats all the same).
#[derive(Debug)]
pub(crate) struct DropLog {
    limiter: RateLimiter,
    queue_full: AtomicU64,
    shutdown: AtomicU64,
}

/// What one log line reported (returned for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DropReport {
    pub queue_full: u64,
    pub shutdown: u64,
}

impl DropLog {
    /// The shortest time between two drop warnings.
    pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        DropLog {
            // A burst of one: the first drop is logged at once, then one line per interval.
            limiter: RateLimiter::new(1.0 / Self::INTERVAL.as_secs_f32(), 1, clock),
            queue_full: AtomicU64::new(0),
            shutdown: AtomicU64::new(0),
        }
    }

    /// Counts one drop of an event with `reason` and logs a summary line if the budget allows.
    /// Returns what that line reported, or `None` when the drop was only counted.
    pub(crate) fn dropped(&self, cause: DropCause, reason: &str) -> Option<DropReport> {
        match cause {
            DropCause::QueueFull => &self.queue_full,
            DropCause::Shutdown => &self.shutdown,
        }
        .fetch_add(1, Ordering::Relaxed);
        if !self.limiter.try_accept() {
            return None;
        }
        let report = DropReport {
            queue_full: self.queue_full.swap(0, Ordering::Relaxed),
            shutdown: self.shutdown.swap(0, Ordering::Relaxed),
        };
        if report.queue_full > 0 {
            tracing::warn!(
                dropped = report.queue_full,
                last_reason = reason,
                "Unable to record event: too many queued events, dropped {} event(s) (logged at most every {}s; every drop is counted in the recorder's stats)",
                report.queue_full,
                Self::INTERVAL.as_secs()
            );
        }
        if report.shutdown > 0 {
            tracing::warn!(
                dropped = report.shutdown,
                last_reason = reason,
                "Unable to record event: broadcaster already stopped, dropped {} event(s) (will not retry!)",
                report.shutdown
            );
        }
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::clock::FakeClock;

    #[test]
    fn a_drop_storm_logs_one_line_per_interval_with_the_sum() {
        let clock = Arc::new(FakeClock::default());
        let log = DropLog::new(clock.clone());
        assert_eq!(
            log.dropped(DropCause::QueueFull, "BackOff"),
            Some(DropReport {
                queue_full: 1,
                shutdown: 0
            })
        );
        for _ in 0..999 {
            assert_eq!(log.dropped(DropCause::QueueFull, "BackOff"), None);
        }
        clock.advance(DropLog::INTERVAL / 2);
        assert_eq!(log.dropped(DropCause::Shutdown, "BackOff"), None);
        clock.advance(DropLog::INTERVAL / 2);
        assert_eq!(
            log.dropped(DropCause::QueueFull, "BackOff"),
            Some(DropReport {
                queue_full: 1000,
                shutdown: 1
            })
        );
    }
}
