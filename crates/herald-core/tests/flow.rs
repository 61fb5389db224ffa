//! client-go's flowcontrol scenarios (throttle_test.go, backoff_test.go), driven by fake clocks.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herald_core::clock::{Clock, FakeClock, IntervalClock, add_saturating, elapsed};
use herald_core::flow::{
    AlwaysRateLimiter, Backoff, ExponentialBackoff, JitterMode, NeverRateLimiter, RateLimit,
    RateLimiter, jitter,
};
use jiff::Timestamp;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn t0() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn fake() -> Arc<FakeClock> {
    Arc::new(FakeClock::new(t0()))
}

// ---------------------------------------------------------------- throttle_test.go

#[test]
fn basic_throttle() {
    let limiter = RateLimiter::new(1.0, 3, fake());
    assert!(limiter.try_accept());
    assert!(limiter.try_accept());
    assert!(limiter.try_accept());
    assert!(!limiter.try_accept());
}

#[test]
fn increment_throttle() {
    let clock = fake();
    let limiter = RateLimiter::new(1.0, 1, clock.clone());
    assert!(limiter.try_accept());
    assert!(!limiter.try_accept());
    clock.advance(secs(2));
    assert!(limiter.try_accept());
}

#[test]
fn throttle_sixteen_accepts_wait_at_least_one_second() {
    // Accept = reserve, then sleep for the returned delay (here: advance the fake clock).
    let clock = fake();
    let limiter = RateLimiter::new(10.0, 5, clock.clone());
    let mut total = Duration::ZERO;
    for i in 0..16 {
        let d = limiter.reserve();
        if i < 5 {
            assert_eq!(d, Duration::ZERO, "burst token {i}");
        } else {
            assert!(
                d > Duration::from_millis(99) && d <= Duration::from_millis(100),
                "{i}: {d:?}"
            );
        }
        clock.advance(d);
        total += d;
    }
    assert!(total >= secs(1), "{total:?}");
    assert!(total <= Duration::from_millis(1100), "{total:?}");
    assert_eq!(elapsed(t0(), clock.now()), total);
}

#[test]
fn throttle_reservations_at_one_instant_queue_up() {
    let limiter = RateLimiter::new(10.0, 5, fake());
    let delays: Vec<Duration> = (0..16).map(|_| limiter.reserve()).collect();
    assert!(delays[..5].iter().all(|d| d.is_zero()));
    for (k, d) in delays[5..].iter().enumerate() {
        let want = Duration::from_millis(100 * (k as u64 + 1));
        assert!(want - *d < Duration::from_micros(1), "{k}: {d:?}");
    }
    assert!(delays[15] >= secs(1));
}

#[test]
fn multithreaded_throttling() {
    let limiter = Arc::new(RateLimiter::new(100.0, 1, fake()));
    assert_eq!(limiter.reserve(), Duration::ZERO, "drain the initial token");
    let taken = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let limiter = limiter.clone();
            let taken = taken.clone();
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                while taken.fetch_add(1, Ordering::SeqCst) < 100 {
                    mine.push(limiter.reserve());
                }
                mine
            })
        })
        .collect();
    let mut delays: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    delays.sort();
    assert_eq!(delays.len(), 100);
    // Every reservation got its own slot: no token was handed out twice.
    for (k, d) in delays.iter().enumerate() {
        let want = Duration::from_millis(10 * (k as u64 + 1));
        assert!(want.abs_diff(*d) < Duration::from_micros(1), "{k}: {d:?}");
    }
    assert!(delays[99] >= Duration::from_millis(990));
}

#[test]
fn always_fake() {
    let l: &dyn RateLimit = &AlwaysRateLimiter;
    for _ in 0..1000 {
        assert!(l.try_accept());
        assert_eq!(l.reserve(), Duration::ZERO);
    }
    assert_eq!(l.qps(), 1.0);
}

#[test]
fn never_fake() {
    let l: &dyn RateLimit = &NeverRateLimiter;
    assert!(!l.try_accept());
    assert_eq!(l.reserve(), Duration::MAX);
    assert_eq!(l.qps(), 1.0);
}

