//! Log lines that a client can cause at will, at most one per interval.

use std::time::Duration;

use tokio::time::Instant;

/// How often a throttled log line may be written.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Lets an event through at most once per interval, counting the others. Reads tokio's clock
/// (paused in tests; the system's monotonic clock outside a runtime).
#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    pub(crate) const fn new(every: Duration) -> Self {
        Throttle {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(events suppressed since the last one)` when this one may be reported.
    pub(crate) fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < self.every)
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_line_per_interval_with_the_count_of_the_others() {
        let mut t = Throttle::new(Duration::from_secs(10));
        assert_eq!(t.ready(), Some(0));
        for _ in 0..1000 {
            assert_eq!(t.ready(), None);
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(t.ready(), Some(1000));
    }
}
