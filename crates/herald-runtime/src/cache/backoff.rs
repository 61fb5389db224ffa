//! The reflector's retry delays: exponential with jitter and client-go's periodic reset.

use std::time::Duration;

use herald_core::flow::{ExponentialBackoff, JitterMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Backoff parameters. [`Default`] is client-go's reflector backoff: 800 ms doubling to a
/// 30 s cap, jitter 1.0 (each sleep is `d + uniform[0, d)`), reset to 800 ms every 2 min.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffOptions {
    /// First delay.
    pub initial: Duration,
    /// Cap of the un-jittered delay (jitter may add up to `jitter × max` on top).
    pub max: Duration,
    /// Growth factor per step.
    pub factor: f64,
    /// Maximum jitter as a fraction of the delay; `0.0` = none.
    pub jitter: f64,
    /// The sequence restarts at `initial` when this much time has passed since its last
    /// (re)start — periodic from the last reset, as apimachinery's `DelayWithReset` does.
    pub reset_after: Duration,
}

impl Default for BackoffOptions {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Exponential backoff with jitter ([`ExponentialBackoff`]) and client-go's periodic reset.
/// Bound: the un-jittered delay never exceeds `max`; at the cap it stays there until the reset.
#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffOptions,
    schedule: ExponentialBackoff,
    attempt: u32,
    last_start: Instant,
    rng: StdRng,
}

impl Backoff {
    pub(crate) fn new(config: BackoffOptions, now: Instant, seed: u64) -> Self {
        let jitter = if config.jitter > 0.0 {
            JitterMode::Proportional(config.jitter)
        } else {
            JitterMode::None
        };
        Self {
            schedule: ExponentialBackoff::new(config.initial, config.max)
                .with_factor(config.factor)
                .with_jitter(jitter),
            config,
            attempt: 0,
            last_start: now,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The next delay (jitter applied), advancing the sequence.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Duration {
        if now.saturating_duration_since(self.last_start) > self.config.reset_after {
            self.attempt = 0;
            self.last_start = now;
        }
        let d = self.schedule.delay(self.attempt, &mut self.rng);
        self.attempt = self.attempt.saturating_add(1);
        d
    }

    /// A uniform number in `[0, 1)` from the same generator (used for watch timeouts).
    pub(crate) fn unit(&mut self) -> f64 {
        self.rng.random::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_caps_and_resets_periodically() {
        let t0 = Instant::now();
        let cfg = BackoffOptions {
            jitter: 0.0,
            ..BackoffOptions::default()
        };
        let mut b = Backoff::new(cfg, t0, 1);
        let got: Vec<u128> = (0..8).map(|_| b.next_delay(t0).as_millis()).collect();
        assert_eq!(got, vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        // 2 min after the sequence started it restarts, however recent the last failure.
        let later = t0 + Duration::from_secs(121);
        assert_eq!(b.next_delay(later), Duration::from_millis(800));
        assert_eq!(b.next_delay(later), Duration::from_millis(1600));
    }

    #[test]
    fn jitter_stays_within_one_delay() {
        let t0 = Instant::now();
        let mut b = Backoff::new(BackoffOptions::default(), t0, 7);
        for _ in 0..200 {
            let d = b.next_delay(t0);
            assert!(
                d >= Duration::from_millis(800) && d < Duration::from_secs(60),
                "{d:?}"
            );
        }
        let mut b = Backoff::new(BackoffOptions::default(), t0, 9);
        let first = b.next_delay(t0);
        assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(1600));
    }
}
