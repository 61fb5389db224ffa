//! The one time source every time-dependent piece of Herald takes.
//!
//! Logic never reads the system time directly: it holds an `Arc<dyn Clock>` and asks it.
//! Production code passes [`SystemClock`]; tests pass a [`FakeClock`] that only moves when
//! told to, or an [`IntervalClock`] that steps forward on every read (the clock client-go's
//! correlator tests use), so every outcome that depends on time is reproducible.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use herald_core::clock::{Clock, FakeClock};
//!
//! let clock = Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()));
//! let shared: Arc<dyn Clock> = clock.clone();
//! clock.advance(Duration::from_secs(90));
//! assert_eq!(shared.now().to_string(), "2024-01-01T00:01:30Z");
//! ```

use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when [`set`](FakeClock::set) or [`advance`](FakeClock::advance)
/// is called. Safe to share between threads.
#[derive(Debug)]
pub struct FakeClock {
    now: Mutex<Timestamp>,
}

impl FakeClock {
    /// A fake clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock to `t` (backwards too: time-dependent code must cope with that).
    pub fn set(&self, t: Timestamp) {
        *self.lock() = t;
    }

    /// Moves the clock forward by `d`. Saturates at the largest representable time.
    pub fn advance(&self, d: Duration) {
        let mut now = self.lock();
        *now = add_saturating(*now, d);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timestamp> {
        // A panic while holding this lock cannot leave a Timestamp half-written.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for FakeClock {
    /// A fake clock standing at the Unix epoch plus one day (so that "zero time" is distinct).
    fn default() -> Self {
        Self::new(Timestamp::from_second(86_400).unwrap_or(Timestamp::UNIX_EPOCH))
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        *self.lock()
    }
}

/// A clock that advances by a fixed step *before* every read, like client-go's
/// `SimpleIntervalClock`. Tests that count clock reads depend on this.
#[derive(Debug)]
pub struct IntervalClock {
    now: Mutex<Timestamp>,
    step: Duration,
}

impl IntervalClock {
    /// A clock at `start` that moves `step` forward on every [`Clock::now`].
    pub fn new(start: Timestamp, step: Duration) -> Self {
        Self {
            now: Mutex::new(start),
            step,
        }
    }

    /// The current time without advancing (client-go's `Since` uses this).
    pub fn peek(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for IntervalClock {
    fn now(&self) -> Timestamp {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now = add_saturating(*now, self.step);
        *now
    }
}

/// `t + d`, saturating at [`Timestamp::MAX`].
pub fn add_saturating(t: Timestamp, d: Duration) -> Timestamp {
    let span = match jiff::SignedDuration::try_from(d) {
        Ok(s) => s,
        Err(_) => return Timestamp::MAX,
    };
    t.checked_add(span).unwrap_or(Timestamp::MAX)
}

/// The non-negative time from `earlier` to `later`; zero when `later` is not after `earlier`
/// (time going backwards never produces a negative elapsed time).
pub fn elapsed(earlier: Timestamp, later: Timestamp) -> Duration {
    let d = later.duration_since(earlier);
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> Timestamp {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn fake_clock_moves_only_when_told() {
        let c = FakeClock::new(t0());
        assert_eq!(c.now(), t0());
        assert_eq!(c.now(), t0());
        c.advance(Duration::from_millis(1500));
        assert_eq!(elapsed(t0(), c.now()), Duration::from_millis(1500));
        c.set(t0());
        assert_eq!(c.now(), t0());
    }

    #[test]
    fn interval_clock_steps_before_each_read() {
        let c = IntervalClock::new(t0(), Duration::from_secs(5));
        assert_eq!(elapsed(t0(), c.now()), Duration::from_secs(5));
        assert_eq!(elapsed(t0(), c.now()), Duration::from_secs(10));
        assert_eq!(elapsed(t0(), c.peek()), Duration::from_secs(10));
    }

    #[test]
    fn elapsed_never_negative() {
        let later = add_saturating(t0(), Duration::from_secs(3));
        assert_eq!(elapsed(later, t0()), Duration::ZERO);
        assert_eq!(
            add_saturating(Timestamp::MAX, Duration::from_secs(1)),
            Timestamp::MAX
        );
    }
}
