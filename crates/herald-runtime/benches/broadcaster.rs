//! Fan-out throughput of `herald_core::watch::Broadcaster`, in deliveries per second
//! (items × watchers), with every watcher drained concurrently by its own task.
//!
//! Wait mode, so every item reaches every watcher and the count is exact; items are
//! `Arc`'d events as the recorder broadcasts them. Both distribution drivers are measured.
//!
//! Run: `cargo bench -p herald-runtime --bench broadcaster -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herald_core::watch::{BroadcasterBuilder, Distribution, FullChannelBehavior};

/// Roughly what an event carries through the broadcaster.
#[allow(dead_code)]
struct Payload {
    reason: String,
    message: String,
    count: u64,
}

const DELIVERIES_PER_RUN: u64 = 1_000_000;
const QUEUE_LEN: usize = 1024;

fn fan_out(
    rt: &tokio::runtime::Runtime,
    watchers: usize,
    items: u64,
    mode: Distribution,
) -> Duration {
    let payload = Arc::new(Payload {
        reason: "BackOff".into(),
        message: "Back-off restarting failed container".into(),
        count: 1,
    });
    rt.block_on(async move {
        let b = BroadcasterBuilder::new(QUEUE_LEN, FullChannelBehavior::WaitIfChannelFull)
            .incoming_capacity(QUEUE_LEN)
            .distribution(mode)
            .build::<Arc<Payload>>();
        let consumers: Vec<_> = (0..watchers)
            .map(|_| {
                let mut w = b.watch().expect("running");
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while let Some(item) = w.recv().await {
                        black_box(&item);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let start = Instant::now();
        for _ in 0..items {
            b.action(Arc::clone(&payload)).await.expect("running");
        }
        b.shutdown().await;
        for c in consumers {
            assert_eq!(c.await.expect("consumer"), items);
        }
        start.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("broadcaster_fan_out");
    group.sample_size(10);
    for mode in [Distribution::InCaller, Distribution::OnThread] {
        for watchers in [1usize, 10, 100] {
            let items = DELIVERIES_PER_RUN / watchers as u64;
            group.throughput(Throughput::Elements(items * watchers as u64));
            let id = BenchmarkId::new(format!("{mode:?}"), watchers);
            group.bench_with_input(id, &watchers, |bch, &w| {
                bch.iter_custom(|iters| (0..iters).map(|_| fan_out(&rt, w, items, mode)).sum());
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
