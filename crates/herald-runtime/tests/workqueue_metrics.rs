//! Work-queue metrics after scripted sequences (client-go's metrics_test), on paused time.

use std::time::Duration;

use herald_runtime::workqueue::{
    ItemExponentialRateLimiter, RateLimitingQueue, UNFINISHED_WORK_UPDATE_PERIOD, WorkQueue,
    WorkQueueMetrics,
};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::time::sleep;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The value of the sample `name{name="<queue>"}` in the text exposition.
fn sample(registry: &Registry, name: &str, queue: &str) -> f64 {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    let prefix = format!("{name}{{name=\"{queue}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no sample {prefix:?} in\n{text}"))
        .parse()
        .unwrap()
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() < 1e-9,
        "{what}: {actual} != {expected}"
    );
}

#[tokio::test(start_paused = true)]
async fn scripted_sequence() {
    let mut registry = Registry::default();
    let q = WorkQueue::with_registry("test", &mut registry);
    let m = |name: &str| sample(&registry, name, "test");

    q.add("foo");
    assert_eq!(m("workqueue_adds_total"), 1.0);
    assert_eq!(m("workqueue_depth"), 1.0);

    sleep(ms(50)).await;
    let foo = q.get().await.unwrap();
    assert_eq!(m("workqueue_depth"), 0.0);
    assert_eq!(m("workqueue_queue_duration_seconds_count"), 1.0);
    assert_close(m("workqueue_queue_duration_seconds_sum"), 0.05, "latency");

    // Re-adds while processing collapse: one add, depth counts the dirty item.
    for _ in 0..5 {
        q.add("foo");
    }
    assert_eq!(m("workqueue_adds_total"), 2.0);
    assert_eq!(m("workqueue_depth"), 1.0);
    assert_eq!(q.len(), 0, "depth is not len");

    sleep(ms(25)).await;
    q.done(&foo);
    assert_eq!(m("workqueue_work_duration_seconds_count"), 1.0);
    assert_close(m("workqueue_work_duration_seconds_sum"), 0.025, "work");

    let foo = q.get().await.unwrap();
    assert_eq!(m("workqueue_queue_duration_seconds_count"), 2.0);
    assert_close(
        m("workqueue_queue_duration_seconds_sum"),
        0.05 + 0.025,
        "latency",
    );
    assert_eq!(m("workqueue_depth"), 0.0);

    // Taken at 75 ms; the gauges refresh every 500 ms from the queue's creation.
    sleep(UNFINISHED_WORK_UPDATE_PERIOD).await;
    assert_close(m("workqueue_unfinished_work_seconds"), 0.425, "unfinished");
    assert_close(
        m("workqueue_longest_running_processor_seconds"),
        0.425,
        "longest",
    );

    q.add_after("bar", Duration::ZERO);
    q.add_after("baz", ms(10));
    assert_eq!(m("workqueue_retries_total"), 2.0);
    assert_eq!(m("workqueue_adds_total"), 3.0, "a zero delay adds at once");
    sleep(ms(20)).await;
    assert_eq!(m("workqueue_adds_total"), 4.0);
    assert_eq!(m("workqueue_depth"), 2.0);

    // After shutdown the gauges are no longer refreshed (client-go's MetricShutdown).
    q.shutdown();
    sleep(Duration::from_secs(2)).await;
    assert_close(m("workqueue_unfinished_work_seconds"), 0.425, "frozen");
    q.done(&foo);
    q.add_after("late", ms(1));
    assert_eq!(m("workqueue_retries_total"), 2.0, "dropped after shutdown");
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_sums_all_processors() {
    let mut registry = Registry::default();
    let q = WorkQueue::with_registry("sum", &mut registry);
    q.add(1);
    q.add(2);
    let a = q.get().await.unwrap();
    sleep(ms(100)).await;
    let _b = q.get().await.unwrap();
    sleep(ms(450)).await; // tick at 500 ms: ages 500 ms and 400 ms
    assert_close(
        sample(&registry, "workqueue_unfinished_work_seconds", "sum"),
        0.9,
        "sum",
    );
    assert_close(
        sample(
            &registry,
            "workqueue_longest_running_processor_seconds",
            "sum",
        ),
        0.5,
        "max",
    );
    q.done(&a);
    sleep(ms(500)).await; // tick at 1 s: only b, 900 ms old
    assert_close(
        sample(&registry, "workqueue_unfinished_work_seconds", "sum"),
        0.9,
        "sum",
    );
    assert_close(
        sample(
            &registry,
            "workqueue_longest_running_processor_seconds",
            "sum",
        ),
        0.9,
        "max",
    );
}

#[tokio::test(start_paused = true)]
async fn queues_share_families_with_their_own_labels() {
    let mut registry = Registry::default();
    let metrics = WorkQueueMetrics::register(&mut registry);
    let a = WorkQueue::with_metrics("a", &metrics);
    let b = RateLimitingQueue::with_metrics(
        "b",
        &metrics,
        ItemExponentialRateLimiter::new(ms(5), Duration::from_secs(1)),
    );
    a.add(1);
    a.add(2);
    b.add(1);
    b.add_rate_limited(2);
    b.add_rate_limited(3);
    assert_eq!(sample(&registry, "workqueue_depth", "a"), 2.0);
    assert_eq!(sample(&registry, "workqueue_depth", "b"), 1.0);
    assert_eq!(sample(&registry, "workqueue_retries_total", "b"), 2.0);
    sleep(ms(10)).await;
    assert_eq!(sample(&registry, "workqueue_depth", "b"), 3.0);
    assert_eq!(sample(&registry, "workqueue_adds_total", "b"), 3.0);
    assert_eq!(sample(&registry, "workqueue_adds_total", "a"), 2.0);

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert_eq!(
        text.matches("# TYPE workqueue_depth gauge").count(),
        1,
        "one family, many series:\n{text}"
    );
    // client-go's buckets: 1 µs × 10^k, ten of them, up to 1000 s.
    let les: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("workqueue_queue_duration_seconds_bucket") && l.contains("name=\"a\"")
        })
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        les,
        [
            "0.000001", "0.00001", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0", "100.0",
            "1000.0", "+Inf"
        ]
    );
}