#[test]
fn wait_refuses_a_reservation_past_its_deadline() {
    let clock = fake();
    let limiter = RateLimiter::new(0.0001, 1, clock.clone());
    assert_eq!(limiter.reserve_within(secs(1)), Some(Duration::ZERO));
    assert_eq!(limiter.reserve_within(secs(1)), None);
    // The refusal took nothing: the debt is still one token's worth (10 000 s), not two.
    let d = limiter.reserve();
    assert!(d > secs(9_999) && d < secs(10_001), "{d:?}");
}

#[test]
fn rate_precision_bug() {
    let clock = fake();
    let qps = (1.0f64 / 1.031425) as f32;
    let limiter = RateLimiter::new(qps, 1, clock.clone());
    for i in 0..60 {
        assert!(limiter.try_accept(), "iteration {i}");
        clock.advance(secs(2));
    }
}

#[test]
fn limiter_reads_the_clock_exactly_once_per_call() {
    let clock = Arc::new(IntervalClock::new(t0(), secs(1)));
    let limiter = RateLimiter::new(1.0, 1, clock.clone());
    assert_eq!(clock.peek(), t0(), "construction reads nothing");
    limiter.try_accept();
    assert_eq!(elapsed(t0(), clock.peek()), secs(1));
    limiter.reserve();
    assert_eq!(elapsed(t0(), clock.peek()), secs(2));
    limiter.reserve_within(secs(1));
    assert_eq!(elapsed(t0(), clock.peek()), secs(3));
    assert_eq!(limiter.qps(), 1.0);
    assert_eq!(limiter.burst(), 1);
}

#[test]
fn degenerate_limiters() {
    let never = RateLimiter::new(1.0, 0, fake());
    assert!(!never.try_accept());
    assert_eq!(never.reserve(), Duration::MAX);
    let no_refill = RateLimiter::new(0.0, 1, fake());
    assert_eq!(no_refill.reserve(), Duration::ZERO);
    assert_eq!(no_refill.reserve(), Duration::MAX);
    let unlimited = RateLimiter::new(f32::INFINITY, 0, fake());
    assert!((0..100).all(|_| unlimited.reserve().is_zero()));
}

// ---------------------------------------------------------------- backoff_test.go

#[test]
fn slow_backoff() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(50), clock.clone());
    let id = "_idSlow".to_string();
    let want = [0, 1, 2, 4, 8, 16, 32, 50, 50, 50];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(b.get(&id), secs(*w), "step {i}");
        clock.advance(secs(1));
        b.next(&id, clock.now());
    }
    b.reset(&id);
    assert_eq!(b.get(&id), Duration::ZERO);
}

#[test]
fn backoff_reset() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(5), clock.clone());
    let id = "_idReset".to_string();
    for _ in 0..6 {
        clock.advance(secs(1));
        b.next(&id, clock.now());
    }
    assert_eq!(b.get(&id), secs(5));
    assert!(b.is_in_backoff_since(&id, clock.now()));
    let last_update = clock.now();
    clock.advance(secs(11));
    assert!(!b.is_in_backoff_since(&id, last_update));
}

#[test]
fn backoff_high_water_mark() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(5), clock.clone());
    let id = "_idHiWaterMark".to_string();
    for _ in 0..4 {
        clock.advance(secs(1));
        b.next(&id, clock.now());
    }
    assert_eq!(b.get(&id), secs(5));
    // 6 s idle is within 2·max: the entry has not expired and stays at the cap.
    clock.advance(secs(6));
    b.next(&id, clock.now());
    assert_eq!(b.get(&id), secs(5));
}

#[test]
fn backoff_gc() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(5), clock.clone());
    let id = "_idGC".to_string();
    for _ in 0..4 {
        clock.advance(secs(1));
        b.next(&id, clock.now());
    }
    assert_eq!(b.get(&id), secs(5));
    clock.advance(secs(6));
    b.gc();
    assert_eq!(b.get(&id), secs(5), "6 s idle: kept");
    clock.advance(secs(6));
    b.gc();
    assert_eq!(b.get(&id), Duration::ZERO, "12 s idle > 2·max: collected");
    assert!(b.is_empty());
}

