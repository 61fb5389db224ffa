//! Work-queue throughput.
//!
//! `cargo bench -p herald-runtime --bench workqueue -- --warm-up-time 1 --measurement-time 3`
//!
//! - `add_get_done/1_worker`: one task adds a batch of distinct keys, then takes and
//!   finishes each.
//! - `add_get_done/1_worker_metered`: the same with Prometheus metrics on.
//! - `add_get_done/1_worker_string_keys`: the same with `String` keys like
//!   `default/pod-123` (includes the caller's clone of each key).
//! - `add_get_done/producer_and_worker`: a producer task and a worker task on a
//!   two-thread runtime, handing items over through the queue.
//! - `rate_limited/exponential`: each item is added with `add_rate_limited` under the
//!   default exponential limiter (5 ms first delay, through the delayed-item heap and the
//!   background task, on paused tokio time), then taken, forgotten and finished.
//!
//! Figures, and client-go's for comparison, are in `benches/README.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_runtime::workqueue::{ItemExponentialRateLimiter, RateLimitingQueue, WorkQueue};

const BATCH: u64 = 10_000;

fn add_get_done(c: &mut Criterion) {
    let mut g = c.benchmark_group("add_get_done");
    g.throughput(Throughput::Elements(BATCH));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let q: WorkQueue<u64> = WorkQueue::new();
    g.bench_function("1_worker", |b| {
        b.iter(|| {
            rt.block_on(async {
                for i in 0..BATCH {
                    q.add(i);
                }
                for _ in 0..BATCH {
                    let i = q.get().await.unwrap();
                    q.done(black_box(&i));
                }
            })
        })
    });

    // The same with metrics on (clock reads and metric updates per operation).
    let mut registry = prometheus_client::registry::Registry::default();
    let qm: WorkQueue<u64> =
        rt.block_on(async { WorkQueue::with_registry("bench", &mut registry) });
    g.bench_function("1_worker_metered", |b| {
        b.iter(|| {
            rt.block_on(async {
                for i in 0..BATCH {
                    qm.add(i);
                }
                for _ in 0..BATCH {
                    let i = qm.get().await.unwrap();
                    qm.done(black_box(&i));
                }
            })
        })
    });

    // Typical controller keys ("namespace/name"); the queue clones each key once.
    let keys: Vec<String> = (0..BATCH).map(|i| format!("default/pod-{i}")).collect();
    let qs: WorkQueue<String> = WorkQueue::new();
    g.bench_function("1_worker_string_keys", |b| {
        b.iter(|| {
            rt.block_on(async {
                for k in &keys {
                    qs.add(k.clone());
                }
                for _ in 0..BATCH {
                    let k = qs.get().await.unwrap();
                    qs.done(black_box(&k));
                }
            })
        })
    });

    let rt2 = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    g.bench_function("producer_and_worker", |b| {
        b.iter(|| {
            rt2.block_on(async {
                let producer = tokio::spawn({
                    let q = q.clone();
                    async move {
                        for i in 0..BATCH {
                            q.add(i);
                        }
                    }
                });
                let worker = tokio::spawn({
                    let q = q.clone();
                    async move {
                        for _ in 0..BATCH {
                            let i = q.get().await.unwrap();
                            q.done(black_box(&i));
                        }
                    }
                });
                producer.await.unwrap();
                worker.await.unwrap();
            })
        })
    });
    g.finish();
}

fn rate_limited(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate_limited");
    g.throughput(Throughput::Elements(BATCH));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let q: RateLimitingQueue<u64> =
        rt.block_on(async { RateLimitingQueue::new(ItemExponentialRateLimiter::<u64>::default()) });
    g.bench_function("exponential", |b| {
        b.iter(|| {
            rt.block_on(async {
                for i in 0..BATCH {
                    q.add_rate_limited(i);
                }
                tokio::time::sleep(Duration::from_millis(6)).await;
                for _ in 0..BATCH {
                    let i = q.get().await.unwrap();
                    q.forget(&i);
                    q.done(black_box(&i));
                }
            })
        })
    });
    g.finish();
}

criterion_group!(benches, add_get_done, rate_limited);
criterion_main!(benches);
