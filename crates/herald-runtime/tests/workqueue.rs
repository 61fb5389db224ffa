//! WorkQueue behaviour: client-go's queue and delaying-queue scenarios, on paused tokio time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_runtime::workqueue::{ItemExponentialRateLimiter, RateLimitingQueue, WorkQueue};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Lets every spawned task run until it blocks (current-thread runtime, no time passes).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// `get` that gives up after `d` of (paused) time: `None` means it stayed blocked.
async fn get_within<K: Clone + Eq + std::hash::Hash + Send + Sync + 'static>(
    q: &WorkQueue<K>,
    d: Duration,
) -> Option<Option<K>> {
    timeout(d, q.get()).await.ok()
}

async fn basic_scenario(drain: bool) {
    let q: WorkQueue<u32> = WorkQueue::new();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let producers: Vec<JoinHandle<()>> = (0..50)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                for i in 0..50 {
                    q.add(i);
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let consumers: Vec<JoinHandle<usize>> = (0..10)
        .map(|_| {
            let q = q.clone();
            let in_flight = in_flight.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut handled = 0;
                while let Some(i) = q.get().await {
                    assert!(
                        in_flight.lock().unwrap().insert(i),
                        "{i} handed to two workers at once"
                    );
                    seen.lock().unwrap().insert(i);
                    sleep(ms(1)).await;
                    in_flight.lock().unwrap().remove(&i);
                    q.done(&i);
                    handled += 1;
                }
                handled
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    if drain {
        q.shutdown_with_drain().await;
        assert_eq!(q.num_processing(), 0);
    } else {
        q.shutdown();
    }
    q.add(999);
    let mut total = 0;
    for c in consumers {
        total += c.await.unwrap();
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(*seen, (0..50).collect::<HashSet<_>>());
        assert!(!seen.contains(&999));
    }
    assert!(total >= 50, "{total}");
    assert_eq!(q.len(), 0);
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn basic_with_shutdown() {
    basic_scenario(false).await;
}

#[tokio::test(start_paused = true)]
async fn basic_with_shutdown_with_drain() {
    basic_scenario(true).await;
}

#[tokio::test(start_paused = true)]
async fn add_while_processing_is_processed_again() {
    let q: WorkQueue<u32> = WorkQueue::new();
    let counts = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
    let workers: Vec<JoinHandle<()>> = (0..10)
        .map(|_| {
            let q = q.clone();
            let counts = counts.clone();
            tokio::spawn(async move {
                while let Some(i) = q.get().await {
                    let first = {
                        let mut c = counts.lock().unwrap();
                        let n = c.entry(i).or_default();
                        *n += 1;
                        *n == 1
                    };
                    if first {
                        // Re-added while this worker holds it: must come back after done.
                        q.add(i);
                    }
                    sleep(ms(1)).await;
                    q.done(&i);
                }
            })
        })
        .collect();
    for i in 0..50 {
        q.add(i);
    }
    sleep(ms(100)).await;
    q.shutdown_with_drain().await;
    for w in workers {
        w.await.unwrap();
    }
    let counts = counts.lock().unwrap();
    assert_eq!(counts.len(), 50);
    assert!(counts.values().all(|&n| n == 2), "{counts:?}");
}

#[tokio::test(start_paused = true)]
async fn len_ignores_duplicates() {
    let q = WorkQueue::new();
    q.add("foo");
    assert_eq!(q.len(), 1);
    q.add("bar");
    assert_eq!(q.len(), 2);
    q.add("foo");
    assert_eq!(q.len(), 2);
    assert!(!q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn fifo_order() {
    let q = WorkQueue::new();
    for i in [3, 1, 2, 1, 3] {
        q.add(i);
    }
    let mut order = vec![];
    while let Some(Some(i)) = get_within(&q, ms(1)).await {
        order.push(i);
        q.done(&i);
    }
    assert_eq!(order, vec![3, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn reinsert_after_done() {
    let q = WorkQueue::new();
    q.add("foo");
    let item = q.get().await.unwrap();
    q.add(item);
    assert_eq!(q.len(), 0, "re-added while processing: not queued yet");
    q.done(&"foo");
    assert_eq!(q.len(), 1);
    let again = q.get().await.unwrap();
    assert_eq!(again, "foo");
    q.done(&again);
    assert_eq!(q.len(), 0);
    assert_eq!(get_within(&q, ms(10)).await, None);
}

#[tokio::test(start_paused = true)]
async fn collapse() {
    let q = WorkQueue::new();
    q.add("bar");
    q.add("bar");
    assert_eq!(q.get().await, Some("bar"));
    q.done(&"bar");
    assert_eq!(get_within(&q, ms(10)).await, None);
}

#[tokio::test(start_paused = true)]
async fn collapse_while_processing_and_never_twice_at_once() {
    let q = WorkQueue::new();
    q.add("foo");
    let first = q.get().await.unwrap();
    q.add("foo");
    q.add("foo");
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    sleep(ms(50)).await;
    assert!(!second.is_finished(), "handed out while still processing");
    q.done(&first);
    assert_eq!(second.await.unwrap(), Some("foo"));
    q.done(&"foo");
    assert_eq!(
        get_within(&q, ms(10)).await,
        None,
        "the two re-adds collapsed"
    );
}

#[tokio::test(start_paused = true)]
async fn done_for_an_item_not_processing_does_nothing() {
    let q = WorkQueue::new();
    q.add(1);
    q.done(&1);
    q.done(&2);
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some(1));
    q.done(&1);
    q.done(&1);
    assert_eq!(q.len(), 0);
    assert_eq!(q.num_processing(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_items_in_flight() {
    let q = WorkQueue::new();
    q.add("a");
    q.add("b");
    let a = q.get().await.unwrap();
    let b = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    sleep(ms(10)).await;
    assert!(!drain.is_finished());
    assert!(q.is_shutting_down());
    q.done(&a);
    sleep(ms(10)).await;
    assert!(!drain.is_finished(), "b is still in flight");
    q.done(&b);
    timeout(ms(10), drain).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_does_not_wait_for_items_in_flight() {
    let q = WorkQueue::new();
    q.add("a");
    let a = q.get().await.unwrap();
    q.shutdown();
    assert!(q.is_shutting_down());
    assert_eq!(q.get().await, None);
    assert_eq!(q.num_processing(), 1);
    q.done(&a);
    assert_eq!(q.num_processing(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_a_waiting_drain() {
    let q = WorkQueue::new();
    q.add("a");
    let _a = q.get().await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    sleep(ms(10)).await;
    assert!(!drain.is_finished());
    q.shutdown();
    timeout(ms(10), drain).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn drain_with_dirty_item() {
    let q = WorkQueue::new();
    q.add("foo");
    let foo = q.get().await.unwrap();
    q.add("foo");
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain().await }
    });
    settle().await;
    assert_eq!(q.get().await, None, "nothing queued: shutdown reported");
    q.done(&foo);
    settle().await;
    assert!(
        !drain.is_finished(),
        "the re-queued foo still has to be processed"
    );
    let again = q.get().await;
    assert_eq!(again, Some("foo"));
    settle().await;
    assert!(!drain.is_finished());
    q.done(&"foo");
    assert_eq!(q.get().await, None);
    timeout(ms(10), drain).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn queued_items_are_handed_out_after_shutdown_then_none() {
    let q = WorkQueue::new();
    q.add(1);
    q.add(2);
    q.shutdown();
    q.add(3);
    q.add_after(4, ms(1));
    assert_eq!(q.get().await, Some(1));
    assert_eq!(q.get().await, Some(2));
    assert_eq!(q.get().await, None);
    sleep(ms(10)).await;
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_parked_workers() {
    let q: WorkQueue<u8> = WorkQueue::new();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    settle().await;
    q.shutdown();
    for w in workers {
        assert_eq!(timeout(ms(1), w).await.unwrap().unwrap(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn cancelled_get_takes_nothing() {
    let q = WorkQueue::new();
    let parked = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    parked.abort();
    assert!(parked.await.unwrap_err().is_cancelled());
    // A get dropped after being notified passes the wake-up on.
    let a = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    let b = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    q.add("x");
    a.abort();
    settle().await;
    let got_a = a.await.ok().flatten();
    let got_b = if got_a.is_none() {
        timeout(ms(1), b).await.unwrap().unwrap()
    } else {
        b.abort();
        None
    };
    assert_eq!(got_a.or(got_b), Some("x"));
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn done_items_are_released() {
    let q = WorkQueue::new();
    let key = Arc::new("ns/name".to_string());
    q.add(key.clone());
    q.add_after(key.clone(), ms(5));
    assert!(Arc::strong_count(&key) > 1);
    let got = q.get().await.unwrap();
    q.done(&got);
    drop(got);
    sleep(ms(10)).await;
    let got = q.get().await.unwrap();
    q.done(&got);
    drop(got);
    assert_eq!(Arc::strong_count(&key), 1, "the queue kept a reference");
    // Shutdown drops delayed items too.
    q.add_after(key.clone(), Duration::from_secs(60));
    assert_eq!(q.num_waiting(), 1);
    q.shutdown();
    assert_eq!(q.num_waiting(), 0);
    assert_eq!(Arc::strong_count(&key), 1);
}

// ---- delaying ----

#[tokio::test(start_paused = true)]
async fn delaying_simple() {
    let q = WorkQueue::new();
    q.add_after("foo", ms(50));
    assert_eq!(q.len(), 0);
    assert_eq!(q.num_waiting(), 1);
    sleep(ms(49)).await;
    assert_eq!(q.len(), 0);
    sleep(ms(11)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_waiting(), 0);
    let foo = q.get().await.unwrap();
    q.done(&foo);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(q.len(), 0, "nothing re-appears");
}

#[tokio::test(start_paused = true)]
async fn delaying_dedup_keeps_the_earliest() {
    let q = WorkQueue::new();
    q.add_after("foo", ms(50));
    q.add_after("foo", ms(70));
    assert_eq!(q.num_waiting(), 1);
    sleep(ms(60)).await;
    assert_eq!(q.len(), 1);
    let foo = q.get().await.unwrap();
    q.done(&foo);
    sleep(ms(20)).await;
    assert_eq!(q.len(), 0, "the later deadline was dropped");

    q.add_after("foo", ms(50));
    q.add_after("foo", ms(30));
    sleep(ms(29)).await;
    assert_eq!(q.len(), 0);
    sleep(ms(2)).await;
    assert_eq!(q.len(), 1);
    let foo = q.get().await.unwrap();
    q.done(&foo);
    sleep(ms(30)).await;
    assert_eq!(q.len(), 0, "the superseded deadline does not fire");
}

#[tokio::test(start_paused = true)]
async fn delaying_add_two_fire_early() {
    let q = WorkQueue::new();
    q.add_after("first", Duration::from_secs(1));
    q.add_after("second", ms(50));
    sleep(ms(60)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("second"));
    q.done(&"second");
    q.add_after("third", Duration::from_secs(2));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("first"));
    sleep(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("third"));
}

#[tokio::test(start_paused = true)]
async fn delaying_copy_shifting() {
    let q = WorkQueue::new();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", ms(500));
    q.add_after("baz", ms(250));
    sleep(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 3);
    let mut order = vec![];
    for _ in 0..3 {
        order.push(q.get().await.unwrap());
    }
    assert_eq!(order, vec!["baz", "bar", "foo"]);
}

#[tokio::test(start_paused = true)]
async fn delayed_item_wakes_a_parked_worker() {
    let q = WorkQueue::new();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    settle().await;
    q.add_after(7, ms(100));
    sleep(ms(99)).await;
    assert!(!worker.is_finished());
    sleep(ms(2)).await;
    assert_eq!(timeout(ms(1), worker).await.unwrap().unwrap(), Some(7));
}

#[tokio::test(start_paused = true)]
async fn delayed_item_collapses_with_queued_and_processing_copies() {
    let q = WorkQueue::new();
    q.add("a");
    q.add_after("a", ms(10));
    sleep(ms(20)).await;
    assert_eq!(q.len(), 1, "ready copy collapsed into the queued one");
    let a = q.get().await.unwrap();
    q.add_after("a", ms(10));
    sleep(ms(20)).await;
    assert_eq!(q.len(), 0, "processing: waits for done");
    q.done(&a);
    assert_eq!(q.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn zero_and_huge_delays() {
    let q = WorkQueue::new();
    q.add_after(1, Duration::ZERO);
    assert_eq!(q.len(), 1);
    q.add_after(2, Duration::MAX);
    assert_eq!(q.num_waiting(), 1);
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(q.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn many_earlier_deadlines_for_one_item_fire_once() {
    let q = WorkQueue::new();
    for i in 0..10_000u64 {
        q.add_after("x", Duration::from_secs(20_000 - i));
    }
    assert_eq!(q.num_waiting(), 1);
    sleep(Duration::from_secs(10_002)).await;
    assert_eq!(q.len(), 1);
    let x = q.get().await.unwrap();
    q.done(&x);
    sleep(Duration::from_secs(20_000)).await;
    assert_eq!(q.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn queue_without_runtime_at_creation_still_delays() {
    let q = std::thread::spawn(|| {
        let q = WorkQueue::new();
        q.add_after("late", Duration::from_secs(1));
        q
    })
    .join()
    .unwrap();
    // The background task starts once a worker waits inside a runtime.
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    sleep(Duration::from_secs(2)).await;
    assert_eq!(worker.await.unwrap(), Some("late"));
}

// ---- rate-limiting queue ----

#[tokio::test(start_paused = true)]
async fn rate_limiting_queue_backs_off_per_item() {
    let q = RateLimitingQueue::new(ItemExponentialRateLimiter::new(
        ms(100),
        Duration::from_secs(10),
    ));
    q.add_rate_limited("one");
    sleep(ms(99)).await;
    assert_eq!(q.len(), 0);
    sleep(ms(2)).await;
    assert_eq!(q.len(), 1);
    let one = q.get().await.unwrap();
    q.add_rate_limited(one);
    q.done(&one);
    sleep(ms(199)).await;
    assert_eq!(q.len(), 0);
    sleep(ms(2)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_requeues(&"one"), 2);

    q.add_rate_limited("two");
    assert_eq!(q.num_requeues(&"two"), 1);
    sleep(ms(101)).await;
    assert_eq!(q.len(), 2);

    q.forget(&"one");
    assert_eq!(q.num_requeues(&"one"), 0);
    assert_eq!(q.len(), 2, "forget does not touch the queue");
    let _ = q.get().await;
    let _ = q.get().await;
    q.add_rate_limited("one");
    sleep(ms(101)).await;
    assert_eq!(q.len(), 0, "still processing");
    q.done(&"one");
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_requeues(&"one"), 1);

    q.shutdown();
    q.add_rate_limited("two");
    assert_eq!(
        q.num_requeues(&"two"),
        1,
        "no failure recorded after shutdown"
    );
}

/// Real threads, no timers: every key's latest add is observed by a later processing round,
/// and no key is ever held by two workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_workers_observe_every_latest_add() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const KEYS: usize = 500;
    let q: WorkQueue<usize> = WorkQueue::new();
    let versions: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (q, versions, seen, busy) =
                (q.clone(), versions.clone(), seen.clone(), busy.clone());
            tokio::spawn(async move {
                while let Some(k) = q.get().await {
                    assert!(!busy[k].swap(true, Ordering::SeqCst), "{k} held twice");
                    let v = versions[k].load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    seen[k].fetch_max(v, Ordering::SeqCst);
                    busy[k].store(false, Ordering::SeqCst);
                    q.done(&k);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let (q, versions) = (q.clone(), versions.clone());
            tokio::spawn(async move {
                for i in 0..20_000usize {
                    let k = (i * 7 + p) % KEYS;
                    versions[k].fetch_add(1, Ordering::SeqCst);
                    q.add(k);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    // Every add has happened; wait for the queue to go idle, then drain.
    while !(q.is_empty() && q.num_processing() == 0) {
        tokio::task::yield_now().await;
    }
    q.shutdown_with_drain().await;
    for w in workers {
        w.await.unwrap();
    }
    for k in 0..KEYS {
        assert_eq!(
            seen[k].load(Ordering::SeqCst),
            versions[k].load(Ordering::SeqCst),
            "key {k} missed its latest add"
        );
    }
}