#[test]
fn alternate_backoff_gc() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(50), clock.clone());
    let id = "_idGC".to_string();
    b.next(&id, clock.now());
    clock.advance(secs(5));
    b.gc();
    assert_eq!(b.get(&id), secs(1));
    clock.advance(secs(101));
    b.gc();
    assert_eq!(b.get(&id), Duration::ZERO);

    let b = Backoff::new(secs(1), secs(50), clock.clone()).with_has_expired(|event, last, _max| {
        event.duration_since(last) >= jiff::SignedDuration::from_secs(200)
    });
    b.next(&id, clock.now());
    clock.advance(secs(101));
    b.gc();
    assert_eq!(b.get(&id), secs(1), "101 s < 200 s: kept");
    clock.advance(secs(501));
    b.gc();
    assert_eq!(b.get(&id), Duration::ZERO);
}

#[test]
fn is_in_backoff_since_update() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(10), clock.clone());
    let id = "_idIsInBackOffSinceUpdate".to_string();
    // (tick, in backoff, backoff while in backoff / after the Next otherwise)
    let mut table: Vec<(u64, bool, u64)> =
        vec![(0, false, 1), (1, false, 2), (2, true, 2), (3, false, 4)];
    table.extend((4..=6).map(|t| (t, true, 4)));
    table.push((7, false, 8));
    table.extend((8..=14).map(|t| (t, true, 8)));
    table.push((15, false, 10));
    table.extend((16..=24).map(|t| (t, true, 10)));
    table.push((25, false, 10));
    table.extend((26..=34).map(|t| (t, true, 10)));
    table.push((35, false, 10));
    // 21 s idle > 2·max: expired, so the next Next starts over.
    table.push((56, false, 1));
    table.push((57, false, 2));
    for (tick, in_backoff, value) in table {
        clock.set(add_saturating(t0(), secs(tick)));
        let got = b.is_in_backoff_since_update(&id, clock.now());
        assert_eq!(got, in_backoff, "tick {tick}");
        if !got {
            b.next(&id, clock.now());
        }
        assert_eq!(b.get(&id), secs(value), "tick {tick}");
    }
}

#[test]
fn backoff_with_jitter() {
    let clock = fake();
    let initial = Duration::from_millis(100);
    let max = Duration::from_secs(60);
    let b = Backoff::new(initial, max, clock.clone()).with_jitter(0.1, StdRng::seed_from_u64(42));
    let id = "_idJitter".to_string();
    b.next(&id, clock.now());
    let mut prev = b.get(&id);
    assert!(prev >= initial && prev <= initial.mul_f64(1.1), "{prev:?}");
    let mut jittered = prev != initial;
    for _ in 0..20 {
        clock.advance(Duration::from_millis(1));
        b.next(&id, clock.now());
        let cur = b.get(&id);
        if cur == max {
            prev = cur;
            continue;
        }
        assert!(
            cur >= prev * 2 && cur <= prev * 2 + prev.mul_f64(0.1),
            "{prev:?} -> {cur:?}"
        );
        jittered |= cur != prev * 2;
        prev = cur;
    }
    assert_eq!(prev, max);
    assert!(jittered, "a 0.1 factor must actually add something");
}

