//! Rate limiter ladders (client-go's default_rate_limiters_test scenarios), on a fake clock.

use std::sync::Arc;
use std::time::Duration;

use herald_core::clock::FakeClock;
use herald_runtime::workqueue::{
    BucketRateLimiter, ItemExponentialRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    MaxWaitRateLimiter, RateLimiter, default_controller_rate_limiter_with_clock,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn fake_clock() -> Arc<FakeClock> {
    Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()))
}

#[test]
fn exponential_ladder_and_forget() {
    let l = ItemExponentialRateLimiter::new(ms(1), Duration::from_secs(1));
    for expected in [1, 2, 4, 8, 16] {
        assert_eq!(l.when(&"one"), ms(expected));
    }
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), ms(1));
    assert_eq!(l.when(&"two"), ms(2));
    assert_eq!(l.num_requeues(&"two"), 2);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), ms(1));
    assert_eq!(l.num_requeues(&"two"), 2, "items are independent");
}

#[test]
fn exponential_overflow_is_capped() {
    let l = ItemExponentialRateLimiter::new(ms(1), Duration::from_secs(1000));
    for _ in 0..5 {
        l.when(&"one");
    }
    assert_eq!(l.when(&"one"), ms(32));
    for _ in 0..1000 {
        l.when(&"one");
    }
    assert_eq!(l.when(&"overflow1"), ms(1));
    assert_eq!(l.when(&"one"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let l = ItemExponentialRateLimiter::new(minute, Duration::from_secs(1000 * 3600));
    l.when(&"one");
    l.when(&"one");
    assert_eq!(l.when(&"one"), 4 * minute);
    for _ in 0..1000 {
        l.when(&"one");
    }
    assert_eq!(l.when(&"one"), Duration::from_secs(1000 * 3600));
    assert_eq!(l.num_requeues(&"one"), 1004);
}

#[test]
fn default_exponential_ladder_is_5ms_to_1000s() {
    let l = ItemExponentialRateLimiter::default();
    let mut expected = ms(5);
    for failure in 1..=18 {
        assert_eq!(l.when(&"k"), expected, "failure {failure}");
        expected *= 2;
    }
    assert_eq!(l.num_requeues(&"k"), 18);
    // 5 ms × 2^17 = 655.36 s was the 18th; from the 19th on, the cap.
    assert_eq!(l.when(&"k"), Duration::from_secs(1000));
    assert_eq!(l.when(&"k"), Duration::from_secs(1000));
}

#[test]
fn per_item_tracking_is_bounded() {
    let l = ItemExponentialRateLimiter::new(ms(1), Duration::from_secs(1)).with_max_tracked(2);
    l.when(&"a");
    l.when(&"b");
    l.when(&"c");
    assert_eq!(l.num_requeues(&"c"), 1);
    let kept = [l.num_requeues(&"a"), l.num_requeues(&"b")];
    assert_eq!(
        kept.iter().sum::<u32>(),
        1,
        "one of a/b was forgotten: {kept:?}"
    );
}

#[test]
fn fast_slow() {
    let l = ItemFastSlowRateLimiter::new(ms(5), Duration::from_secs(10), 3);
    for _ in 0..3 {
        assert_eq!(l.when(&"one"), ms(5));
    }
    assert_eq!(l.when(&"one"), Duration::from_secs(10));
    assert_eq!(l.when(&"one"), Duration::from_secs(10));
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), ms(5));
    assert_eq!(l.num_requeues(&"two"), 1);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), ms(5));
}

#[test]
fn max_of() {
    let l: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            ms(5),
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        )),
    ]);
    for _ in 0..3 {
        assert_eq!(l.when(&"one"), ms(5));
    }
    assert_eq!(l.when(&"one"), Duration::from_secs(3));
    assert_eq!(l.when(&"one"), Duration::from_secs(3));
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), ms(5));
    assert_eq!(l.num_requeues(&"two"), 1);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), ms(5));
    let empty: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![]);
    assert_eq!(empty.when(&"x"), Duration::ZERO);
    assert_eq!(empty.num_requeues(&"x"), 0);
}

