//! A [`Clock`] that follows tokio's clock, so paused-time tests drive every timestamp.

use std::time::Duration;

use herald_core::clock::{Clock, add_saturating};
use jiff::Timestamp;
use tokio::time::Instant;

/// Reads `start + (tokio::time::Instant::now() − creation)`.
///
/// Under `#[tokio::test(start_paused = true)]` tokio's clock only moves when the runtime is
/// idle or is told to advance, so this clock makes timers (retry sleeps, trailing flushes) and
/// event timestamps agree, deterministically. In production `SystemClock` is the right choice.
#[derive(Debug, Clone)]
pub struct TokioClock {
    start: Timestamp,
    origin: Instant,
}

impl TokioClock {
    /// A clock reading `start` now. Must be created inside a tokio runtime.
    pub fn new(start: Timestamp) -> Self {
        Self {
            start,
            origin: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let since: Duration = Instant::now().saturating_duration_since(self.origin);
        add_saturating(self.start, since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_paused_time() {
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let c = TokioClock::new(t0);
        assert_eq!(c.now(), t0);
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(c.now().to_string(), "2024-01-01T00:05:00Z");
    }
}