#[test]
fn backoff_jitter_is_reproducible_from_the_seed() {
    let run = |seed| {
        let clock = fake();
        let b = Backoff::new(Duration::from_millis(100), secs(60), clock.clone())
            .with_jitter(0.5, StdRng::seed_from_u64(seed));
        let id = 1u32;
        (0..5)
            .map(|_| {
                b.next(&id, clock.now());
                b.get(&id)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn alternate_has_expired_func() {
    let clock = fake();
    let id = "_idHasExpired".to_string();
    let b = Backoff::new(secs(1), secs(50), clock.clone());
    b.next(&id, clock.now());
    clock.advance(secs(5));
    b.next(&id, clock.now());
    assert!(b.get(&id) >= secs(2));
    clock.advance(secs(101));
    b.next(&id, clock.now());
    assert_eq!(b.get(&id), secs(1), "expired after 2·max");

    let b = Backoff::new(secs(1), secs(50), clock.clone()).with_has_expired(|event, last, _max| {
        event.duration_since(last) >= jiff::SignedDuration::from_secs(8)
    });
    b.next(&id, clock.now());
    clock.advance(secs(5));
    b.next(&id, clock.now());
    assert_eq!(b.get(&id), secs(2));
    clock.advance(secs(9));
    b.next(&id, clock.now());
    assert_eq!(b.get(&id), secs(1), "expired after 8 s");
}

#[test]
fn backoff_is_bounded_and_evicts_the_stalest_entry() {
    let clock = fake();
    let b = Backoff::new(secs(1), secs(50), clock.clone()).with_max_entries(3);
    for id in 0..3u32 {
        b.next(&id, clock.now());
        clock.advance(secs(1));
    }
    b.next(&1, clock.now());
    b.next(&3, clock.now());
    assert_eq!(b.len(), 3);
    assert_eq!(b.get(&0), Duration::ZERO, "least recently updated goes");
    assert_eq!(b.get(&1), secs(2));
    assert_eq!(b.get(&3), secs(1));
}

// ---------------------------------------------------------------- jitter / retry delays

#[test]
fn jitter_stays_in_range_and_defaults_factor_to_one() {
    let mut rng = StdRng::seed_from_u64(3);
    let d = secs(10);
    for _ in 0..1000 {
        let j = jitter(d, 0.25, &mut rng);
        assert!(j >= d && j < Duration::from_millis(12_500), "{j:?}");
        let j = jitter(d, 0.0, &mut rng);
        assert!(j >= d && j < secs(20), "{j:?}");
    }
    assert_eq!(jitter(Duration::MAX, 1.0, &mut rng), Duration::MAX);
}

#[test]
fn exponential_backoff_doubles_and_saturates() {
    let mut rng = StdRng::seed_from_u64(5);
    let b = ExponentialBackoff::new(Duration::from_millis(10), secs(1));
    let got: Vec<_> = (0..9).map(|a| b.delay(a, &mut rng)).collect();
    let want: Vec<_> = [10, 20, 40, 80, 160, 320, 640, 1000, 1000]
        .map(Duration::from_millis)
        .to_vec();
    assert_eq!(got, want);
    for attempt in [64, 1023, 1024, 5000, i32::MAX as u32, u32::MAX] {
        assert_eq!(b.delay(attempt, &mut rng), secs(1), "attempt {attempt}");
    }
    let huge = ExponentialBackoff::new(secs(1), Duration::MAX);
    assert_eq!(huge.delay(u32::MAX, &mut rng), Duration::MAX);
    let zero = ExponentialBackoff::new(Duration::ZERO, secs(1));
    assert_eq!(zero.delay(u32::MAX, &mut rng), secs(1));
    let triple = b.with_factor(3.0);
    assert_eq!(triple.delay(2, &mut rng), Duration::from_millis(90));
}

#[test]
fn exponential_backoff_jitter_modes() {
    let mut rng = StdRng::seed_from_u64(9);
    let base = ExponentialBackoff::new(Duration::from_millis(100), secs(10));
    let full = base.with_jitter(JitterMode::Full);
    let prop = base.with_jitter(JitterMode::Proportional(0.5));
    let mut full_seen_low = false;
    for attempt in [0u32, 3, 10, u32::MAX] {
        let d = base.delay(attempt, &mut rng);
        for _ in 0..200 {
            let f = full.delay(attempt, &mut rng);
            assert!(f <= d, "full {f:?} > {d:?}");
            full_seen_low |= f < d / 2;
            let p = prop.delay(attempt, &mut rng);
            assert!(p >= d && p < d.mul_f64(1.5), "proportional {p:?} for {d:?}");
        }
    }
    assert!(full_seen_low, "full jitter spreads over [0, d]");
}