#[test]
fn max_wait() {
    let l = MaxWaitRateLimiter::new(
        ItemFastSlowRateLimiter::new(ms(5), Duration::from_secs(1000), 100),
        Duration::from_secs(500),
    );
    for _ in 0..100 {
        assert_eq!(l.when(&"one"), ms(5));
    }
    assert_eq!(l.when(&"one"), Duration::from_secs(500));
    assert_eq!(l.num_requeues(&"one"), 101);
    l.forget(&"one");
    assert_eq!(l.when(&"one"), ms(5));
}

#[test]
fn bucket_reserves_tokens_in_order() {
    let clock = fake_clock();
    let l = BucketRateLimiter::new(10.0, 100, clock.clone());
    for i in 0..100 {
        assert_eq!(
            RateLimiter::<u32>::when(&l, &i),
            Duration::ZERO,
            "burst token {i}"
        );
    }
    assert_eq!(RateLimiter::<u32>::when(&l, &100), ms(100));
    assert_eq!(RateLimiter::<u32>::when(&l, &101), ms(200));
    assert_eq!(RateLimiter::<u32>::when(&l, &102), ms(300));
    assert_eq!(RateLimiter::<u32>::num_requeues(&l, &100), 0);
    RateLimiter::<u32>::forget(&l, &100);
    // 1 s later: 10 tokens refilled, 3 of them already promised.
    clock.advance(Duration::from_secs(1));
    for i in 0..7 {
        assert_eq!(
            RateLimiter::<u32>::when(&l, &i),
            Duration::ZERO,
            "refilled token {i}"
        );
    }
    assert_eq!(RateLimiter::<u32>::when(&l, &7), ms(100));
}

#[test]
fn bucket_that_never_refills_answers_max() {
    let l = BucketRateLimiter::new(0.0, 1, fake_clock());
    assert_eq!(RateLimiter::<u8>::when(&l, &1), Duration::ZERO);
    assert_eq!(RateLimiter::<u8>::when(&l, &1), Duration::MAX);
    let never = BucketRateLimiter::new(10.0, 0, fake_clock());
    assert_eq!(RateLimiter::<u8>::when(&never, &1), Duration::MAX);
}

#[test]
fn default_controller_limiter_ladder_and_bucket() {
    let clock = fake_clock();
    let l = default_controller_rate_limiter_with_clock::<String>(clock.clone());
    let key = "ns/a".to_string();
    let mut expected = ms(5);
    for _ in 0..18 {
        assert_eq!(l.when(&key), expected);
        expected *= 2;
    }
    assert_eq!(l.when(&key), Duration::from_secs(1000));
    assert_eq!(l.num_requeues(&key), 19);
    l.forget(&key);
    assert_eq!(l.num_requeues(&key), 0);

    // 19 tokens are spent; 81 more first failures at the same instant still fit the burst.
    for i in 0..81 {
        assert_eq!(l.when(&format!("ns/{i}")), ms(5));
    }
    // Then the queue-wide bucket spaces retries 100 ms apart.
    assert_eq!(l.when(&"ns/x".to_string()), ms(100));
    assert_eq!(l.when(&"ns/y".to_string()), ms(200));
}

#[test]
fn shared_and_boxed_limiters_forward() {
    let shared: Arc<ItemExponentialRateLimiter<u8>> =
        Arc::new(ItemExponentialRateLimiter::new(ms(1), ms(100)));
    let boxed: Box<dyn RateLimiter<u8>> = Box::new(shared.clone());
    assert_eq!(boxed.when(&1), ms(1));
    assert_eq!(shared.when(&1), ms(2));
    assert_eq!(boxed.num_requeues(&1), 2);
    boxed.forget(&1);
    assert_eq!(shared.num_requeues(&1), 0);
}
