//! Log lines that a client can cause at will, at most one per interval.

use std::time::{Duration, Instant};

/// How often a throttled log line may be written.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Lets an event through at most once per interval, counting the others.
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

    #[test]
    fn one_line_per_interval_with_the_count_of_the_others() {
        let mut t = Throttle::new(Duration::from_secs(3600));
        assert_eq!(t.ready(), Some(0));
        assert_eq!(t.ready(), None);
        assert_eq!(t.ready(), None);
        // A zero interval lets every event through and reports what was held back.
        t.every = Duration::ZERO;
        assert_eq!(t.ready(), Some(2));
        assert_eq!(t.ready(), Some(0));
    }
}
