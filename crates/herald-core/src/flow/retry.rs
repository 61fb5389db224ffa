//! Jitter and the exponential backoff schedule for retry loops.

use std::time::Duration;

use rand::Rng;

/// `d` plus a random extra of up to `factor · d` (apimachinery's `wait.Jitter`): the result is
/// in `[d, d·(1+factor))`. A `factor <= 0` (or NaN) means 1.0.
///
/// Bound: saturates at `Duration::MAX`.
///
/// ```
/// use std::time::Duration;
/// use rand::{SeedableRng, rngs::StdRng};
/// let mut rng = StdRng::seed_from_u64(7);
/// let d = herald_core::flow::jitter(Duration::from_secs(10), 0.25, &mut rng);
/// assert!(d >= Duration::from_secs(10) && d < Duration::from_millis(12_500));
/// ```
pub fn jitter<R: Rng + ?Sized>(d: Duration, factor: f64, rng: &mut R) -> Duration {
    let factor = if factor > 0.0 { factor } else { 1.0 };
    let extra = rng.random::<f64>() * factor * d.as_secs_f64();
    d.saturating_add(secs_saturating(extra))
}

/// `secs` as a `Duration`, truncated to whole nanoseconds; negative or NaN is zero and
/// anything too large is `Duration::MAX`.
pub(crate) fn secs_saturating(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// How [`ExponentialBackoff::delay`] randomises its base delay `d`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum JitterMode {
    /// Exactly `d`.
    #[default]
    None,
    /// Uniform in `[0, d]` ("full jitter": spreads a herd of retries the most).
    Full,
    /// `d + U[0,1)·f·d`, like [`jitter`] (a factor `<= 0` means 1.0).
    Proportional(f64),
}

/// The delay schedule of a retry loop: `initial · factor^attempt`, capped at `max`, then
/// jittered.
///
/// Bound: the base delay saturates at `max` for any attempt number (no overflow, however
/// large); [`JitterMode::Proportional`] may add up to `f · max` on top, the way client-go adds
/// jitter after its cap.
///
/// ```
/// use std::time::Duration;
/// use rand::{SeedableRng, rngs::StdRng};
/// use herald_core::flow::ExponentialBackoff;
///
/// let b = ExponentialBackoff::new(Duration::from_millis(100), Duration::from_secs(10));
/// let mut rng = StdRng::seed_from_u64(1);
/// assert_eq!(b.delay(0, &mut rng), Duration::from_millis(100));
/// assert_eq!(b.delay(3, &mut rng), Duration::from_millis(800));
/// assert_eq!(b.delay(u32::MAX, &mut rng), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialBackoff {
    /// The delay before the first retry (attempt 0).
    pub initial: Duration,
    /// The largest base delay.
    pub max: Duration,
    /// The growth per attempt (2.0 by [`new`](Self::new)); values below 1 shrink the delay.
    pub factor: f64,
    /// How the base delay is randomised.
    pub jitter: JitterMode,
}

impl ExponentialBackoff {
    /// Doubling from `initial` up to `max`, without jitter.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            factor: 2.0,
            jitter: JitterMode::None,
        }
    }

    /// The same schedule with `jitter`.
    pub fn with_jitter(mut self, jitter: JitterMode) -> Self {
        self.jitter = jitter;
        self
    }

    /// The same schedule growing by `factor` per attempt.
    pub fn with_factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// The un-jittered delay before retry number `attempt` (0 = the first retry):
    /// `min(initial · factor^attempt, max)`.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let exp = i32::try_from(attempt).unwrap_or(i32::MAX);
        let secs = self.initial.as_secs_f64() * self.factor.powi(exp);
        // NaN (0 · ∞) and anything at or past the cap saturate to the cap.
        if secs.is_nan() || secs >= self.max.as_secs_f64() {
            return self.max;
        }
        secs_saturating(secs).min(self.max)
    }

    /// The delay before retry number `attempt` (0 = the first retry), jittered per
    /// [`jitter`](Self::jitter) with randomness from `rng`.
    pub fn delay<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> Duration {
        let base = self.base_delay(attempt);
        match self.jitter {
            JitterMode::None => base,
            JitterMode::Full => {
                secs_saturating(rng.random_range(0.0..=1.0) * base.as_secs_f64()).min(base)
            }
            JitterMode::Proportional(f) => jitter(base, f, rng),
        }
    }
}
